"""What operators ask of a node cache, end to end on real sockets: --filter-aaaa, --cache-min-ttl, --stale-nxdomain
(an agent on 127.0.0.1 in front of an in-process upstream double, on the C and on the Python hit path)."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from nodedns.app.agent import Agent
from nodedns.config import Config
from tests.support.agentproc import metric_value
from tests.support.forward_clock import Clock, advance
from tests.support.helpers import (
    EXAMPLE,
    RunningAgent,
    nodedns_cmd,
    rrset_values,
    running_agent,
    subprocess_env,
    wait_for,
)
from tests.support.upstream_double import UpstreamDouble

pytestmark = pytest.mark.usefixtures("hit_path")  # every test on the C and on the Python hit path

ZONE = {
    "www.example.com": {"A": ["192.0.2.1"], "AAAA": ["2001:db8::1"]},
    "flappy.example.com": {"A": ["192.0.2.7"]},
    "quick.example.com": {"A": ["192.0.2.9"]},
    "search.example.com": {"A": ["192.0.2.80"], "AAAA": ["2001:db8::80"]},
}


@pytest.fixture
def upstream() -> Iterator[UpstreamDouble]:
    with UpstreamDouble(ZONE, soa_ttl=60, soa_minimum=3) as up:
        yield up


def agent_for(up: UpstreamDouble, clock: Clock | None = None, agent: type[Agent] = Agent,
              **raw: Any) -> Any:
    config = {"manifests": str(EXAMPLE), "upstream": up.address, "health-check": "0s", "upstream-timeout": "300ms",
              "status-listen": "127.0.0.1:0", "debug-listen": "127.0.0.1:0", **raw}
    if clock is None:
        return running_agent(config, agent_factory=agent)
    return running_agent(config, agent_factory=lambda cfg: agent(cfg, clock=clock))


def scrape(agent: RunningAgent, name: str) -> float | None:
    with urllib.request.urlopen(agent.status_url + "/metrics", timeout=5) as r:
        return metric_value(r.read().decode(), name)


def status(agent: RunningAgent) -> dict[str, Any]:
    with urllib.request.urlopen(agent.debug_url + "/status", timeout=5) as r:
        doc: dict[str, Any] = json.loads(r.read())
    return doc


def lookup(agent: RunningAgent, name: str, qtype: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{agent.debug_url}/debug/lookup?name={name}&type={qtype}", timeout=10) as r:
        doc: dict[str, Any] = json.loads(r.read())
    return doc


def assert_filtered(r: dns.message.Message) -> None:
    """NOERROR, no answer, our SOA (TTL 30, MINIMUM 30) in authority: dnsmasq's --filter-AAAA NODATA."""
    assert r.rcode() == dns.rcode.NOERROR, r
    assert not r.answer, r
    assert len(r.authority) == 1 and r.authority[0].rdtype == dns.rdatatype.SOA, r
    soa = r.authority[0]
    assert soa.ttl == 30 and soa[0].minimum == 30, r
    assert str(soa.name) == "." and str(soa[0].mname) == "ns.dns.cluster.local.", r


# -- --filter-aaaa -----------------------------------------------------------------------------


def test_forwarded_aaaa_questions_get_nodata_with_an_soa_and_the_upstream_is_never_asked(
        upstream: UpstreamDouble) -> None:
    with agent_for(upstream, **{"filter-aaaa": "on"}) as a:
        for i in range(6):  # the first from the slow path, the rest from the hit path; TCP through the resolver
            assert_filtered(a.query("www.example.com", "AAAA", edns=0 if i % 2 else None))
        assert_filtered(a.query("WWW.Example.COM", "AAAA"))  # another spelling: the canonical key
        assert_filtered(a.query("www.example.com", "AAAA", tcp=True))
        assert upstream.count("www.example.com", "AAAA") == 0
        assert rrset_values(a.query("www.example.com", "A")) == ["192.0.2.1"]  # A is forwarded as ever
        wait_for(lambda: scrape(a, "nodedns_filtered_aaaa_total") == 8, what="8 filtered answers counted")
        assert scrape(a, "nodedns_filter_aaaa_active") == 1
        section = status(a)["filter_aaaa"]
        assert section["mode"] == "on" and section["filtering"] is True and section["filtered"] == 8
        explained = lookup(a, "www.example.com", "AAAA")
        assert explained["path"] == "filtered" and "--filter-aaaa on" in explained["how"]
        assert upstream.count("www.example.com", "AAAA") == 0
        with urllib.request.urlopen(a.debug_url + "/", timeout=5) as page:  # the status page
            html = page.read().decode()
        assert "AAAA filter (on): <b class=ok>filtering</b>, 8 answered NODATA here" in html


