"""Forwarding and caching end to end: an agent on 127.0.0.1 in front of in-process upstream doubles."""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dns.edns
import dns.flags
import dns.message
import dns.query
import dns.rcode
import pytest

from nodedns.app.agent import Agent
from nodedns.errors import ConfigError
from tests.support import cluster_fixture as fx
from tests.support.forward_clock import Clock, advance
from tests.support.helpers import EXAMPLE, RunningAgent, free_port, rrset_values, running_agent, wait_for
from tests.support.upstream_double import SPOOF_ADDRESS, UpstreamDouble

ZONE = {
    "www.example.com": {"A": ["192.0.2.1"], "AAAA": ["2001:db8::1"]},
    "short.example.com": {"A": ["192.0.2.2"]},
    "search.example.com": {"A": ["192.0.2.80"]},
    "a.example.com": {"A": ["192.0.2.11"]},
    "b.example.com": {"A": ["192.0.2.12"]},
    "c.example.com": {"A": ["192.0.2.13"]},
    "big.example.com": {"TXT": [f'"{i:02d}{"x" * 200}"' for i in range(12)]},
    "4.3.2.1.in-addr.arpa": {"PTR": ["host.example.com."]},
}
CORP = {"db.corp.example": {"A": ["10.1.0.1"]}}

pytestmark = pytest.mark.usefixtures("hit_path")  # every test on the C and on the Python hit path


@pytest.fixture
def upstream() -> Iterator[UpstreamDouble]:
    with UpstreamDouble(ZONE, soa_ttl=60, soa_minimum=3) as up:
        yield up


def agent_for(raw: dict[str, Any], clock: Clock | None = None) -> Any:
    raw = {"manifests": str(EXAMPLE), "health-check": "50ms", "upstream-timeout": "300ms", **raw}
    if clock is None:
        return running_agent(raw)
    return running_agent(raw, agent_factory=lambda cfg: Agent(cfg, clock=clock))


def probe_answered(up: UpstreamDouble) -> bool:
    """The agent's start-up loop probe reached this upstream."""
    return any(rdtype == "HINFO" for _, rdtype in up.seen)


def ttl_of(msg: dns.message.Message) -> int:
    return int((msg.answer or msg.authority)[0].ttl)


# -- hit, miss, TTLs -------------------------------------------------------------------------


def test_a_miss_is_forwarded_and_the_repeat_is_a_hit(upstream: UpstreamDouble) -> None:
    with agent_for({"upstream": upstream.address}) as agent:
        first = agent.query("www.example.com", "A")
        hits = agent.agent.server.hits
        second = agent.query("WWW.Example.Com", "A")
        assert rrset_values(first) == rrset_values(second) == ["192.0.2.1"]
        assert second.question[0].name.to_text() == "WWW.Example.Com."
        assert upstream.count("www.example.com", "A") == 1
        assert agent.agent.server.hits == hits + 1
        assert first.flags & dns.flags.RA and not first.flags & dns.flags.AA


@pytest.mark.parametrize(("edns", "tcp"), [(-1, False), (0, False), (0, True)], ids=["plain", "edns", "tcp"])
def test_cached_answers_are_served_to_every_transport(upstream: UpstreamDouble, edns: int | None, tcp: bool) -> None:
    with agent_for({"upstream": upstream.address}) as agent:
        agent.query("www.example.com", "AAAA", edns=edns)
        again = agent.query("www.example.com", "AAAA", edns=edns, tcp=tcp)
        assert rrset_values(again) == ["2001:db8::1"]
        assert again.edns == edns
        assert upstream.count("www.example.com", "AAAA") == 1


def test_ttls_count_down_on_hits_and_the_entry_expires(upstream: UpstreamDouble) -> None:
    clock = Clock()
    with agent_for({"upstream": upstream.address, "prefetch": "false"}, clock) as agent:
        assert ttl_of(agent.query("www.example.com")) == 30  # 300 s capped by --cache-success-ttl
        advance(agent, clock, 7)
        assert ttl_of(agent.query("www.example.com")) == 23
        assert ttl_of(agent.query("www.example.com")) == 23  # the hot copy of this second
        advance(agent, clock, 23)
        assert ttl_of(agent.query("www.example.com")) == 30  # expired: asked again
        assert upstream.count("www.example.com", "A") == 2


