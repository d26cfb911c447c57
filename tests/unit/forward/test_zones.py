"""Zones: per-domain forwarding settings (`zones:` of the config file), as an operator writes them and as a
client meets them: config errors naming the zone and the key, the longest match, inheritance from `.`,
each zone's max-concurrent and TTL caps, serve-stale modes, fail-fast, reloads that keep the other zones'
cache."""

from __future__ import annotations

import concurrent.futures
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.message
import dns.rcode
import pytest
import yaml

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.app.build import zone_defaults
from nodedns.errors import ConfigError
from nodedns.forward.loops import probe_name
from nodedns.forward.routes import RouteSources
from nodedns.forward.zones import ZoneTable, resolve_zones
from tests.support.forward_clock import Clock, advance
from tests.support.helpers import EXAMPLE, rrset_values, running_agent, wait_for
from tests.support.upstream_double import UpstreamDouble

DOT = {"www.example.com": {"A": ["192.0.2.1"]}, "two.example.com": {"A": ["192.0.2.2"]},
       "three.example.com": {"A": ["192.0.2.3"]}}
CORP = {f"{n}.corp.example": {"A": [f"10.1.0.{i}"]} for i, n in enumerate(("db", "web", "mail", "git"), 1)}
CORP["deep.lab.corp.example"] = {"A": ["10.1.9.9"]}


@pytest.fixture
def dot() -> Iterator[UpstreamDouble]:
    with UpstreamDouble(DOT, ttl=300) as up:
        yield up


@pytest.fixture
def corp() -> Iterator[UpstreamDouble]:
    with UpstreamDouble(CORP, ttl=300) as up:
        yield up


def agent_for(raw: dict[str, Any], clock: Clock | None = None) -> Any:
    raw = {"manifests": str(EXAMPLE), "health-check": "50ms", "upstream-timeout": "300ms", "prefetch": "false",
           **raw}
    if clock is None:
        return running_agent(raw)
    return running_agent(raw, agent_factory=lambda cfg: Agent(cfg, clock=clock))


def ttl_of(msg: dns.message.Message) -> int:
    return int((msg.answer or msg.authority)[0].ttl)


