"""A private certificate authority for TLS tests: a CA, and server certificates it signs (openssl)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None,
                                   reason="needs the openssl command (a Debian package .ci/run installs)")


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class ServerCert:
    cert: Path  # PEM: the server certificate
    key: Path  # PEM: its private key

    def context(self) -> ssl.SSLContext:
        """A server-side TLS context presenting this certificate."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert, self.key)
        return ctx


@dataclass(frozen=True)
class PrivateCA:
    directory: Path
    cert: Path  # PEM: the CA certificate, what a client is told to trust

    @classmethod
    def create(cls, directory: Path, name: str = "nodedns test CA") -> PrivateCA:
        directory.mkdir(parents=True, exist_ok=True)
        key, cert = directory / "ca.key", directory / "ca.crt"
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        return cls(directory, cert)

    def issue(self, stem: str, *, dns_names: tuple[str, ...] = (), ips: tuple[str, ...] = ()) -> ServerCert:
        """A server certificate signed by this CA for these names and addresses (subjectAltName)."""
        key, csr, cert = (self.directory / f"{stem}.{ext}" for ext in ("key", "csr", "crt"))
        san = ",".join([f"DNS:{n}" for n in dns_names] + [f"IP:{ip}" for ip in ips])
        ext = self.directory / f"{stem}.ext"
        ext.write_text(f"subjectAltName={san}\nextendedKeyUsage=serverAuth\n")
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={(dns_names + ips)[0]}")
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey", str(self.directory / "ca.key"),
                 "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))
        return ServerCert(cert, key)
