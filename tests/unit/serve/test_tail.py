"""Refreshes spread over time: entries stored together come due apart (a jittered prefetch point), at most
PREFETCH_PER_TURN refreshes start in one event-loop turn and PREFETCH_IN_FLIGHT wait for the upstream at
once (the rest start on a later query, the entry served meanwhile), and the once-a-second insight
hand-over lets the loop run between its slices."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
import time

import dns.message
import dns.rcode
import pytest
import uvloop

from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords, ZoneSettings
from nodedns.dns.message import parse_query
from nodedns.dns.queries import make_query
from nodedns.dns.wire import RCODE
from nodedns.forward.store import ForwardCache
from nodedns.runtime import tasks
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.forwarding import PREFETCH_IN_FLIGHT, PREFETCH_PER_TURN
from nodedns.serve.resolver import Resolver
from tests.support.helpers import EXAMPLE, RunningAgent
from tests.support.wiring import UpstreamDoubleBase, resolver_of, watched


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CountingUpstream(UpstreamDoubleBase):
    """A Forwarding double: every name has one A record with TTL 30; counts what it is asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def query(self, qname: str, key: bytes, *, probe: bool = False) -> bytes:
        self.asked.append(qname)
        q = b"\x00\x00" + key
        head = q[:2] + b"\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00"
        answer = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x1e\x00\x04\xc0\x00\x02\x01"  # A 192.0.2.1, TTL 30
        return head + key[10:] + answer


def _resolver(upstream: CountingUpstream, clock: Clock, ttl_cap: float = 30.0) -> Resolver:
    index = Index()
    index.mark_synced()
    answers = ClusterAnswers()
    cache = ForwardCache(hot=answers.hot, clock=clock, jitter=lambda: 0.0,  # every entry due at once
                         success_ttl=ttl_cap)
    return watched(resolver_of(records=ClusterRecords(index, ZoneSettings()), index=index, cluster_answers=answers,
                    forward_cache=cache, forwarder=upstream))


def _ask(resolver: Resolver, name: str) -> object:
    data = make_query(name, 1)
    return resolver.answer(parse_query(data), data, None)


def test_entries_coming_due_in_one_turn_start_at_most_the_turns_share_of_refreshes() -> None:
    names = [f"n{i}.example.com" for i in range(2 * PREFETCH_PER_TURN + 2)]

    async def main() -> None:
        clock = Clock()
        upstream = CountingUpstream()
        resolver = _resolver(upstream, clock)
        await asyncio.gather(*[_ask(resolver, n) for n in names])  # type: ignore[misc]
        assert len(upstream.asked) == len(names)
        clock.now += 27  # 3 s of 30 left: every entry at its prefetch point
        cache = resolver.forward_cache
        assert cache is not None
        cache.tick()  # a new second: the hot answers whose second has come are looked at, as the agent does
        while cache.stage():
            pass
        assert resolver.stats["prefetch"] == PREFETCH_PER_TURN  # refreshed ahead: a turn's share in this one
        # the same turn: every name asked once (as one read of a busy socket would): answered at once, from the
        # cache, no refresh started twice
        answers = [_ask(resolver, n) for n in names]
        assert all(isinstance(a, bytes) and a[3] & 0xF == RCODE.NOERROR for a in answers)
        assert resolver.stats["prefetch"] == PREFETCH_PER_TURN
        started = []
        for _ in range(2):  # the next turns: a turn's share each, until every entry is refreshed once
            await asyncio.sleep(0)
            started.append(resolver.stats["prefetch"])
        assert started == [2 * PREFETCH_PER_TURN, len(names)]
        await asyncio.sleep(0.01)
        assert len(upstream.asked) == 2 * len(names)  # each refreshed once, none twice

    uvloop.run(main())