def test_negative_answers_are_cached_for_the_soa_minimum(upstream: UpstreamDouble) -> None:
    clock = Clock()
    with agent_for({"upstream": upstream.address}, clock) as agent:
        r = agent.query("missing.example.com")
        assert r.rcode() == dns.rcode.NXDOMAIN and ttl_of(r) == 3  # min(SOA TTL 60, MINIMUM 3)
        assert agent.query("missing.example.com").rcode() == dns.rcode.NXDOMAIN
        assert upstream.count("missing.example.com") == 1
        advance(agent, clock, 3)
        assert agent.query("missing.example.com").rcode() == dns.rcode.NXDOMAIN
        assert upstream.count("missing.example.com") == 2


def test_the_least_recently_used_answer_is_evicted(upstream: UpstreamDouble) -> None:
    with agent_for({"upstream": upstream.address, "cache-success": "2"}) as agent:
        for name in ("a.example.com", "b.example.com", "c.example.com", "a.example.com"):
            agent.query(name)
        assert upstream.count("a.example.com") == 2
        assert agent.agent.forward_cache is not None and agent.agent.forward_cache.counts()["evictions"] >= 1


# -- prefetch and serve-stale ----------------------------------------------------------------------


def test_an_entry_asked_for_near_expiry_is_refreshed_once_in_the_background(upstream: UpstreamDouble) -> None:
    clock = Clock()
    upstream.per_name["www.example.com"] = "delay"
    upstream.delay = 1.0  # the refresh is still under way for the next queries, however slow the machine
    with agent_for({"upstream": upstream.address, "upstream-timeout": "3s"}, clock) as agent:
        agent.query("www.example.com")
        advance(agent, clock, 28)  # 2 s of 30 left: within the last 10%
        for _ in range(3):  # over TCP: every one through the resolver, which sees the entry near its end
            r = agent.query("www.example.com", tcp=True)  # answered at once from the cache
            assert ttl_of(r) == 2
            advance(agent, clock, 0.3)  # same second for the first two
        advance(agent, clock, 0.2)  # the next second, the refresh still under way: no second one
        assert ttl_of(agent.query("www.example.com", tcp=True)) == 1
        wait_for(lambda: upstream.count("www.example.com") == 2, timeout=5.0)
        time.sleep(0.4)
        assert upstream.count("www.example.com") == 2  # one refresh in flight per entry
        text = agent.call(agent.agent.observer.metrics).decode()
        assert [line.rsplit(" ", 1)[1] for line in text.splitlines()
                if line.startswith("coredns_cache_prefetch_total{")] == ["1.0"]  # one started, not one per hit
        advance(agent, clock, 1)
        wait_for(lambda: ttl_of(agent.query("www.example.com")) >= 29, timeout=5.0)  # the refreshed entry
        assert upstream.count("www.example.com") == 2  # (the refresh's answer, not a new miss)


@pytest.mark.parametrize(
    ("serve_stale", "expect_rcode", "expect_ttl"),
    [("1h", dns.rcode.NOERROR, 30), ("0s", dns.rcode.SERVFAIL, None)],
    ids=["stale-answer", "serve-stale-off"],
)
def test_an_expired_answer_is_served_stale_while_the_upstream_is_down(
    upstream: UpstreamDouble, serve_stale: str, expect_rcode: int, expect_ttl: int | None
) -> None:
    clock = Clock()
    with agent_for({"upstream": upstream.address, "serve-stale": serve_stale, "prefetch": "false"}, clock) as agent:
        agent.query("www.example.com")
        upstream.mode = "drop"
        advance(agent, clock, 60)
        r = agent.query("www.example.com")
        assert r.rcode() == expect_rcode
        if expect_ttl is not None:
            assert rrset_values(r) == ["192.0.2.1"] and ttl_of(r) == expect_ttl
            asked = upstream.count("www.example.com")
            advance(agent, clock, 1)
            assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]
            assert upstream.count("www.example.com") == asked  # no new try during the recheck pause


