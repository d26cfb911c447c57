"""Autopath measured on a fake node: how many queries glibc sends for an external name, with and without.

    pod netns (nd8-pod-*)                          node netns (nd8-node-*)
    /etc/netns/<pod>/resolv.conf (ClusterFirst,      nodedns serve --manifests (Pod 192.0.2.2 on node-a)
      by `nodedns resolv-conf`, ndots:5)               --setup-interface nd8local --local-ip 169.254.20.10
    getent ahosts api.example.com  --veth-->           --upstream 127.0.0.1:PORT [--autopath]
                                                     the upstream double (knows api.example.com), in-netns

The agent's /metrics (`coredns_dns_requests_total`, A and AAAA) is read before and after each
lookup: the difference is what glibc sent. Print the figures with `pytest -s`.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support import manifests as m
from tests.support.helpers import ROOT, nodedns_cmd, subprocess_env
from tests.support.netns import Netns, netns, requires_netns, veth_pair

pytestmark = requires_netns

PREFIX = "nd8"
LOCAL_IP = "169.254.20.10"
POD_IP = "192.0.2.2"
NODE = "node-a"
STATUS = "127.0.0.1:9253"
START_TIMEOUT = 30.0

UPSTREAM = """
import sys
from tests.support.upstream_double import UpstreamDouble
up = UpstreamDouble({"api.example.com": {"A": ["192.0.2.80"]}}).start()
print(up.port, flush=True)
sys.stdin.read()  # until the test closes our stdin
up.stop()
"""

METRICS = f"""
import urllib.request
print(urllib.request.urlopen("http://{STATUS}/metrics", timeout=5).read().decode())
"""

READY = f"""
import sys, time, urllib.request
deadline = time.monotonic() + {START_TIMEOUT}
while time.monotonic() < deadline:
    try:
        if urllib.request.urlopen("http://{STATUS}/readyz", timeout=1).status == 200:
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.05)
sys.exit(1)
"""


@contextlib.contextmanager
def upstream_in(node: Netns) -> Iterator[int]:
    """The upstream double on 127.0.0.1 inside the node namespace; its port."""
    proc = subprocess.Popen([*node.exec_prefix, sys.executable, "-c", UPSTREAM], cwd=ROOT, env=subprocess_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield port
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def pod_resolv_conf(pod_netns: str, tmp: Path) -> str:
    """The ClusterFirst resolv.conf the kubelet would write, where `ip netns exec` mounts it."""
    manifest = tmp / "client.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: client, namespace: default}\n"
                        "spec:\n  containers: [{name: c, image: busybox}]\n")
    target = Path("/etc/netns") / pod_netns / "resolv.conf"
    target.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(nodedns_cmd("resolv-conf", "--pod", str(manifest), "--resolv-conf", "", "--cluster-dns",
                                   LOCAL_IP, "--cluster-domain", "cluster.local", "-o", str(target)),
                       env=subprocess_env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return target.read_text()


@contextlib.contextmanager
def agent_in(node: Netns, manifest: Path, upstream_port: int, log: Path, *extra: str) -> Iterator[None]:
    argv = [*node.exec_prefix, *nodedns_cmd(
        "serve", "--manifests", str(manifest), "--node-name", NODE, "--setup-interface", f"{PREFIX}local",
        "--local-ip", LOCAL_IP, "--host-resolv-conf", "", "--upstream", f"127.0.0.1:{upstream_port}",
        # one process: /metrics counts at once (a --workers supervisor's figures are up to a second old,
        # and lookup() below tells "settled" by two reads 0.3 s apart)
        "--status-listen", STATUS, "--lameduck", "0s", "--workers", "1", *extra)]
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        ready = node.run(sys.executable, "-c", READY, check=False, timeout=START_TIMEOUT + 5, env=subprocess_env())
        assert ready.returncode == 0, log.read_text()
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def address_queries(node: Netns) -> int:
    """A and AAAA queries the agent has received (every listener, both transports)."""
    text = node.run(sys.executable, "-c", METRICS, env=subprocess_env()).stdout
    total = 0.0
    for line in text.splitlines():
        if line.startswith("coredns_dns_requests_total{") and ('type="A"' in line or 'type="AAAA"' in line):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def lookup(node: Netns, pod: Netns, name: str) -> tuple[int, str]:
    """(queries the agent received, getent's output) for one `getent ahosts NAME` in the pod."""
    before = address_queries(node)
    r = pod.run("getent", "ahosts", name, check=False, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    # the counters are bumped after the answers are sent (forwarded ones when the upstream answers):
    # read until two reads 0.3 s apart agree, within a bound
    deadline = time.monotonic() + 5
    seen = address_queries(node)
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = address_queries(node)
        if now == seen:
            break
        seen = now
    return seen - before, r.stdout


LOOKUPS = {  # name -> an address its answer must hold
    "api.example.com": "192.0.2.80",  # external: 3 search domains, then the name as is
    "db.other": "10.96.0.20",  # another namespace's service: found under the second search domain
    "web": "10.96.0.10",  # this namespace's service: found under the first
}


def test_glibc_sends_two_queries_instead_of_eight_for_an_external_name_with_autopath(tmp_path: Path) -> None:
    manifest = m.write(tmp_path / "cluster.yaml", [
        m.namespace("default"), m.namespace("other"), m.node(NODE), m.service("web", cluster_ips=["10.96.0.10"]),
        m.service("db", "other", cluster_ips=["10.96.0.20"]), m.pod("client", ip=POD_IP, node_name=NODE),
    ])
    with netns("node", PREFIX) as node, netns("pod", PREFIX) as pod:
        veth_pair(node, pod, node_ip="192.0.2.1", pod_ip=POD_IP, routes=[f"{LOCAL_IP}/32"],
                  pod_ipv6="fd00:8::2")  # a dual-stack pod: glibc asks A and AAAA
        assert pod_resolv_conf(pod.name, tmp_path) == (
            f"nameserver {LOCAL_IP}\nsearch default.svc.cluster.local svc.cluster.local cluster.local\n"
            "options ndots:5\n")
        counts: dict[tuple[str, str], int] = {}
        with upstream_in(node) as port:
            for variant, flags in (("plain", ()), ("autopath", ("--autopath",))):
                with agent_in(node, manifest, port, tmp_path / f"{variant}.log", *flags):
                    for name, address in LOOKUPS.items():
                        sent, out = lookup(node, pod, name)
                        assert address in out.split(), out
                        counts[(name, variant)] = sent
                    again, _ = lookup(node, pod, "api.example.com")  # answered again, from what is cached
                    assert again == counts[("api.example.com", variant)]
    print("\nqueries glibc sends (getent ahosts NAME; ClusterFirst, ndots:5, 3 search domains):")
    for name in LOOKUPS:
        print(f"  {name:<16} {counts[(name, 'plain')]} without --autopath, {counts[(name, 'autopath')]} with")
    assert counts == {("api.example.com", "plain"): 8, ("db.other", "plain"): 4, ("web", "plain"): 2,
                      ("api.example.com", "autopath"): 2, ("db.other", "autopath"): 2, ("web", "autopath"): 2}