class SlowUpstream(CountingUpstream):
    """TTL 300 (a prefetch window of 30 s); answers once `release` is set (set at first, to prime);
    `waiting`: asked and not answered yet."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.release.set()
        self.waiting = 0

    async def query(self, qname: str, key: bytes, *, probe: bool = False) -> bytes:
        self.waiting += 1
        await self.release.wait()
        self.waiting -= 1
        wire = await super().query(qname, key)
        return wire.replace(b"\x00\x00\x00\x1e\x00\x04", b"\x00\x00\x01\x2c\x00\x04")


def test_at_most_prefetch_in_flight_refreshes_wait_for_the_upstream_at_once() -> None:
    names = [f"n{i}.example.com" for i in range(PREFETCH_IN_FLIGHT + 2 * PREFETCH_PER_TURN)]

    async def main() -> None:
        clock = Clock()
        upstream = SlowUpstream()
        resolver = _resolver(upstream, clock, ttl_cap=300)
        await asyncio.gather(*[_ask(resolver, n) for n in names])  # type: ignore[misc]
        cache = resolver.forward_cache
        assert cache is not None
        upstream.release.clear()  # the upstream slow from now: refreshes stay in flight
        clock.now += 269

        def second() -> None:  # a new second (the agent's turn: the hot answers due looked at), every name asked
            clock.now += 1
            cache.tick()
            while cache.stage():
                pass
            for n in names:
                answer = _ask(resolver, n)
                assert isinstance(answer, bytes) and answer[3] & 0xF == RCODE.NOERROR  # served meanwhile

        for _ in range(1 + PREFETCH_IN_FLIGHT // PREFETCH_PER_TURN):
            second()
            await asyncio.sleep(0)  # the next turn: the refreshes started have asked the upstream
        assert upstream.waiting == PREFETCH_IN_FLIGHT  # no more started while those wait
        assert resolver.stats["prefetch"] == PREFETCH_IN_FLIGHT
        upstream.release.set()
        await asyncio.sleep(0)  # answered: each slot freed starts the next due, a turn's share at a time
        assert PREFETCH_IN_FLIGHT < resolver.stats["prefetch"] <= PREFETCH_IN_FLIGHT + PREFETCH_PER_TURN
        await asyncio.sleep(0.01)
        assert upstream.waiting == 0 and resolver.stats["prefetch"] == len(names)  # each refreshed once

    uvloop.run(main())


def test_the_insight_hand_over_lets_the_loop_run_between_its_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodedns.metrics.slots import PLUGIN_CACHE, SlotLabels
    from nodedns.observe.insightfeed import INSIGHT_SLICE
    from tests.support.helpers import ROOT, running_agent

    monkeypatch.setattr(tasks, "TURN_BUDGET", 0.0)  # a turn per slice: the slices counted by the loop's turns
    with running_agent({"manifests": str(ROOT / "examples" / "cluster.yaml"), "upstream": "none"}) as agent:
        a = agent.agent
        assert a.tally is not None and a.insight is not None
        slot = a.slots.slot(SlotLabels(".", "A", "NOERROR", PLUGIN_CACHE, False, False))

        async def hand_over() -> tuple[int, int, int]:
            assert a.tally is not None and a.insight is not None
            for c in range(16):  # 16 clients x 64 names: 1,024 rows, as a busy node's second
                for i in range(64):
                    a.tally.hit(f"10.244.9.{c}", bytes((slot,)) + make_query(f"n{i}.example.com", 1)[1:])
            turns = 0
            done = False

            async def probe() -> None:
                nonlocal turns
                while not done:
                    turns += 1
                    await asyncio.sleep(0)

            task = asyncio.ensure_future(probe())
            rows = await a.insight_feed.rows_sliced()
            mid = turns
            await a.insight_feed.take_sliced(rows)
            done = True
            await task
            return len(rows), mid, turns

        rows, after_rows, after_take = asyncio.run_coroutine_threadsafe(hand_over(), agent.loop).result(30)
        assert rows == 16 * 64
        assert after_rows >= 16 * 64 // max(INSIGHT_SLICE, 64) - 1  # the loop ran between the tally's slices
        assert after_take - after_rows >= rows // INSIGHT_SLICE - 1  # and between the Insight's
        assert agent.call(lambda: a.insight.rows if a.insight is not None else 0) >= rows  # every row counted


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def arrival(sock: socket.socket, timeout: float = 10) -> int | None:
    """When the next datagram on `sock` arrived (the kernel's stamp, ns), None when none comes in `timeout`."""
    got = stamped(sock, timeout)
    return None if got is None else got[0]


def stamped(sock: socket.socket, timeout: float = 10) -> tuple[int, bytes] | None:
    """The next datagram on `sock` and when it arrived (the kernel's stamp, ns); None when none comes."""
    sock.settimeout(timeout)
    try:
        data, anc, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(16))
    except TimeoutError:
        return None
    for level, kind, value in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("qq", value[:16])
            return sec * 1_000_000_000 + nsec, data
    raise AssertionError("no arrival stamp")