def test_servfail_is_cached_briefly_and_a_stale_answer_wins_over_it(upstream: UpstreamDouble) -> None:
    clock = Clock()
    with agent_for({"upstream": upstream.address, "prefetch": "false"}, clock) as agent:
        upstream.per_name["short.example.com"] = "servfail"
        assert agent.query("short.example.com").rcode() == dns.rcode.SERVFAIL
        assert agent.query("short.example.com").rcode() == dns.rcode.SERVFAIL
        assert upstream.count("short.example.com") == 1  # remembered for --cache-servfail-ttl (5s)
        advance(agent, clock, 5)
        agent.query("short.example.com")
        assert upstream.count("short.example.com") == 2
        agent.query("www.example.com")
        upstream.per_name["www.example.com"] = "servfail"
        advance(agent, clock, 31)
        r = agent.query("www.example.com")
        assert rrset_values(r) == ["192.0.2.1"] and ttl_of(r) == 30  # RFC 8767: SERVFAIL counts as failure


def test_serve_stale_is_bounded_by_its_window(upstream: UpstreamDouble) -> None:
    clock = Clock()
    with agent_for({"upstream": upstream.address, "serve-stale": "10s", "prefetch": "false"}, clock) as agent:
        agent.query("www.example.com")
        upstream.mode = "drop"
        advance(agent, clock, 45)  # expired 15 s ago: past the 10 s window
        assert agent.query("www.example.com").rcode() == dns.rcode.SERVFAIL


def test_cluster_names_are_never_served_stale(upstream: UpstreamDouble) -> None:
    clock = Clock()
    with agent_for({"upstream": upstream.address}, clock) as agent:
        agent.query("web.default.svc.cluster.local")
        upstream.mode = "drop"
        advance(agent, clock, 120)
        r = agent.query("web.default.svc.cluster.local")
        assert rrset_values(r) == ["10.96.12.34"] and ttl_of(r) == 5  # from the index, its own TTL
        assert upstream.count("web.default.svc.cluster.local") == 0


# -- transports -----------------------------------------------------------------------------------


def test_a_truncated_upstream_answer_is_asked_again_over_tcp(upstream: UpstreamDouble) -> None:
    upstream.mode = "truncate"
    with agent_for({"upstream": upstream.address}) as agent:
        r = agent.query("www.example.com")
        assert rrset_values(r) == ["192.0.2.1"]
        assert upstream.transports["udp"] >= 1 and upstream.transports["tcp"] >= 1


@pytest.mark.parametrize("edns", [-1, 0], ids=["plain", "edns-above-max-udp-size"])
def test_a_large_cached_answer_is_truncated_for_udp_and_whole_over_tcp(upstream: UpstreamDouble, edns: int) -> None:
    with agent_for({"upstream": upstream.address}) as agent:
        full = agent.query("big.example.com", "TXT", edns=edns, payload=4096, tcp=True)
        assert len(rrset_values(full)) == 12
        small = agent.query("big.example.com", "TXT", edns=edns, payload=4096)
        # as many whole records as fit (miekg/dns Truncate), TC=1: never an empty answer
        assert small.flags & dns.flags.TC and 0 < len(rrset_values(small)) < 12
        assert set(rrset_values(small)) <= set(rrset_values(full))


@pytest.mark.parametrize(
    "raw",
    [{"upstream-force-tcp": True}, {"stub-domain": "example.com={addr},force_tcp"}],
    ids=["root-force-tcp", "stub-domain-force-tcp"],
)
def test_force_tcp_groups_never_use_udp(upstream: UpstreamDouble, raw: dict[str, Any]) -> None:
    other = {k: v.format(addr=upstream.address) if isinstance(v, str) else v for k, v in raw.items()}
    with agent_for({"upstream": upstream.address, **other}) as agent:
        assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]
        assert upstream.count("www.example.com", transport="tcp") == 1
        assert upstream.count("www.example.com", transport="udp") == 0


# -- several upstreams ---------------------------------------------------------------------------


