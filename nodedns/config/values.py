"""The values an option takes: addresses (plain, tls://, unix:), durations, sizes, shares, names, and the
parser of each kind (`Parser`: the raw YAML or flag value to the typed one, ValueError saying what is wrong).
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Callable
from typing import Any

from nodedns.errors import ConfigError
from nodedns.names import (
    IPNetwork,
    canonical_ip,
    is_dns1123_label,
    is_dns1123_subdomain,
    normalize_name,
    split_hostport,
)

HostPort = tuple[str, int]
Parser = Callable[[Any], Any]  # a raw value to its typed one; ValueError says what is wrong
TLS_PREFIX = "tls://"
DOT_PORT = 853  # DNS over TLS (RFC 7858)


class TLSUpstream(tuple[str, int]):
    """An upstream (address, port) reached over DNS over TLS, its certificate verified against `name`
    (None: --upstream-tls-servername, else the address itself, which the certificate must then name).

    A 2-tuple like any other upstream address, so routes and their comparisons stay as they are; it
    differs from the plain (address, port) it resembles (a change between them is a change of route)."""

    name: str | None

    def __new__(cls, host: str, port: int, name: str | None = None) -> TLSUpstream:
        self = super().__new__(cls, (host, port))
        self.name = name
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TLSUpstream) and tuple.__eq__(self, other) and self.name == other.name

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((TLS_PREFIX, self[0], self[1], self.name))

    def __reduce__(self) -> tuple[Any, ...]:
        return (TLSUpstream, (self[0], self[1], self.name))

    def __repr__(self) -> str:
        return f"TLSUpstream({self[0]!r}, {self[1]!r}, {self.name!r})"


def upstream_address(text: str, default_port: int = 53) -> HostPort:
    """`ADDR[:PORT]`, or `tls://ADDR[:PORT][#NAME]` (port 853 by default): a plain (address, port) or a
    TLSUpstream. Raises ValueError."""
    s = text.strip()
    if s[: len(TLS_PREFIX)].lower() != TLS_PREFIX:
        return split_hostport(s, default_port)
    addr, sep, name = s[len(TLS_PREFIX):].partition("#")
    host, port = split_hostport(addr, DOT_PORT)
    if sep:
        name = normalize_name(name)
        if not name or not (is_dns1123_subdomain(name) or canonical_ip(name) is not None):
            raise ValueError(f"{s!r}: the server name after '#' must be a DNS name")
    return TLSUpstream(host, port, name or None)


# An HTTP listener: ADDR:PORT, or a Unix socket as "unix:/absolute/path"
Endpoint = HostPort | str
UNIX_PREFIX = "unix:"
MAX_UNIX_PATH = 107  # bytes of sun_path, without its terminating NUL

def endpoint_text(endpoint: Endpoint) -> str:
    """`host:port`, `[v6]:port`, or `unix:/path` as given."""
    if isinstance(endpoint, str):
        return endpoint
    host, port = endpoint
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# Where the root upstreams come from when nothing else names them (CoreDNS's default Corefile:
# `forward . /etc/resolv.conf`); `upstream: none` turns the default off.
DEFAULT_UPSTREAM_RESOLV_CONF = "/etc/resolv.conf"
UPSTREAM_NONE = "none"

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | int | float) -> float:
    """`1h`, `1m30s`, `500ms`, `5` (seconds) -> seconds. Raises ValueError."""
    if isinstance(text, bool):
        raise ValueError("not a duration")
    if isinstance(text, int | float):
        if not math.isfinite(text) or text < 0:
            raise ValueError("must be a non-negative duration")
        return float(text)
    s = text.strip().lower()
    if not s:
        raise ValueError("empty duration")
    try:
        value = float(s)
    except ValueError:
        pass
    else:
        if not math.isfinite(value) or value < 0:
            raise ValueError("must be a non-negative duration")
        return value
    pos = 0
    total = 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(s):
        raise ValueError(f"{text!r} is not a duration (use e.g. 500ms, 5s, 1m30s, 1h)")
    return total


def format_duration(seconds: float) -> str:
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)(b?)")
_SIZE_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(text: str | int | float) -> int:
    """`32Mi`, `32MiB`, `512Ki`, `1G` (1000**3), `65536` (bytes) -> bytes. Binary with `i` (Kubernetes'
    Ki/Mi/Gi), decimal without (k/M/G); a trailing `B` is allowed. Raises ValueError."""
    if isinstance(text, bool):
        raise ValueError("not a size")
    if isinstance(text, int | float):
        if not math.isfinite(text) or text < 0:
            raise ValueError("must be a non-negative size")
        return int(text)
    m = _SIZE.fullmatch(text.strip().lower())
    if m is None:
        raise ValueError(f"{text!r} is not a size (use e.g. 32Mi, 512Ki, 1G or a number of bytes)")
    number, unit, binary, _ = m.groups()
    if binary and not unit:
        raise ValueError(f"{text!r} is not a size (use e.g. 32Mi, 512Ki, 1G or a number of bytes)")
    value = float(number) * (1024 if binary else 1000) ** _SIZE_POWER[unit]
    if not math.isfinite(value):
        raise ValueError("must be a finite size")
    return int(value)


def format_size(n: int) -> str:
    for unit, power in (("Gi", 3), ("Mi", 2), ("Ki", 1)):
        if n >= 1024 ** power and n % 1024 ** power == 0:
            return f"{n // 1024 ** power}{unit}"
    return str(n)


def parse_percent(text: str | int | float) -> float:
    """`1%` or `0.01` -> 0.01 (a fraction in [0, 1])."""
    if isinstance(text, bool):
        raise ValueError("not a percentage")
    if isinstance(text, str):
        s = text.strip()
        value = float(s[:-1]) / 100 if s.endswith("%") else float(s)
    else:
        value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0% and 100%")
    return value


def _as_str(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, str | int | float):
        raise ValueError("must be a string")
    return str(v)


def _path(v: Any) -> str | None:
    s = _as_str(v)
    return s or None


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "yes", "on", "1"):
        return True
    if isinstance(v, str) and v.strip().lower() in ("false", "no", "off", "0"):
        return False
    raise ValueError("must be true or false")


def _int_range(lo: int, hi: int) -> Parser:
    def parse(v: Any) -> int:
        if isinstance(v, bool):
            raise ValueError("must be a whole number")
        try:
            n = int(str(v).strip())
        except ValueError:
            raise ValueError("must be a whole number") from None
        if not lo <= n <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return n

    return parse


def _duration_range(lo: float, hi: float) -> Parser:
    def parse(v: Any) -> float:
        d = parse_duration(v)
        if not lo <= d <= hi:
            raise ValueError(f"must be between {format_duration(lo)} and {format_duration(hi)}")
        return d

    return parse


def _size_range(lo: int, hi: int) -> Parser:
    def parse(v: Any) -> int:
        n = parse_size(v)
        if not lo <= n <= hi:
            raise ValueError(f"must be between {format_size(lo)} and {format_size(hi)}")
        return n

    return parse


def _choice(*choices: str) -> Parser:
    def parse(v: Any) -> str:
        s = _as_str(v).strip()
        if s not in choices:
            raise ValueError(f"must be one of {', '.join(choices)} (got {s!r})")
        return s

    return parse


def _hostport(default_port: int) -> Parser:
    def parse(v: Any) -> HostPort:
        return split_hostport(_as_str(v), default_port)

    return parse


def _optional_hostport(default_port: int) -> Parser:
    inner = _hostport(default_port)

    def parse(v: Any) -> HostPort | None:
        s = _as_str(v).strip()
        if s in ("", "none", "off"):
            return None
        result: HostPort = inner(s)
        return result

    return parse


def _unix_path(s: str, example: str) -> str:
    """`unix:/absolute/path` checked (absolute, at most a socket address's bytes) and kept as that text."""
    path = s[len(UNIX_PREFIX):]
    if not path.startswith("/"):
        raise ValueError(f"{s!r}: a Unix socket needs an absolute path ({example})")
    if len(os.fsencode(path)) > MAX_UNIX_PATH:
        raise ValueError(f"{s!r}: a Unix socket path has at most {MAX_UNIX_PATH} bytes")
    return s


def _optional_endpoint(default_port: int) -> Parser:
    """`ADDR[:PORT]`, `unix:/absolute/path` (kept as that text), or none/off/"" (no listener)."""
    inner = _hostport(default_port)

    def parse(v: Any) -> Endpoint | None:
        s = _as_str(v).strip()
        if s in ("", "none", "off"):
            return None
        if s.startswith(UNIX_PREFIX):
            return _unix_path(s, "unix:/run/nodedns/debug.sock")
        result: HostPort = inner(s)
        return result

    return parse


def _cidr(v: Any) -> IPNetwork:
    s = _as_str(v).strip()
    try:
        return ipaddress.ip_network(s, strict=False)
    except ValueError:
        raise ValueError(f"{s!r} is not a CIDR") from None


def _ip(v: Any) -> str:
    s = _as_str(v).strip()
    ip = canonical_ip(s)
    if ip is None:
        raise ValueError(f"{s!r} is not an IP address")
    return ip


def _hosts_file(v: Any) -> str:
    """One --hosts path: a non-empty string (YAML `hosts` is a list of them)."""
    if not isinstance(v, str):
        raise ValueError(f"must be a list of file paths (got {type(v).__name__} {v!r:.40})")
    if not v.strip():
        raise ValueError("a file path is empty")
    return v


def _domain(v: Any) -> str:
    s = normalize_name(_as_str(v))
    if s and not is_dns1123_subdomain(s):
        raise ValueError(f"{s!r} is not a valid DNS domain")
    return s


def _upstream(v: Any) -> HostPort:
    return upstream_address(_as_str(v), 53)


def _stub_domain(v: Any) -> tuple[str, tuple[HostPort, ...], bool]:
    """`DOMAIN=ADDR[:PORT][,ADDR[:PORT]...][,force_tcp]`: the literal `force_tcp` makes the group TCP-only;
    an address may be `tls://ADDR[:PORT][#NAME]` (DNS over TLS)."""
    s = _as_str(v).strip()
    domain, sep, servers = s.partition("=")
    if not sep or not servers.strip():
        raise ValueError(f"{s!r}: use DOMAIN=ADDR[:PORT][,ADDR[:PORT]...][,force_tcp]")
    items = [a.strip() for a in servers.split(",") if a.strip()]
    force_tcp = "force_tcp" in items
    return (_domain(domain), tuple(upstream_address(a, 53) for a in items if a != "force_tcp"), force_tcp)


TCP_PREFIX = "tcp:"


def _dnstap_endpoint(v: Any) -> str | None:
    """`unix:/absolute/path` or `tcp:ADDR:PORT` (kept as that text, the address canonical); none/off: None."""
    s = _as_str(v).strip()
    if s in ("", "none", "off"):
        return None
    if s.startswith(UNIX_PREFIX):
        return _unix_path(s, "unix:/run/dnstap.sock")
    if s.startswith(TCP_PREFIX):
        host, port = split_hostport(s[len(TCP_PREFIX):], 0)
        ip = canonical_ip(host)
        if ip is None or not 0 < port < 65536:
            raise ValueError(f"{s!r}: use tcp:ADDR:PORT with an IP address and a port")
        return TCP_PREFIX + (f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}")
    raise ValueError(f"{s!r}: use unix:/PATH or tcp:ADDR:PORT")


def _server_name(v: Any) -> str:
    s = normalize_name(_as_str(v))
    if not s or not (is_dns1123_subdomain(s) or canonical_ip(s) is not None):
        raise ValueError(f"{s!r} is not a DNS name")
    return s


def _federation(v: Any) -> tuple[str, str]:
    s = _as_str(v).strip()
    name, sep, domain = s.partition("=")
    name = name.strip().lower()
    if not sep or not is_dns1123_label(name):
        raise ValueError(f"{s!r}: use NAME=DOMAIN with NAME a DNS label")
    d = _domain(domain)
    if not d:
        raise ValueError(f"{s!r}: the domain is empty")
    return name, d


def parse_federations(text: str, key: str = "federations") -> tuple[tuple[str, str], ...]:
    """kube-dns's federations format, `name=domain[,name2=domain2...]` (not JSON), as (name, domain) pairs.

    The kube-dns ConfigMap's `federations` key (and its deprecated `--federations` flag) use it. A
    name must be a DNS-1123 label, a domain a DNS-1123 subdomain; a name may appear once. Empty text
    means no federations. Raises ConfigError naming `key`.
    """
    out: dict[str, str] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        try:
            name, domain = _federation(item)
        except ValueError as exc:
            raise ConfigError(key, str(exc)) from None
        if name in out:
            raise ConfigError(key, f"federation {name!r} is given twice")
        out[name] = domain
    return tuple(out.items())


def _allow_from(v: Any) -> IPNetwork:
    return _cidr(v)


def _on_off(v: Any) -> str:
    """`on` or `off` (YAML's unquoted on/off/true/false are booleans: taken as the same)."""
    if isinstance(v, bool):
        return "on" if v else "off"
    s = _as_str(v).strip().lower()
    if s in ("on", "true", "yes"):
        return "on"
    if s in ("off", "false", "no"):
        return "off"
    raise ValueError(f"must be on or off (got {s!r})")


def _on_off_auto(v: Any) -> str:
    """`on`, `off` or `auto` (YAML's unquoted on/off are booleans: taken as the same)."""
    if isinstance(v, bool) or _as_str(v).strip().lower() != "auto":
        try:
            return _on_off(v)
        except ValueError:
            raise ValueError(f"must be off, on or auto (got {_as_str(v).strip()!r})") from None
    return "auto"