def error_of(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        cfgmod.build(cfgmod.load_text(text), environ={})
    return info.value


# -- the config file ---------------------------------------------------------------------------


EXAMPLE_ZONES = """
upstream: none
zones:
  .:
    upstreams: [10.0.0.2, 10.0.0.3]
    policy: sequential
  corp.example:
    upstreams: ["tls://10.1.0.53#dns.corp.example"]
    protocol: force-tcp
    max-concurrent: 100
    cache: {max-ttl: 300s, min-ttl: 30s, denial-ttl: 5s, servfail-ttl: 0s}
    serve-stale: {mode: verify, for: 1h}
    stale-nxdomain: 10m
    filter-aaaa: off
    query-log: 10%
"""


def test_the_documented_zones_are_read_and_every_unset_value_comes_from_dot_then_the_flags() -> None:
    cfg = cfgmod.build({**cfgmod.load_text(EXAMPLE_ZONES), "cache-success-ttl": "45s", "serve-stale": "2h",
                        "max-concurrent": 700}, environ={})
    assert cfg.upstream_resolv_conf is None  # `.` names its upstreams: /etc/resolv.conf is not the default
    zones = resolve_zones(cfg.zones, zone_defaults(cfg), root=())
    dot, corp = zones[""], zones["corp.example"]
    assert dot.upstreams == (("10.0.0.2", 53), ("10.0.0.3", 53)) and dot.policy == "sequential"
    assert dot.cache.success_ttl == 45 and dot.max_concurrent == 700 and not dot.force_tcp
    assert corp.policy == "sequential"  # from `.`
    assert corp.force_tcp and corp.max_concurrent == 100
    assert (corp.cache.success_ttl, corp.cache.min_ttl, corp.cache.denial_ttl, corp.cache.servfail_ttl) == \
        (300, 30, 5, 0)
    assert corp.cache.stale_mode == "verify" and corp.cache.serve_stale == 3600
    assert corp.cache.stale_nxdomain == 600 and corp.filter_aaaa is False and corp.query_log == 0.1
    assert str(corp.upstreams[0][0]) == "10.1.0.53" and corp.upstreams[0][1] == 853


DOT_EVERY_KEY = {"upstreams": ["10.0.0.2"], "policy": "random", "protocol": "force-tcp", "max-concurrent": 9,
                 "cache": {"max-ttl": "7s", "min-ttl": "2s", "denial-ttl": "3s", "servfail-ttl": "4s"},
                 "serve-stale": {"mode": "immediate", "for": "11m"}, "stale-nxdomain": "13m",
                 "filter-aaaa": "on", "query-log": "17%", "dnstap": "19%"}
OWN_VALUE = {"policy": "sequential", "protocol": "prefer-udp", "max-concurrent": 5, "cache": {"max-ttl": "8s"},
             "serve-stale": {"mode": "off"}, "stale-nxdomain": "1m", "filter-aaaa": "off", "query-log": "1%",
             "dnstap": "2%"}


def _settings(zone: Any) -> dict[str, Any]:
    c = zone.cache
    return {"policy": zone.policy, "protocol": zone.force_tcp, "max-concurrent": zone.max_concurrent,
            "cache": (c.success_ttl, c.min_ttl, c.denial_ttl, c.servfail_ttl), "serve-stale": c.stale_mode,
            "serve-stale-for": c.serve_stale, "stale-nxdomain": c.stale_nxdomain, "filter-aaaa": zone.filter_aaaa,
            "query-log": zone.query_log, "dnstap": zone.dnstap}


@pytest.mark.parametrize("key", sorted(OWN_VALUE))
def test_a_zone_takes_each_key_it_leaves_unset_from_dot_and_only_the_key_it_sets_of_its_own(key: str) -> None:
    """Every key `.` sets to a value no default has: a zone that sets nothing has all of them; a zone that
    sets one key differs from `.` in that key only (its `serve-stale: for` too, when it sets only the mode,
    stays `.`'s)."""
    specs = cfgmod.parse_zones({".": DOT_EVERY_KEY, "plain.example": {},
                                "own.example": {key: OWN_VALUE[key]}})
    zones = resolve_zones(specs, zone_defaults(cfgmod.build({}, environ={})), root=())
    dot, plain, own = (_settings(zones[n]) for n in ("", "plain.example", "own.example"))
    assert plain == dot
    assert dot == {"policy": "random", "protocol": True, "max-concurrent": 9, "cache": (7, 2, 3, 4),
                   "serve-stale": "immediate", "serve-stale-for": 660.0, "stale-nxdomain": 780.0,
                   "filter-aaaa": True, "query-log": 0.17, "dnstap": 0.19}
    differing = {k for k in dot if dot[k] != own[k]}
    assert differing == {key}, (key, own)
    assert zones["plain.example"].upstreams == zones["own.example"].upstreams == (("10.0.0.2", 53),)


def test_a_stub_domain_forcing_tcp_wins_only_where_its_zone_says_nothing_of_the_protocol(tmp_path: Path) -> None:
    stubs = {"a.test": ((("10.3.0.53", 53),), True), "b.test": ((("10.3.0.54", 53),), True)}
    specs = cfgmod.parse_zones({"a.test": {"protocol": "prefer-udp"}, "b.test": {"max-concurrent": 3}})
    zones = resolve_zones(specs, zone_defaults(cfgmod.build({}, environ={})), root=(("10.0.0.1", 53),),
                          stubs=stubs)
    assert zones["a.test"].force_tcp is False and zones["b.test"].force_tcp is True
    assert zones["a.test"].upstreams == (("10.3.0.53", 53),)


@pytest.mark.parametrize(("text", "key", "says"), [
    ("zones:\n  corp.example:\n    upstream: [10.0.0.1]\n", "zones: corp.example: upstream", "unknown key"),
    ("zones:\n  corp.example:\n    cache: {max-ttl: 5 minutes}\n", "zones: corp.example: cache.max-ttl",
     "not a duration"),
    ("zones:\n  corp.example:\n    cache: {max_ttl: 5m}\n", "zones: corp.example: cache.max_ttl", "unknown key"),
    ("zones:\n  corp.example:\n    serve-stale: {mode: later}\n", "zones: corp.example: serve-stale.mode",
     "immediate, verify, off"),
    ("zones:\n  corp.example:\n    serve-stale: {for: forever}\n", "zones: corp.example: serve-stale.for",
     "not a duration"),
    ("zones:\n  corp.example:\n    policy: fastest\n", "zones: corp.example: policy", "round_robin"),
    ("zones:\n  corp.example:\n    protocol: quic\n", "zones: corp.example: protocol", "force-tcp"),
    ("zones:\n  corp.example:\n    max-concurrent: 0\n", "zones: corp.example: max-concurrent", "between"),
    ("zones:\n  corp.example:\n    query-log: 200%\n", "zones: corp.example: query-log", "between"),
    ("zones:\n  corp.example:\n    upstreams: [dns.corp.example]\n", "zones: corp.example: upstreams",
     "not an IP address"),
    ("zones:\n  corp.example:\n    upstreams: []\n", "zones: corp.example: upstreams", "at least one"),
    ("zones:\n  corp.example: [10.0.0.1]\n", "zones: corp.example", "must be a mapping"),
    ("zones:\n  corp.example:\n    max-concurrent: 5\n  corp.example:\n    policy: random\n",
     "zones: corp.example", "written twice (lines 2 and 4)"),
    ("zones:\n  corp.example:\n    policy: random\n  Corp.Example.:\n    policy: random\n",
     "zones: corp.example", "written twice"),
    ("zones:\n  corp.example:\n    policy: random\n    policy: sequential\n", "zones: corp.example: policy",
     "written twice (lines 3 and 4)"),
    ("zones:\n  corp.example:\n    cache: {max-ttl: 1m, max-ttl: 2m}\n", "zones: corp.example: cache.max-ttl",
     "written twice"),
    ("zones:\n  svc.cluster.local:\n    policy: random\n", "zones: svc.cluster.local", "never forwarded"),
    ("zones:\n  cluster.local:\n    upstreams: [10.0.0.1]\n", "zones: cluster.local", "never forwarded"),
    ("multicluster-zone: clusterset.local\nzones:\n  clusterset.local:\n    upstreams: [10.0.0.1]\n",
     "zones: clusterset.local", "never forwarded"),
    ("zones:\n  bad_name!:\n    policy: random\n", "zones: bad_name!", "not a valid DNS domain"),
    ("upstream: 10.0.0.9\nzones:\n  .:\n    upstreams: [10.0.0.1]\n", "zones: .: upstreams", "given twice"),
], ids=["unknown-key", "bad-duration", "unknown-cache-key", "bad-stale-mode", "bad-stale-duration", "bad-policy",
        "bad-protocol", "zero-max-concurrent", "bad-percent", "host-name-upstream", "no-upstream",
        "not-a-mapping", "domain-twice", "domain-twice-spelled-otherwise", "key-twice", "cache-key-twice",
        "inside-the-cluster-zone", "the-cluster-zone-itself", "the-clusterset-zone-itself",
        "bad-domain", "dot-upstreams-twice"])
def test_a_wrong_zone_is_a_config_error_naming_the_zone_and_the_key(text: str, key: str, says: str) -> None:
    err = error_of(text)
    assert err.key == key
    assert says in err.reason
    assert str(err).startswith(key)


def test_a_key_written_twice_outside_zones_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "nodedns.yaml"
    path.write_text("ttl: 5s\nttl: 30s\n")
    with pytest.raises(ConfigError, match=r"^ttl: is written twice \(lines 1 and 2\)"):
        cfgmod.from_sources({"config": str(path)}, environ={})


def test_the_longest_zone_wins_and_dot_is_the_default() -> None:
    specs = cfgmod.parse_zones({".": {"policy": "sequential"}, "corp.example": {"max-concurrent": 7},
                                "lab.corp.example": {"max-concurrent": 3}})
    table = ZoneTable(resolve_zones(specs, zone_defaults(cfgmod.build({}, environ={})), root=(("10.0.0.1", 53),)))
    assert table.zone_for("deep.lab.corp.example").name == "lab.corp.example"
    assert table.zone_for("lab.corp.example").name == "lab.corp.example"
    assert table.zone_for("db.corp.example").max_concurrent == 7
    assert table.zone_for("notcorp.example").name == ""  # a label boundary, not a suffix of the text
    assert table.zone_for("www.example.com").policy == "sequential"
    assert table.zone_for("lab.corp.example").upstreams == (("10.0.0.1", 53),)  # `.`'s upstreams inherited


def test_stub_domains_become_zones_and_zones_add_their_settings(tmp_path: Path) -> None:
    (tmp_path / "stubDomains").write_text(json.dumps({"corp.example": ["10.1.0.53"], "acme.test": ["10.2.0.53"]}))
    sources = RouteSources(
        upstream=(("10.0.0.1", 53),), kube_dns_dir=str(tmp_path),
        stub_domains=(("tcp.test", (("10.3.0.53", 53),), True),),
        defaults=zone_defaults(cfgmod.build({}, environ={})),
        zones=cfgmod.parse_zones({"corp.example": {"cache": {"max-ttl": "5m"}},
                                  "acme.test": {"upstreams": ["10.9.9.9"]}}))
    routes = sources.build(sources.snapshot())
    corp, acme, tcp = routes.zones["corp.example"], routes.zones["acme.test"], routes.zones["tcp.test"]
    assert corp.upstreams == (("10.1.0.53", 53),) and corp.cache.success_ttl == 300  # the ConfigMap's servers
    assert acme.upstreams == (("10.9.9.9", 53),)  # the zone names its own: they win
    assert tcp.force_tcp and tcp.upstreams == (("10.3.0.53", 53),)
    assert routes.stubs["corp.example"] == ((("10.1.0.53", 53),), False)


# -- answers ----------------------------------------------------------------------------------------


def zones_for(dot: UpstreamDouble, corp: UpstreamDouble, **corp_settings: Any) -> dict[str, Any]:
    return {".": {"upstreams": [dot.address]}, "corp.example": {"upstreams": [corp.address], **corp_settings}}


def test_each_name_goes_to_its_zones_upstreams(dot: UpstreamDouble, corp: UpstreamDouble) -> None:
    with agent_for({"zones": zones_for(dot, corp)}) as agent:
        assert rrset_values(agent.query("db.corp.example")) == ["10.1.0.1"]
        assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]
        assert corp.count("db.corp.example") == 1 and dot.count("db.corp.example") == 0
        assert dot.count("www.example.com") == 1 and corp.count("www.example.com") == 0


