"""kube-dns federation: `svc.ns.fed.svc.<zone>` CNAMEs to the local service or to this node's zone/region."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dns.rcode
import pytest

from tests import manifests as m
from tests.helpers import RunningAgent, running_agent


def objects(*, node_labels: bool = True) -> list[dict[str, object]]:
    return [
        m.namespace("default"),
        m.namespace("myfed"),  # a namespace named like the federation (kube-dns's known ambiguity)
        m.node("node-a", zone="us-central1-b", region="us-central1") if node_labels else m.node("node-a"),
        m.service("web", cluster_ips=["10.96.1.1"]),
        m.endpoint_slice("web-1", "web", [m.endpoint("10.244.0.5")]),
        m.service("idle", cluster_ips=["10.96.1.2"]),  # ClusterIP without ready endpoints
        m.endpoint_slice("idle-1", "idle", [m.endpoint("10.244.0.6", ready=False)]),
        m.service("db", headless=True),  # headless: local even without endpoints (the rule)
        m.service("ext", external_name="example.org"),
        # a real name in namespace myfed: "web.default.myfed.svc" is endpoint web of service default
        m.service("default", "myfed", headless=True),
        m.endpoint_slice("default-1", "default", [m.endpoint("10.244.9.9", hostname="web")], ns="myfed"),
    ]


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAgent]:
    path = m.write(tmp_path_factory.mktemp("fed") / "c.yaml", objects())
    cfg = {"manifests": str(path), "node-name": "node-a", "federation": ["myfed=example.com", "other=fed.example.net"]}
    with running_agent(cfg) as a:
        yield a


def cname_and_rest(agent: RunningAgent, name: str, rdtype: str = "A") -> tuple[str, list[str], int]:
    r = agent.query(name, rdtype)
    cnames = [rd.target.to_text() for rrset in r.answer if rrset.rdtype == 5 for rd in rrset]
    rest = [rd.to_text() for rrset in r.answer if rrset.rdtype != 5 for rd in rrset]
    return (cnames[0] if cnames else ""), rest, r.rcode()


def test_a_local_service_with_ready_endpoints_gets_a_cname_to_its_local_name(agent: RunningAgent) -> None:
    target, rest, rcode = cname_and_rest(agent, "web.default.other.svc.cluster.local")
    assert (target, rest, rcode) == ("web.default.svc.cluster.local.", ["10.96.1.1"], dns.rcode.NOERROR)


def test_a_local_headless_service_is_local_even_without_endpoints(agent: RunningAgent) -> None:
    target, _, _ = cname_and_rest(agent, "db.default.other.svc.cluster.local", "CNAME")
    assert target == "db.default.svc.cluster.local."


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("idle.default.other.svc.cluster.local", "idle.default.other.svc.us-central1-b.us-central1.fed.example.net."),
        ("gone.default.other.svc.cluster.local", "gone.default.other.svc.us-central1-b.us-central1.fed.example.net."),
        ("ext.default.other.svc.cluster.local", "ext.default.other.svc.us-central1-b.us-central1.fed.example.net."),
        ("gone.nons.myfed.svc.cluster.local", "gone.nons.myfed.svc.us-central1-b.us-central1.example.com."),
    ],
    ids=["no-ready-endpoints", "no-such-service", "externalname-is-not-local", "no-such-namespace"],
)
def test_otherwise_the_cname_points_at_this_nodes_zone_and_region(
    agent: RunningAgent, name: str, expected: str
) -> None:
    target, rest, rcode = cname_and_rest(agent, name)
    assert target == expected
    assert rest == []  # resolved upstream (no upstream configured here)
    assert rcode == dns.rcode.NOERROR


def test_a_name_that_exists_locally_wins_over_the_federation_reading(agent: RunningAgent) -> None:
    r = agent.query("web.default.myfed.svc.cluster.local", "A")
    assert [rd.to_text() for rrset in r.answer for rd in rrset] == ["10.244.9.9"]


@pytest.mark.parametrize(
    "name",
    [
        "web.default.unknown.svc.cluster.local",  # not a configured federation
        "web.default.other.pod.cluster.local",  # not svc
        "x.web.default.other.svc.cluster.local",  # 5 labels
        "1web.default.other.svc.cluster.local",  # service label is not DNS-1035
        "web.de_fault.other.svc.cluster.local",  # namespace label is not DNS-1123
    ],
    ids=["unknown-federation", "pod-not-svc", "too-many-labels", "bad-service-label", "bad-namespace-label"],
)
def test_names_not_shaped_like_kube_dns_federation_queries_stay_nxdomain(agent: RunningAgent, name: str) -> None:
    assert agent.query(name, "A").rcode() == dns.rcode.NXDOMAIN


def test_a_node_without_zone_and_region_labels_cannot_answer_remote_federation(tmp_path: Path) -> None:
    path = m.write(tmp_path / "c.yaml", objects(node_labels=False))
    with running_agent({"manifests": str(path), "node-name": "node-a", "federation": "other=fed.example.net"}) as a:
        assert a.query("gone.default.other.svc.cluster.local").rcode() == dns.rcode.SERVFAIL
        # the local case needs no labels
        assert a.query("web.default.other.svc.cluster.local").rcode() == dns.rcode.NOERROR