@pytest.mark.parametrize("path", ["c", "python"])
def test_a_burst_of_misses_waits_its_turns_and_the_cached_answers_behind_it_do_not(path: str) -> None:
    """2,000 misses queued before one cached answer (the loop held, as when names expire together under
    load): the slow path takes a bounded slice of each loop turn, the rest of the misses wait for later
    turns, so the reader reaches the cached answer's query — and answers it — before most misses are
    answered. Answering the misses first (a wake-up's misses all at once) sends every one of them before
    the cached answer."""
    with pytest.MonkeyPatch.context() as mp:  # the hit path is chosen when the agent's DNS server is made
        mp.setenv("NODEDNS_HIT_PATH", path)
        agent = RunningAgent({"manifests": str(EXAMPLE), "allow-from": "127.0.0.1/32,127.0.0.2/32"}).start()
    burst, hit = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        burst.bind(("127.0.0.1", 0))
        hit.bind(("127.0.0.2", 0))
        try:  # 2,000 replies queue here: past net.core.rmem_max when root may (CI runs as root)
            burst.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 8 << 20)
        except PermissionError:
            burst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        for s in (burst, hit):
            s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # each reply stamped as it arrives
        stored = make_query("kubernetes.default.svc.cluster.local.", 1, qid=1)
        for s, wire in ((burst, make_query("nothing-here.default.svc.cluster.local.", 1, qid=2)), (hit, stored)):
            s.settimeout(5)
            s.sendto(wire, (agent.host, agent.port))  # each client admitted; the cached answer stored
            s.recv(4096)
        entered, gate = threading.Event(), threading.Event()

        def hold() -> None:
            entered.set()
            gate.wait(10)

        agent.loop.call_soon_threadsafe(hold)
        assert entered.wait(10)
        try:
            for i in range(2000):
                burst.sendto(make_query(f"miss-{i}-{random.getrandbits(32)}.default.svc.cluster.local.", 1,
                                        qid=i), (agent.host, agent.port))
            hit.sendto(stored, (agent.host, agent.port))
        finally:
            gate.set()
        hit_at = arrival(hit)
        assert hit_at is not None, "the cached answer never came"
        times, order = [], []
        while len(times) < 2000:
            got = stamped(burst, timeout=2)
            if got is None:
                break
            times.append(got[0])
            order.append(struct.unpack("!H", got[1][:2])[0])
        assert order == sorted(order), "the misses waiting were not answered in the order they came"
        before = sum(1 for t in times if t < hit_at)  # by the kernel's arrival stamps, whoever ran when
        assert len(times) > 1500  # all of them, unless the kernel dropped some for a small rmem_max
        assert before < len(times) // 2, f"{before} of {len(times)} misses answered before the cached answer " \
                                         "queued behind them"
        deferred = agent.call(lambda: sum(ls.udp_deferred for ls in agent.agent.server.stats))
        assert deferred > 0
    finally:
        burst.close()
        hit.close()
        agent.stop()