def test_failover_to_another_upstream_and_recovery_through_health_checks(upstream: UpstreamDouble) -> None:
    with UpstreamDouble(ZONE) as dead:
        dead.mode = "drop"
        raw = {"upstream": [dead.address, upstream.address], "upstream-policy": "sequential", "cache-success": "0"}
        with agent_for(raw) as agent:
            fw = agent.agent.forwarder
            assert fw is not None
            assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]  # retried on the second
            wait_for(lambda: fw.status()["upstreams"][0]["healthy"] is False, timeout=5.0)
            before = dead.count("www.example.com")
            for _ in range(3):
                assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]
            assert dead.count("www.example.com") == before  # taken out: not asked any more
            dead.mode = "answer"
            wait_for(lambda: fw.status()["upstreams"][0]["healthy"] is True, timeout=5.0)
            agent.query("a.example.com")
            assert dead.count("a.example.com") == 1  # back in, first again


def test_an_upstream_is_down_after_two_failures_in_a_row_and_then_skipped(upstream: UpstreamDouble) -> None:
    """CoreDNS forward's max_fails (2): a server that failed twice in a row is down (/status says so) and
    asked no more until a health check succeeds (none runs here within the test: every 60 s)."""
    with UpstreamDouble(ZONE) as dead:
        dead.mode = "drop"
        raw = {"upstream": [dead.address, upstream.address], "upstream-policy": "sequential", "cache-success": "0",
               "health-check": "60s", "upstream-timeout": "300ms"}
        with agent_for(raw) as agent:
            fw = agent.agent.forwarder
            assert fw is not None
            wait_for(lambda: probe_answered(upstream), timeout=5.0)  # the start-up loop probe failed on the dead one
            # first

            def first() -> dict[str, Any]:
                return agent.call(lambda: fw.status()["upstreams"][0])  # type: ignore[no-any-return]

            seen = []
            for i in range(4):
                before = first()
                name = f"n{i}.example.com"
                assert agent.query(name).rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN)  # the second answered
                assert dead.count(name) == (1 if before["healthy"] else 0), (i, before)
                after = first()
                assert after["healthy"] is (after["fails"] < 2), after
                seen.append(after["healthy"])
            assert seen[-2:] == [False, False]


@pytest.mark.parametrize(
    ("policy", "check"),
    [
        ("sequential", lambda a, b: a == 20 and b == 0),
        ("round_robin", lambda a, b: a == 10 and b == 10),
        ("random", lambda a, b: a > 0 and b > 0 and a + b == 20),
    ],
    ids=["sequential", "round_robin", "random"],
)
def test_each_policy_spreads_queries_its_way(upstream: UpstreamDouble, policy: str,
                                             check: Callable[[int, int], bool]) -> None:
    names = [f"n{i}.example.com" for i in range(20)]
    with UpstreamDouble(ZONE) as second:
        # A timeout far above a loaded machine's answer time: a try that timed out would be asked again of
        # the other upstream, and count twice.
        raw = {"upstream": [upstream.address, second.address], "upstream-policy": policy,
               "upstream-timeout": "5s"}
        with agent_for(raw) as agent:
            wait_for(lambda: probe_answered(upstream) or probe_answered(second), timeout=5.0)  # the probe takes a turn
            # too
            for name in names:
                agent.query(name)
            a = sum(upstream.count(n) for n in names)
            b = sum(second.count(n) for n in names)
            assert check(a, b), (a, b)


def test_queries_beyond_max_concurrent_are_refused(upstream: UpstreamDouble) -> None:
    upstream.per_name["a.example.com"] = "delay"
    upstream.delay = 0.5
    with agent_for({"upstream": upstream.address, "max-concurrent": "1", "upstream-timeout": "2s"}) as agent:
        wait_for(lambda: probe_answered(upstream) and agent.agent.forwarder is not None
                 and agent.agent.forwarder.inflight == 0, timeout=5.0)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            slow = pool.submit(agent.query, "a.example.com")
            time.sleep(0.15)
            refused = agent.query("b.example.com")
            assert refused.rcode() == dns.rcode.REFUSED
            assert rrset_values(slow.result()) == ["192.0.2.11"]