def test_a_zone_at_its_max_concurrent_delays_neither_another_zone_nor_cached_answers(
        dot: UpstreamDouble, corp: UpstreamDouble) -> None:
    with agent_for({"zones": zones_for(dot, corp, **{"max-concurrent": 2}), "upstream-timeout": "3s"}) as agent:
        assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]  # cached before the zone fills
        wait_for(lambda: any(rdtype == "HINFO" for _, rdtype in corp.seen)
                 and agent.call(lambda: agent.agent.forwarder.inflight) == 0, 5, "the start-up probes answered")
        corp.mode = "delay"
        corp.delay = 2.0
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            slow = [pool.submit(agent.query, n, "A", timeout=5.0) for n in ("db.corp.example", "web.corp.example")]
            wait_for(lambda: agent.call(lambda: agent.agent.forwarder.group_for("db.corp.example").inflight) == 2,
                     5, "the corp zone's two slots taken")
            t0 = time.monotonic()
            third = agent.query("mail.corp.example")  # over the zone's bound: REFUSED at once
            assert third.rcode() == dns.rcode.REFUSED
            assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]  # cached
            assert rrset_values(agent.query("two.example.com")) == ["192.0.2.2"]  # another zone, asked now
            elapsed = time.monotonic() - t0
            assert elapsed < 1.0, f"the other zone and the cache waited {elapsed:.2f}s behind the full one"
            assert all(rrset_values(f.result()) for f in slow)


