"""Real resolvers nobody here wrote, from a Pod's network namespace, through the agent as shipped.

    stranger netns (nd6-str-*)         pod netns (nd6-pod-*)            node netns (nd6-node-*)
    192.0.2.6 (outside the             10.244.7.2 (this node's          nodedns serve --config <the
    node's pod CIDR): REFUSED          pod CIDR), resolv.conf from      DaemonSet's config.yaml>
                                       `nodedns resolv-conf`:           --manifests, NODE_NAME=node-a:
                                         nameserver 169.254.20.10        workers 2, allow list on,
                                         search <ns>.svc.cluster.local   nodelocaldns + iptables,
                                         ... options ndots:5            upstreams from resolv.conf ->
                                                                        a stand-in upstream on
                                                                        127.0.0.1:53 (www.example.test)

The clients, each asked the same questions:

    glibc    `getent ahosts NAME`; SRV through a small C program (tests/support/clients/dnsclient.c, gcc)
    musl     the same C program built with `musl-gcc -static` (Debian musl-tools; musl 1.2.3: no
             EDNS, no TCP retry, res_search = res_query)
    busybox  `busybox nslookup NAME` / `-type=SRV` (Debian busybox 1.35: no TCP retry)
    go       a small Go program (tests/support/clients/goclient.go; net.Resolver PreferGo), built offline from
             the standard library (Debian golang-go); skipped only outside CI without a Go toolchain

The questions: a short name, an FQDN, a headless Service with 60 endpoints (> 512 bytes: clients
without TCP live on the truncated UDP answer and must get at least 25 addresses), SRV, an external
name through the search list (answered by the stand-in upstream), and a name that does not exist.
docs/cluster-zone-testing.md has the matrix with its results.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import cluster_fixture as fx
from tests.support.fakenode import LOCAL_IP, NodeAgent, agent_on_node, node_http, render_resolv_conf, shipped_config
from tests.support.helpers import IN_CI
from tests.support.netns import Netns, netns, requires_netns, veth_pair

pytestmark = requires_netns

NODE_IP, POD_IP = "10.244.7.1", "10.244.7.2"  # the pod inside this node's pod CIDR
STRANGER_NODE_IP, STRANGER_IP = "192.0.2.5", "192.0.2.6"  # outside it
POD_CIDR = "10.244.7.0/24"
CLIENTS_SRC = Path(__file__).resolve().parents[1] / "support" / "clients"
HEADLESS_COUNT = 60
MIN_TRUNCATED = 25  # what musl and busybox must get of the 60 over UDP
EXTERNAL = ("www.example.test", "192.0.2.80")

WEB_IP = "10.96.12.34"
BIG_IPS = {f"10.244.60.{i}" for i in range(1, HEADLESS_COUNT + 1)}


def manifest_objects() -> list[dict[str, Any]]:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
            "spec": {"podCIDR": POD_CIDR, "podCIDRs": [POD_CIDR]},
            "status": {"addresses": [{"type": "InternalIP", "address": NODE_IP}]}}
    big = [fx.endpoint(ip) for ip in sorted(BIG_IPS, key=lambda t: int(t.rsplit(".", 1)[1]))]
    return [
        fx.namespace("default"),
        node,
        fx.service("default", "web", cluster_ips=[WEB_IP], ports=[fx.port(80, "http")]),
        fx.endpoint_slice("default", "web-1", "web", "IPv4", [fx.endpoint("10.244.7.20")], [fx.port(80, "http")]),
        fx.headless("default", "big", ports=[fx.port(80, "http")]),
        fx.endpoint_slice("default", "big-1", "big", "IPv4", big, [fx.port(80, "http")]),
    ]


# ----------------------------------------------------------------------------------------------
# The clients


@dataclass(frozen=True)
class Result:
    ok: bool
    values: frozenset[str]  # addresses, or SRV lines "priority weight port target"
    text: str  # what the client printed, for failure messages


def _run(ns: Netns, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return ns.run(*argv, check=False, timeout=60, env=env)


ADDR = re.compile(r"^Address:\s+(\S+)$", re.M)
SRV_LINE = re.compile(r"service = (\d+) (\d+) (\d+) (\S+)")


class Clients:
    """How each client is asked; every answer normalized to a set of addresses or SRV lines."""

    def __init__(self, pod: Netns, bin_dir: Path, go: Path | None) -> None:
        self.pod = pod
        self.bin = bin_dir
        self.go = go

    def ask(self, client: str, kind: str, name: str) -> Result:
        if client == "glibc":
            if kind == "srv":
                return self._program(str(self.bin / "dnsclient-glibc"), kind, name)
            r = _run(self.pod, "getent", "ahosts", name)
            return Result(r.returncode == 0, frozenset(line.split()[0] for line in r.stdout.splitlines() if line),
                          r.stdout + r.stderr)
        if client == "musl":
            return self._program(str(self.bin / "dnsclient-musl"), kind, name)
        if client == "go":
            assert self.go is not None
            return self._program(str(self.go), kind, name, env={**os.environ, "GODEBUG": "netdns=go"})
        if client == "busybox":
            argv = ["busybox", "nslookup"] + (["-type=SRV"] if kind == "srv" else []) + [name]
            r = _run(self.pod, *argv)
            out = r.stdout
            if kind == "srv":
                values = frozenset(" ".join(m.groups()).rstrip(".") for m in SRV_LINE.finditer(out))
            else:  # the first "Address:" is the server's own
                values = frozenset(a for a in ADDR.findall(out.split("\n\n", 1)[-1]))
            # busybox sends every search name at once and exits 1 when any of them is NXDOMAIN, even
            # when another one answered: an address printed is the answer a Pod's script would use
            return Result(bool(values), values, out + r.stderr)
        raise AssertionError(client)

    def _program(self, path: str, kind: str, name: str, env: dict[str, str] | None = None) -> Result:
        r = _run(self.pod, path, kind, name, env=env)
        lines = [line.rstrip(".") for line in r.stdout.splitlines() if line.strip()]
        if kind == "srv":
            lines = [" ".join(line.split()[:3] + [line.split()[3].rstrip(".")]) for line in lines]
        return Result(r.returncode == 0, frozenset(lines), r.stdout + r.stderr)


def build_clients(bin_dir: Path) -> Path | None:
    """The C program for glibc and for musl; the Go program when a Go toolchain is there (else None)."""
    src = str(CLIENTS_SRC / "dnsclient.c")
    subprocess.run(["gcc", "-O2", "-o", str(bin_dir / "dnsclient-glibc"), src, "-lresolv"], check=True,
                   capture_output=True, timeout=120)
    musl = shutil.which("musl-gcc")
    if musl is None:
        if IN_CI:
            raise AssertionError("musl-gcc is missing (Debian musl-tools): .ci/run installs it")
        pytest.skip("musl-gcc is not installed (Debian musl-tools)")
    subprocess.run([musl, "-static", "-O2", "-o", str(bin_dir / "dnsclient-musl"), src], check=True,
                   capture_output=True, timeout=120)
    go = shutil.which("go")
    if go is None:
        if IN_CI:
            raise AssertionError("no Go toolchain (Debian golang-go): .ci/run installs it")
        return None
    env = {**os.environ, "GOCACHE": str(bin_dir / "gocache"), "GOPATH": str(bin_dir / "gopath"),
           "GOPROXY": "off", "GOTOOLCHAIN": "local", "GOFLAGS": "", "CGO_ENABLED": "0"}
    out = bin_dir / "goclient"
    r = subprocess.run([go, "build", "-o", str(out), str(CLIENTS_SRC / "goclient.go")], env=env,
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    return out


# ----------------------------------------------------------------------------------------------
# The node, the pod, the agent as shipped


@dataclass
class Node:
    node: Netns
    pod: Netns
    stranger: Netns
    agent: NodeAgent
    clients: Clients

    def log_text(self) -> str:
        return self.agent.log_text()

    def status(self) -> dict[str, Any]:
        # /status is on the debug listener: the node's loopback (the ConfigMap's debug-listen), not for Pods
        data: dict[str, Any] = json.loads(node_http(self.node, "http://127.0.0.1:9254/status"))
        return data


CLIENT_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "namespace": "default"},
              "spec": {"containers": [{"name": "client", "image": "alpine"}]}}  # ClusterFirst


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    tmp = tmp_path_factory.mktemp("clients")
    go = build_clients(tmp)
    manifest = tmp / "cluster.yaml"
    manifest.write_text(yaml.safe_dump(fx.as_list(manifest_objects())), encoding="utf-8")
    config, local_ip = shipped_config(tmp)
    with netns("node") as node_ns, netns("pod") as pod_ns, netns("str") as stranger:
        veth_pair(node_ns, pod_ns, node_ip=NODE_IP, pod_ip=POD_IP, prefixlen=24, routes=[f"{LOCAL_IP}/32"])
        veth_pair(node_ns, stranger, node_ip=STRANGER_NODE_IP, pod_ip=STRANGER_IP, routes=[f"{LOCAL_IP}/32"])
        render_resolv_conf(pod_ns, CLIENT_POD, tmp)
        argv = ["--config", str(config), "--local-ip", local_ip, "--manifests", str(manifest)]
        with agent_on_node(node_ns, tmp, zone={EXTERNAL[0]: {"A": [EXTERNAL[1]]}}, argv=argv,
                           node_name="node-a") as agent:
            yield Node(node_ns, pod_ns, stranger, agent, Clients(pod_ns, tmp, go))


# ----------------------------------------------------------------------------------------------
# The matrix

CLIENTS = ["glibc", "musl", "busybox", "go"]


@dataclass(frozen=True)
class Case:
    id: str
    kind: str  # addr | srv
    name: str
    expect: frozenset[str] | None  # None: must not resolve
    partial_ok: set[str]  # clients without TCP that may get a truncated subset (at least MIN_TRUNCATED)


CASES = [
    Case("short-name", "addr", "web", frozenset({WEB_IP}), set()),
    Case("fqdn", "addr", "web.default.svc.cluster.local", frozenset({WEB_IP}), set()),
    Case("headless-60", "addr", "big.default.svc.cluster.local", frozenset(BIG_IPS), {"musl", "busybox"}),
    Case("srv", "srv", "_http._tcp.web.default.svc.cluster.local",
         frozenset({"0 100 80 web.default.svc.cluster.local"}), set()),
    Case("external-via-search-list", "addr", EXTERNAL[0], frozenset({EXTERNAL[1]}), set()),
    Case("nxdomain", "addr", "no-such-service", None, set()),
]

RESULTS: dict[tuple[str, str], Result] = {}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@pytest.mark.parametrize("client", CLIENTS)
def test_every_real_client_gets_a_usable_answer(node: Node, client: str, case: Case) -> None:
    if client == "go" and node.clients.go is None:
        pytest.skip("no Go toolchain here (Debian golang-go; CI installs it)")
    got = node.clients.ask(client, case.kind, case.name)
    RESULTS[(client, case.id)] = got
    if case.expect is None:
        assert not got.ok and not got.values, got.text
        return
    assert got.ok, f"{client} {case.name}: {got.text}\n{node.log_text()[-3000:]}"
    if client in case.partial_ok:
        # no TCP retry: what fits in one 512-byte UDP answer, whole records (miekg/dns Truncate)
        assert got.values <= case.expect and len(got.values) >= MIN_TRUNCATED, (len(got.values), got.text)
    else:
        assert got.values == case.expect, got.text


def test_the_allow_list_is_on_as_shipped(node: Node) -> None:
    """The pod (inside the node's pod CIDR) is answered above; a stranger outside it gets REFUSED."""
    allow = node.status()["limits"]["allow_from"]
    assert allow["mode"] == "default" and allow["pod_cidrs"] == [POD_CIDR]
    r = node.stranger.run("busybox", "nslookup", "web.default.svc.cluster.local", LOCAL_IP, check=False, timeout=30)
    assert "REFUSED" in r.stdout + r.stderr and WEB_IP not in r.stdout


def test_the_matrix(node: Node) -> None:
    """Prints the matrix (pytest -s) for docs/cluster-zone-testing.md; every cell ran above."""
    head = "| question | " + " | ".join(CLIENTS) + " |"
    rows = [head, "|" + "---|" * (len(CLIENTS) + 1)]
    for case in CASES:
        cells = []
        for client in CLIENTS:
            got = RESULTS.get((client, case.id))
            if got is None:
                cells.append("not run")
            elif case.expect is None:
                cells.append("not found" if not got.ok else "RESOLVED")
            elif case.kind == "addr" and len(case.expect) > 1:
                cells.append(f"{len(got.values)} of {len(case.expect)}")
            else:
                cells.append("ok" if got.values == case.expect else "WRONG")
        rows.append(f"| {case.id} | " + " | ".join(cells) + " |")
    print("\n" + "\n".join(rows))
    assert "Traceback" not in node.log_text()
