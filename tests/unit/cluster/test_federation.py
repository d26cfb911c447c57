"""kube-dns federation: `svc.ns.fed.svc.<zone>` CNAMEs to the local service or to this node's zone/region."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dns.rcode
import pytest

from nodedns.config import parse_federations
from nodedns.errors import ConfigError
from tests.support import manifests as m
from tests.support.helpers import RunningAgent, running_agent


def objects(*, node_labels: bool = True) -> list[dict[str, object]]:
    return [
        m.namespace("default"),
        m.namespace("myfed"),  # a namespace named like the federation (kube-dns's known ambiguity)
        m.node("node-a", zone="us-central1-b", region="us-central1") if node_labels else m.node("node-a"),
        m.service("web", cluster_ips=["10.96.1.1"]),
        m.endpoint_slice("web-1", "web", [m.endpoint("10.244.0.5")]),
        m.service("idle", cluster_ips=["10.96.1.2"]),  # ClusterIP without ready endpoints
        m.endpoint_slice("idle-1", "idle", [m.endpoint("10.244.0.6", ready=False)]),
        m.service("db", headless=True),  # headless with a ready endpoint: local
        m.endpoint_slice("db-1", "db", [m.endpoint("10.244.0.7")]),
        m.service("cold", headless=True),  # headless without ready endpoints: no local record, as kube-dns
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


def test_a_local_headless_service_with_ready_endpoints_is_local(agent: RunningAgent) -> None:
    target, rest, rcode = cname_and_rest(agent, "db.default.other.svc.cluster.local")
    assert (target, rest, rcode) == ("db.default.svc.cluster.local.", ["10.244.0.7"], dns.rcode.NOERROR)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("idle.default.other.svc.cluster.local", "idle.default.other.svc.us-central1-b.us-central1.fed.example.net."),
        ("cold.default.other.svc.cluster.local", "cold.default.other.svc.us-central1-b.us-central1.fed.example.net."),
        ("gone.default.other.svc.cluster.local", "gone.default.other.svc.us-central1-b.us-central1.fed.example.net."),
        ("ext.default.other.svc.cluster.local", "ext.default.other.svc.us-central1-b.us-central1.fed.example.net."),
        ("gone.nons.myfed.svc.cluster.local", "gone.nons.myfed.svc.us-central1-b.us-central1.example.com."),
    ],
    ids=["no-ready-endpoints", "headless-without-ready-endpoints", "no-such-service", "externalname-is-not-local",
         "no-such-namespace"],
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


# -- the kube-dns ConfigMap's `federations` key --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("myfed=example.com", (("myfed", "example.com"),)),
        (" a=one.example , b=two.example. ", (("a", "one.example"), ("b", "two.example"))),
        ("", ()),
        ("Fed=Example.COM", (("fed", "example.com"),)),
    ],
    ids=["one", "two-with-spaces-and-a-trailing-dot", "empty", "lowercased"],
)
def test_the_kube_dns_federations_format_parses(text: str, expected: tuple[tuple[str, str], ...]) -> None:
    assert parse_federations(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"myfed": "example.com"}', "use NAME=DOMAIN"),
        ("my.fed=example.com", "NAME a DNS label"),
        ("myfed=", "the domain is empty"),
        ("myfed=exa_mple.com", "not a valid DNS domain"),
        ("a=x.example,a=y.example", "given twice"),
    ],
    ids=["json-is-not-the-format", "name-not-a-label", "no-domain", "bad-domain", "duplicate-name"],
)
def test_a_bad_federations_value_is_an_error_naming_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"federations: .*{message}"):
        parse_federations(text)


def _federation_answer(agent: RunningAgent) -> tuple[str, int]:
    target, _, rcode = cname_and_rest(agent, "gone.default.myfed.svc.cluster.local", "CNAME")
    return target, rcode


def _wait(pred: Callable[[], bool], what: str, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def configmap_agent(tmp_path: Path, federations: str, **extra: str) -> tuple[dict[str, str], Path]:
    """The agent's config with a kube-dns ConfigMap directory holding `federations`; and that file."""
    cm = tmp_path / "kube-dns"
    cm.mkdir()
    (cm / "federations").write_text(federations)
    path = m.write(tmp_path / "c.yaml", objects())
    return {"manifests": str(path), "node-name": "node-a", "kube-dns-config-dir": str(cm), **extra}, \
        cm / "federations"


def test_federations_come_from_the_kube_dns_configmap_and_follow_its_changes(tmp_path: Path) -> None:
    cfg, fed = configmap_agent(tmp_path, "myfed=first.example", **{"kube-dns-config-period": "50ms"})
    with running_agent(cfg) as agent:
        watcher = agent.agent.config_watcher
        assert watcher is not None
        assert _federation_answer(agent) == ("gone.default.myfed.svc.us-central1-b.us-central1.first.example.", 0)
        # the stored answer goes with the old map
        fed.write_text("myfed=second.example,other=third.example")
        _wait(lambda: _federation_answer(agent)[0].endswith(".second.example."), "the reloaded map")
        assert cname_and_rest(agent, "web.default.other.svc.cluster.local")[0] == "web.default.svc.cluster.local."
        # an invalid key is logged and ignored: the old map stays, as kube-dns does
        fed.write_text('{"myfed": "json.example"}')
        _wait(lambda: watcher.errors == 1, "the bad ConfigMap to be reported")
        assert "federations" in watcher.last_error
        assert _federation_answer(agent)[0].endswith(".second.example.")
        # the key removed: no federations any more
        fed.unlink()
        _wait(lambda: _federation_answer(agent)[1] == dns.rcode.NXDOMAIN, "the federation to go")


def test_a_federation_flag_wins_over_the_configmap_for_the_same_name(tmp_path: Path) -> None:
    cfg, _ = configmap_agent(tmp_path, "myfed=cm.example,other=cm-other.example", federation="myfed=flag.example")
    with running_agent(cfg) as agent:
        assert _federation_answer(agent)[0].endswith(".flag.example.")
        target, _, _ = cname_and_rest(agent, "gone.default.other.svc.cluster.local", "CNAME")
        assert target.endswith(".cm-other.example.")