def test_identical_misses_in_flight_share_one_upstream_query(upstream: UpstreamDouble) -> None:
    upstream.mode = "delay"
    upstream.delay = 0.4
    with agent_for({"upstream": upstream.address, "upstream-timeout": "2s"}) as agent:
        with concurrent.futures.ThreadPoolExecutor(5) as pool:
            answers = list(pool.map(lambda _: agent.query("www.example.com"), range(5)))
        assert all(rrset_values(r) == ["192.0.2.1"] for r in answers)
        assert upstream.count("www.example.com") == 1


def test_each_upstream_query_has_a_random_id_and_source_port(upstream: UpstreamDouble) -> None:
    names = [f"r{i}.example.com" for i in range(12)]
    with agent_for({"upstream": upstream.address}) as agent:
        for name in names:
            agent.query(name)
    ids = [qid for qid, _ in upstream.sources]
    ports = [port for _, port in upstream.sources]
    # a fresh socket per query, its port picked at random by the kernel: not a sequence, hardly a repeat
    assert len(set(ports)) >= len(ports) - 1
    assert any(b - a != 1 for a, b in zip(ports, ports[1:], strict=False))
    assert len(set(ids)) >= len(ids) - 1  # 16 random bits each


def test_a_spoofed_answer_is_ignored(upstream: UpstreamDouble) -> None:
    upstream.mode = "spoof"
    with agent_for({"upstream": upstream.address}) as agent:
        r = agent.query("www.example.com")
        assert rrset_values(r) == ["192.0.2.1"]
        fw = agent.agent.forwarder
        assert fw is not None and fw.stats["spoofed"] >= 1 and fw.stats["mismatched"] >= 2  # wrong ID, wrong question
        assert SPOOF_ADDRESS not in rrset_values(agent.query("www.example.com"))


# -- loops ----------------------------------------------------------------------------------------


def test_forwarding_to_our_own_listen_address_is_refused() -> None:
    port = free_port()
    with pytest.raises(ConfigError, match="own listen address"):
        with agent_for({"listen": f"127.0.0.1:{port}", "upstream": f"127.0.0.1:{port}"}):
            pass


def looping_zones(agent: RunningAgent) -> list[str]:
    fw = agent.agent.forwarder
    assert fw is not None
    return agent.call(lambda: [g.label for g in fw.loops()])


def rcode_of(agent: RunningAgent, name: str) -> str:
    return dns.rcode.to_text(agent.query(name, timeout=2).rcode())


def test_a_forwarding_loop_servfails_its_route_and_the_cluster_zone_goes_on(upstream: UpstreamDouble) -> None:
    port = free_port()
    upstream.mode = "forward"
    upstream.forward_to = ("127.0.0.1", port)
    with agent_for({"listen": f"127.0.0.1:{port}", "upstream": upstream.address, "status-listen": "127.0.0.1:0"}) \
            as agent:
        wait_for(lambda: looping_zones(agent) == ["."], timeout=8)
        started = time.monotonic()
        assert rcode_of(agent, "www.example.com") == "SERVFAIL"
        assert time.monotonic() - started < 0.5  # refused at once, not after the loop's timeouts
        assert rrset_values(agent.query("web.default.svc.cluster.local")) == ["10.96.12.34"]
        reasons = agent.call(agent.agent.observer.readiness)
        prefix = 'upstream: forwarding loop through the upstreams of zone "."'
        assert any(r.startswith(prefix) for r in reasons), reasons
        status = agent.call(agent.agent.observer.status)
        assert [lp["zone"] for lp in status["upstream"]["loops"]] == ["."]
        assert 'nodedns_forward_loop{zone="."} 1.0' in agent.call(agent.agent.observer.metrics).decode()
        assert agent.agent.state == "running"


