"""Topology-aware headless answers: this node first, then this zone, then the rest; traffic distribution."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodedns.cluster import topology
from nodedns.cluster.objects import Endpoint, EndpointSlice, Node, Service
from tests.support import manifests as m
from tests.support.helpers import RunningAgent, running_agent

# Endpoints in slice order; the comment says where each one is as seen from node-a in zone-a.
ENDPOINTS = [
    m.endpoint("10.0.0.1", node="node-c", zone="zone-c", hostname="far"),  # elsewhere
    m.endpoint("10.0.0.2", node="node-b", zone="zone-a", hostname="zonal"),  # same zone
    m.endpoint("10.0.0.3", node="node-a", zone="zone-a", hostname="local"),  # same node
    m.endpoint("10.0.0.4", node="node-d", zone="zone-b", hostname="hinted", for_zones=["zone-a"]),  # hinted here
    m.endpoint("10.0.0.5", node="node-e", zone="zone-a", hostname="hinted-away", for_zones=["zone-b"]),  # hinted away
    m.endpoint("10.0.0.6", node="node-a", zone="zone-a", hostname="local2"),  # same node
]


def cluster(tmp_path: Path, extra: list[dict[str, object]] | None = None) -> Path:
    objs = [
        m.namespace("default"),
        m.node("node-a", zone="zone-a", region="region-1"),
        m.service("api", headless=True, ports=[{"name": "http", "port": 8080}]),
        m.endpoint_slice("api-1", "api", ENDPOINTS[:3]),
        m.endpoint_slice("api-2", "api", ENDPOINTS[3:]),
        m.service("zonal", headless=True, traffic_distribution="PreferSameZone"),
        m.endpoint_slice("zonal-1", "zonal", ENDPOINTS),
        m.service("close", headless=True, traffic_distribution="PreferClose"),
        m.endpoint_slice("close-1", "close", [ENDPOINTS[0], ENDPOINTS[1]]),
        m.service("nodal", headless=True, traffic_distribution="PreferSameNode"),
        m.endpoint_slice("nodal-1", "nodal", ENDPOINTS),
        m.service("nodal-fallback", headless=True, traffic_distribution="PreferSameNode"),
        m.endpoint_slice("nodal-fallback-1", "nodal-fallback", [ENDPOINTS[0], ENDPOINTS[1]]),
        m.service("nowhere-near", headless=True, traffic_distribution="PreferSameZone"),
        m.endpoint_slice("nowhere-near-1", "nowhere-near", [ENDPOINTS[0], ENDPOINTS[4]]),
        *(extra or []),
    ]
    return m.write(tmp_path / "cluster.yaml", objs)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAgent]:
    path = cluster(tmp_path_factory.mktemp("topology"))
    with running_agent({"manifests": str(path), "node-name": "node-a"}) as a:
        yield a


def addresses(agent: RunningAgent, name: str, tcp: bool = False) -> list[str]:
    r = agent.query(name, "A", tcp=tcp)
    return [rd.address for rrset in r.answer for rd in rrset]


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_headless_a_answers_list_this_node_then_this_zone_then_the_rest(agent: RunningAgent, tcp: bool) -> None:
    assert addresses(agent, "api.default.svc.cluster.local", tcp) == [
        "10.0.0.3", "10.0.0.6",  # this node, in slice order
        "10.0.0.2", "10.0.0.4",  # this zone: by zone field, and by hint
        "10.0.0.1", "10.0.0.5",  # the rest: another zone, and hinted to another zone
    ]


def test_headless_srv_answers_follow_the_same_order(agent: RunningAgent) -> None:
    r = agent.query("api.default.svc.cluster.local", "SRV")
    targets = [rd.target.to_text().split(".")[0] for rrset in r.answer for rd in rrset]
    assert targets == ["local", "local2", "zonal", "hinted", "far", "hinted-away"]


def test_named_port_srv_is_ordered_too(agent: RunningAgent) -> None:
    r = agent.query("_http._tcp.api.default.svc.cluster.local", "SRV")
    targets = [rd.target.to_text().split(".")[0] for rrset in r.answer for rd in rrset]
    assert targets[:2] == ["local", "local2"]
    assert len(targets) == 6


@pytest.mark.parametrize(
    ("service", "expected"),
    [
        ("zonal", ["10.0.0.3", "10.0.0.6", "10.0.0.2", "10.0.0.4"]),
        ("close", ["10.0.0.2"]),
        ("nodal", ["10.0.0.3", "10.0.0.6"]),
        ("nodal-fallback", ["10.0.0.2"]),
        ("nowhere-near", ["10.0.0.1", "10.0.0.5"]),
    ],
    ids=[
        "prefer-same-zone-keeps-node-and-zone",
        "prefer-close-is-prefer-same-zone",
        "prefer-same-node-keeps-only-this-node",
        "prefer-same-node-falls-back-to-the-zone",
        "nothing-in-the-zone-means-everything",
    ],
)
def test_traffic_distribution_returns_only_the_preferred_endpoints_when_there_are_any(
    agent: RunningAgent, service: str, expected: list[str]
) -> None:
    assert addresses(agent, f"{service}.default.svc.cluster.local") == expected


def test_endpoint_names_resolve_whatever_their_zone(agent: RunningAgent) -> None:
    assert addresses(agent, "far.nodal.default.svc.cluster.local") == ["10.0.0.1"]


def test_without_a_node_name_the_slice_order_is_kept(tmp_path: Path) -> None:
    with running_agent({"manifests": str(cluster(tmp_path))}) as a:
        assert addresses(a, "api.default.svc.cluster.local") == [f"10.0.0.{i}" for i in range(1, 7)]
        # and traffic distribution does not drop anything it cannot judge
        assert len(addresses(a, "nodal.default.svc.cluster.local")) == 6


def test_a_node_without_zone_label_still_puts_its_own_endpoints_first(tmp_path: Path) -> None:
    path = cluster(tmp_path)
    text = path.read_text().replace("topology.kubernetes.io/zone: zone-a", "unrelated: label")
    path.write_text(text)
    with running_agent({"manifests": str(path), "node-name": "node-a"}) as a:
        assert addresses(a, "api.default.svc.cluster.local")[:2] == ["10.0.0.3", "10.0.0.6"]
        # PreferSameZone cannot judge without a zone: every endpoint, this node's first
        assert addresses(a, "zonal.default.svc.cluster.local") == [
            "10.0.0.3", "10.0.0.6", "10.0.0.1", "10.0.0.2", "10.0.0.4", "10.0.0.5"]


def _ep(node: str, zone: str, for_zones: tuple[str, ...] = ()) -> Endpoint:
    return Endpoint(("10.1.1.1",), True, "", "", node, zone, for_zones)


@pytest.mark.parametrize(
    ("ep", "group"),
    [
        (_ep("n1", "z1"), topology.SAME_NODE),
        (_ep("n1", "z9", ("z9",)), topology.SAME_NODE),
        (_ep("n2", "z1"), topology.SAME_ZONE),
        (_ep("n2", "z9", ("z1", "z2")), topology.SAME_ZONE),
        (_ep("n2", "z1", ("z2",)), topology.ELSEWHERE),
        (_ep("n2", "z2"), topology.ELSEWHERE),
        (_ep("", ""), topology.ELSEWHERE),
    ],
    ids=["node", "node-beats-hints", "zone-field", "zone-hint", "hint-overrides-zone-field", "other-zone", "unknown"],
)
def test_group_of_an_endpoint(ep: Endpoint, group: int) -> None:
    assert topology.group(ep, "n1", "z1") == group


def test_order_is_stable_within_a_group() -> None:
    svc = Service("default", "s", 1, (), (), "", False, "")
    sl = EndpointSlice("default", "s-1", "s", "IPv4", (), ())
    eps = [(sl, _ep(f"x{i}", "z2")) for i in range(5)] + [(sl, _ep("y", "z1")), (sl, _ep("n1", "z1"))]
    ordered = topology.order(svc, eps, "n1", Node("n1", "z1", "r1"))
    assert [ep.node_name for _, ep in ordered] == ["n1", "y", "x0", "x1", "x2", "x3", "x4"]
