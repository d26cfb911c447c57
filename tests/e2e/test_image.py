"""The container image, built and run: scripts/build-image --local-base builds daemonset/Containerfile
on a base made from Debian packages (mmdebstrap -> podman import; no container registry needed), then
the built image's entrypoint runs from its mounted root (`buildah from` + `buildah mount` + chroot in a
network namespace: `podman run` needs cgroups this kernel does not give it) with the DaemonSet's
arguments, the shipped ConfigMap's config and a manifest of the example cluster. It must answer on
the link-local address, own it on its interface, install its conntrack-bypass rules and remove both
on SIGTERM.

Needs root, buildah, podman and mmdebstrap (.ci/run installs them) and Debian's and PyPI's packages;
the build takes a few minutes.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.helpers import IN_CI, ROOT, subprocess_env
from tests.support.netns import Netns, netns

TOOLS = ("buildah", "podman", "mmdebstrap", "ip", "unshare", "chroot")
LOCAL_IP = "169.254.20.10"
NODE = "node-a"  # the example cluster's node: its pod CIDR makes the default allow list
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "building and running the image needs root (it runs as root in CI)"
    absent = [t for t in TOOLS if shutil.which(t) is None]
    return f"not installed: {', '.join(absent)} (.ci/run installs them)" if absent else None


MISSING = _missing()
pytestmark = pytest.mark.skipif(MISSING is not None and not IN_CI, reason=MISSING or "")


def sh(*argv: str, timeout: float = 120, check: bool = True) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} -> {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


@dataclass
class Image:
    tag: str
    root: Path  # the mounted root of a working container of the image
    config: dict[str, Any]  # its OCI config: Entrypoint, Cmd, Env


@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    token = secrets.token_hex(4)
    tag, base = f"localhost/nodedns-test:{token}", f"localhost/nodedns-test-base:{token}"
    argv = [str(ROOT / "scripts" / "build-image"), "--local-base", "--tag", tag]
    if Path(CA_BUNDLE).exists():  # a TLS-intercepting proxy's CA is in the host's bundle, not Debian's
        argv += ["--ca-bundle", CA_BUNDLE]
    build = subprocess.run(argv, capture_output=True, text=True, timeout=40 * 60, check=False,
                           env={**os.environ, "LOCAL_BASE_NAME": base})
    assert build.returncode == 0, build.stderr[-5000:]
    assert build.stdout.strip().splitlines()[-1] == tag
    container = sh("buildah", "from", "--pull-never", tag).strip()
    try:
        root = Path(sh("buildah", "mount", container).strip())
        info = json.loads(sh("buildah", "inspect", "--type", "image", tag))
        yield Image(tag, root, info["OCIv1"]["config"])
    finally:
        sh("buildah", "rm", container, check=False)
        sh("buildah", "rmi", tag, check=False)
        sh("buildah", "rmi", base, check=False)  # nothing of this run stays in the image store


def daemonset_container() -> dict[str, Any]:
    docs = yaml.safe_load_all((ROOT / "daemonset" / "daemonset.yaml").read_text())
    ds = next(d for d in docs if d and d.get("kind") == "DaemonSet")
    container: dict[str, Any] = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "nodedns")
    return container


def configmap_value(key: str) -> str:
    docs = yaml.safe_load_all((ROOT / "daemonset" / "configmap.yaml").read_text())
    cm = next(d for d in docs if d and d.get("kind") == "ConfigMap" and key in d.get("data", {}))
    return str(cm["data"][key])


def shipped_config() -> str:
    docs = yaml.safe_load_all((ROOT / "daemonset" / "configmap.yaml").read_text())
    cm = next(d for d in docs if d and d.get("kind") == "ConfigMap" and "config.yaml" in d.get("data", {}))
    return str(cm["data"]["config.yaml"])


def test_the_image_holds_the_locked_versions_and_the_c_hit_path(image: Image) -> None:
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "daemonset" / "requirements.txt").read_text(),
                           flags=re.M))
    site = next((image.root / "opt" / "nodedns" / "lib").glob("python3*/site-packages"))
    installed = {}
    for meta in site.glob("*.dist-info/METADATA"):
        head = meta.read_text(errors="replace").split("\n\n", 1)[0]
        name = re.search(r"^Name: (.+)$", head, flags=re.M)
        version = re.search(r"^Version: (.+)$", head, flags=re.M)
        assert name and version, meta
        installed[re.sub(r"[-_.]+", "-", name.group(1).strip().lower())] = version.group(1).strip()
    build_only = {"pip", "setuptools", "wheel"}  # used to build nodedns, then removed
    assert installed.pop("nodedns") == "0.1.0"
    assert installed == {re.sub(r"[-_.]+", "-", k.lower()): v for k, v in pins.items() if k not in build_only}
    assert list(site.glob("nodedns/serve/_hitpath*.so")), "the C hit path was not built"
    assert list(site.glob("nodedns/cluster/_slim*.so")), "the C slice columns were not built"


@pytest.fixture
def node() -> Iterator[Netns]:
    with netns("node", "ndimg") as ns:
        yield ns


def _ask(ns: Netns, script: str, *args: str) -> str:
    return ns.run(sys.executable, "-c", script, *args, env=subprocess_env(), timeout=15, check=False).stdout.strip()


READY = r'''
import sys, urllib.request
try:
    print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/readyz", timeout=2).status)
except Exception as exc:
    print(type(exc).__name__)
'''
WAIT_READY = r'''
import sys, time, urllib.request
while True:
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/readyz", timeout=1).status == 200:
            print(time.time())
            break
    except Exception:
        pass
    time.sleep(0.01)
'''
QUERY = r'''
import sys
import dns.message, dns.query, dns.rcode
r = dns.query.udp(dns.message.make_query(sys.argv[1], "A"), sys.argv[2], port=53, timeout=2)
print(dns.rcode.to_text(r.rcode()), *sorted(rr.to_text() for rrset in r.answer for rr in rrset))
'''


@dataclass
class Agent:
    proc: subprocess.Popen[bytes]
    log: Path
    status_port: str
    ready_after: float  # seconds from the container's start to its first 200 on /readyz


@contextmanager
def run_image(image: Image, node: Netns, tmp_path: Path, manifest: Path) -> Iterator[Agent]:
    """The image's entrypoint as the DaemonSet starts it, in `node`, until ready; SIGTERM on leaving."""
    # what the kubelet would give the container: the ConfigMap's file, a manifest of the cluster
    # (no API server here), the node's resolv.conf (dnsPolicy: Default), the DaemonSet's args and env
    etc = image.root / "etc" / "nodedns"
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "config.yaml").write_text(shipped_config())
    shutil.copy(manifest, etc / "cluster.yaml")
    (image.root / "etc" / "resolv.conf").write_text("nameserver 127.0.0.1\n")
    config = yaml.safe_load(shipped_config())
    status_port = str(config["status-listen"]).rsplit(":", 1)[1]
    spec = daemonset_container()
    from_configmap = {e["name"]: configmap_value(e["valueFrom"]["configMapKeyRef"]["key"])
                      for e in spec.get("env", []) if "configMapKeyRef" in e.get("valueFrom", {})}
    # $(VAR) in the args, as the kubelet expands them from the container's environment
    args = [re.sub(r"\$\((\w+)\)", lambda m: from_configmap[m.group(1)], a)
            for a in spec.get("args", image.config.get("Cmd") or [])] + ["--manifests", "/etc/nodedns/cluster.yaml"]
    env = [*image.config.get("Env", []), f"NODE_NAME={NODE}", *(f"{k}={v}" for k, v in from_configmap.items())]
    for volume in ("run/nodedns-pod", "run/nodedns"):  # the pod's emptyDir and the roster's hostPath
        (image.root / volume).mkdir(parents=True, exist_ok=True)
    argv = [*image.config["Entrypoint"], *args]
    run = (f"mount -t proc proc {image.root}/proc && exec chroot {image.root} /usr/bin/env -i "
           + " ".join(f"'{e}'" for e in env) + " " + " ".join(f"'{a}'" for a in argv))
    log = tmp_path / "agent.log"
    # one poller in the node, started first, asks /readyz every 10 ms and prints the wall clock of the
    # first 200: the start-up figure is not blurred by starting a probe process per try
    poller = subprocess.Popen([*node.exec_prefix, sys.executable, "-c", WAIT_READY, status_port],
                              stdout=subprocess.PIPE, text=True, env=subprocess_env())
    with log.open("wb") as out:
        started = time.time()
        proc = subprocess.Popen([*node.exec_prefix, "unshare", "--mount", "sh", "-c", run], stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        while poller.poll() is None:
            assert proc.poll() is None, log.read_text()
            assert time.time() < started + 60, log.read_text()
            time.sleep(0.05)
        assert _ask(node, READY, status_port) == "200", log.read_text()
        agent = Agent(proc, log, status_port, float(poller.communicate()[0]) - started)
        yield agent
    finally:
        if poller.poll() is None:
            poller.kill()
        poller.wait(10)
        proc.send_signal(signal.SIGTERM)  # unshare execs sh, sh execs chroot, env and the agent: one pid
        code = proc.wait(60)
    assert code == 0, log.read_text()


def test_the_image_runs_as_the_daemonset_runs_it(image: Image, node: Netns, tmp_path: Path) -> None:
    config = yaml.safe_load(shipped_config())
    with run_image(image, node, tmp_path, ROOT / "examples" / "cluster.yaml") as agent:
        log = agent.log
        # it answers on the link-local address, from the example cluster
        assert _ask(node, QUERY, "web.default.svc.cluster.local", LOCAL_IP) == "NOERROR 10.96.12.34", log.read_text()
        # it owns that address on its interface
        assert f"inet {LOCAL_IP}/32" in node.run("ip", "addr", "show", "dev", config["setup-interface"]).stdout
        # and skips conntrack for it
        raw = node.run("iptables", "-t", "raw", "-S").stdout
        assert f"-A PREROUTING -d {LOCAL_IP}/32 -p udp -m udp --dport 53" in raw and "-j NOTRACK" in raw, raw
        assert "C hit path" in log.read_text()
    assert config["setup-interface"] not in node.links()
    assert LOCAL_IP not in node.run("iptables", "-t", "raw", "-S").stdout
    assert LOCAL_IP not in node.run("iptables", "-S").stdout


def empty_cluster(tmp_path: Path) -> Path:
    """The example cluster's node and nothing else: an empty index (no namespace, service or pod)."""
    example = yaml.safe_load((ROOT / "examples" / "cluster.yaml").read_text())
    nodes = [o for o in example["items"] if o["kind"] == "Node" and o["metadata"]["name"] == NODE]
    path = tmp_path / "empty.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    return path


def test_the_image_starts_and_gets_ready_with_an_empty_index(image: Image, node: Netns, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # the figure docs/measured.md quotes (target: under 2 s): container start to /readyz 200, the
    # median of three starts (one start on a shared machine can meet a busy moment)
    starts = []
    for i in range(3):
        run_dir = tmp_path / f"start-{i}"
        run_dir.mkdir()
        with run_image(image, node, run_dir, empty_cluster(run_dir)) as agent:
            assert _ask(node, QUERY, "web.default.svc.cluster.local", LOCAL_IP) == "NXDOMAIN", agent.log.read_text()
            assert agent.ready_after > 0
            starts.append(agent.ready_after)
    with capsys.disabled():
        print(f"\nimage start-up: ready {statistics.median(starts):.2f} s after the container started, median of "
              f"{len(starts)} ({', '.join(f'{s:.2f}' for s in starts)}; empty index, the shipped ConfigMap)")


def image_megabytes(tag: str) -> float:
    """The image's size as `buildah images` shows it ("143 MB"), in MB."""
    shown = sh("buildah", "images", "--format", "{{.Size}}", tag).strip()
    number, unit = re.fullmatch(r"([\d.]+)\s*([kMG]?B)", shown).groups()  # type: ignore[union-attr]
    return float(number) * {"B": 1e-6, "kB": 1e-3, "MB": 1.0, "GB": 1e3}[unit]


def test_the_image_is_at_most_150_mb_without_compiler_or_package_manager(
        image: Image, capsys: pytest.CaptureFixture[str]) -> None:
    size = image_megabytes(image.tag)
    with capsys.disabled():
        print(f"\nimage size: {size:.0f} MB (buildah images)")
    assert size <= 150, f"{size} MB"
    for tool in ("gcc", "cc", "apt", "apt-get", "dpkg", "perl", "pip"):
        for bindir in ("usr/bin", "usr/sbin", "usr/local/bin", "opt/nodedns/bin"):
            assert not (image.root / bindir / tool).exists(), f"/{bindir}/{tool}"
    site = next((image.root / "opt" / "nodedns" / "lib").glob("python3*/site-packages"))
    leftovers = [p for pattern in ("*.h", "*.c", "*.pyx", "tests", "pip", "setuptools")
                 for p in site.rglob(pattern)]
    assert not leftovers, leftovers[:5]
    # what the agent and the DaemonSet's probes run is there
    for tool in ("usr/sbin/iptables", "usr/sbin/ip6tables", "usr/sbin/nft", "usr/bin/sh", "usr/bin/find",
                 "usr/bin/env"):
        assert (image.root / tool).exists() or (image.root / tool.replace("usr/", "", 1)).exists(), tool


TABLE = re.compile(r"<!-- sizes: scripts/image-sizes IMAGE -->\n(.*?)\n<!-- end of sizes -->", re.S)


def size_rows(table: str) -> dict[str, float]:
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    return {part.strip(): float(mb.strip().strip("*")) for part, mb in rows if part.strip() != "part"}


def test_docs_image_md_accounts_for_the_image_s_bytes(image: Image) -> None:
    out = sh(str(ROOT / "scripts" / "image-sizes"), image.tag)
    measured = size_rows(out)
    total = measured.pop("**the image**")
    # every byte in a row: the rows add up to the image, and the image to what buildah shows
    assert abs(sum(measured.values()) - total) < 0.05 * len(measured), out
    assert abs(total - image_megabytes(image.tag)) <= 1, out
    found = TABLE.search((ROOT / "docs" / "image.md").read_text())
    assert found, "docs/image.md has no table between <!-- sizes: ... --> and <!-- end of sizes -->"
    documented = size_rows(found.group(1))
    documented_total = documented.pop("**the image**")
    # the same parts; each within 2 MB (or a tenth) of today's build: regenerate the table when not
    assert documented.keys() == measured.keys(), (sorted(documented), sorted(measured))
    for part, mb in measured.items():
        assert abs(documented[part] - mb) <= max(2.0, mb / 10), (part, documented[part], mb, out)
    assert abs(documented_total - total) <= 3, out
