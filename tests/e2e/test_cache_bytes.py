"""The forward cache's byte budget (--cache-max-bytes): stored answers, stale ones included, never hold more
than the budget; eviction goes least recently used first; an answer over the entry limit is served,
not stored; each answer is held once (the hot dict's copy is the entry's own bytes); /status and
/metrics say how much is held."""

from __future__ import annotations

import gc
import json
import tracemalloc
import urllib.request
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import dns.rcode
import dnslib
import pytest

from nodedns.config import ConfigError, build, parse_size
from nodedns.dns.hot import HotTable
from nodedns.dns.keys import make_key
from nodedns.dns.wire import KF_RD
from nodedns.forward.store import ENTRY_OVERHEAD, MAX_ENTRY_BYTES, ForwardCache
from tests.support import manifests as m
from tests.support.agentproc import metric_value
from tests.support.apiserver import FakeApiServer
from tests.support.helpers import EXAMPLE, running_agent, wait_for
from tests.support.shipped import ShippedAgent, cluster
from tests.support.upstream_double import UpstreamDouble


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def answer(name: str, size: int, *, rtype: str = "TXT", rcode: int = 0, ttl: int = 300) -> tuple[bytes, bytes]:
    """(cache key, upstream response) for `name` with about `size` bytes of records (a denial: SOA, and
    `size` bytes of additional TXT records)."""
    q = dnslib.DNSRecord.question(name, rtype)
    r = q.reply()
    r.header.rcode = rcode
    if rtype == "TXT":
        for _ in range(max(1, size // 250)):
            r.add_answer(dnslib.RR(name, dnslib.QTYPE.TXT, rdata=dnslib.TXT("x" * 240), ttl=ttl))
    else:
        r.add_auth(dnslib.RR("example.com", dnslib.QTYPE.SOA, ttl=ttl, rdata=dnslib.SOA(
            "ns.example.com", "h.example.com", (1, 2, 3, 4, ttl))))
        for _ in range(size // 250):
            r.add_ar(dnslib.RR("pad.example.com", dnslib.QTYPE.TXT, rdata=dnslib.TXT("p" * 240), ttl=ttl))
    raw = bytes(r.pack())
    end = raw.index(b"\x00", 12) + 5
    return make_key(raw[12:end], KF_RD), raw


def cache(max_bytes: int, clock: Clock | None = None, **kw: Any) -> tuple[ForwardCache, dict[bytes, bytes]]:
    hot = HotTable()
    return ForwardCache(hot=hot, max_bytes=max_bytes, clock=clock or Clock(), **kw), hot.view


@pytest.mark.parametrize(("text", "value"), [("32Mi", 32 << 20), ("32MiB", 32 << 20), ("512Ki", 512 << 10),
                                             ("1G", 10**9), ("65536", 65536), ("1.5Mi", 3 << 19)],
                         ids=["Mi", "MiB", "Ki", "G-decimal", "bytes", "fraction"])
def test_sizes_carry_units(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["Mi", "32 apples", "-1", "1Mi"], ids=["no-number", "junk", "negative", "too-small"])
def test_a_bad_cache_budget_is_a_config_error_naming_the_key(text: str) -> None:
    with pytest.raises(ConfigError, match="^cache-max-bytes: "):
        build({"cache-max-bytes": text}, environ={})


def test_the_default_budget_is_32_mib_for_the_whole_agent() -> None:
    assert build({}, environ={}).cache_max_bytes == 32 << 20


def test_stored_answers_never_hold_more_than_the_budget_and_the_least_recently_used_go_first() -> None:
    c, hot = cache(1 << 20)
    keys = []
    for i in range(300):  # ~3 MB of 10 KB answers into a 1 MiB budget
        key, raw = answer(f"n{i}.example.com", 10_000)
        c.admit(key, raw)
        keys.append(key)
        assert c.bytes_used() <= c.max_bytes
        if i >= 50:
            c.get(keys[10])  # read often: it stays
    assert c.evictions()["success"] > 0
    assert c.get(keys[10]) is not None and c.get(keys[0]) is None and c.get(keys[-1]) is not None
    assert sum(1 for k in keys if k in hot) <= len(keys)  # evicted keys left the hot dict too
    assert all(c.get(k) is not None for k in keys if k in hot)


def test_stale_entries_count_against_the_budget_until_their_serve_stale_window_ends() -> None:
    clock = Clock()
    c, _ = cache(1 << 20, clock, serve_stale=3600.0)
    key, raw = answer("a.example.com", 2000, ttl=30)
    c.admit(key, raw)
    held = c.bytes_used()
    assert held > 2000
    clock.now += 600  # expired, inside the serve-stale window: still held, still charged
    c.tick()
    entry = c.get(key)
    assert entry is not None and not c.fresh(entry, clock.now) and c.stale_usable(entry, clock.now)
    assert c.bytes_used() == held
    clock.now += 3600  # past the window: gone at the next write, its bytes too
    other, raw2 = answer("b.example.com", 100)
    c.admit(other, raw2)
    assert c.get(key) is None and c.bytes_used() < held


def test_an_answer_over_the_entry_limit_is_served_but_not_stored() -> None:
    c, hot = cache(32 << 20)
    assert c.max_entry == MAX_ENTRY_BYTES
    key, raw = answer("big.example.com", 60_000)
    wire, entry = c.admit(key, raw)
    assert entry is None and key not in hot and c.get(key) is None
    assert c.counts()["too_large"] == 1 and c.bytes_used() == 0
    parsed = dnslib.DNSRecord.parse(wire)
    assert len(parsed.rr) == 240 and parsed.header.rcode == 0
    small_budget, _ = cache(4 << 20)
    assert small_budget.max_entry == min(MAX_ENTRY_BYTES, (4 << 20) // 64)


def test_each_answer_is_held_once_the_hot_copy_is_the_entrys_own_bytes() -> None:
    clock = Clock()
    c, hot = cache(1 << 20, clock)
    key, raw = answer("a.example.com", 5000)
    c.admit(key, raw)
    entry = c.get(key)
    assert entry is not None and hot[key] is entry.wire
    clock.now += 1
    c.tick()
    wire = c.serve(key, entry, clock.now)  # a new second: rendered to be sent, the stored template unchanged
    assert hot[key] is entry.wire and wire is not entry.wire
    assert dnslib.DNSRecord.parse(wire).rr[0].ttl == 29  # the success cap (30 s), one second later


@pytest.mark.parametrize(("size", "rtype"), [(16, "A"), (60_000, "TXT"), (8000, "TXT")],
                         ids=["small", "60KB-TXT", "8KB-TXT"])
def test_what_an_entry_is_charged_covers_what_it_costs(size: int, rtype: str) -> None:
    c, _ = cache(1 << 34)
    c.max_entry = 1 << 20  # measure the large ones too
    items = [answer(f"n{i}.example.com", size, rtype=rtype) for i in range(200)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for key, raw in items:
            c.admit(key, raw)
        c.tick(c.clock() + 1)  # a new second: what is hot stays hot (charged to its entry)
        gc.collect()
        cost = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cost <= c.bytes_used(), f"{cost / 200:.0f} bytes an entry, charged {c.bytes_used() / 200:.0f}"
    assert c.bytes_used() - cost < 200 * (ENTRY_OVERHEAD + 256)  # and not much more


def test_the_two_stores_share_one_budget() -> None:
    c, _ = cache(1 << 20)
    for i in range(400):  # answers and denials of ~5 KB in turn: 2 MB into a 1 MiB budget
        kind = ("TXT", 0) if i % 2 else ("SOA", 3)
        key, raw = answer(f"m{i}.example.com", 5000, rtype=kind[0], rcode=kind[1], ttl=60)
        c.admit(key, raw)
        assert c.bytes_used() <= c.max_bytes, (i, c.bytes_used())
    counts = c.counts()
    assert counts["success"] > 20 and counts["denial"] > 20
    assert c.evictions()["success"] > 0 and c.evictions()["denial"] > 0


def test_a_denial_evicts_denials_before_answers() -> None:
    c, _ = cache(1 << 20)
    good = []
    for i in range(90):
        key, raw = answer(f"n{i}.example.com", 10_000)
        c.admit(key, raw)
        good.append(key)
    for i in range(2000):
        key, raw = answer(f"x{i}.example.com", 0, rtype="SOA", rcode=3, ttl=60)
        c.admit(key, raw)
    assert c.bytes_used() <= c.max_bytes
    assert c.evictions()["denial"] > 0
    assert sum(c.get(k) is not None for k in good) >= 80  # the answers mostly stayed


def test_held_chase_answers_count_against_the_budget_for_their_second() -> None:
    clock = Clock()
    c, hot = cache(4 << 20, clock)
    for i in range(2000):
        c.hold(b"k%d" % i, b"\x00" * 8000)
    assert c.bytes_used() <= c.max_bytes and c.counts()["not_held"] > 0
    clock.now += 1
    c.tick()
    assert c.bytes_used() == 0 and not hot


# ----------------------------------------------------------------------------------------------
# On the wire


def _txt(n: int) -> list[str]:
    """n distinct TXT strings of 240 characters (an RRset keeps each value once)."""
    return [f'"{j:04d}' + "x" * 236 + '"' for j in range(n)]


def _tcp(port: int, name: str, rdtype: str = "TXT") -> dns.message.Message:
    return dns.query.tcp(dns.message.make_query(name, rdtype), "127.0.0.1", port=port, timeout=5)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - our own loopback URL
        return str(resp.read().decode())


def test_the_agent_keeps_its_forward_cache_within_the_budget_and_reports_it(tmp_path: Path) -> None:
    zone = {f"n{i}.attacker.example": {"TXT": _txt(40)} for i in range(600)}  # ~10 KB each
    zone["big.attacker.example"] = {"TXT": _txt(240)}  # ~60 KB
    with UpstreamDouble(zone) as up:
        raw = {"manifests": str(EXAMPLE), "upstream": up.address, "cache-max-bytes": "4Mi",
               "status-listen": "127.0.0.1:0", "debug-listen": "127.0.0.1:0"}
        with running_agent(raw) as agent:
            for i in range(600):
                r = _tcp(agent.port, f"n{i}.attacker.example")
                assert r.rcode() == dns.rcode.NOERROR and len(r.answer[0]) == 40
            for _ in range(2):
                r = _tcp(agent.port, "big.attacker.example")
                assert r.rcode() == dns.rcode.NOERROR and len(r.answer[0]) == 240
            assert up.count("big.attacker.example") >= 2  # not stored: asked again

            def section() -> dict[str, Any]:
                doc: dict[str, Any] = json.loads(_get(agent.debug_url + "/status"))
                return dict(doc["cache"]["caches"][0])

            wait_for(lambda: section()["too_large"] == 2, what="the big answers counted")
            c = section()
            # the budget is the process's: a quarter kept for cluster answers, the rest the forward cache's
            assert c["budget"] == 4 << 20 and c["max_bytes"] == 3 << 20 and 2 << 20 < c["bytes"] <= 3 << 20
            assert c["evictions"]["success"] > 0
            text = _get(agent.status_url + "/metrics")
            used = metric_value(text, "nodedns_cache_bytes")
            assert used is not None and used <= (metric_value(text, "nodedns_cache_max_bytes") or 0)
            assert metric_value(text, "nodedns_cache_too_large_total") == 2


def test_the_shipped_agent_splits_the_budget_over_its_workers_and_keeps_no_60kb_answer(tmp_path: Path) -> None:
    zone = {f"b{i}.attacker.example": {"TXT": _txt(240)} for i in range(30)}
    with FakeApiServer() as api, UpstreamDouble(zone) as up:
        cluster(api)
        with ShippedAgent(tmp_path, api, up) as agent:
            agent.wait_ready()
            for i in range(30):
                r = _tcp(agent.port, f"b{i}.attacker.example")
                assert r.rcode() == dns.rcode.NOERROR and len(r.answer[0]) == 240
            wait_for(lambda: agent.metric("nodedns_cache_too_large_total") == 30, timeout=10,
                     what="every 60 KB answer served, none kept")
            # the workers' shares: the budget less the supervisor's 1 MiB (the explainer's cache), each
            # share a quarter for cluster answers and the rest for the forward cache
            share = ((32 << 20) - (1 << 20)) // 2
            assert agent.metric("nodedns_cache_max_bytes") == 2 * (share - share // 4)
            assert agent.metric("nodedns_cluster_answers_max_bytes") == 2 * (share // 4)
            assert (agent.metric("nodedns_cache_bytes") or 0) < 1 << 20


def _wide(name: str, ports: int, endpoints: int, net: int) -> list[dict[str, Any]]:
    """A headless Service with `ports` named ports and a slice of `endpoints` endpoints, each with a
    hostname: every `_pN._tcp` SRV answer carries a record and an address per endpoint."""
    named = [{"name": f"p{i}", "port": 1000 + i, "protocol": "TCP"} for i in range(ports)]
    eps = [m.endpoint(f"10.{net}.{i // 250}.{i % 250 + 1}", hostname=f"h{i}") for i in range(endpoints)]
    return [m.service(name, headless=True, ports=named), m.endpoint_slice(f"{name}-1", name, eps, ports=named)]


def test_a_service_of_large_answers_cannot_fill_the_process_with_cluster_answers(tmp_path: Path) -> None:
    """A Service author's attack: SRV answers of every port of two headless Services, one whose answers
    are over 16 KiB (built for each query, never stored), one whose answers are a few KiB each, more of
    them than the cluster share holds. The stored cluster answers stay within their budget (a quarter of
    --cache-max-bytes), the rest is evicted, every query answered, and /status and /metrics say so."""
    objects = [m.namespace("default"), *_wide("huge", 40, 300, 20), *_wide("wide", 400, 40, 21)]
    path = m.write(tmp_path / "cluster.yaml", objects)
    raw = {"manifests": str(path), "cache-max-bytes": "4Mi", "upstream": "none",
           "status-listen": "127.0.0.1:0", "debug-listen": "127.0.0.1:0"}
    with running_agent(raw) as agent:
        for _ in range(2):
            for i in range(40):
                r = _tcp(agent.port, f"_p{i}._tcp.huge.default.svc.cluster.local", "SRV")
                assert r.rcode() == dns.rcode.NOERROR and len(r.answer[0]) == 300
            for i in range(400):
                r = _tcp(agent.port, f"_p{i}._tcp.wide.default.svc.cluster.local", "SRV")
                assert r.rcode() == dns.rcode.NOERROR and len(r.answer[0]) == 40

        def section() -> dict[str, Any]:
            doc: dict[str, Any] = json.loads(_get(agent.debug_url + "/status"))
            return dict(doc["cluster_answers"])

        c = section()
        assert c["max_bytes"] == (4 << 20) // 4 and 0 < c["bytes"] <= c["max_bytes"]
        assert c["too_large"] == 2 * 40  # every huge answer built again for each query, none stored
        assert c["evictions"] > 0  # the wide answers did not all fit: the oldest went
        text = _get(agent.status_url + "/metrics")
        assert metric_value(text, "nodedns_cluster_answers_max_bytes") == (4 << 20) // 4
        assert (metric_value(text, "nodedns_cluster_answers_bytes") or 0) <= (4 << 20) // 4
        assert metric_value(text, "nodedns_cluster_answers_too_large_total") == 80