def test_a_reload_that_fixes_the_loop_brings_forwarding_back(upstream: UpstreamDouble, tmp_path: Path) -> None:
    port = free_port()
    raw = {"listen": f"127.0.0.1:{port}", "upstream": upstream.address, "kube-dns-config-dir": str(tmp_path),
           "kube-dns-config-period": "100ms"}
    with UpstreamDouble(ZONE) as looping, agent_for(raw) as agent:
        looping.mode = "forward"
        looping.forward_to = ("127.0.0.1", port)
        wait_for(lambda: probe_answered(upstream), timeout=5.0)
        assert looping_zones(agent) == []
        (tmp_path / "upstreamNameservers").write_text(json.dumps([looping.address]))
        wait_for(lambda: looping_zones(agent) == ["."], timeout=8)
        assert rcode_of(agent, "www.example.com") == "SERVFAIL"
        (tmp_path / "upstreamNameservers").write_text(json.dumps([upstream.address]))
        wait_for(lambda: looping_zones(agent) == [], timeout=8)
        wait_for(lambda: rrset_values(agent.query("www.example.com")) == ["192.0.2.1"], timeout=8)
        assert agent.call(agent.agent.observer.readiness) == []


def test_a_loop_through_a_stub_domain_leaves_the_other_routes_forwarding(upstream: UpstreamDouble) -> None:
    port = free_port()
    with UpstreamDouble(CORP) as corp:
        corp.mode = "forward"
        corp.forward_to = ("127.0.0.1", port)
        raw = {"listen": f"127.0.0.1:{port}", "upstream": upstream.address,
               "stub-domain": f"corp.example={corp.address}"}
        with agent_for(raw) as agent:
            wait_for(lambda: looping_zones(agent) == ["corp.example"], timeout=8)
            assert rcode_of(agent, "db.corp.example") == "SERVFAIL"
            assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]


def test_a_loop_fixed_outside_our_config_is_found_gone_by_the_recheck(
        upstream: UpstreamDouble, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("nodedns.app.loops.LOOP_RECHECK", 0.3)
    port = free_port()
    upstream.mode = "forward"
    upstream.forward_to = ("127.0.0.1", port)
    with agent_for({"listen": f"127.0.0.1:{port}", "upstream": upstream.address}) as agent:
        wait_for(lambda: looping_zones(agent) == ["."], timeout=8)
        upstream.mode = "answer"  # the upstream's operator fixed its forwarding
        wait_for(lambda: looping_zones(agent) == [], timeout=8)
        assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]


def test_two_agents_forwarding_to_each_other_detect_the_loop_and_keep_running() -> None:
    port_a, port_b = free_port(), free_port()
    with agent_for({"listen": f"127.0.0.1:{port_a}", "upstream": f"127.0.0.1:{port_b}"}) as a, \
            agent_for({"listen": f"127.0.0.1:{port_b}", "upstream": f"127.0.0.1:{port_a}"}) as b:
        wait_for(lambda: bool(looping_zones(a) or looping_zones(b)), timeout=8)
        assert a.agent.state == b.agent.state == "running"
        assert rrset_values(a.query("web.default.svc.cluster.local")) == ["10.96.12.34"]


# -- routes ----------------------------------------------------------------------------------------


def test_stub_domains_go_to_their_own_servers(upstream: UpstreamDouble) -> None:
    with UpstreamDouble(CORP) as corp:
        raw = {"upstream": upstream.address, "stub-domain": f"corp.example={corp.address}"}
        with agent_for(raw) as agent:
            assert rrset_values(agent.query("db.corp.example")) == ["10.1.0.1"]
            assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]
            assert corp.count("db.corp.example") == 1 and upstream.count("db.corp.example") == 0


def test_names_without_any_upstream_are_refused() -> None:
    with UpstreamDouble(CORP) as corp, agent_for({"stub-domain": f"corp.example={corp.address}"}) as agent:
        assert agent.query("www.example.com").rcode() == dns.rcode.REFUSED
        assert rrset_values(agent.query("db.corp.example")) == ["10.1.0.1"]


def test_unknown_reverse_names_are_forwarded(upstream: UpstreamDouble) -> None:
    with agent_for({"upstream": upstream.address}) as agent:
        assert rrset_values(agent.query("4.3.2.1.in-addr.arpa", "PTR")) == ["host.example.com."]


def test_an_external_name_target_is_chased_upstream(upstream: UpstreamDouble) -> None:
    with agent_for({"upstream": upstream.address}) as agent:
        for _ in range(2):
            r = agent.query("search.prod.svc.cluster.local")
            assert rrset_values(r, rdtype="CNAME") == ["search.example.com."]
            assert rrset_values(r, rdtype="A") == ["192.0.2.80"]
        assert upstream.count("search.example.com") == 1


