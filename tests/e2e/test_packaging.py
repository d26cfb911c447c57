"""The package as pip installs it: `python -m build` makes an sdist and a wheel from a clean copy of the
checkout; the wheel installed in a fresh virtual environment serves the example cluster with its
`nodedns` command; the sdist installs and serves on a machine without a C compiler (CC=/bin/false,
no cc or gcc on PATH), answering from the Python hit path. The metadata PyPI shows is complete.

Needs the `build` package (the test extras) and PyPI for the build's setuptools and the dependencies
(pip's cache makes the second install quick); a few minutes.
"""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import pytest

from tests.support.helpers import ROOT, free_port


@dataclass
class Dists:
    sdist: Path
    wheel: Path


def checkout_copy(dest: Path) -> Path:
    """The files git knows (committed or not, minus the ignored): what a fresh clone would build from.
    Outside a git checkout (scripts/mutate's scratch copy): the tree less what .gitignore names."""
    git = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=False)
    if git.returncode != 0:
        ignored = shutil.ignore_patterns(".git", ".venv", "build", "dist", "__pycache__", "*.egg-info", "*.so",
                                         ".*_cache", ".hypothesis", "bench-out")
        shutil.copytree(ROOT, dest, ignore=ignored, dirs_exist_ok=True)
        return dest
    for name in filter(None, git.stdout.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    src = checkout_copy(tmp_path_factory.mktemp("checkout"))
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(src)], capture_output=True,
                       text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    sdists, wheels = list(out.glob("nodedns-*.tar.gz")), list(out.glob("nodedns-*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, list(out.iterdir())
    return Dists(sdists[0], wheels[0])


def venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    return path / "bin"


def pip_install(bin_dir: Path, target: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                           str(target)], capture_output=True, text=True, timeout=900, check=False, env=env)


def bare_env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """Only the venv's bin/ on PATH (so no cc, gcc), no PYTHONPATH pointing into the checkout."""
    import os

    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "PIP_CERT", "PIP_INDEX_URL",
                                                         "PIP_EXTRA_INDEX_URL", "SSL_CERT_FILE", "TMPDIR")}
    return {**keep, "PATH": str(bin_dir), **extra}


@dataclass
class Served:
    port: int
    log: str


@pytest.fixture
def serve_from() -> Iterator[object]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(bin_dir: Path, log: Path, **env: str) -> Served:
        port, status = free_port(), free_port()
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(bin_dir / "nodedns"), "serve", "--manifests", "examples/cluster.yaml",
                 "--listen", f"127.0.0.1:{port}", "--status-listen", f"127.0.0.1:{status}",
                 "--debug-listen", "none", "--upstream", "none"],
                cwd=ROOT, env=bare_env(bin_dir, **env), stdout=out, stderr=subprocess.STDOUT)
        procs.append(proc)
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{status}/readyz", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        return Served(port, log.read_text())

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(30)


def ask(port: int, name: str) -> str:
    r = dns.query.udp(dns.message.make_query(name, "A"), "127.0.0.1", port=port, timeout=3)
    return " ".join([dns.rcode.to_text(r.rcode()), *sorted(rr.to_text() for rrset in r.answer for rr in rrset)])


def installed_from(bin_dir: Path) -> tuple[Path, list[str]]:
    """Where the venv imports nodedns from, and the C extensions' files there (the hit path, the slice columns)."""
    out = subprocess.run([str(bin_dir / "python"), "-c", "import nodedns; print(nodedns.__file__)"], cwd="/",
                         capture_output=True, text=True, check=True, env=bare_env(bin_dir)).stdout.strip()
    package = Path(out).parent
    built = [*(package / "serve").glob("_hitpath*.so"), *(package / "cluster").glob("_slim*.so")]
    return package, [p.name for p in built]


def test_the_wheel_installs_in_a_fresh_venv_and_serves_the_example(dists: Dists, tmp_path: Path,
                                                                    serve_from: object) -> None:
    bin_dir = venv(tmp_path / "venv")
    r = pip_install(bin_dir, dists.wheel)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    package, hitpath = installed_from(bin_dir)
    assert package.is_relative_to(tmp_path / "venv"), package  # the installed package, not the checkout
    assert len(hitpath) == 2, "the wheel built on a machine with a compiler carries both C extensions"
    agent = serve_from(bin_dir, tmp_path / "agent.log")  # type: ignore[operator]
    assert ask(agent.port, "web.default.svc.cluster.local") == "NOERROR 10.96.12.34"
    assert "C hit path" in agent.log


def test_the_sdist_installs_and_serves_without_a_c_compiler(dists: Dists, tmp_path: Path,
                                                            serve_from: object) -> None:
    bin_dir = venv(tmp_path / "venv")
    env = bare_env(bin_dir, CC="/bin/false", CXX="/bin/false")
    assert not any((bin_dir / c).exists() for c in ("cc", "gcc")) and "/usr/bin" not in env["PATH"]
    r = pip_install(bin_dir, dists.sdist, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    package, hitpath = installed_from(bin_dir)
    assert package.is_relative_to(tmp_path / "venv"), package
    assert not hitpath, "no compiler: no C extension can have been built"
    agent = serve_from(bin_dir, tmp_path / "agent.log")  # type: ignore[operator]
    assert ask(agent.port, "web.default.svc.cluster.local") == "NOERROR 10.96.12.34"
    assert "Python hit path" in agent.log, agent.log


def test_the_sdist_holds_what_the_wheel_is_built_from(dists: Dists) -> None:
    with tarfile.open(dists.sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ("pyproject.toml", "setup.py", "README.md", "LICENSE", "nodedns/serve/_hitpath.c",
                   "nodedns/cluster/_slim.c", "nodedns/cli/__init__.py", "nodedns/py.typed"):
        assert needed in names, needed
    with zipfile.ZipFile(dists.wheel) as whl:
        wheel_names = whl.namelist()
    assert "nodedns/py.typed" in wheel_names and "nodedns/serve/_hitpath.pyi" in wheel_names
    assert "nodedns/cluster/_slim.pyi" in wheel_names
    assert not any(n.startswith(("tests/", "docs/", "scripts/")) for n in wheel_names)


def test_the_metadata_is_complete(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel) as whl:
        meta_name = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(whl.read(meta_name).decode())
        entry_points = whl.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
        licenses = [n for n in whl.namelist() if "/licenses/" in n]
    assert meta["Name"] == "nodedns" and meta["Version"]
    assert meta["License-Expression"] == "Apache-2.0" and licenses, (meta["License-Expression"], licenses)
    assert meta["Requires-Python"] == ">=3.11"
    classifiers = meta.get_all("Classifier") or []
    for needed in ("Operating System :: POSIX :: Linux", "Topic :: Internet :: Name Service (DNS)",
                   "Programming Language :: Python :: 3.11"):
        assert needed in classifiers, classifiers
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Source", "Issues"} <= urls.keys(), urls
    assert "nodedns = nodedns.cli:main" in entry_points
    assert meta["Description-Content-Type"] == "text/markdown" and "nodedns" in (meta.get_payload() or "")
    assert meta.get_all("Requires-Dist") and meta["Summary"]