def test_a_client_holding_its_share_of_a_stalled_zone_still_asks_the_other_zones(dot: UpstreamDouble,
                                                                                  corp: UpstreamDouble) -> None:
    for i in range(20):
        corp.set(f"h{i}.corp.example", "A", [f"10.1.1.{i}"])
    raw = {"zones": zones_for(dot, corp, **{"max-concurrent": 500}), "max-concurrent": 64, "upstream-timeout": "3s"}
    with agent_for(raw) as agent:  # a client's share: an eighth of 64, at least 16
        wait_for(lambda: any(rdtype == "HINFO" for _, rdtype in corp.seen)
                 and agent.call(lambda: agent.agent.forwarder.inflight) == 0, 5, "the start-up probes answered")
        corp.mode = "delay"
        corp.delay = 2.0
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            slow = [pool.submit(agent.query, f"h{i}.corp.example", "A", timeout=5.0) for i in range(16)]
            wait_for(lambda: agent.call(lambda: agent.agent.forwarder.group_for("h1.corp.example").inflight) == 16,
                     5, "the client's 16 corp queries in flight")
            assert agent.query("h17.corp.example").rcode() == dns.rcode.REFUSED  # its share of corp is full
            t0 = time.monotonic()
            assert rrset_values(agent.query("three.example.com")) == ["192.0.2.3"]  # `.`: its own share
            assert time.monotonic() - t0 < 1.0
            assert all(f.result().rcode() == dns.rcode.NOERROR for f in slow)


