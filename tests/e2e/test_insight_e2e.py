"""Per-Pod insight on a fake node, as shipped: two "pods" that differ only in ndots resolve the same external names
with glibc; `nodedns top` shows the waste of the first and not of the second, and its advice names the first.

    pod netns "checkout" (orders)        node netns (the ConfigMap's local-ip key as --local-ip, as the DaemonSet does)
    10.244.7.2, resolv.conf from         nodedns serve --config <daemonset/configmap.yaml's config.yaml>
    `nodedns resolv-conf`: ndots:5         --manifests (the Node with its pod CIDR, the two Pods),
                               --veth-->   NODE_NAME=node-a: the allow list on, workers 2 (and, to
    pod netns "batch" (default)            compare, --workers 1), nodelocaldns 169.254.20.10 + iptables,
    10.244.7.6, the same with              upstreams from the node's resolv.conf -> a stand-in upstream
    dnsConfig ndots:1                      on 127.0.0.1:53 (api.example.com, cdn.example.net)

`getent ahosts NAME` three times per name in each pod; then, in the node namespace, `nodedns top`
(found as `nodedns lookup` finds the debug listener: 127.0.0.1:9254, the ConfigMap's) and /metrics.
The supervisor of --workers 2 has its workers' counts at most a second late: the test polls.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import manifests as m
from tests.support.agentproc import metric_value
from tests.support.fakenode import LOCAL_IP, NodeAgent, agent_on_node, node_http, render_resolv_conf, shipped_config
from tests.support.helpers import nodedns_cmd, subprocess_env
from tests.support.netns import Netns, netns, requires_netns, veth_pair

pytestmark = requires_netns

PREFIX = "nd18"
NODE = "node-a"
NODE_IP, CHECKOUT_IP = "10.244.7.1", "10.244.7.2"  # a /30 each: the node's side and the pod's
NODE_IP_2, BATCH_IP = "10.244.7.5", "10.244.7.6"
POD_CIDR = "10.244.7.0/24"
EXTERNAL = {"api.example.com": "192.0.2.80", "cdn.example.net": "192.0.2.81"}
LOOKUPS = 3

CHECKOUT = m.pod("checkout-7d9f8-abcde", "orders", ip=CHECKOUT_IP, node_name=NODE, uid="u-checkout",
                 owner=("ReplicaSet", "checkout-7d9f8"))
BATCH = m.pod("batch", "default", ip=BATCH_IP, node_name=NODE, uid="u-batch",
              dns_config={"options": [{"name": "ndots", "value": "1"}]})


@dataclass
class Node:
    node: Netns
    checkout: Netns
    batch: Netns
    agent: NodeAgent

    def log_text(self) -> str:
        return self.agent.log_text()

    def top(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = subprocess_env()
        env.pop("NODEDNS_DEBUG", None)
        found = () if not os.path.exists("/run/nodedns/debug.sock") else ("--debug", "http://127.0.0.1:9254")
        return self.node.run(*nodedns_cmd("top", *found, *args), env=env, check=False, timeout=60)

    def metrics(self) -> str:
        return node_http(self.node, "http://127.0.0.1:9253/metrics")


@pytest.fixture(params=["shipped", "one-process"], ids=["shipped-config-workers-2", "shipped-config-workers-1"])
def node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Node]:
    extra = () if request.param == "shipped" else ("--workers", "1")
    manifest = m.write(tmp_path / "cluster.yaml", [
        m.namespace("default"), m.namespace("orders"),
        {**m.node(NODE, pod_cidrs=[POD_CIDR]), "status": {"addresses": [{"type": "InternalIP", "address": NODE_IP}]}},
        CHECKOUT, BATCH,
    ])
    config, local_ip = shipped_config(tmp_path)
    with netns("node", PREFIX) as node_ns, netns("chk", PREFIX) as checkout, netns("bat", PREFIX) as batch:
        # dual-stack pods (an IPv6 address at once): glibc asks A and AAAA for every name
        veth_pair(node_ns, checkout, node_ip=NODE_IP, pod_ip=CHECKOUT_IP, routes=[f"{LOCAL_IP}/32"],
                  pod_ipv6="fd00:18::2")
        veth_pair(node_ns, batch, node_ip=NODE_IP_2, pod_ip=BATCH_IP, routes=[f"{LOCAL_IP}/32"],
                  pod_ipv6="fd00:18:1::6")
        assert "options ndots:5" in render_resolv_conf(checkout, CHECKOUT, tmp_path)
        assert "options ndots:1" in render_resolv_conf(batch, BATCH, tmp_path)
        with agent_on_node(node_ns, tmp_path, zone={name: {"A": [ip]} for name, ip in EXTERNAL.items()},
                           argv=["--config", str(config), "--local-ip", local_ip, "--manifests", str(manifest),
                                 *extra], node_name=NODE) as agent:
            yield Node(node_ns, checkout, batch, agent)


def settled_top(env: Node, expected_queries: dict[str, int]) -> dict[str, Any]:
    """`nodedns top --json` once every Pod's queries reached what was sent (the workers report each second)."""
    deadline = time.monotonic() + 15
    while True:
        r = env.top("--json", "--sort", "waste")
        assert r.returncode == 0, r.stderr + env.log_text()[-3000:]
        doc: dict[str, Any] = json.loads(r.stdout)
        got = {p["pod"]: p["queries"] for p in doc["pods"]}
        if all(got.get(pod, 0) >= n for pod, n in expected_queries.items()) or time.monotonic() > deadline:
            return doc
        time.sleep(0.3)