def test_a_chase_whose_service_changed_while_its_target_was_asked_is_not_kept(upstream: UpstreamDouble) -> None:
    """The ExternalName Service is pointed elsewhere while its old target is being asked upstream: the
    answer to that query may carry the old chain, the next one must carry the new (nothing kept across it)."""
    upstream.per_name["search.example.com"] = "delay"
    upstream.delay = 0.5
    with agent_for({"upstream": upstream.address}) as agent, concurrent.futures.ThreadPoolExecutor(1) as pool:
        asked = pool.submit(agent.query, "search.prod.svc.cluster.local")
        wait_for(lambda: upstream.count("search.example.com") == 1, timeout=3)
        moved = fx.service("prod", "search", external_name="www.example.com")
        agent.call(lambda: agent.agent.index.apply("Service", "MODIFIED", moved))
        assert rrset_values(asked.result(), rdtype="CNAME") == ["search.example.com."]
        for _ in range(3):
            r = agent.query("search.prod.svc.cluster.local")
            assert rrset_values(r, rdtype="CNAME") == ["www.example.com."]
            assert rrset_values(r, rdtype="A") == ["192.0.2.1"]


def test_an_external_name_target_that_does_not_exist_ends_the_chain_with_nxdomain(
        upstream: UpstreamDouble) -> None:
    upstream.per_name["search.example.com"] = "nxdomain"
    with agent_for({"upstream": upstream.address}) as agent:
        r = agent.query("search.prod.svc.cluster.local")
        assert r.rcode() == dns.rcode.NXDOMAIN and rrset_values(r, rdtype="CNAME") == ["search.example.com."]


def test_upstreams_come_from_a_resolv_conf(tmp_path: Path) -> None:
    # resolv.conf carries no port (always 53), so check the route it makes rather than a real answer
    conf = tmp_path / "resolv.conf"
    conf.write_text("search example\nnameserver 127.0.0.254\nnameserver ::1\noptions ndots:1\n")
    with agent_for({"upstream-resolv-conf": str(conf)}) as agent:
        fw = agent.agent.forwarder
        assert fw is not None
        assert [u["to"] for u in fw.status()["upstreams"]] == ["127.0.0.254:53", "[::1]:53"]


def test_a_changed_resolv_conf_is_read_again_and_its_nameservers_used(tmp_path: Path) -> None:
    """The DaemonSet forwards to the node's resolv.conf (`upstream-resolv-conf: /etc/resolv.conf`): when the file
    changes (a new resolver, DHCP), the agent follows it without a restart."""
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver 127.0.0.254\n")
    with agent_for({"upstream-resolv-conf": str(conf), "kube-dns-config-period": "100ms"}) as agent:
        fw = agent.agent.forwarder
        assert fw is not None

        def upstreams() -> list[str]:
            return [u["to"] for u in agent.call(fw.status)["upstreams"]]

        assert upstreams() == ["127.0.0.254:53"]
        conf.write_text("nameserver 127.0.0.253\nnameserver 127.0.0.252\n")
        wait_for(lambda: upstreams() == ["127.0.0.253:53", "127.0.0.252:53"], timeout=5.0)
        conf.write_text("search example.org\n")  # names no nameserver: an error, the last good config stays
        watcher = agent.agent.config_watcher
        assert watcher is not None
        wait_for(lambda: watcher.errors == 1, timeout=5.0)
        assert upstreams() == ["127.0.0.253:53", "127.0.0.252:53"]


# -- the kube-dns ConfigMap -----------------------------------------------------------------------