def test_each_zone_caps_the_ttls_of_its_answers(dot: UpstreamDouble, corp: UpstreamDouble) -> None:
    corp.set("short.corp.example", "A", ["10.1.0.7"], ttl=3)
    settings = {"cache": {"max-ttl": "120s", "min-ttl": "20s"}}
    with agent_for({"zones": zones_for(dot, corp, **settings), "cache-success-ttl": "30s"}) as agent:
        assert ttl_of(agent.query("db.corp.example")) == 120  # 300 capped by the zone
        assert ttl_of(agent.query("short.corp.example")) == 20  # 3 raised to the zone's floor
        assert ttl_of(agent.query("www.example.com")) == 30  # `.`: --cache-success-ttl
        r = agent.query("nothere.corp.example")
        assert r.rcode() == dns.rcode.NXDOMAIN


def test_a_zone_with_denial_ttl_zero_keeps_no_nxdomain(dot: UpstreamDouble, corp: UpstreamDouble) -> None:
    with agent_for({"zones": zones_for(dot, corp, cache={"denial-ttl": "0s"})}) as agent:
        for _ in range(2):
            assert agent.query("gone.corp.example").rcode() == dns.rcode.NXDOMAIN
            assert agent.query("gone.example.com").rcode() == dns.rcode.NXDOMAIN
        assert corp.count("gone.corp.example") == 2  # not kept
        assert dot.count("gone.example.com") == 1  # `.` keeps its denials


