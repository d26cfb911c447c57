"""scripts/image-sizes on a made-up image root: every byte in exactly one row, the rows adding up to the
image's size, each file in the part its path names (tests/e2e/test_image.py runs it on the built image)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.helpers import ROOT

SITE = "opt/nodedns/lib/python3.11/site-packages"
FILES = {  # path in the root -> bytes
    "usr/bin/python3.11": 6_000_000,
    "usr/lib/python3.11/json/__init__.py": 300_000,
    "usr/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so": 200_000,
    "usr/lib/x86_64-linux-gnu/libcrypto.so.3": 4_500_000,
    "usr/lib/x86_64-linux-gnu/libc.so.6": 1_900_000,
    "usr/lib/x86_64-linux-gnu/libz.so.1.2.13": 120_000,
    "usr/lib/x86_64-linux-gnu/xtables/libxt_NOTRACK.so": 15_000,
    "usr/sbin/xtables-nft-multi": 230_000,
    "usr/sbin/nft": 30_000,
    "usr/bin/ip": 700_000,
    "usr/bin/bash": 1_200_000,
    "usr/share/doc/bash/copyright": 20_000,
    "etc/passwd": 900,
    f"{SITE}/kubernetes/client/api/core_v1_api.py": 3_000_000,
    f"{SITE}/kubernetes/config/kube_config.py": 2_500_000,
    f"{SITE}/kubernetes-37.0.2.dist-info/METADATA": 2_000,
    f"{SITE}/dnslib/dns.py": 100_000,
    f"{SITE}/dnslib/__pycache__/dns.cpython-311.pyc": 90_000,
    f"{SITE}/dnslib-0.9.26.dist-info/METADATA": 1_000,
}
RECORDS = {
    "kubernetes-37.0.2.dist-info": ("kubernetes", ["kubernetes/client/api/core_v1_api.py",
                                                   "kubernetes/config/kube_config.py"]),
    "dnslib-0.9.26.dist-info": ("dnslib", ["dnslib/dns.py"]),
}


def make_root(root: Path) -> int:
    for rel, size in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x" * size)
    total = sum(FILES.values())
    for info, (name, owned) in RECORDS.items():
        record = "".join(f"{p},,\n" for p in owned) + f"{info}/RECORD,,\n"
        (root / SITE / info / "RECORD").write_text(record)
        meta = root / SITE / info / "METADATA"
        meta.write_text(f"Name: {name}\n" + "x" * (FILES[f"{SITE}/{info}/METADATA"] - len(f"Name: {name}\n")))
        total += len(record.encode())
    (root / "usr" / "bin" / "sh").symlink_to("dash")  # a symlink counts its target's name: 4 bytes
    return total + 4


def rows(out: str) -> dict[str, float]:
    cells = [line.split("|")[1:3] for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    return {part.strip(): float(mb.strip().strip("*")) for part, mb in cells if part.strip() != "part"}


def test_every_byte_of_the_root_is_in_one_row_and_the_rows_add_up_to_the_image(tmp_path: Path) -> None:
    files = make_root(tmp_path)
    layer, image = files + 700_000, files + 700_000 + 3_000
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "image-sizes"), "--root", str(tmp_path),
                          "--image-bytes", str(image), "--layer-bytes", str(layer)],
                         capture_output=True, text=True, check=True).stdout
    got = rows(out)
    assert got.pop("**the image**") == round(image / 1e6, 1)
    assert got["layer format"] == 0.7 and got["image config and manifest"] == 0.0
    assert got["Python package: kubernetes: generated API classes and models"] == 3.0
    assert got["Python package: kubernetes"] == 2.5
    assert got["Python interpreter"] == 6.0
    assert got["OpenSSL"] == 4.5 and got["glibc"] == 1.9
    assert got["firewall: iptables, nftables"] == 0.3
    assert got["programs"] == 1.2 and got["iproute2"] == 0.7
    # dnslib's source, its bytecode (no RECORD names it) and its metadata: one small package
    small = next(line for line in out.splitlines() if line.startswith("| Python packages, each under 2 MB"))
    assert "dnslib" in small and re.search(r"\| 0\.2 \|", small), small
    assert abs(sum(got.values()) - image / 1e6) < 0.05 * len(got), out