def test_a_flood_of_made_up_aaaa_names_is_answered_without_pushing_cluster_answers_out(
        upstream: UpstreamDouble) -> None:
    from nodedns.serve.forwarding import FILTER_TAG

    with agent_for(upstream, **{"filter-aaaa": "on"}) as a:
        a.agent.resolver.forwarding.filter_stored_max = 50  # 10,000 as shipped
        a.agent.cluster_answers.max_entries = 120  # a full table would push its oldest answers out
        assert rrset_values(a.query("web.default.svc.cluster.local", "A")) == ["10.96.12.34"]
        stored = len(a.agent.cluster_answers.hot.view)
        for i in range(300):
            assert_filtered(a.query(f"r{i}.flood.example", "AAAA", edns=0 if i % 3 else None))
        assert a.call(lambda: a.agent.cluster_answers.with_tag(FILTER_TAG)) == 50
        assert a.agent.cluster_answers.evictions == 0 and len(a.agent.cluster_answers.hot.view) == stored + 50
        assert upstream.count("r7.flood.example") == 0
        wait_for(lambda: scrape(a, "nodedns_filtered_aaaa_total") == 300, what="every filtered answer counted")


def test_the_cluster_zone_is_never_filtered(upstream: UpstreamDouble) -> None:
    with agent_for(upstream, **{"filter-aaaa": "on"}) as a:
        r = a.query("web.default.svc.cluster.local", "AAAA")  # a dual-stack Service: its IPv6 ClusterIP
        assert rrset_values(r) == ["fd00:10:96::1234"] and r.flags & dns.flags.AA
        r = a.query("db.prod.svc.cluster.local", "AAAA")  # an IPv4-only Service: the index's own NODATA
        assert r.rcode() == dns.rcode.NOERROR and not r.answer and r.flags & dns.flags.AA
        assert str(r.authority[0].name) == "cluster.local."  # the cluster zone's SOA, not the filter's
        r = a.query("nothere.default.svc.cluster.local", "AAAA")
        assert r.rcode() == dns.rcode.NXDOMAIN
        for _ in range(2):  # an ExternalName Service leaving the cluster: a cluster question, its target's AAAA kept
            r = a.query("search.prod.svc.cluster.local", "AAAA")
            assert rrset_values(r, rdtype="CNAME") == ["search.example.com."]
            assert rrset_values(r, rdtype="AAAA") == ["2001:db8::80"]
        assert upstream.count("search.example.com", "AAAA") == 1
        assert scrape(a, "nodedns_filtered_aaaa_total") == 0


def test_without_the_flag_aaaa_questions_are_forwarded(upstream: UpstreamDouble) -> None:
    with agent_for(upstream) as a:
        assert rrset_values(a.query("www.example.com", "AAAA")) == ["2001:db8::1"]
        assert upstream.count("www.example.com", "AAAA") == 1
        assert scrape(a, "nodedns_filtered_aaaa_total") == 0
        assert "filter_aaaa" not in status(a)