def test_nodedns_top_shows_the_waste_of_ndots_5_and_not_of_ndots_1(node: Node) -> None:
    sent: dict[str, int] = {}
    for pod_ns in (node.checkout, node.batch):
        for _ in range(LOOKUPS):
            for name, address in EXTERNAL.items():
                r = pod_ns.run("getent", "ahosts", name, check=False, timeout=30)
                assert r.returncode == 0 and address in r.stdout.split(), r.stdout + r.stderr + node.log_text()[-2000:]
    # glibc: per lookup, A and AAAA per name tried: 4 names at ndots:5 (3 search domains, then the name), 1 at ndots:1
    sent["orders/checkout-7d9f8-abcde"] = LOOKUPS * len(EXTERNAL) * 8
    sent["default/batch"] = LOOKUPS * len(EXTERNAL) * 2
    doc = settled_top(node, sent)
    pods = {p["pod"]: p for p in doc["pods"]}
    checkout, batch = pods["orders/checkout-7d9f8-abcde"], pods["default/batch"]
    assert checkout["queries"] == sent[checkout["pod"]], checkout
    assert checkout["search_misses"] == LOOKUPS * len(EXTERNAL) * 6 and checkout["waste"] == 0.75, checkout
    assert batch["queries"] == sent[batch["pod"]] and batch["search_misses"] == 0, batch
    assert batch["waste"] == 0.0 and batch["rcodes"] == {"NOERROR": batch["queries"]}
    assert checkout["owner"] == {"kind": "Deployment", "name": "checkout"}

    r = node.top("--sort", "waste")
    assert r.returncode == 0, r.stderr
    agent, *lines = r.stdout.splitlines()
    assert agent.startswith("agent:    node node-a, pid ")  # the agent that answered, named first
    rows = {line.split()[1]: line.split() for line in lines[1:] if line and not line.startswith(("advice", "  "))}
    assert lines[1].split()[1] == "checkout-7d9f8-abcde"  # the most waste first
    assert rows["checkout-7d9f8-abcde"][7] == "75%" and rows["batch"][7] == "0%"
    advice = [line for line in lines if line.startswith("  - ")]
    assert any(line.startswith("  - orders/checkout-7d9f8-abcde: 75% of its queries are search-list misses for "
                               "external names") and "set ndots:2" in line for line in advice), r.stdout
    assert not any("default/batch" in line for line in advice), r.stdout
    print("\n" + r.stdout)

    text = node.metrics()
    print("\n".join(line for line in text.splitlines() if line.startswith("nodedns_namespace_")))
    assert metric_value(text, "nodedns_namespace_search_misses_total", namespace="orders") == checkout["search_misses"]
    assert metric_value(text, "nodedns_namespace_search_misses_total", namespace="default") == 0
    assert metric_value(text, "nodedns_namespace_queries_total", namespace="default", rcode="NOERROR") \
        == batch["queries"]
    assert "Traceback" not in node.log_text()