def test_serve_stale_modes_show_in_the_answers(dot: UpstreamDouble, corp: UpstreamDouble) -> None:
    clock = Clock()
    zones = {".": {"upstreams": [dot.address], "serve-stale": {"mode": "off"}},
             "corp.example": {"upstreams": [corp.address], "serve-stale": {"mode": "immediate", "for": "1h"}},
             "lab.corp.example": {"upstreams": [corp.address], "serve-stale": {"mode": "verify"}}}
    with agent_for({"zones": zones, "upstream-timeout": "2s"}, clock) as agent:
        forwarding = agent.agent.resolver.forwarding
        agent.call(lambda: setattr(forwarding, "stale_timer", 2.5))  # verify would answer after 2.5 s
        for name in ("db.corp.example", "deep.lab.corp.example", "www.example.com"):
            assert agent.query(name).rcode() == dns.rcode.NOERROR
        corp.mode = dot.mode = "delay"
        corp.delay = dot.delay = 3.0
        advance(agent, clock, 400)  # every entry expired
        t0 = time.monotonic()
        r = agent.query("db.corp.example")  # immediate: the stale answer at once, asked in the background
        assert rrset_values(r) == ["10.1.0.1"] and ttl_of(r) == 30 and time.monotonic() - t0 < 1.0
        wait_for(lambda: corp.count("db.corp.example") == 2, 5, "the background refresh")
        agent.call(lambda: setattr(forwarding, "stale_timer", 0.3))
        t0 = time.monotonic()
        r = agent.query("deep.lab.corp.example")  # verify: asked first, stale once the timer runs out
        elapsed = time.monotonic() - t0
        assert rrset_values(r) == ["10.1.9.9"] and ttl_of(r) == 30
        assert 0.25 < elapsed < 0.9, elapsed
        dot.mode = "drop"
        r = agent.query("www.example.com", timeout=6.0)  # off: never stale
        assert r.rcode() == dns.rcode.SERVFAIL


def test_verify_gives_the_fresh_answer_when_the_upstream_is_in_time(dot: UpstreamDouble,
                                                                    corp: UpstreamDouble) -> None:
    clock = Clock()
    with agent_for({"zones": zones_for(dot, corp, **{"serve-stale": {"mode": "verify"}})}, clock) as agent:
        agent.query("db.corp.example")
        corp.set("db.corp.example", "A", ["10.1.0.99"])
        advance(agent, clock, 400)
        r = agent.query("db.corp.example")
        assert rrset_values(r) == ["10.1.0.99"] and ttl_of(r) == 30  # the new answer, capped at 30 by `.`


def test_each_zone_has_its_own_protocol_aaaa_filter_and_last_known_good(dot: UpstreamDouble,
                                                                        corp: UpstreamDouble) -> None:
    clock = Clock()
    corp.set("db.corp.example", "AAAA", ["2001:db8::1"])
    dot.set("www.example.com", "AAAA", ["2001:db8::2"])
    settings = {"protocol": "force-tcp", "filter-aaaa": "on", "stale-nxdomain": "10m"}
    with agent_for({"zones": zones_for(dot, corp, **settings), "stale-nxdomain": "0s"}, clock) as agent:
        assert rrset_values(agent.query("db.corp.example")) == ["10.1.0.1"]
        assert corp.count("db.corp.example", transport="tcp") == 1
        assert corp.count("db.corp.example", transport="udp") == 0  # force-tcp: never UDP
        assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]
        assert dot.count("www.example.com", transport="udp") == 1  # `.`: UDP first
        r = agent.query("db.corp.example", "AAAA")
        assert r.rcode() == dns.rcode.NOERROR and not r.answer and corp.count("db.corp.example", "AAAA") == 0
        assert rrset_values(agent.query("www.example.com", "AAAA")) == ["2001:db8::2"]  # `.` does not filter
        agent.query("web.corp.example")
        agent.query("two.example.com")
        corp.per_name["web.corp.example"] = "nxdomain"
        dot.per_name["two.example.com"] = "nxdomain"
        advance(agent, clock, 400)
        assert rrset_values(agent.query("web.corp.example")) == ["10.1.0.2"]  # last-known-good for 10 minutes
        assert agent.query("two.example.com").rcode() == dns.rcode.NXDOMAIN  # `.`: --stale-nxdomain 0s


