"""The life of a forward-cache entry as a state machine, checked against a small reference model after
every step: stored fresh, its prefetch point, the refresh a query starts there, stale within
--serve-stale, last-known-good over an upstream's NXDOMAIN within --stale-nxdomain, evicted least
recently used when the byte budget is spent, handed over to a successor; on a fake clock, with every
boundary (the second an entry expires, its prefetch point, the end of each window) reached exactly.

The model is written from docs/cache.md's promises, not from the store's code: an answer stored at
second S with TTL T is fresh while the clock is below S + T; a query from the prefetch point on (10% of
T, at least 1 s, left; moved earlier by the drawn share of another 10%) refreshes it; after expiry it is
served stale for --serve-stale, and a positive one as last-known-good over a denial for --stale-nxdomain
(however much shorter --serve-stale is), counted from the first denial; a successor holds what its
predecessor held, with the time each had left, and refreshes it at the same point; an answer rendered
ahead for the next second (the hit path's, for a name asked only over UDP) never hides its prefetch
point from the resolver."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import dns.flags
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rrset
from cachetools import Cache
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from nodedns.dns.hot import HotTable
from nodedns.dns.keys import fast_key
from nodedns.forward.store import NEGATIVE, POSITIVE, ForwardCache

SUCCESS_TTL = 30
DENIAL_TTL = 5
JITTER = 0.5  # the drawn share of the prefetch spread, fixed so the model can say the point
NAMES = [f"n{i}.example.com" for i in range(6)]
BUDGET_ENTRIES = 64  # the budget holds about this many of the answers below (the largest one is 1/64 of it)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _query(name: str) -> dns.message.Message:
    return dns.message.make_query(name, "A", use_edns=None)


@functools.lru_cache(maxsize=4096)
def key_of(name: str) -> bytes:
    fk = fast_key(_query(name).to_wire())
    assert fk is not None
    return fk[0]


@functools.lru_cache(maxsize=4096)
def positive(name: str, ttl: int) -> bytes:
    r = dns.message.make_response(_query(name))
    r.answer.append(dns.rrset.from_text(name + ".", ttl, dns.rdataclass.IN, "A", "192.0.2.1"))
    return r.to_wire()


@functools.lru_cache(maxsize=4096)
def denial(name: str, ttl: int) -> bytes:
    r = dns.message.make_response(_query(name))
    r.set_rcode(dns.rcode.NXDOMAIN)
    r.authority.append(dns.rrset.from_text("example.com.", ttl, dns.rdataclass.IN, "SOA",
                                           f"ns.example.com. h.example.com. 1 2 3 4 {ttl}"))
    return r.to_wire()


@dataclass
class Model:
    kind: str
    ttl: int
    expires: int
    stale_until: float
    prefetch_at: float
    denied_since: float = 0.0


class ForwardEntryLife(RuleBasedStateMachine):
    """Drives a ForwardCache (and its successors) with the queries and upstream answers of a resolver."""

    @initialize(serve_stale=st.sampled_from([0.0, 10.0, 40.0]), stale_nxdomain=st.sampled_from([0.0, 20.0, 90.0]),
                start=st.floats(1000.0, 1001.0))
    def start(self, serve_stale: float, stale_nxdomain: float, start: float) -> None:
        self.clock = Clock(start)
        self.serve_stale = serve_stale
        self.stale_nxdomain = stale_nxdomain
        probe = ForwardCache(hot=HotTable(), clock=self.clock, jitter=lambda: JITTER)
        size = probe.admit(key_of("f999.example.com"), positive("f999.example.com", 30))[1]
        assert size is not None
        self.max_bytes = size.size * BUDGET_ENTRIES
        self.cache = self._new_cache()
        self.model: dict[str, Model] = {}
        self.order: dict[str, list[str]] = {POSITIVE: [], NEGATIVE: []}  # least recently used first
        self.inserted: dict[str, list[str]] = {POSITIVE: [], NEGATIVE: []}  # the order they were stored in
        self.evictions = 0
        self.flooded = 0
        self.loaded: set[str] = set()  # handed over and not used since: older than the rest, in no known order

    def _new_cache(self) -> ForwardCache:
        return ForwardCache(hot=HotTable(), clock=self.clock, serve_stale=self.serve_stale,
                            stale_nxdomain=self.stale_nxdomain,
                            success_ttl=SUCCESS_TTL, denial_ttl=DENIAL_TTL, max_bytes=self.max_bytes,
                            jitter=lambda: JITTER)

    # -- the model's bookkeeping ---------------------------------------------------------------

    def _forget(self, name: str) -> None:
        m = self.model.pop(name, None)
        if m is not None:
            self.order[m.kind].remove(name)
            self.inserted[m.kind].remove(name)

    def _touch(self, name: str) -> None:
        self.loaded.discard(name)
        m = self.model[name]
        self.order[m.kind].remove(name)
        self.order[m.kind].append(name)

    def _store(self, name: str, response: bytes, kind: str, ttl: int) -> None:
        before = sum(self.cache.evictions().values())
        self._forget(name)
        self.loaded.discard(name)
        _wire, entry = self.cache.admit(key_of(name), response)
        assert entry is not None, f"{name} with TTL {ttl} was not stored"
        now = self.clock.now
        expires = int(now) + ttl
        window = max(self.serve_stale, self.stale_nxdomain) if kind == POSITIVE else self.serve_stale
        point = expires - max(1, math.ceil(ttl * 0.1)) - JITTER * ttl * 0.1
        self.model[name] = Model(kind, ttl, expires, expires + window, point)
        self.order[kind].append(name)
        self.inserted[kind].append(name)
        self.evictions += sum(self.cache.evictions().values()) - before
        other = NEGATIVE if kind == POSITIVE else POSITIVE
        if any(not self._held(n) for n in self.order[other] if now < self.model[n].stale_until):
            mine = [n for n in self.order[kind] if n != name and now < self.model[n].stale_until and self._held(n)]
            assert not mine, f"{other} entries evicted while {kind} still held {mine}: the store written to goes first"
        self._account_evictions()

    def _held(self, name: str) -> bool:
        key = key_of(name)
        return any(s is not None and key in s for s in (self.cache.success, self.cache.denial))

    def _account_evictions(self) -> None:
        """The entries the model still holds that the cache let go: the byte budget's LRU evictions, as
        many as it counted, each the least recently used of its store."""
        now = self.clock.now
        gone = [n for n, m in self.model.items() if now < m.stale_until and not self._held(n)]
        assert len(gone) <= self.evictions, f"{gone} left the cache before their window ended ({self.model})"
        for kind in (POSITIVE, NEGATIVE):
            live = [n for n in self.order[kind] if now < self.model[n].stale_until and n not in self.loaded]
            held = [self._held(n) for n in live]
            assert held == sorted(held), f"{kind}: not the least recently used evicted first: {live} {held}"
            handed = [n for n in self.order[kind] if now < self.model[n].stale_until and n in self.loaded]
            if any(self._held(n) for n in handed):
                assert all(held), f"{kind}: evicted {live} before what was handed over and not used since"
        for n in gone:
            self._forget(n)
        self.evictions -= len(gone)

    # -- what happens to the cache -------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), ttl=st.integers(1, 45))
    def an_upstream_answers(self, name: str, ttl: int) -> None:
        self._store(name, positive(name, ttl), POSITIVE, min(ttl, SUCCESS_TTL))

    @rule(name=st.sampled_from(NAMES))
    def an_upstream_answers_with_ttl_0(self, name: str) -> None:
        """TTL 0: served, never stored, and what was stored for the name goes (docs/cache.md)."""
        _wire, entry = self.cache.admit(key_of(name), positive(name, 0))
        assert entry is None
        self._forget(name)
        assert not self._held(name) and self.cache.get(key_of(name)) is None

    @rule(name=st.sampled_from(NAMES), ttl=st.integers(1, 8))
    def an_upstream_denies_a_name_not_held(self, name: str, ttl: int) -> None:
        m = self.model.get(name)
        if m is not None and m.kind == POSITIVE and self.clock.now < m.stale_until:
            return  # the rule below: a denial of a held positive answer
        self._store(name, denial(name, ttl), NEGATIVE, min(ttl, DENIAL_TTL))

    @rule(name=st.sampled_from(NAMES))
    def an_upstream_denies_a_held_answer(self, name: str) -> None:
        """What the resolver does with an NXDOMAIN for an answer it holds positive: last-known-good while
        --stale-nxdomain allows (counted from the first denial), else the denial is stored."""
        m = self.model.get(name)
        entry = self.cache.get(key_of(name))
        now = self.clock.now
        if m is None or now >= m.stale_until:
            assert entry is None, f"{name}: held after its window"
            return
        self._touch(name)
        assert entry is not None
        expected = (m.kind == POSITIVE and self.stale_nxdomain > 0
                    and (not m.denied_since or now < m.denied_since + self.stale_nxdomain))
        assert self.cache.last_known_good(entry, now) == expected, (name, m, now)
        if expected:
            if not entry.denied_since:
                entry.denied_since = m.denied_since = now
            assert self.cache.denied(entry, now)
        else:
            self._store(name, denial(name, 3), NEGATIVE, 3)

    @rule(name=st.sampled_from(NAMES))
    def a_client_asks(self, name: str) -> None:
        """A query reaching the resolver: fresh, due for its refresh (which the upstream answers with the
        same TTL), stale or gone, as the model says."""
        m = self.model.get(name)
        now = self.clock.now
        entry = self.cache.get(key_of(name))
        if m is None or now >= m.stale_until:
            assert entry is None, f"{name}: held at {now} past its window ({m})"
            self._forget(name)
            return
        assert entry is not None, f"{name}: gone at {now} within its window ({m})"
        self._touch(name)
        assert entry.kind == m.kind and entry.expires == m.expires, (entry.kind, entry.expires, m)
        fresh = int(now) < m.expires
        assert self.cache.fresh(entry, now) == fresh, (name, now, m)
        assert self.cache.stale_usable(entry, now) == (now < m.expires + self.serve_stale), (name, now, m)
        due = now >= m.prefetch_at
        assert self.cache.near_expiry(entry, now) == due, (name, now, m, entry.prefetch_at)
        if fresh and due and not m.denied_since:
            self._store(name, positive(name, m.ttl) if m.kind == POSITIVE else denial(name, m.ttl), m.kind, m.ttl)

    @rule(seconds=st.floats(0.01, 50.0))
    def time_passes(self, seconds: float) -> None:
        self.clock.now += seconds

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), before=st.booleans(),
          edge=st.sampled_from(["expires", "stale_until", "prefetch_at", "serve_stale", "stale_nxdomain"]))
    def time_reaches_a_boundary(self, data: st.DataObject, edge: str, before: bool) -> None:
        name = data.draw(st.sampled_from(sorted(self.model)))
        m = self.model[name]
        if edge == "stale_nxdomain":
            if not m.denied_since:
                return
            at = m.denied_since + self.stale_nxdomain
        elif edge == "serve_stale":
            at = m.expires + self.serve_stale
        else:
            at = getattr(m, edge)
        at -= 1e-6 if before else 0.0
        if at > self.clock.now:
            self.clock.now = at
        self._decisions(name)

    def _decisions(self, name: str) -> None:
        """What the cache decides for the name now (looked at without using it) is what the model says."""
        m = self.model[name]
        now = self.clock.now
        key = key_of(name)
        store = self.cache.success if m.kind == POSITIVE else self.cache.denial
        assert store is not None
        if now >= m.stale_until:
            assert key not in store, f"{name}: held at {now} past its window ({m})"
            return
        if not Cache.__contains__(store, key):
            return  # evicted: _account_evictions says whether it could be
        entry = Cache.__getitem__(store, key)
        assert self.cache.fresh(entry, now) == (int(now) < m.expires), (name, now, m)
        assert self.cache.stale_usable(entry, now) == (now < m.expires + self.serve_stale), (name, now, m)
        assert self.cache.near_expiry(entry, now) == (now >= m.prefetch_at), (name, now, m, entry.prefetch_at)
        lkg = (m.kind == POSITIVE and self.stale_nxdomain > 0
               and (not m.denied_since or now < m.denied_since + self.stale_nxdomain))
        assert self.cache.last_known_good(entry, now) == lkg, (name, now, m)

    @rule()
    def a_flood_of_new_names_fills_the_budget(self) -> None:
        for _ in range(BUDGET_ENTRIES // 2):
            self.flooded += 1
            name = f"f{self.flooded}.example.com"
            self._store(name, positive(name, SUCCESS_TTL), POSITIVE, SUCCESS_TTL)
        assert self.cache.bytes_used() <= self.max_bytes

    @rule()
    def a_successor_takes_over(self) -> None:
        """Hand-over: the successor stores what the predecessor still could use, with the time each had
        left, in the order they were stored (its least recently used first)."""
        data = self.cache.export()
        self.cache = self._new_cache()
        self.cache.load(data)
        now = self.clock.now
        for kind in (POSITIVE, NEGATIVE):
            self.order[kind] = [n for n in self.inserted[kind] if now < self.model[n].stale_until]
            self.inserted[kind] = list(self.order[kind])
        for name in [n for n, m in self.model.items() if now >= m.stale_until]:
            del self.model[name]
        self.loaded = set(self.model)
        for name, m in self.model.items():
            key = key_of(name)
            store = self.cache.success if m.kind == POSITIVE else self.cache.denial
            assert store is not None and Cache.__contains__(store, key), f"{name} not handed over"
            entry = Cache.__getitem__(store, key)
            assert (entry.expires, entry.denied_since) == (m.expires, m.denied_since), (name, m)

    @rule(turns=st.integers(1, 3))
    def the_hit_path_answers_for_a_few_seconds(self, turns: int) -> None:
        """Names asked only over UDP: the resolver serves each once, then the hit path answers from its hot
        template, second after second. What is hot in a second, once the second's turn is done, is fresh
        all of it and short of its prefetch point, so the first query at that point reaches the resolver."""
        self.clock.now = now = math.floor(self.clock.now) + 1.0  # from the start of a second: its answers are these
        answered = []  # the names answered this second, in order
        for name, m in list(self.model.items()):
            if int(now) < m.expires and not m.denied_since:
                entry = self.cache.get(key_of(name))
                assert entry is not None
                self._touch(name)
                self.cache.serve(key_of(name), entry, now)
                answered.append(name)
        for _ in range(turns):
            self.clock.now = math.floor(self.clock.now) + 1.0
            self.cache.tick()
            key_names = {key_of(n): n for n in self.model}
            for key in list(self.cache._kept):  # the hot answers, used at the turn (in the order they became hot)
                if key in key_names:
                    self._touch(key_names[key])
            while self.cache.stage(limit=1000):  # the hot answers whose second has come, looked at after the turn
                pass
            second = int(self.clock.now)
            answered = [n for n in answered if key_of(n) in self.cache.hot.view]
            for key in self.cache.hot.view:
                name = key_names.get(key)
                if name is None:
                    continue
                m = self.model[name]
                assert second < m.expires, f"{name} put hot for second {second}, expired at {m.expires}"
                assert m.prefetch_at >= second + 1, \
                    f"{name} put hot for second {second}: its prefetch point {m.prefetch_at} is never seen"

    @invariant()
    def within_the_byte_budget(self) -> None:
        if hasattr(self, "cache"):
            assert self.cache.bytes_used() <= self.max_bytes


ForwardEntryLife.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None,
                                              suppress_health_check=[HealthCheck.too_slow])
test_a_forward_cache_entry_lives_as_the_model_says = ForwardEntryLife.TestCase