class NodeWithIPv6(Agent):
    """An agent on a node with a global IPv6 address until a test takes it away."""

    addresses = ["2001:db8:1::5"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aaaa_auto.period = 0.05
        setattr(self.aaaa_auto, "node_ipv6", lambda: list(self.addresses))  # noqa: B010 - replaces the method


IPV4_ONLY = """apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: api, namespace: default}
  spec: {clusterIP: 10.96.0.50, clusterIPs: [10.96.0.50], ports: [{port: 80}]}
"""


def test_auto_filters_only_while_the_node_has_no_global_ipv6_and_says_why(upstream: UpstreamDouble,
                                                                          tmp_path: Path) -> None:
    NodeWithIPv6.addresses = ["2001:db8:1::5"]
    (tmp_path / "v4.yaml").write_text(IPV4_ONLY)
    with agent_for(upstream, agent=NodeWithIPv6, manifests=str(tmp_path / "v4.yaml"), **{"filter-aaaa": "auto"}) as a:
        wait_for(lambda: "2001:db8:1::5" in status(a)["filter_aaaa"]["reason"], what="auto decided")
        section = status(a)["filter_aaaa"]
        assert section["mode"] == "auto" and section["filtering"] is False
        assert rrset_values(a.query("www.example.com", "AAAA")) == ["2001:db8::1"]
        assert upstream.count("www.example.com", "AAAA") == 1
        NodeWithIPv6.addresses = []  # the node loses its IPv6 address: nothing else here has IPv6
        wait_for(lambda: status(a)["filter_aaaa"]["filtering"] is True, what="auto filters")
        assert "no global IPv6" in status(a)["filter_aaaa"]["reason"]
        for _ in range(3):
            assert_filtered(a.query("www.example.com", "AAAA"))  # the cached AAAA is not served any more
        assert upstream.count("www.example.com", "AAAA") == 1
        NodeWithIPv6.addresses = ["2001:db8:1::6"]
        wait_for(lambda: status(a)["filter_aaaa"]["filtering"] is False, what="auto stops filtering")
        assert rrset_values(a.query("www.example.com", "AAAA")) == ["2001:db8::1"]


def test_auto_does_not_filter_in_a_cluster_with_a_dual_stack_service(upstream: UpstreamDouble) -> None:
    NodeWithIPv6.addresses = []
    with agent_for(upstream, agent=NodeWithIPv6, **{"filter-aaaa": "auto"}) as a:  # web: fd00:10:96::1234
        wait_for(lambda: "fd00:10:96::1234" in status(a)["filter_aaaa"]["reason"], what="auto decided")
        assert status(a)["filter_aaaa"]["filtering"] is False and scrape(a, "nodedns_filter_aaaa_active") == 0
        assert rrset_values(a.query("www.example.com", "AAAA")) == ["2001:db8::1"]


def test_auto_does_not_filter_while_a_service_has_an_ipv6_cluster_ip() -> None:
    from nodedns.cluster.objects import SERVICE
    from nodedns.config import build

    agent = Agent(build({"upstream": "127.0.0.1:53", "filter-aaaa": "auto"}, environ={}))
    assert agent.aaaa_auto.decision([]) == (False, "the index has not synced yet: the Services are not known")
    agent.index.mark_synced()
    auto = agent.aaaa_auto
    assert auto.decision([]) == (True, "the node has no global IPv6 address and no Service an IPv6 ClusterIP")
    assert agent.aaaa_auto.decision(["2001:db8::7"])[0] is False
    agent.index.apply(SERVICE, "ADDED", {
        "metadata": {"name": "dual", "namespace": "prod"},
        "spec": {"clusterIP": "10.96.9.9", "clusterIPs": ["10.96.9.9", "fd00:10::9"], "ports": [{"port": 80}]}})
    active, why = agent.aaaa_auto.decision([])
    assert not active and "prod/dual" in why and "fd00:10::9" in why


# -- --cache-min-ttl ---------------------------------------------------------------------------


def test_the_ttl_floor_raises_short_forwarded_ttls_and_the_answer_carries_it(upstream: UpstreamDouble) -> None:
    upstream.ttls["quick.example.com"] = 2
    clock = Clock()
    with agent_for(upstream, clock, **{"cache-min-ttl": "20s"}) as a:
        r = a.query("quick.example.com", "A")
        assert rrset_values(r) == ["192.0.2.9"] and r.answer[0].ttl == 20
        advance(a, clock, 5)  # past the upstream's own TTL: still cached, the floor counting down
        r = a.query("quick.example.com", "A")
        assert r.answer[0].ttl == 15
        assert upstream.count("quick.example.com", "A") == 1
        r = a.query("www.example.com", "A")  # TTL 300 upstream: the cap (30 s), untouched by the floor
        assert r.answer[0].ttl == 30


def test_the_ttl_floor_never_goes_above_the_success_cap(upstream: UpstreamDouble) -> None:
    upstream.ttls["quick.example.com"] = 1
    with agent_for(upstream, **{"cache-min-ttl": "1h", "cache-success-ttl": "12s"}) as a:
        assert a.query("quick.example.com", "A").answer[0].ttl == 12


def test_the_ttl_floor_leaves_negative_answers_and_the_cluster_zone_alone(upstream: UpstreamDouble) -> None:
    with agent_for(upstream, **{"cache-min-ttl": "25s"}) as a:
        r = a.query("gone.example.com", "A")
        assert r.rcode() == dns.rcode.NXDOMAIN and r.authority[0].ttl == 3  # the SOA MINIMUM, not the floor
        r = a.query("web.default.svc.cluster.local", "A")
        assert r.answer[0].ttl == 5  # the cluster zone's own TTL


# -- --stale-nxdomain --------------------------------------------------------------------------


def test_a_name_an_upstream_suddenly_denies_keeps_its_last_answer_for_the_window(upstream: UpstreamDouble) -> None:
    upstream.ttls["flappy.example.com"] = 10
    clock = Clock()
    with agent_for(upstream, clock, **{"stale-nxdomain": "60s"}) as a:
        assert rrset_values(a.query("flappy.example.com", "A")) == ["192.0.2.7"]
        upstream.per_name["flappy.example.com"] = "nxdomain"  # a transient NXDOMAIN from the upstream
        advance(a, clock, 11)
        for tcp in (False, False, True):
            r = a.query("flappy.example.com", "A", tcp=tcp)
            assert r.rcode() == dns.rcode.NOERROR and rrset_values(r) == ["192.0.2.7"], r
            assert r.answer[0].ttl == 5  # short: --cache-servfail-ttl, when it is asked again
        assert upstream.count("flappy.example.com", "A") == 2  # asked once more, not once per query
        assert scrape(a, "nodedns_stale_nxdomain_served_total") == 3
        explained = lookup(a, "flappy.example.com", "A")
        assert explained["path"] == "last-known-good" and "--stale-nxdomain" in explained["how"]
        printed = subprocess.run(nodedns_cmd("lookup", "flappy.example.com", "A", "--debug", a.debug_url),
                                 env=subprocess_env(), capture_output=True, text=True, timeout=30, check=True).stdout
        assert "path:     last-known-good (stale over NXDOMAIN)" in printed and "192.0.2.7" in printed
        advance(a, clock, 6)  # past the recheck: the next query is answered stale and asked in the background
        assert rrset_values(a.query("flappy.example.com", "A")) == ["192.0.2.7"]
        wait_for(lambda: upstream.count("flappy.example.com", "A") >= 3, what="asked again in the background")
        advance(a, clock, 60)  # the window is over: the denial stands
        wait_for(lambda: a.query("flappy.example.com", "A").rcode() == dns.rcode.NXDOMAIN, what="the NXDOMAIN")


def test_an_upstream_answer_that_comes_back_ends_the_last_known_good(upstream: UpstreamDouble) -> None:
    upstream.ttls["flappy.example.com"] = 10
    clock = Clock()
    with agent_for(upstream, clock, **{"stale-nxdomain": "10m"}) as a:
        a.query("flappy.example.com", "A")
        upstream.per_name["flappy.example.com"] = "nxdomain"
        advance(a, clock, 11)
        assert rrset_values(a.query("flappy.example.com", "A")) == ["192.0.2.7"]
        upstream.per_name.pop("flappy.example.com")
        upstream.set("flappy.example.com", "A", ["192.0.2.8"])
        advance(a, clock, 6)
        a.query("flappy.example.com", "A")  # stale once more; asked again in the background
        wait_for(lambda: rrset_values(a.query("flappy.example.com", "A")) == ["192.0.2.8"], what="the new answer")
        assert a.query("flappy.example.com", "A").answer[0].ttl > 5


def test_nodata_counts_as_a_denial_too(upstream: UpstreamDouble) -> None:
    clock = Clock()
    upstream.ttls["flappy.example.com"] = 10
    with agent_for(upstream, clock, **{"stale-nxdomain": "1m"}) as a:
        a.query("flappy.example.com", "A")
        upstream.records["flappy.example.com"] = {"TXT": ['"only text now"']}  # A: NODATA
        advance(a, clock, 11)
        assert rrset_values(a.query("flappy.example.com", "A")) == ["192.0.2.7"]


def test_without_the_flag_an_nxdomain_is_passed_on_at_once(upstream: UpstreamDouble) -> None:
    upstream.ttls["flappy.example.com"] = 10
    clock = Clock()
    with agent_for(upstream, clock) as a:
        a.query("flappy.example.com", "A")
        upstream.per_name["flappy.example.com"] = "nxdomain"
        advance(a, clock, 11)
        assert a.query("flappy.example.com", "A").rcode() == dns.rcode.NXDOMAIN
        assert scrape(a, "nodedns_stale_nxdomain_served_total") == 0


# -- as shipped: daemonset/configmap.yaml (--workers 2, the allow list) ---------------------------


def test_as_shipped_with_workers_every_worker_filters_and_the_counts_are_summed(tmp_path: Path) -> None:
    from tests.support.apiserver import FakeApiServer
    from tests.support.shipped import ShippedAgent, cluster, configmap_config

    assert configmap_config()["workers"] == 2
    with FakeApiServer() as api, UpstreamDouble(ZONE) as up:
        up.ttls["quick.example.com"] = 1
        cluster(api)
        with ShippedAgent(tmp_path, api, up, **{"filter-aaaa": "on", "cache-min-ttl": "20s",
                                                "stale-nxdomain": "1m"}) as agent:
            agent.wait_ready()
            for i in range(40):  # spread over both workers by SO_REUSEPORT (a new source port each)
                r = dns.query.udp(dns.message.make_query("www.example.com", "AAAA"), "127.0.0.1", port=agent.port,
                                  timeout=3)
                assert_filtered(r)
                if i % 10 == 0:
                    assert_filtered(dns.query.tcp(dns.message.make_query("www.example.com", "AAAA"), "127.0.0.1",
                                                  port=agent.port, timeout=3))
            assert up.count("www.example.com", "AAAA") == 0
            wait_for(lambda: agent.metric("nodedns_filtered_aaaa_total") == 44, timeout=15,
                     what="the workers' filtered answers summed")
            doc = json.loads(agent.get("/status")[1])
            assert doc["filter_aaaa"]["filtered"] == 44 and doc["filter_aaaa"]["filtering"] is True
            r = dns.query.udp(dns.message.make_query("quick.example.com", "A"), "127.0.0.1", port=agent.port,
                              timeout=3)
            assert rrset_values(r) == ["192.0.2.9"] and r.answer[0].ttl == 20  # the floor, in a worker
            assert agent.metric("nodedns_stale_nxdomain_served_total") == 0


def test_as_shipped_with_workers_auto_is_decided_by_the_supervisor_and_every_worker_follows(
        upstream: UpstreamDouble, tmp_path: Path) -> None:
    from nodedns.workers import modes
    from tests.support.helpers import free_port

    def supervisor(config: Config) -> Agent:  # the node's addresses as the test says (the supervisor decides)
        agent = modes.supervisor(config, count=2)
        agent.aaaa_auto.period = 0.05
        setattr(agent.aaaa_auto, "node_ipv6", lambda: list(NodeWithIPv6.addresses))  # noqa: B010 - replaces the method
        return agent

    NodeWithIPv6.addresses = ["2001:db8:1::5"]
    (tmp_path / "v4.yaml").write_text(IPV4_ONLY)
    port = free_port()
    with running_agent({"manifests": str(tmp_path / "v4.yaml"), "upstream": upstream.address, "health-check": "0s",
                        "listen": f"127.0.0.1:{port}", "status-listen": "127.0.0.1:0", "debug-listen": "127.0.0.1:0",
                        "filter-aaaa": "auto"}, agent_factory=supervisor) as a:
        a.run(a.agent.wait_serving(), timeout=30)

        def ask() -> dns.message.Message:  # a new source port each time: both workers get some
            return dns.query.udp(dns.message.make_query("www.example.com", "AAAA"), "127.0.0.1", port=port, timeout=3)

        assert all(rrset_values(ask()) == ["2001:db8::1"] for _ in range(10))
        NodeWithIPv6.addresses = []
        wait_for(lambda: status(a)["filter_aaaa"]["filtering"] is True, what="the supervisor decides to filter")
        wait_for(lambda: all(not ask().answer for _ in range(20)), what="every worker filters")
        for _ in range(20):
            assert_filtered(ask())
        assert "no global IPv6" in status(a)["filter_aaaa"]["reason"]
        wait_for(lambda: (scrape(a, "nodedns_filtered_aaaa_total") or 0) >= 20, timeout=15,
                 what="the workers' counts summed")


@pytest.mark.parametrize(("text", "mode"), [("off", "off"), ("on", "on"), ('"off"', "off"), ("auto", "auto"),
                                            ("true", "on"), ("no", "off")])
def test_yaml_on_and_off_unquoted_are_read_as_the_filter_modes(tmp_path: Path, text: str, mode: str) -> None:
    from nodedns.config import from_sources

    (tmp_path / "c.yaml").write_text(f"filter-aaaa: {text}\ncache-min-ttl: 10s\nstale-nxdomain: 5m\nupstream: none\n")
    cfg = from_sources({"config": str(tmp_path / "c.yaml")}, environ={})
    assert (cfg.filter_aaaa, cfg.cache_min_ttl, cfg.stale_nxdomain) == (mode, 10.0, 300.0)
