"""`nodedns shadow` on a fake node, as the shadow DaemonSet runs it, beside a stand-in current DNS under load.

    pod netns "client" (default/client,      node netns
    10.244.0.90): dnsperf at 5,000 q/s  -->  dnsmasq on 10.244.0.89:53 and 10.244.0.93:53: the stand-in current DNS,
    of the names the stand-in answers          host records made from examples/cluster.yaml by nodedns's own
    right                                      answers, with deliberate differences (below)
    pod netns "odd" (10.244.0.94): each    nodedns shadow --config <daemonset/configmap.yaml's config.yaml>
    deliberate difference once, and an       --manifests examples/cluster.yaml (no --local-ip, as the overlay)
    empty non-terminal                       --interface any --port 53 (the overlay's command line)

The deliberate differences: web.default has the wrong address, api.prod is missing (NXDOMAIN), db.prod
(headless) lacks one of its two addresses. The shadow must report exactly those three names as
mismatches, the empty non-terminal as a known difference, every dnsperf answer as a match, and change
nothing on the node (no interface, no rule: the shipped config's --setup-interface and --firewall are set
aside).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.cluster import manifests
from nodedns.dns.wire import QT
from tests.support.fakenode import shipped_config
from tests.support.helpers import ROOT, nodedns_cmd, subprocess_env, wait_for
from tests.support.netns import NETNS_MISSING, Netns, netns, veth_pair

MISSING = NETNS_MISSING or next((f"{t} is not installed" for t in ("dnsperf", "dnsmasq") if shutil.which(t) is None),
                                None)
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

PREFIX = "nd32"
EXAMPLE = ROOT / "examples" / "cluster.yaml"
NODE_IP, CLIENT_IP = "10.244.0.89", "10.244.0.90"  # the client is Pod default/client in examples/cluster.yaml
NODE_IP_2, ODD_IP = "10.244.0.93", "10.244.0.94"
WEB, API, DB = "web.default.svc.cluster.local", "api.prod.svc.cluster.local", "db.prod.svc.cluster.local"
DELIBERATE = {WEB, API, DB}
ENT = "pod.cluster.local"  # an empty non-terminal: the stand-in has no name below it (NXDOMAIN)
RATE = 5000
SECONDS = 6


def true_records() -> dict[str, list[str]]:
    """Every Service name of the example and its A records, as nodedns answers them (the resolver's own)."""
    agent = Agent(cfgmod.from_sources({"manifests": str(EXAMPLE), "upstream": ["none"]}))
    agent.index.load_changes(manifests.changes(str(EXAMPLE)))
    agent.index.mark_synced()
    out: dict[str, list[str]] = {}
    for ns, name in sorted(agent.index.services):
        qname = f"{name}.{ns}.svc.cluster.local"
        found = agent.resolver.records.lookup(qname, QT.A)
        records = found.answer if found else []
        ips = [str(rr.data) for rr in records if rr.rtype == QT.A]
        if ips and len(ips) == len(records):  # plain address answers (an ExternalName's CNAME is no host record)
            out[qname] = ips
    assert {WEB, API, DB} <= set(out), out
    return out


def stand_in_records(truth: dict[str, list[str]]) -> list[str]:
    """dnsmasq --host-record values: the truth with the deliberate differences."""
    lines = []
    for name, ips in truth.items():
        if name == API:
            continue  # missing: NXDOMAIN
        if name == WEB:
            ips = ["10.96.99.99"]
        if name == DB:
            ips = ips[:1]
        lines += [f"{name},{ip}" for ip in ips]
    return lines


@dataclass
class Node:
    node: Netns
    client: Netns
    odd: Netns
    shadow: subprocess.Popen[bytes]
    log: Path
    correct: list[str]

    def shadow_doc(self) -> dict[str, Any]:
        r = self.node.run(*nodedns_cmd("shadow", "--report", "--json"), env=subprocess_env(), timeout=30)
        doc: dict[str, Any] = json.loads(r.stdout)
        return doc


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    truth = true_records()
    config, _ = shipped_config(tmp_path)  # no --local-ip: the overlay gives none
    with netns("node", PREFIX) as node_ns, netns("cli", PREFIX) as client, netns("odd", PREFIX) as odd:
        veth_pair(node_ns, client, node_ip=NODE_IP, pod_ip=CLIENT_IP)
        veth_pair(node_ns, odd, node_ip=NODE_IP_2, pod_ip=ODD_IP)
        stand_in = subprocess.Popen([*node_ns.exec_prefix, "dnsmasq", "--no-daemon", "--port=53", "--bind-interfaces",
                                     f"--listen-address={NODE_IP}", f"--listen-address={NODE_IP_2}", "--no-resolv",
                                     "--no-hosts", "--local=/cluster.local/", "--user=root", "--cache-size=0",
                                     f"--pid-file={tmp_path / 'dnsmasq.pid'}",
                                     *[f"--host-record={r}" for r in stand_in_records(truth)]],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log = tmp_path / "shadow.log"
        with log.open("wb") as out:
            shadow = subprocess.Popen([*node_ns.exec_prefix, *nodedns_cmd(
                "shadow", "--config", str(config), "--manifests", str(EXAMPLE),
                "--interface", "any", "--port", "53", "--max-rate", "50000")],
                env=subprocess_env(NODE_NAME="node-a"), stdout=out, stderr=subprocess.STDOUT)
        env = Node(node_ns, client, odd, shadow, log, sorted(set(truth) - DELIBERATE))
        try:
            wait_for(lambda: shadow.poll() is None and "ready:" in log.read_text(), 60,
                     "the shadow synced and capturing")
            yield env
        finally:
            shadow.terminate()
            shadow.wait(30)
            stand_in.terminate()
            stand_in.wait(10)


def dnsperf(ns: Netns, server: str, names: list[str], tmp: Path) -> tuple[int, int]:
    """(queries sent, queries completed) of a dnsperf run at RATE q/s for SECONDS."""
    data = tmp / "names.txt"
    data.write_text("".join(f"{n} A\n" for n in names))
    r = ns.run("dnsperf", "-s", server, "-d", str(data), "-Q", str(RATE), "-l", str(SECONDS), "-t", "2",
               timeout=SECONDS + 60)
    sent = int(re.search(r"Queries sent:\s+(\d+)", r.stdout).group(1))  # type: ignore[union-attr]
    done = int(re.search(r"Queries completed:\s+(\d+)", r.stdout).group(1))  # type: ignore[union-attr]
    return sent, done


def ask_odd(env: Node) -> None:
    """Each deliberate difference once, and an empty non-terminal, from the other Pod."""
    script = ("import dns.message, dns.query, sys\n"
              "for name in sys.argv[1:]:\n"
              f"    dns.query.udp(dns.message.make_query(name, 'A'), '{NODE_IP_2}', timeout=3)\n")
    env.odd.run(sys.executable, "-c", script, *sorted(DELIBERATE), ENT, env=subprocess_env(), timeout=60)


def test_the_shadow_reports_exactly_the_deliberate_differences_at_5000_queries_a_second(node: Node,
                                                                                         tmp_path: Path) -> None:
    odd = threading.Thread(target=ask_odd, args=(node,))
    load: list[tuple[int, int]] = []
    runner = threading.Thread(target=lambda: load.append(dnsperf(node.client, NODE_IP, node.correct, tmp_path)))
    runner.start()
    odd.start()
    odd.join(90)
    runner.join(SECONDS + 90)
    (sent, done), = load
    assert sent >= RATE * SECONDS * 0.8, f"dnsperf sent {sent} queries in {SECONDS}s"

    def settled() -> dict[str, Any] | None:
        doc = node.shadow_doc()
        return doc if doc["pending"] == 0 and sum(doc["answers"].values()) >= done + len(DELIBERATE) + 1 else None

    wait_for(settled, 30, "every pair judged")
    doc = settled()
    assert doc is not None, node.log.read_text()[-3000:]
    answers = doc["answers"]
    assert answers["mismatch"] == len(DELIBERATE), doc["mismatch_list"]
    assert {m["question"]["name"].rstrip(".") for m in doc["mismatch_list"]} == DELIBERATE
    assert doc["mismatches"] == {"records": 2, "rcode": 1}
    assert {m["pod"] for m in doc["mismatch_list"]} == {None}  # the odd Pod is no Pod of the manifests
    assert doc["known"] == {"empty_non_terminal": 1}
    assert answers["match"] >= done  # every answer dnsperf got was judged the same
    assert answers["match"] + answers["unknown"] + sum(doc["dropped"].values()) == sent, doc
    # nothing on the node changed: no interface, no rule (the shipped config's setup-interface and firewall)
    assert "nodelocaldns" not in node.node.links()
    assert not [r for r in node.node.rules() if "169.254.20.10" in r]
    report = node.node.run(*nodedns_cmd("shadow", "--report"), env=subprocess_env(), timeout=30).stdout
    assert f"mismatch   {len(DELIBERATE)}" in report and "10.96.99.99" in report


def test_bench_shadow_prints_the_cpu_per_10000_queries_beside_dnsmasq() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench-shadow"), "--rates", "300", "--seconds", "2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env=subprocess_env())
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [line.split() for line in r.stdout.splitlines() if re.match(r"\s*(50000|2000 \(default\))\s", line)]
    assert len(rows) == 2, r.stdout
    for row in rows:
        offered, answered, judged = (int(x.replace(",", "")) for x in row[-11:-8])
        assert offered == 300 and answered > 0 and judged > 0, row
        # both CPU figures measured (dnsmasq's may be under one clock tick, 10 ms, for this small run)
        assert float(row[-7]) > 0 and float(row[-5]) >= 0 and row[-3].endswith(("x", "nan")), row