def test_a_zones_servfail_ttl_is_how_long_its_failed_names_are_served_stale_unasked(dot: UpstreamDouble,
                                                                                     corp: UpstreamDouble) -> None:
    clock = Clock()
    with agent_for({"zones": zones_for(dot, corp, cache={"servfail-ttl": "20s"})}, clock) as agent:
        agent.query("db.corp.example")
        agent.query("www.example.com")
        corp.mode = dot.mode = "servfail"
        advance(agent, clock, 400)
        for name, ip in (("db.corp.example", "10.1.0.1"), ("www.example.com", "192.0.2.1")):
            r = agent.query(name)
            assert rrset_values(r) == [ip] and ttl_of(r) == 30
        asked = corp.count("db.corp.example"), dot.count("www.example.com")
        advance(agent, clock, 8)  # past `.`'s --cache-servfail-ttl (5 s), within corp's 20 s
        agent.query("db.corp.example")
        agent.query("www.example.com")
        wait_for(lambda: dot.count("www.example.com") == asked[1] + 1, 5, "`.` asks again")
        assert corp.count("db.corp.example") == asked[0]  # corp still serves it stale unasked


# -- reloads ----------------------------------------------------------------------------------------


def write_zones(path: Path, zones: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump({"zones": zones}))


def test_a_reload_keeps_the_cache_of_unchanged_zones_and_a_wrong_zone_keeps_the_last_good_config(
        tmp_path: Path, dot: UpstreamDouble, corp: UpstreamDouble) -> None:
    path = tmp_path / "nodedns.yaml"
    zones = zones_for(dot, corp, cache={"max-ttl": "200s"})
    write_zones(path, zones)
    raw = {"config": str(path), **cfgmod.load_text(path.read_text()), "kube-dns-config-period": "50ms",
           "status-listen": "127.0.0.1:0"}
    with agent_for(raw) as agent:
        assert ttl_of(agent.query("db.corp.example")) == 200
        agent.query("www.example.com")
        watcher = agent.agent.config_watcher
        reloads = watcher.reloads
        write_zones(path, zones_for(dot, corp, cache={"max-ttl": "60s"}))
        wait_for(lambda: watcher.reloads > reloads, 5, "the zones reloaded")
        assert ttl_of(agent.query("db.corp.example")) == 60  # its cache dropped, asked again under the new cap
        assert corp.count("db.corp.example") == 2
        agent.query("www.example.com")
        assert dot.count("www.example.com") == 1  # `.` unchanged: its cache kept
        errors = watcher.errors
        path.write_text(path.read_text() + "    cache-ttl: 5s\n")  # an unknown key in corp.example
        wait_for(lambda: watcher.errors > errors, 5, "the wrong zone seen")
        assert "zones: corp.example: cache-ttl: unknown key" in watcher.last_error
        with urllib.request.urlopen(agent.status_url + "/metrics", timeout=5) as resp:
            assert "nodedns_upstream_config_errors_total 1" in resp.read().decode()
        assert ttl_of(agent.query("web.corp.example")) == 60  # the last good config still answers


# -- fail fast, and where a zone's state shows --------------------------------------------------------


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return str(resp.read().decode())


def test_a_zone_whose_every_upstream_is_down_fails_at_once_and_says_so(dot: UpstreamDouble,
                                                                        corp: UpstreamDouble) -> None:
    clock = Clock()
    raw = {"zones": zones_for(dot, corp), "upstream-timeout": "1s", "status-listen": "127.0.0.1:0",
           "debug-listen": "127.0.0.1:0"}
    with agent_for(raw, clock) as agent:
        assert rrset_values(agent.query("db.corp.example")) == ["10.1.0.1"]
        corp.mode = "drop"
        assert agent.query("web.corp.example", timeout=5.0).rcode() == dns.rcode.SERVFAIL  # two timeouts: down

        def corp_row() -> dict[str, Any]:
            rows = json.loads(fetch(agent.debug_url + "/status"))["upstream"]["zones"]
            return next(r for r in rows if r["zone"] == "corp.example")

        wait_for(lambda: corp_row()["state"] == "down", 5, "the corp zone down")
        t0 = time.monotonic()
        assert agent.query("mail.corp.example").rcode() == dns.rcode.SERVFAIL  # no try: at once
        advance(agent, clock, 400)
        r = agent.query("db.corp.example")  # expired: the stale answer at once
        assert rrset_values(r) == ["10.1.0.1"] and ttl_of(r) == 30
        assert time.monotonic() - t0 < 0.5, "a zone known down still waited on its upstreams"
        assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]  # `.` unaffected
        row = corp_row()
        assert row["failfast"] >= 1 and row["upstreams"] == corp.address and row["down_since"].endswith("Z")
        status = json.loads(fetch(agent.debug_url + "/status"))["upstream"]
        assert [c["zone"] for c in status["conditions"]] == ["corp.example"]
        metrics = fetch(agent.status_url + "/metrics")
        assert 'nodedns_zone_up{zone="corp.example"} 0.0' in metrics
        assert 'nodedns_zone_up{zone="."} 1.0' in metrics
        assert 'nodedns_zone_state{state="down",zone="corp.example"} 1.0' in metrics
        assert "every upstream down: stale or SERVFAIL at once" in fetch(agent.debug_url + "/")
        probe = probe_name("corp.example")  # a forwarding loop is what makes a zone's upstreams look down:
        # the probe that would find it is sent
        agent.call(lambda: agent.agent.resolver.forwarding.add_loop_probe(probe))
        agent.query(probe, "HINFO", timeout=5.0)
        assert corp.count(probe) == 1
        corp.mode = "answer"
        wait_for(lambda: corp_row()["state"] == "up", 5, "the corp zone back up")
        assert rrset_values(agent.query("mail.corp.example")) == ["10.1.0.3"]


