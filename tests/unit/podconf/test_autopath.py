"""Node-local autopath (`--autopath`): the server-side search-list walk for Pods of this node.

In-process tests speak to the agent from 127.0.0.0/8 source addresses; each address is a Pod of the
manifest (or nobody), so one agent serves eligible and ineligible clients side by side.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from nodedns.cluster.index import Index
from nodedns.dns.keys import fast_key
from nodedns.podconf.searchpath import Autopath, Plan
from tests.support import manifests as m
from tests.support.helpers import RunningAgent, running_agent
from tests.support.upstream_double import UpstreamDouble

NODE = "node-a"
HOST_RESOLV_CONF = "nameserver 192.0.2.53\nsearch corp.example\n"
ZONE = {
    "api.example.com": {"A": ["192.0.2.80"]},
    "corp-host.corp.example": {"A": ["192.0.2.81"]},
    "v6only.example.com": {"AAAA": ["2001:db8::6"]},
    "thing.extra.example": {"A": ["192.0.2.82"]},
}

# client address -> (pod, why it gets plain answers or "" when it gets autopath)
POD = m.pod("client", ip="127.0.0.1", node_name=NODE)
CLIENTS: dict[str, tuple[dict[str, Any] | None, str]] = {
    "127.0.0.1": (POD, ""),
    "127.0.0.2": (m.pod("host-net", ip="127.0.0.2", node_name=NODE, host_network=True,
                        dns_policy="ClusterFirstWithHostNet"), "host-network Pod"),
    "127.0.0.3": (m.pod("default-dns", ip="127.0.0.3", node_name=NODE, dns_policy="Default"),
                  "dnsPolicy Default: custom DNS"),
    "127.0.0.4": (m.pod("elsewhere", ip="127.0.0.4", node_name="node-b"), "runs on node node-b"),
    "127.0.0.5": (m.pod("tuned", ip="127.0.0.5", node_name=NODE, dns_config={
        "searches": ["extra.example"], "options": [{"name": "ndots", "value": "2"}]}), ""),
    "127.0.0.6": (m.pod("none-dns", ip="127.0.0.6", node_name=NODE, dns_policy="None", dns_config={
        "nameservers": ["127.0.0.1"], "searches": ["default.svc.cluster.local", "svc.cluster.local"]}),
        "dnsPolicy None: custom DNS"),
    "127.0.0.7": (m.pod("twin-a", ip="127.0.0.7", node_name=NODE), "2 running Pods share this IP"),
    "127.0.0.9": (None, "no running Pod with this IP"),
}


def objects() -> list[dict[str, Any]]:
    terminating = m.pod("leaving", ip="127.0.0.8", node_name=NODE)
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return [
        m.namespace("default"),
        m.namespace("other"),
        m.node(NODE, zone="z1", region="r1"),
        m.service("web", cluster_ips=["10.96.0.10"]),
        m.service("db", "other", cluster_ips=["10.96.0.20"]),
        *(pod for pod, _ in CLIENTS.values() if pod is not None),
        m.pod("twin-b", ip="127.0.0.7", node_name=NODE),
        terminating,
    ]


@pytest.fixture(scope="module")
def upstream() -> Iterator[UpstreamDouble]:
    with UpstreamDouble(ZONE) as up:
        up.per_name["flaky.example.com"] = "servfail"
        yield up


def config(tmp: Path, upstream: UpstreamDouble, **extra: Any) -> dict[str, Any]:
    host = tmp / "resolv.conf"
    host.write_text(HOST_RESOLV_CONF)
    return {"manifests": str(m.write(tmp / "c.yaml", objects())), "node-name": NODE, "autopath": True,
            "upstream": upstream.address, "host-resolv-conf": str(host), "serve-stale": "0s", **extra}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory, upstream: UpstreamDouble) -> Iterator[RunningAgent]:
    with running_agent(config(tmp_path_factory.mktemp("autopath"), upstream)) as a:
        yield a


def ask(agent: RunningAgent, name: str, rdtype: str = "A", *, source: str = "127.0.0.1",
        tcp: bool = False) -> dns.message.Message:
    q = dns.message.make_query(name, rdtype)
    if tcp:
        return dns.query.tcp(q, agent.host, port=agent.port, timeout=5, source=source)
    return dns.query.udp(q, agent.host, port=agent.port, timeout=5, source=source)


def hot_key(name: str, rdtype: str = "A") -> bytes:
    """The hot-dict key of the query `ask` sends (no EDNS)."""
    fk = fast_key(dns.message.make_query(name, rdtype).to_wire())
    assert fk is not None
    return fk[0]


def summary(r: dns.message.Message) -> tuple[str, list[str]]:
    """(rcode, answer records as 'owner TYPE data') of a response."""
    records = [f"{rrset.name} {dns.rdatatype.to_text(rrset.rdtype)} {rd.to_text()}"
               for rrset in r.answer for rd in rrset]
    return dns.rcode.to_text(r.rcode()), records


# -- the walk -----------------------------------------------------------------------------------

Q = "api.example.com.default.svc.cluster.local."
WALKS = [
    ("an external name: CNAME to it and its records", Q, "A",
     ("NOERROR", [f"{Q} CNAME api.example.com.", "api.example.com. A 192.0.2.80"])),
    ("NODATA counts as existing: NODATA, no CNAME (as CoreDNS)", Q, "AAAA", ("NOERROR", [])),
    ("AAAA of a name that has one", "v6only.example.com.default.svc.cluster.local.", "AAAA",
     ("NOERROR", ["v6only.example.com.default.svc.cluster.local. CNAME v6only.example.com.",
                  "v6only.example.com. AAAA 2001:db8::6"])),
    ("another namespace's service via the second search domain", "db.other.default.svc.cluster.local.", "A",
     ("NOERROR", ["db.other.default.svc.cluster.local. CNAME db.other.svc.cluster.local.",
                  "db.other.svc.cluster.local. A 10.96.0.20"])),
    ("the host search domain (host resolv.conf)", "corp-host.default.svc.cluster.local.", "A",
     ("NOERROR", ["corp-host.default.svc.cluster.local. CNAME corp-host.corp.example.",
                  "corp-host.corp.example. A 192.0.2.81"])),
    ("the name as asked exists: its plain answer", "web.default.svc.cluster.local.", "A",
     ("NOERROR", ["web.default.svc.cluster.local. A 10.96.0.10"])),
    ("nothing exists: the query's own NXDOMAIN", "nothing.default.svc.cluster.local.", "A", ("NXDOMAIN", [])),
    ("an upstream failure on the way: the plain answer", "flaky.example.com.default.svc.cluster.local.", "A",
     ("NXDOMAIN", [])),
    ("not under the first search domain: plain", "api.example.com.svc.cluster.local.", "A", ("NXDOMAIN", [])),
]


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
@pytest.mark.parametrize(("name", "rdtype", "expected"), [w[1:] for w in WALKS], ids=[w[0] for w in WALKS])
def test_a_pod_of_this_node_gets_the_walk(agent: RunningAgent, name: str, rdtype: str,
                                          expected: tuple[str, list[str]], tcp: bool) -> None:
    assert summary(ask(agent, name, rdtype, tcp=tcp)) == expected


def test_the_nxdomain_of_a_failed_walk_is_the_authoritative_cluster_one(agent: RunningAgent) -> None:
    r = ask(agent, "nothing.default.svc.cluster.local")
    assert [rrset.name.to_text() for rrset in r.authority] == ["cluster.local."]


@pytest.mark.parametrize("source", [ip for ip, (_, why) in CLIENTS.items() if why] + ["127.0.0.8"],
                         ids=[why.split(":")[0] for _, why in CLIENTS.values() if why] + ["terminating"])
def test_other_clients_get_plain_answers(agent: RunningAgent, source: str) -> None:
    assert summary(ask(agent, Q, source=source)) == ("NXDOMAIN", [])


@pytest.mark.parametrize(("ip", "why"), [(ip, why) for ip, (_, why) in CLIENTS.items()],
                         ids=list(CLIENTS))
def test_the_reason_a_client_gets_plain_answers_is_known(agent: RunningAgent, ip: str, why: str) -> None:
    assert agent.agent.autopath is not None
    plan, _, reason = agent.call(lambda: agent.agent.autopath.client(ip))  # type: ignore[union-attr]
    assert (plan is not None) == (not why)
    assert why in reason


def test_dns_config_searches_and_ndots_shape_the_walk(agent: RunningAgent) -> None:
    # 127.0.0.5 adds "extra.example" and ndots 2: "corp-host" (no dots) still ends with the bare name
    r = ask(agent, "corp-host.default.svc.cluster.local", source="127.0.0.5")
    assert summary(r)[1][0] == "corp-host.default.svc.cluster.local. CNAME corp-host.corp.example."
    plan = agent.call(lambda: agent.agent.autopath.plan_for("127.0.0.5"))  # type: ignore[union-attr]
    assert plan is not None and plan.searches[-1] == "extra.example" and plan.ndots == 2


# -- the hit path never mixes clients -------------------------------------------------------------


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_walk_answers_and_plain_answers_never_cross_between_clients(agent: RunningAgent, tcp: bool) -> None:
    walked = ("NOERROR", [f"{Q} CNAME api.example.com.", "api.example.com. A 192.0.2.80"])
    for _ in range(3):
        assert summary(ask(agent, Q, source="127.0.0.9", tcp=tcp)) == ("NXDOMAIN", [])
        assert summary(ask(agent, Q, source="127.0.0.1", tcp=tcp)) == walked
        assert summary(ask(agent, Q.upper(), source="127.0.0.1", tcp=tcp))[0] == "NOERROR"  # 0x20 spelling
    assert hot_key(Q) not in agent.agent.cluster_answers.hot.view


def test_clients_with_different_search_lists_get_their_own_walks(agent: RunningAgent) -> None:
    name = "thing.default.svc.cluster.local."
    for _ in range(2):  # the second round is served from the walk answers kept for this second
        assert summary(ask(agent, name, source="127.0.0.5")) == (
            "NOERROR", [f"{name} CNAME thing.extra.example.", "thing.extra.example. A 192.0.2.82"])
        assert summary(ask(agent, name, source="127.0.0.1")) == ("NXDOMAIN", [])


def test_an_index_change_reaches_the_next_walk_at_once(tmp_path: Path, upstream: UpstreamDouble) -> None:
    name = "late.other.default.svc.cluster.local."
    with running_agent(config(tmp_path, upstream)) as agent:
        assert summary(ask(agent, name)) == ("NXDOMAIN", [])
        agent.call(lambda: agent.agent.index.apply("Service", "ADDED",
                                                   m.service("late", "other", cluster_ips=["10.96.0.30"])))
        assert summary(ask(agent, name)) == (
            "NOERROR", [f"{name} CNAME late.other.svc.cluster.local.", "late.other.svc.cluster.local. A 10.96.0.30"])


def test_the_walk_shares_the_forward_cache(agent: RunningAgent, upstream: UpstreamDouble) -> None:
    ask(agent, Q)
    before = upstream.count("api.example.com", "A")
    for _ in range(3):
        ask(agent, Q)
    assert upstream.count("api.example.com", "A") == before  # every later walk reads the cache


def test_the_autopath_counters_reach_status_and_metrics(agent: RunningAgent) -> None:
    ask(agent, Q)
    st = agent.call(agent.agent.observer.status)
    section = st["autopath"]
    assert section["walks"]["searched"] >= 1 and section["queries_saved"] >= 3
    assert section["success"] == section["walks"]["searched"] + section["walks"]["as_asked"]
    text = agent.call(agent.agent.observer.metrics).decode()
    line = next(x for x in text.splitlines() if x.startswith("coredns_autopath_success_total{"))
    server = f"dns://127.0.0.1:{agent.port}"
    assert line == f'coredns_autopath_success_total{{server="{server}"}} {float(section["success"])}'
    assert 'nodedns_autopath_walks_total{result="searched"}' in text
    assert "nodedns_autopath_queries_saved_total" in text


def test_a_pod_that_goes_away_gets_plain_answers_at_once(tmp_path: Path, upstream: UpstreamDouble) -> None:
    with running_agent(config(tmp_path, upstream)) as agent:
        assert summary(ask(agent, Q))[0] == "NOERROR"
        agent.call(lambda: agent.agent.index.apply("Pod", "DELETED", POD))
        assert summary(ask(agent, Q)) == ("NXDOMAIN", [])


def test_without_autopath_the_plain_nxdomain_is_stored_for_the_hit_path(tmp_path: Path,
                                                                          upstream: UpstreamDouble) -> None:
    with running_agent(config(tmp_path, upstream, autopath=False)) as agent:
        assert agent.agent.autopath is None
        assert summary(ask(agent, Q)) == ("NXDOMAIN", [])
        assert hot_key(Q) in agent.agent.cluster_answers.hot.view


# -- the plan (pure) --------------------------------------------------------------------------------

SEARCHES = ("default.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example")
PLANS = [
    ("a dotless name ends with itself", Plan(SEARCHES, 5, True), "web.default.svc.cluster.local",
     ("web.default.svc.cluster.local", "web.svc.cluster.local", "web.cluster.local", "web.corp.example", "web")),
    ("no-tld-query drops a dotless bare name", Plan(SEARCHES, 5, False), "web.default.svc.cluster.local",
     ("web.default.svc.cluster.local", "web.svc.cluster.local", "web.cluster.local", "web.corp.example")),
    ("no-tld-query keeps a dotted one", Plan(SEARCHES, 5, False), "a.b.default.svc.cluster.local",
     ("a.b.default.svc.cluster.local", "a.b.svc.cluster.local", "a.b.cluster.local", "a.b.corp.example", "a.b")),
    ("as many dots as ndots: the bare name was tried first", Plan(SEARCHES, 2, True),
     "a.b.c.default.svc.cluster.local",
     ("a.b.c.default.svc.cluster.local", "a.b.c.svc.cluster.local", "a.b.c.cluster.local", "a.b.c.corp.example")),
    ("a lone dot search domain is the bare name", Plan(("default.svc.cluster.local", ""), 5, True),
     "x.default.svc.cluster.local", ("x.default.svc.cluster.local", "x")),
    ("the first search domain itself is no walk", Plan(SEARCHES, 5, True), "default.svc.cluster.local", None),
    ("a sibling suffix is no walk", Plan(SEARCHES, 5, True), "x.notdefault.svc.cluster.local", None),
    ("a name that would grow too long is no walk", Plan(SEARCHES + ("y" * 60 + ".example",), 5, True),
     "a" * 63 + "." + "b" * 63 + "." + "c" * 60 + ".default.svc.cluster.local", None),
]


@pytest.mark.parametrize(("plan", "qname", "expected"), [p[1:] for p in PLANS], ids=[p[0] for p in PLANS])
def test_the_walk_tries_the_names_the_client_would_try_next(plan: Plan, qname: str,
                                                            expected: tuple[str, ...] | None) -> None:
    assert plan.names(qname) == expected


def _index_with_pods() -> Index:
    index = Index()
    index.load([
        ("Pod", m.pod("a", "default", ip="10.0.0.1", node_name=NODE)),
        ("Pod", m.pod("b", "hostnet", ip="10.0.0.2", node_name=NODE, host_network=True,
                      dns_policy="ClusterFirstWithHostNet")),
        ("Pod", m.pod("c", "elsewhere", ip="10.0.0.3", node_name="node-b")),
        ("Pod", m.pod("d", "custom", ip="10.0.0.4", node_name=NODE, dns_policy="Default")),
    ])
    return index


@pytest.mark.parametrize(
    ("qname", "covered"),
    [("x.default.svc.cluster.local", True), ("a.b.c.default.svc.cluster.local", True),
     ("default.svc.cluster.local", False), ("svc.cluster.local", False), ("x.default.pod.cluster.local", False),
     ("x.default.svc.cluster.local.example", False), ("x.hostnet.svc.cluster.local", False),
     ("x.elsewhere.svc.cluster.local", False), ("x.custom.svc.cluster.local", False),
     ("x.nopods.svc.cluster.local", False)],
    ids=["one-label-below", "many-labels-below", "the-namespace-itself", "svc", "pod-names", "other-zone",
         "only-host-network-pods", "pods-on-another-node", "only-custom-dns-pods", "no-pods"],
)
def test_covered_names_are_below_a_namespace_with_a_walk_eligible_pod_here(qname: str, covered: bool) -> None:
    assert Autopath(index=_index_with_pods(), zone="cluster.local", node_name=NODE).covers(qname) is covered


def test_the_covered_namespaces_follow_the_index() -> None:
    index = _index_with_pods()
    ap = Autopath(index=index, zone="cluster.local", node_name=NODE)
    assert ap.namespaces() == {"default"}
    index.apply("Pod", "ADDED", m.pod("e", "late", ip="10.0.0.5", node_name=NODE))
    index.apply("Pod", "DELETED", m.pod("a", "default", ip="10.0.0.1", node_name=NODE))
    assert ap.namespaces() == {"late"}
    index.apply("Pod", "MODIFIED", m.pod("e", "late", ip="10.0.0.5", node_name="node-b"))
    assert ap.namespaces() == set()
    assert sorted(p.name for p in index.pods_on_node("node-b")) == ["c", "e"]
    assert not Autopath(index=index, zone="cluster.local", node_name="").namespaces()


def test_a_non_pod_client_keeps_its_nxdomains_on_the_hit_path_when_no_namespace_needs_them(
    tmp_path: Path, upstream: UpstreamDouble
) -> None:
    # the bench case: with --autopath on, NXDOMAINs of namespaces without local Pods are stored as usual
    with running_agent(config(tmp_path, upstream)) as agent:
        assert summary(ask(agent, "x.other.svc.cluster.local", source="127.0.0.9")) == ("NXDOMAIN", [])
        assert hot_key("x.other.svc.cluster.local.") in agent.agent.cluster_answers.hot.view
        assert summary(ask(agent, Q, source="127.0.0.9")) == ("NXDOMAIN", [])
        assert hot_key(Q) not in agent.agent.cluster_answers.hot.view


def test_a_walk_that_spanned_an_index_change_is_not_kept_for_the_rest_of_its_second(tmp_path: Path) -> None:
    """A walk waits for the upstream (the host search domain's name) while a Service it would have found
    appears: its answer (from before the change) goes to its own query only; the same question asked again
    in the same second is walked again and finds the Service."""
    import concurrent.futures
    import time

    name = "db2.other.default.svc.cluster.local."
    with UpstreamDouble(ZONE) as up:
        up.per_name["db2.other.corp.example"] = "delay"
        up.delay = 0.4
        with running_agent(config(tmp_path, up)) as agent:
            assert summary(ask(agent, "warm.default.svc.cluster.local.")) == ("NXDOMAIN", [])  # synced, answering
            while time.monotonic() % 1 > 0.1:
                time.sleep(0.005)  # early in a second: both questions in the same one
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                first = pool.submit(ask, agent, name)
                time.sleep(0.15)  # the walk waits for the upstream's answer now
                agent.call(lambda: agent.agent.index.apply("Service", "ADDED",
                                                           m.service("db2", "other", cluster_ips=["10.96.0.31"])))
                assert summary(first.result())[0] == "NXDOMAIN"  # walked before the Service existed
            again = ask(agent, name)
            assert summary(again) == (
                "NOERROR", [f"{name} CNAME db2.other.svc.cluster.local.", "db2.other.svc.cluster.local. A 10.96.0.31"])
