"""Knowing its own node: the one Node named by NODE_NAME, from the API (list + watch narrowed by
`metadata.name`) or from the manifest file; its labels drive topology order and federation CNAMEs."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodedns.cluster import apisync
from nodedns.cluster import objects as k8s
from nodedns.cluster.index import Index
from tests.support import kube_agent
from tests.support import manifests as m
from tests.support.apiserver import FakeApiServer, endpoint_slice, service
from tests.support.helpers import RunningAgent, running_agent
from tests.support.kube_agent import fast_agent, wait_synced
from tests.support.kube_sync import eventually, syncing

# the API server double with namespace "default", and a kubeconfig for it: test_kube_agent's fixtures
api = kube_agent.api


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24", "fd00:244:1::/64"]},
         ("10.244.1.0/24", "fd00:244:1::/64")),
        ({"podCIDR": "10.244.2.0/24"}, ("10.244.2.0/24",)),
        ({}, ()),
        ({"podCIDRs": ["10.244.3.7/24"]}, ("10.244.3.0/24",)),
    ],
    ids=["dual-stack-podCIDRs", "only-the-old-podCIDR", "none-yet", "host-bits-dropped"],
)
def test_the_node_record_keeps_its_pod_cidrs(spec: dict[str, Any], expected: tuple[str, ...]) -> None:
    obj = m.node("node-a", zone="z1", region="r1")
    obj["spec"] = spec
    node = k8s.slim("Node", obj)
    assert isinstance(node, k8s.Node)
    assert (node.zone, node.region) == ("z1", "r1")
    assert node.pod_cidrs == expected


def test_a_bad_pod_cidr_entry_is_left_out_and_the_node_still_counts() -> None:
    """The API server never stores a malformed podCIDR; a hand-written manifest might. Dropping the
    entry keeps the node's zone and region (topology, federation) instead of losing the whole Node."""
    obj = m.node("node-a", zone="z1", region="r1")
    obj["spec"] = {"podCIDRs": ["10.244.0.0/24", "not-a-cidr"]}
    node = k8s.slim("Node", obj)
    assert isinstance(node, k8s.Node)
    assert (node.zone, node.region, node.pod_cidrs) == ("z1", "r1", ("10.244.0.0/24",))


@pytest.mark.parametrize(
    ("node_name", "expected"),
    [("n1", "metadata.name=n1"), ("", None)],
    ids=["named-node-watched-by-name", "no-node-name-no-node"],
)
def test_resources_include_this_node_by_name(node_name: str, expected: str | None) -> None:
    selectors = {r.name: r.field_selector for r in apisync.resources(pods="insecure", node_name=node_name)}
    assert selectors.get("nodes") == expected


async def test_only_this_node_is_listed_and_watched_and_its_label_changes_reach_the_index(
    api: FakeApiServer, kubeconfig: str
) -> None:
    api.put("Node", m.node("node-a", zone="zone-1", region="r", pod_cidrs=["10.244.0.0/24"]))
    api.put("Node", m.node("node-b", zone="zone-2", region="r"))
    async with syncing(kubeconfig, node_name="node-a") as (index, sync):
        assert set(index.nodes) == {"node-a"}
        node = index.node("node-a")
        assert node is not None and node.zone == "zone-1"
        assert node.pod_cidrs == ("10.244.0.0/24",)
        requests = api.requests_for("nodes")
        assert {r.verb for r in requests} >= {"list", "watch"}
        assert all(r.query.get("fieldSelector") == "metadata.name=node-a" for r in requests)
        assert sync.status()["resources"]["nodes"]["synced"] is True

        api.put("Node", m.node("node-a", zone="zone-3", region="r"))
        api.put("Node", m.node("node-b", zone="zone-4", region="r"))
        await eventually(lambda: (n := index.node("node-a")) is not None and n.zone == "zone-3",
                         what="the new zone label")
        assert set(index.nodes) == {"node-a"}
        api.delete("Node", "", "node-a")
        await eventually(lambda: index.node("node-a") is None, what="the node to go")


async def test_a_node_name_the_api_does_not_know_still_syncs(api: FakeApiServer, kubeconfig: str) -> None:
    async with syncing(kubeconfig, node_name="node-z") as (index, _):
        assert index.synced and index.nodes == {}


def test_a_plain_index_has_no_node_until_one_is_applied() -> None:
    index = Index()
    assert index.node("node-a") is None
    index.apply("Node", "ADDED", m.node("node-a", zone="z"))
    node = index.node("node-a")
    assert node is not None and node.zone == "z"


# -- the agent: its own Node's labels drive the answers --------------------------------------------

HEADLESS_ENDPOINTS = [("10.244.1.1", "node-b", "zone-2"), ("10.244.2.2", "node-c", "zone-1"),
                      ("10.244.3.3", "node-a", "zone-1")]


def _slice_with_zones() -> dict[str, Any]:
    obj = endpoint_slice("default", "db-1", "db", [ip for ip, _, _ in HEADLESS_ENDPOINTS])
    for ep, (_, node, zone) in zip(obj["endpoints"], HEADLESS_ENDPOINTS, strict=True):
        ep["nodeName"], ep["zone"] = node, zone
    return obj


def addresses(agent: RunningAgent, name: str) -> list[str]:
    return [rd.address for rrset in agent.query(name, "A").answer for rd in rrset]


@contextlib.contextmanager
def api_agent(kubeconfig: str, **extra: Any) -> Iterator[RunningAgent]:
    with running_agent({"kubeconfig": kubeconfig, "node-name": "node-x", **extra}, agent_factory=fast_agent) as a:
        wait_synced(a)
        yield a


def test_the_agent_orders_answers_by_its_own_nodes_zone_as_the_api_reports_it(
    api: FakeApiServer, kubeconfig: str
) -> None:
    api.put("Service", service("default", "db", None))
    api.put("EndpointSlice", _slice_with_zones())
    api.put("Node", m.node("node-x", zone="zone-2", region="r"))
    with api_agent(kubeconfig) as agent:
        # node-x is in zone-2: the zone-2 endpoint first, then slice order
        assert addresses(agent, "db.default.svc.cluster.local") == ["10.244.1.1", "10.244.2.2", "10.244.3.3"]
        api.put("Node", m.node("node-x", zone="zone-1", region="r"))
        deadline = time.monotonic() + 2.0
        while addresses(agent, "db.default.svc.cluster.local")[0] != "10.244.2.2":
            assert time.monotonic() < deadline, "the relabelled node did not change the order"
            time.sleep(0.01)
        assert addresses(agent, "db.default.svc.cluster.local") == ["10.244.2.2", "10.244.3.3", "10.244.1.1"]


def test_in_manifests_mode_the_node_comes_from_the_file(tmp_path: Path) -> None:
    path = m.write(tmp_path / "c.yaml", [m.namespace("default"), m.node("node-x", zone="zone-1", region="r",
                                                                          pod_cidrs=["10.244.9.0/24"])])
    with running_agent({"manifests": str(path), "node-name": "node-x"}) as agent:
        node = agent.call(lambda: agent.agent.index.node("node-x"))
        assert node is not None and node.zone == "zone-1"
        assert node.pod_cidrs == ("10.244.9.0/24",)