def test_the_kube_dns_configmap_is_reloaded_and_a_bad_one_is_ignored(upstream: UpstreamDouble,
                                                                     tmp_path: Path) -> None:
    with UpstreamDouble(CORP) as corp, UpstreamDouble(ZONE) as other:
        (tmp_path / "stubDomains").write_text(json.dumps({"corp.example": [corp.address]}))
        raw = {"upstream": upstream.address, "kube-dns-config-dir": str(tmp_path),
               "kube-dns-config-period": "100ms", "cache-success": "0", "cache-denial": "0"}
        with agent_for(raw) as agent:
            assert rrset_values(agent.query("db.corp.example")) == ["10.1.0.1"]
            watcher = agent.agent.config_watcher
            assert watcher is not None
            (tmp_path / "upstreamNameservers").write_text(json.dumps([other.address]))
            wait_for(lambda: watcher.reloads == 1, timeout=5.0)
            agent.query("www.example.com")
            assert other.count("www.example.com") == 1 and upstream.count("www.example.com") == 0
            (tmp_path / "stubDomains").write_text("{not json")
            wait_for(lambda: watcher.errors == 1, timeout=5.0)
            assert rrset_values(agent.query("db.corp.example")) == ["10.1.0.1"]  # the old config stays
            assert corp.count("db.corp.example") == 2


# -- flag variants share or split entries as they must ---------------------------------------


def test_dnssec_ok_queries_get_their_own_entry_and_edns_options_share_one(upstream: UpstreamDouble) -> None:
    with agent_for({"upstream": upstream.address}) as agent:
        agent.query("www.example.com", edns=0)
        with_options = dns.message.make_query("www.example.com", "A", use_edns=0,
                                              options=[dns.edns.GenericOption(10, b"12345678")])
        r = dns.query.udp(with_options, agent.host, port=agent.port, timeout=3)
        assert rrset_values(r) == ["192.0.2.1"] and not r.options  # the client's cookie is not echoed
        assert upstream.count("www.example.com") == 1
        r = agent.query("www.example.com", edns=0, dnssec=True)
        assert r.ednsflags & dns.flags.DO and upstream.count("www.example.com") == 2


# -- what the status endpoint sees ---------------------------------------------------------------


def test_cache_and_upstream_show_in_the_metrics(upstream: UpstreamDouble) -> None:
    with agent_for({"upstream": upstream.address}) as agent:
        for _ in range(3):
            agent.query("www.example.com")
            agent.query("missing.example.com")
        text = agent.call(agent.agent.observer.metrics).decode()
        hits = {line.split("{")[1].split("}")[0]: float(line.rsplit(" ", 1)[1])
                for line in text.splitlines() if line.startswith("coredns_cache_hits_total{")}
        assert any('type="success"' in k and v >= 2 for k, v in hits.items()), hits
        assert any('type="denial"' in k and v >= 2 for k, v in hits.items()), hits
        assert f'nodedns_upstream_healthy{{to="{upstream.address}",zone="."}} 1.0' in text
        assert 'coredns_proxy_request_duration_seconds_count{proxy_name="forward",rcode="NOERROR",' \
               f'to="{upstream.address}"}} 1.0' in text


# -- reverse names the index may claim --------------------------------------------------------------

REVERSE = "7.77.96.10.in-addr.arpa"


def test_a_forwarded_reverse_answer_gives_way_to_a_service_that_claims_the_address_and_comes_back_after() -> None:
    """A PTR the index has no record for is forwarded (and cached for its TTL); once a Service takes the
    address the answer is the cluster's at once, on the hit path too; once the Service is gone it is the
    upstream's again."""
    from tests.support import cluster_fixture as cf

    def ptr(agent: RunningAgent) -> list[str]:
        return rrset_values(agent.query(REVERSE, "PTR"), rdtype="PTR")

    with UpstreamDouble({REVERSE: {"PTR": ["outside.example."]}}) as up, \
            agent_for({"upstream": up.address}) as agent:
        for _ in range(3):  # forwarded once, then from the cache (the hit path)
            assert ptr(agent) == ["outside.example."]
        assert up.count(REVERSE, "PTR") == 1
        claim = cf.service("default", "claims", cluster_ips=["10.96.77.7"])
        assert agent.call(lambda: agent.agent.index.apply("Service", "ADDED", claim))
        for _ in range(3):
            assert ptr(agent) == ["claims.default.svc.cluster.local."]
        assert agent.call(lambda: agent.agent.index.apply("Service", "DELETED", claim))
        for _ in range(3):
            assert ptr(agent) == ["outside.example."]