def test_each_zone_logs_its_own_share_of_queries(dot: UpstreamDouble, corp: UpstreamDouble,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    with agent_for({"zones": zones_for(dot, corp, **{"query-log": "100%"}), "query-log": "0%"}) as agent:
        with caplog.at_level("INFO", logger="nodedns.query"):
            for _ in range(3):
                agent.query("db.corp.example")
                agent.query("www.example.com")
            lines = lambda: [r.getMessage() for r in caplog.records  # noqa: E731 - the start-up probes left out
                             if r.name == "nodedns.query" and "type=A " in r.getMessage()]
            wait_for(lambda: len(lines()) >= 3, 5, "three lines")
        names = lines()
        assert len(names) == 3 and all("name=db.corp.example." in n for n in names)


def test_a_config_file_gone_keeps_the_zones_in_use(tmp_path: Path) -> None:
    path = tmp_path / "nodedns.yaml"
    write_zones(path, {"corp.example": {"upstreams": ["10.1.0.53"], "max-concurrent": 7}})
    sources = RouteSources(upstream=(("10.0.0.1", 53),), defaults=zone_defaults(cfgmod.build({}, environ={})),
                           zones=cfgmod.parse_zones({"corp.example": {"upstreams": ["10.1.0.53"]}}),
                           config_file=str(path))
    assert sources.build(sources.snapshot()).zones["corp.example"].max_concurrent == 7  # the file's, re-read
    path.unlink()
    with pytest.raises(ConfigError, match="does not exist"):
        sources.snapshot()


def test_a_reload_while_queries_are_in_flight_keeps_the_zones_count_true(dot: UpstreamDouble,
                                                                         corp: UpstreamDouble) -> None:
    with agent_for({"zones": zones_for(dot, corp, **{"max-concurrent": 2}), "upstream-timeout": "3s"}) as agent:
        fw = agent.agent.forwarder
        wait_for(lambda: any(rdtype == "HINFO" for _, rdtype in corp.seen)
                 and agent.call(lambda: fw.inflight) == 0, 5, "the start-up probes answered")
        corp.mode = "delay"
        corp.delay = 1.0
        routes = agent.call(fw.routes)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            slow = [pool.submit(agent.query, n, "A", timeout=5.0) for n in ("db.corp.example", "web.corp.example")]
            wait_for(lambda: agent.call(lambda: fw.group_for("db.corp.example").inflight) == 2, 5, "two in flight")
            agent.call(lambda: fw.configure(routes))  # a reload: the same zones
            assert all(rrset_values(f.result()) for f in slow)
        corp.mode = "answer"
        assert agent.call(lambda: fw.group_for("db.corp.example").inflight) == 0
        assert rrset_values(agent.query("mail.corp.example")) == ["10.1.0.3"]  # not refused: the slots came back