@pytest.mark.parametrize("path", ["c", "python"])
def test_a_stored_answer_found_by_its_canonical_key_is_counted_for_insight(path: str) -> None:
    """A query in odd case (0x20) misses the hit path's byte-for-byte lookup and is answered from the stored
    answer by its case-folded key (`UDPListener.general`): insight counts it for its client, as any hit."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NODEDNS_HIT_PATH", path)
        agent = RunningAgent({"manifests": str(EXAMPLE), "allow-from": "127.0.0.1/32", "insight": "on"}).start()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(5)
        for name in ("kubernetes.default.svc.cluster.local.", "KuBeRnEtEs.default.svc.cluster.local."):
            sock.sendto(make_query(name, 1, qid=7), (agent.host, agent.port))
            sock.recv(4096)  # the first admits the client and stores the answer
        agent.call(agent.agent.insight_feed.rows)  # what was counted so far, handed on
        for _ in range(5):
            sock.sendto(make_query("KuBeRnEtEs.default.svc.cluster.local.", 1, qid=8), (agent.host, agent.port))
            assert dns.message.from_wire(sock.recv(4096)).rcode() == dns.rcode.NOERROR
        rows = agent.call(agent.agent.insight_feed.rows)
        assert sum(r.answers for r in rows if r.client == "127.0.0.1") == 5, rows
    finally:
        sock.close()
        agent.stop()


def test_misses_that_come_one_at_a_time_are_answered_at_once_never_queued() -> None:
    """The slow path's time is counted per wake-up of the listener: a miss that comes alone (the previous
    one answered) is answered in its own wake-up, however long the listener has been running."""
    agent = RunningAgent({"manifests": str(EXAMPLE), "allow-from": "127.0.0.1/32"}).start()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(5)
        for i in range(40):
            sock.sendto(make_query(f"alone-{i}.default.svc.cluster.local.", 1, qid=i), (agent.host, agent.port))
            sock.recv(4096)
            time.sleep(0.005)  # longer than a wake-up's slow-path time
        deferred = agent.call(lambda: sum(ls.udp_deferred for ls in agent.agent.server.stats))
        assert deferred == 0
    finally:
        sock.close()
        agent.stop()


def test_an_entry_asked_in_its_life_is_refreshed_at_its_prefetch_point_though_nobody_asks_then() -> None:
    """Refresh ahead: an entry asked in its life is refreshed by the once-a-second look when it reaches its
    prefetch point, with no query then (a gap in the traffic), and kept hot until then; its refreshed copy is
    hot too but not asked: at its own prefetch point it leaves the hot dict, so the first query then comes
    to the resolver and starts the refresh, and one nobody asks is not refreshed again (a name nobody asks
    costs the upstream one refresh, not one a TTL)."""

    async def main() -> None:
        clock = Clock()
        upstream = CountingUpstream()
        resolver = _resolver(upstream, clock)
        cache = resolver.forward_cache
        assert cache is not None
        name, other = "busy.example.com", "idle.example.com"
        key, okey = (parse_query(make_query(n, 1)).key for n in (name, other))

        def second() -> None:
            clock.now += 1
            cache.tick()
            cache.stage(limit=1000)

        await _ask(resolver, name)  # type: ignore[misc]
        await _ask(resolver, other)  # type: ignore[misc]
        hot = 0
        for _ in range(25):  # nobody asks: both kept hot (asked in their life) up to their prefetch point
            second()
            hot += key in cache.hot and okey in cache.hot
        assert hot == 25 and upstream.asked == [name, other] and cache.stats["refreshed_ahead"] == 0
        second()  # past both prefetch points: refreshed now, no query
        await asyncio.sleep(0.01)
        assert sorted(upstream.asked[2:]) == sorted([name, other])
        assert cache.stats["refreshed_ahead"] == 2 and resolver.stats["prefetch"] == 2
        entry = cache.get(key)
        assert entry is not None and entry.expires == int(clock.now) + 30 and not entry.asked  # the refreshed copy
        assert key in cache.hot and okey in cache.hot  # hot at once: the hit path answers it
        while clock.now + 2 < entry.prefetch_at:
            second()
            assert key in cache.hot and okey in cache.hot
        second()  # its prefetch point: not asked through the resolver, so not refreshed ahead: both leave
        await asyncio.sleep(0.01)
        assert key not in cache.hot and okey not in cache.hot and upstream.asked[4:] == []
        answer = _ask(resolver, name)  # `name` asked again: the resolver serves it (asked in this life), hot again
        assert isinstance(answer, bytes) and answer[3] & 0xF == RCODE.NOERROR and key in cache.hot
        second()  # its look: asked, at its prefetch point: refreshed ahead
        await asyncio.sleep(0.01)
        assert upstream.asked[4:] == [name]  # `other`, never asked, is left to expire
        assert cache.stats["refreshed_ahead"] == 3 and resolver.stats["prefetch"] == 3

    uvloop.run(main())


def test_refreshes_ahead_beyond_the_caps_wait_in_order_and_start_as_slots_free_without_a_query() -> None:
    """More entries come due in one second than the caps start at once (PREFETCH_PER_TURN a turn,
    PREFETCH_IN_FLIGHT in flight): the rest wait, in the order they came due, and start as refreshes end
    and turns pass, with no query and no further second: every one refreshed once."""
    names = [f"n{i}.example.com" for i in range(PREFETCH_IN_FLIGHT + 2 * PREFETCH_PER_TURN + 3)]

    async def main() -> None:
        clock = Clock()
        upstream = SlowUpstream()
        resolver = _resolver(upstream, clock)
        cache = resolver.forward_cache
        assert cache is not None
        await asyncio.gather(*[_ask(resolver, n) for n in names])  # type: ignore[misc]
        upstream.release.clear()
        upstream.asked.clear()
        for _ in range(26):
            cache.stage(limit=1000)
            clock.now += 1
            cache.tick()
        cache.stage(limit=1000)  # every entry past its prefetch point next second
        for _ in range(10):
            await asyncio.sleep(0)
        assert upstream.waiting == PREFETCH_IN_FLIGHT  # no more than that in flight, the rest wait
        assert cache.stats["refreshed_ahead"] == len(names)  # all handed on, none dropped
        upstream.release.set()
        for _ in range(50):
            await asyncio.sleep(0)
        assert upstream.asked == names and upstream.waiting == 0  # each once, in the order they came due

    uvloop.run(main())


def test_a_refresh_ahead_in_flight_over_several_seconds_is_started_once_and_the_entry_left_to_its_queries() -> None:
    """A slow upstream keeps a refresh ahead in flight past the turns of several seconds: it is started (and
    counted) once; meanwhile the entry is no longer kept hot by the staging (a query renders it, marked asked
    again, and is answered from the cache: nobody waits), and no second refresh is asked of the upstream."""

    async def main() -> None:
        clock = Clock()
        upstream = SlowUpstream()
        resolver = _resolver(upstream, clock)
        cache = resolver.forward_cache
        assert cache is not None
        name = "slow.example.com"
        key = parse_query(make_query(name, 1)).key
        await _ask(resolver, name)  # type: ignore[misc]
        upstream.release.clear()
        upstream.asked.clear()
        for _ in range(26):
            cache.stage(limit=1000)
            clock.now += 1
            cache.tick()
        for _ in range(3):  # three seconds with the refresh in flight
            cache.stage(limit=1000)
            await asyncio.sleep(0)
            clock.now += 1
            cache.tick()
        assert upstream.waiting == 1  # one question in flight
        assert cache.stats["refreshed_ahead"] == 1 and resolver.stats["prefetch"] == 1
        assert key not in cache.hot  # not kept hot by the staging while its refresh is in flight
        answer = _ask(resolver, name)  # answered from the cache at once, no second upstream question
        assert isinstance(answer, bytes) and answer[3] & 0xF == RCODE.NOERROR
        await asyncio.sleep(0)
        assert upstream.waiting == 1
        upstream.release.set()
        await asyncio.sleep(0.01)
        assert upstream.asked == [name]
        entry = cache.get(key)
        assert entry is not None and entry.expires == int(clock.now) + 30  # the refreshed copy

    uvloop.run(main())


def test_a_refreshed_copy_the_hit_path_answers_before_its_prefetch_point_is_refreshed_ahead_again() -> None:
    """A refreshed copy is answered by the hit paths without the resolver: the templates they answered in the
    last second (`ForwardCache.asked`, added by both hit paths) count as asked at its prefetch point, so a
    name in steady use is refreshed ahead life after life with no query through Python; one the hit paths did
    not answer then leaves the hot dict."""

    async def main() -> None:
        clock = Clock()
        upstream = CountingUpstream()
        resolver = _resolver(upstream, clock)
        cache = resolver.forward_cache
        assert cache is not None
        name, other = "busy.example.com", "idle.example.com"
        key, okey = (parse_query(make_query(n, 1)).key for n in (name, other))
        await _ask(resolver, name)  # type: ignore[misc]
        await _ask(resolver, other)  # type: ignore[misc]
        for life in range(3):
            entry = cache.get(key)
            assert entry is not None and (life == 0 or not entry.asked)
            while clock.now + 2 < entry.prefetch_at:
                clock.now += 1
                cache.tick()
                cache.stage(limit=1000)
                cache.asked.add(cache.hot.view[key])  # a hit path answered `name` this second, never `other`
                await asyncio.sleep(0)
            clock.now += 1
            cache.tick()
            cache.stage(limit=1000)
            await asyncio.sleep(0.01)
            assert upstream.asked.count(name) == 2 + life, life  # refreshed ahead each life, no query
            assert key in cache.hot
        assert upstream.asked.count(other) == 2 and okey not in cache.hot  # refreshed once, then left
        assert resolver.stats["prefetch"] == cache.stats["refreshed_ahead"] == 4

    uvloop.run(main())

