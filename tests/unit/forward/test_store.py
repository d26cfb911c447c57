"""The forward cache (pure): templates, TTL caps, RFC 2308 negative TTLs, per-second rendering, expiry,
serve-stale windows, eviction and prefetch timing, all on an injected clock."""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rrset
import pytest

from nodedns.dns.hot import HotTable
from nodedns.dns.keys import fast_key
from nodedns.errors import FormatError
from nodedns.forward.store import NEGATIVE, POSITIVE, SERVFAIL, STALE_TTL, ForwardCache, make_template


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def query(name: str = "www.example.com", rdtype: str = "A", edns: int | None = None, do: bool = False
          ) -> dns.message.Message:
    return dns.message.make_query(name, rdtype, use_edns=edns, want_dnssec=do)


def key_of(q: dns.message.Message) -> bytes:
    fk = fast_key(q.to_wire())
    assert fk is not None
    return fk[0]


def response(q: dns.message.Message, *, rcode: int = 0, answer: list[tuple[str, int, str, str]] | None = None,
             soa: tuple[int, int] | None = None, edns: bool = False) -> bytes:
    r = dns.message.make_response(q)
    r.flags |= dns.flags.AA
    r.set_rcode(rcode)
    for name, ttl, rdtype, value in answer or []:
        r.answer.append(dns.rrset.from_text(name, ttl, dns.rdataclass.IN, rdtype, value))
    if soa is not None:
        ttl, minimum = soa
        r.authority.append(dns.rrset.from_text(
            "example.com.", ttl, dns.rdataclass.IN, "SOA", f"ns.example.com. h.example.com. 1 2 3 4 {minimum}"))
    if edns:
        r.use_edns(0, payload=4096, options=[dns.edns.GenericOption(10, b"cookie12")])  # a cookie to strip
    return r.to_wire()


class LiveView(Mapping[bytes, bytes]):
    """The hot table as a client is answered from it now: a forwarded template with its TTLs set for the
    cache's second, gone once its expiry second has come."""

    def __init__(self, hot: HotTable) -> None:
        self.hot = hot

    def __getitem__(self, key: bytes) -> bytes:
        w = self.hot.get(key)
        if w is None:
            raise KeyError(key)
        return w

    def __iter__(self) -> Iterator[bytes]:
        return iter([k for k in self.hot.view if self.hot.get(k) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


def make_cache(clock: Clock, **kw: object) -> tuple[ForwardCache, LiveView]:
    hot = HotTable()
    return ForwardCache(hot=hot, clock=clock, **kw), LiveView(hot)  # type: ignore[arg-type]


def ttls(wire: bytes) -> list[int]:
    msg = dns.message.from_wire(wire)
    return [rrset.ttl for section in (msg.answer, msg.authority) for rrset in section]


A_RECORD = [("www.example.com.", 300, "A", "192.0.2.1")]


@pytest.mark.parametrize(
    ("answer", "soa", "rcode", "kind", "ttl"),
    [
        (A_RECORD, None, 0, POSITIVE, 30),  # capped by the success TTL
        ([("www.example.com.", 7, "A", "192.0.2.1")], None, 0, POSITIVE, 7),  # the record's own TTL
        ([], (60, 3), dns.rcode.NXDOMAIN, NEGATIVE, 3),  # SOA MINIMUM below the SOA TTL
        ([], (2, 60), dns.rcode.NXDOMAIN, NEGATIVE, 2),  # SOA TTL below the MINIMUM
        ([], (60, 60), dns.rcode.NXDOMAIN, NEGATIVE, 5),  # capped by the denial TTL
        ([], (60, 4), 0, NEGATIVE, 4),  # NODATA
        ([], None, dns.rcode.SERVFAIL, SERVFAIL, 5),  # the servfail TTL
    ],
    ids=["positive-capped", "positive-own-ttl", "nxdomain-soa-minimum", "nxdomain-soa-ttl", "nxdomain-capped",
         "nodata", "servfail"],
)
def test_admitted_answers_get_their_rfc_2308_ttl(answer: list[tuple[str, int, str, str]],
                                                 soa: tuple[int, int] | None, rcode: int, kind: str,
                                                 ttl: int) -> None:
    clock = Clock()
    cache, hot = make_cache(clock)
    q = query()
    key = key_of(q)
    wire, entry = cache.admit(key, response(q, rcode=rcode, answer=answer, soa=soa))
    assert entry is not None and entry.kind == kind and entry.ttl == ttl
    assert hot[key] == wire
    if kind != SERVFAIL:
        assert set(ttls(wire)) == {ttl}


@pytest.mark.parametrize(
    ("rcode", "answer", "soa"),
    [(dns.rcode.NXDOMAIN, [], None), (0, [("www.example.com.", 0, "A", "192.0.2.1")], None),
     (dns.rcode.REFUSED, [], None)],
    ids=["nxdomain-without-soa", "ttl-zero", "refused"],
)
def test_uncacheable_answers_are_served_but_not_kept(rcode: int, answer: list[tuple[str, int, str, str]],
                                                     soa: tuple[int, int] | None) -> None:
    cache, hot = make_cache(Clock())
    q = query()
    key = key_of(q)
    wire, entry = cache.admit(key, response(q, rcode=rcode, answer=answer, soa=soa))
    assert entry is None and cache.get(key) is None and key not in hot
    assert dns.message.from_wire(wire).rcode() == rcode


def test_ttls_count_down_once_per_second_from_one_stored_template() -> None:
    clock = Clock(1000.4)
    cache, hot = make_cache(clock)
    q = query()
    key = key_of(q)
    cache.admit(key, response(q, answer=A_RECORD))
    entry = cache.get(key)
    assert entry is not None and hot.hot.view[key] is entry.wire  # the entry's own bytes, not a copy
    clock.now = 1000.9
    assert cache.tick() == pytest.approx(0.1)
    assert ttls(hot[key]) == [30]  # same second
    clock.now = 1003.2
    cache.tick()
    assert ttls(hot[key]) == [27]  # counted down where it is sent, never written again
    assert hot.hot.view[key] is entry.wire and cache.stats["renders"] == 1
    assert ttls(cache.serve(key, entry, clock.now)) == [27]
    clock.now = 1003.9
    assert ttls(hot[key]) == [27] and ttls(cache.serve(key, entry, clock.now)) == [27]  # whole seconds


def stored_a_record(clock: Clock, **kw: object) -> tuple[ForwardCache, bytes]:
    """A cache holding the answer of www.example.com A (TTL capped to 30 s), and its key."""
    cache, _ = make_cache(clock, **kw)
    q = query()
    key = key_of(q)
    cache.admit(key, response(q, answer=A_RECORD))
    return cache, key


def test_an_entry_expires_then_stays_stale_for_the_serve_stale_window() -> None:
    clock = Clock(1000.0)
    cache, key = stored_a_record(clock, serve_stale=100.0)
    clock.now = 1030.0
    entry = cache.get(key)
    assert entry is not None and not cache.fresh(entry, clock.now) and cache.stale_usable(entry, clock.now)
    assert ttls(cache.serve_stale_answer(key, entry, clock.now)) == [STALE_TTL]
    clock.now = 1130.5
    assert cache.get(key) is None


def test_without_serve_stale_an_expired_entry_is_gone() -> None:
    clock = Clock(1000.0)
    cache, key = stored_a_record(clock, serve_stale=0.0)
    clock.now = 1030.0
    assert cache.get(key) is None


def test_the_least_recently_used_entry_is_evicted_when_the_store_is_full() -> None:
    clock = Clock()
    cache, _ = make_cache(clock, success_size=2)
    keys = []
    for name in ("a.example.com", "b.example.com", "c.example.com"):
        q = query(name)
        keys.append(key_of(q))
        if len(keys) == 3:
            assert cache.get(keys[0]) is not None  # a is used: b is now the least recent
        cache.admit(keys[-1], response(q, answer=[(name + ".", 300, "A", "192.0.2.1")]))
    assert [cache.get(k) is not None for k in keys] == [True, False, True]
    assert cache.counts()["evictions"] == 1


def test_denial_and_success_have_separate_sizes() -> None:
    cache, _ = make_cache(Clock(), success_size=1, denial_size=1)
    q1, q2 = query("a.example.com"), query("b.example.com")
    cache.admit(key_of(q1), response(q1, answer=[("a.example.com.", 300, "A", "192.0.2.1")]))
    cache.admit(key_of(q2), response(q2, rcode=dns.rcode.NXDOMAIN, soa=(60, 60)))
    assert cache.get(key_of(q1)) is not None and cache.get(key_of(q2)) is not None


@pytest.mark.parametrize(
    ("jitter", "elapsed", "due"),
    [(0.999, 23.0, False), (0.999, 24.1, True), (0.5, 25.4, False), (0.5, 25.6, True)],
    ids=["spread-end-with-7s-left", "spread-end-with-5.9s-left", "mid-spread-with-4.6s-left",
         "mid-spread-with-4.4s-left"],
)
def test_the_prefetch_point_moves_up_to_another_tenth_of_the_ttl_earlier(jitter: float, elapsed: float,
                                                                         due: bool) -> None:
    clock = Clock(1000.0)
    cache, _ = make_cache(clock, jitter=lambda: jitter)
    q = query()
    _, entry = cache.admit(key_of(q), response(q, answer=[("www.example.com.", 30, "A", "192.0.2.1")]))
    assert entry is not None
    clock.now += elapsed
    assert cache.prefetch_due(entry, clock.now) is due


def test_entries_stored_in_the_same_second_come_due_spread_over_a_tenth_of_the_ttl() -> None:
    clock = Clock(1000.0)
    cache, _ = make_cache(clock)  # the real random spread
    entries = []
    for i in range(200):
        q = query(f"n{i}.example.com")
        entries.append(cache.admit(key_of(q), response(q, answer=[(f"n{i}.example.com.", 30, "A", "192.0.2.1")]))[1])
    # the first moment each one is due, in steps of 0.1 s
    first = {id(e): next(t / 10 for t in range(300) if cache.near_expiry(e, clock.now + t / 10))
             for e in entries if e is not None}
    assert len(first) == 200
    assert min(first.values()) >= 24.0 and max(first.values()) <= 27.0
    by_second = [sum(1 for v in first.values() if s <= v < s + 1) for s in (24, 25, 26)]
    assert all(n >= 40 for n in by_second), by_second  # about a third each, not all in one second


@pytest.mark.parametrize(
    ("record_ttl", "elapsed", "due"),
    [(30, 26.0, False), (30, 27.0, True), (5, 3.0, False), (5, 4.0, True)],
    ids=["30s-with-4s-left", "30s-with-3s-left", "5s-with-2s-left", "5s-with-1s-left"],
)
def test_prefetch_is_due_in_the_last_tenth_of_the_ttl(record_ttl: int, elapsed: float, due: bool) -> None:
    clock = Clock(1000.0)
    cache, _ = make_cache(clock, jitter=lambda: 0.0)  # the latest point the spread allows
    q = query()
    key = key_of(q)
    _, entry = cache.admit(key, response(q, answer=[("www.example.com.", record_ttl, "A", "192.0.2.1")]))
    assert entry is not None
    clock.now += elapsed
    assert cache.prefetch_due(entry, clock.now) is due


@pytest.mark.parametrize(
    ("client_edns", "client_do", "upstream_edns"),
    [(None, False, False), (0, False, True), (0, True, True)],
    ids=["plain-client", "edns-client", "edns-client-with-do"],
)
def test_templates_carry_our_opt_only_when_the_client_sent_one(client_edns: int | None, client_do: bool,
                                                              upstream_edns: bool) -> None:
    q = query("WwW.Example.COM", edns=client_edns, do=client_do)
    key = key_of(q)
    t = make_template(key, response(q, answer=A_RECORD, edns=upstream_edns), udp_size=1232)
    msg = dns.message.from_wire(t.wire)
    assert msg.id == 0
    assert msg.question[0].name.to_text() == "www.example.com."
    assert not msg.flags & dns.flags.AA and msg.flags & dns.flags.RA
    if client_edns is None:
        assert msg.edns == -1
    else:
        assert msg.edns == 0 and msg.payload == 1232 and not msg.options
        assert bool(msg.ednsflags & dns.flags.DO) is client_do


# -- the forward cache across a hand-over (ForwardCache.export / load) -------------------------------


def filled(clock: Clock, **kw: object) -> tuple[ForwardCache, dict[str, bytes]]:
    """A cache with a positive answer, an NXDOMAIN, a SERVFAIL, an ExternalName-chase answer and an answer
    already past its stale window; the keys by what they are."""
    cache, _ = make_cache(clock, serve_stale=100.0, **kw)
    keys = {}
    q = query("pos.example.com")
    keys["positive"] = key_of(q)
    cache.admit(keys["positive"], response(q, answer=[("pos.example.com.", 300, "A", "192.0.2.1")]))
    q = query("nx.example.com")
    keys["negative"] = key_of(q)
    cache.admit(keys["negative"], response(q, rcode=dns.rcode.NXDOMAIN, soa=(60, 60)))
    q = query("fail.example.com")
    keys["servfail"] = key_of(q)
    cache.admit(keys["servfail"], response(q, rcode=dns.rcode.SERVFAIL))
    q = query("target.example.com")
    keys["cluster"] = key_of(q)
    cache.admit(keys["cluster"], response(q, answer=[("target.example.com.", 300, "A", "192.0.2.9")]), cluster=True)
    return cache, keys


def test_a_successor_takes_every_usable_entry_with_the_time_it_had_left() -> None:
    old_clock, new_clock = Clock(1000.0), Clock(5000.0)  # two processes: the times travel relative to now
    old, keys = filled(old_clock)
    old_clock.now = 1010.0
    pos = old.get(keys["positive"])
    assert pos is not None
    old.mark_failed(pos, old_clock.now, 20.0)
    pos.denied_since = old_clock.now - 2
    data = old.export()
    new, hot = make_cache(new_clock, serve_stale=100.0)
    assert new.load(data) == 2  # the positive and the NXDOMAIN; not the SERVFAIL, not the cluster answer
    assert new.get(keys["servfail"]) is None and new.get(keys["cluster"]) is None
    taken = new.get(keys["positive"])
    assert taken is not None and new.fresh(taken, new_clock.now)
    assert taken.expires == 5000 + 20  # stored at 1000 for 30 s (the cap): 20 s left at 1010
    assert taken.fail_until == pytest.approx(5020.0) and taken.denied_since == pytest.approx(4998.0)
    assert ttls(new.serve(keys["positive"], taken, new_clock.now)) == [20]
    assert dns.message.from_wire(hot[keys["positive"]]).answer[0][0].to_text() == "192.0.2.1"
    denied = new.get(keys["negative"])
    assert denied is not None and denied.kind == NEGATIVE and denied.expires == 5000 - 10 + 5  # 5 s cap, 10 s later
    new_clock.now = 5025.0  # past its TTL, within serve-stale: still usable as stale
    assert (e := new.get(keys["positive"])) is not None and new.stale_usable(e, new_clock.now)


def test_an_entry_the_successor_already_holds_and_one_past_its_window_stay_out() -> None:
    clock = Clock(1000.0)
    old, keys = filled(clock)
    q = query("pos.example.com")
    new, _ = make_cache(Clock(1000.0), serve_stale=100.0)
    new.admit(keys["positive"], response(q, answer=[("pos.example.com.", 300, "A", "192.0.2.77")]))
    assert new.load(old.export()) == 1  # the NXDOMAIN only: its own answer is newer
    kept = new.get(keys["positive"])
    assert kept is not None and dns.message.from_wire(kept.plain()).answer[0][0].to_text() == "192.0.2.77"
    clock.now = 1000.0 + 30 + 100 + 1  # every entry past its stale window
    assert ForwardCache(hot=HotTable(), clock=clock).load(old.export()) == 0


def test_the_successors_byte_budget_holds_over_a_larger_export() -> None:
    clock = Clock(1000.0)
    big, _ = make_cache(clock, max_bytes=64 << 20)
    for i in range(3000):
        q = query(f"h{i}.example.com")
        big.admit(key_of(q), response(q, answer=[(f"h{i}.example.com.", 300, "A", "192.0.2.1")]))
    small, _ = make_cache(clock, max_bytes=4 << 20, success_size=1000)
    assert small.load(big.export()) == 3000  # each stored, the oldest evicted as for any insert
    assert len(small.success) == 1000 and small.bytes_used() <= 4 << 20  # type: ignore[arg-type]


@pytest.mark.parametrize("damage", ["magic", "cut", "count", "offset", "kind"])
def test_a_damaged_export_is_refused(damage: str) -> None:
    clock = Clock(1000.0)
    old, _ = filled(clock)
    data = bytearray(old.export())
    from nodedns.forward.store import _WARM_ENTRY, WARM_MAGIC  # noqa: PLC0415 - the format's own layout
    first = len(WARM_MAGIC)
    if damage == "magic":
        data[0] ^= 0xFF
    elif damage == "cut":
        del data[-10:]
    elif damage == "count":
        data[-1] ^= 0x01
    elif damage == "offset":  # a TTL offset past the end of its answer
        klen, wlen = struct.unpack_from("=HI", data, first + _WARM_ENTRY.size - 8)
        struct.pack_into("=H", data, first + _WARM_ENTRY.size + klen + wlen, wlen)
    else:
        data[first] = 9
    with pytest.raises(FormatError):
        ForwardCache(hot=HotTable(), clock=clock).load(bytes(data))


def _entry_field(data: bytearray, index: int, value: float | int) -> None:
    """Overwrite one field of the first exported entry (the `_WARM_ENTRY` layout) with `value`."""
    from nodedns.forward.store import _WARM_ENTRY, WARM_MAGIC  # noqa: PLC0415 - the format's own layout
    fields = list(_WARM_ENTRY.unpack_from(data, len(WARM_MAGIC)))
    fields[index] = value
    _WARM_ENTRY.pack_into(data, len(WARM_MAGIC), *fields)


@pytest.mark.parametrize(("index", "value"), [
    (3, float("inf")), (3, float("nan")), (3, -float("inf")), (3, 1e300),  # the expiry
    (4, float("inf")), (4, float("nan")),  # the end of the stale window
    (5, float("nan")), (6, float("inf")),  # the failure and denial times
    (2, -1),  # a negative TTL
    (1, 0xFFFF),  # an rcode past 12 bits
    (3, 10_000.0),  # an expiry after the end of its stale window
], ids=["expiry-inf", "expiry-nan", "expiry-minus-inf", "expiry-far", "stale-inf", "stale-nan", "fail-nan",
        "denied-inf", "ttl-negative", "rcode-wide", "expiry-past-stale"])
def test_an_export_with_a_value_out_of_range_is_refused_whole(index: int, value: float) -> None:
    clock = Clock(1000.0)
    old, keys = filled(clock)
    data = bytearray(old.export())
    _entry_field(data, index, value)
    new, hot = make_cache(clock)
    with pytest.raises(FormatError, match="out of range|stale window"):
        new.load(bytes(data))
    assert new.get(keys["positive"]) is None and new.get(keys["negative"]) is None and not hot


def test_an_export_broken_after_its_first_entries_leaves_none_of_them() -> None:
    clock = Clock(1000.0)
    old, keys = filled(clock)
    data = bytearray(old.export())
    from nodedns.forward.store import _WARM_ENTRY, WARM_MAGIC  # noqa: PLC0415 - the format's own layout
    klen, wlen, nofs = _WARM_ENTRY.unpack_from(data, len(WARM_MAGIC))[-3:]
    second = len(WARM_MAGIC) + _WARM_ENTRY.size + klen + wlen + 2 * nofs  # the second entry: its expiry is inf
    fields = list(_WARM_ENTRY.unpack_from(data, second))
    fields[3] = float("inf")
    _WARM_ENTRY.pack_into(data, second, *fields)
    new, hot = make_cache(clock)
    with pytest.raises(FormatError):
        new.load(bytes(data))
    assert new.bytes_used() == 0 and not hot  # the first entry, stored before the second broke, went again
    assert new.load(old.export()) == 2  # an intact export still loads


# -- the next second rendered ahead --------------------------------------------------------------------------


def staged_cache(names: int, *, jitter: float = 0.0, **kw: object) -> tuple[ForwardCache, dict[bytes, bytes],
                                                                             Clock, list[bytes]]:
    """`names` answers (TTL capped to 30 s) stored and served at 1000.2, their keys."""
    clock = Clock(1000.2)
    cache, hot = make_cache(clock, jitter=lambda: jitter, **kw)
    keys = []
    for i in range(names):
        q = query(f"h{i}.example.com")
        key = key_of(q)
        cache.admit(key, response(q, answer=[(f"h{i}.example.com.", 300, "A", "192.0.2.1")]))
        keys.append(key)
    return cache, hot, clock, keys


def stage_all(cache: ForwardCache, now: float) -> int:
    slices = 1
    while cache.stage(limit=16, now=now):
        slices += 1
    return slices


def test_hot_answers_stay_hot_from_second_to_second_without_a_query_or_a_look() -> None:
    cache, hot, clock, keys = staged_cache(100)
    stored = {k: hot.hot.view[k] for k in keys}
    clock.now = 1000.8
    assert stage_all(cache, clock.now) == 1  # nothing to look at: no answer's second has come
    assert all(ttls(hot[k]) == [30] for k in keys)
    renders = cache.stats["renders"]
    clock.now = 1001.0
    cache.tick()
    assert all(ttls(hot[k]) == [29] for k in keys)  # the next second's TTL, at its first instant
    clock.now = 1002.0  # and the second after, though no query went the slow way meanwhile
    cache.tick()
    stage_all(cache, clock.now)
    assert all(ttls(hot[k]) == [28] for k in keys)
    assert all(hot.hot.view[k] is stored[k] for k in keys)  # the same objects: nothing rendered, nothing put
    assert cache.stats["renders"] == renders and cache.stats["reviewed"] == 0


@pytest.mark.parametrize(("elapsed", "staged"), [(25.7, True), (26.7, False), (29.7, False)],
                         ids=["before-the-refresh-second", "refresh-point-next-second", "expiring-next-second"])
def test_an_answer_due_for_its_refresh_or_expiring_next_second_is_left_to_the_slow_way(elapsed: float,
                                                                                         staged: bool) -> None:
    """Prefetch points (TTL 30: 3 s before expiry, jitter 0) and expiry are met by a query on the slow path,
    which starts the refresh: the hit path never holds such an answer past its point."""
    cache, hot, clock, keys = staged_cache(1)
    entry = cache.get(keys[0])
    assert entry is not None and entry.expires == 1030 and entry.prefetch_at == 1027
    clock.now = 1000.2 + elapsed
    cache.tick()
    cache.serve(keys[0], entry, clock.now)
    stage_all(cache, clock.now)
    clock.now = int(clock.now) + 1.0
    cache.tick()
    assert (keys[0] in hot) == staged


def test_without_prefetch_an_answer_is_hot_until_its_last_second() -> None:
    cache, hot, clock, keys = staged_cache(1, prefetch=False)
    clock.now = 1028.5
    cache.tick()
    entry = cache.get(keys[0])
    assert entry is not None
    cache.serve(keys[0], entry, clock.now)
    stage_all(cache, clock.now)
    clock.now = 1029.0
    cache.tick()
    assert ttls(hot[keys[0]]) == [1]
    cache.serve(keys[0], entry, 1029.5)  # its last second, served: nothing is made ahead for its expiry
    stage_all(cache, 1029.7)
    clock.now = 1030.0
    cache.tick()
    assert keys[0] not in hot  # expired: never served from the hit path with TTL 0 (the slow way: stale, refresh)


@pytest.mark.parametrize("change", ["new-answer", "discarded", "filtered", "evicted"])
def test_a_hot_answer_goes_with_its_entry(change: str) -> None:
    cache, hot, clock, keys = staged_cache(2, success_size=2)
    clock.now = 1000.8
    stage_all(cache, clock.now)
    if change == "new-answer":
        q = query("h0.example.com")
        cache.admit(keys[0], response(q, answer=[("h0.example.com.", 300, "A", "192.0.2.99")]))
    elif change == "discarded":
        cache.discard(keys[0])
    elif change == "filtered":
        cache.drop_hot(lambda key: key == keys[0])
        stage_all(cache, clock.now)  # staging again does not bring it back
    else:
        q = query("h2.example.com")  # a third entry in a store of two: h0, least recently used, goes
        cache.admit(key_of(q), response(q, answer=[("h2.example.com.", 300, "A", "192.0.2.3")]))
    if change in ("discarded", "evicted", "filtered"):
        assert keys[0] not in hot  # at once: the hit path never answers it for the rest of the second
    clock.now = 1001.0
    cache.tick()
    if change == "new-answer":  # the new answer, served when it came: rendered at its first query of this second
        assert keys[0] not in hot or dns.message.from_wire(hot[keys[0]]).answer[0][0].address == "192.0.2.99"
    else:
        assert keys[0] not in hot
    assert ttls(hot[keys[1]]) == [29]


def test_a_hot_answer_costs_no_bytes_beyond_its_entry() -> None:
    """The hot table holds each entry's own template: a second's turn copies nothing, so the byte budget
    charged per entry is all that hot answers cost."""
    cache, hot, clock, keys = staged_cache(60)
    used = cache.bytes_used()
    for second in range(1001, 1010):
        clock.now = second + 0.5
        cache.tick()
        stage_all(cache, clock.now)
        assert cache.bytes_used() == used
    for k in keys:
        entry = cache.get(k)
        assert entry is not None and hot.hot.view[k] is entry.wire and len(entry.wire) < entry.size


def test_an_answer_taken_out_of_the_hot_table_leaves_what_another_part_puts_there_alone() -> None:
    """--filter-aaaa turning on takes the forwarded answers out of the hot table (`drop_hot`) and its own
    answer for the name goes there (the cluster answers' filter tag): the forward cache's later looks at its
    entries never drop that answer."""
    cache, hot, clock, keys = staged_cache(1)
    assert cache.drop_hot(lambda key: key == keys[0]) == 1 and keys[0] not in hot
    filtered = b"\x00\x00" + b"filtered answer"
    hot.hot.put(keys[0], filtered)  # another part's answer for the same key
    for second in range(1001, 1031):  # past the entry's prefetch point and its expiry
        clock.now = second + 0.1
        cache.tick()
        while cache.stage():
            pass
        assert hot.hot.view.get(keys[0]) is filtered, second


def test_hot_answers_are_marked_used_each_second_so_the_budget_evicts_what_nobody_asks_first() -> None:
    """The hit paths answer hot answers without a lookup in the store: once a second (TOUCH_SLICE a call) the
    hot ones are marked used in its LRU order, so an answer that left the hot table unasked goes before them,
    though it was stored after them."""
    clock = Clock(1000.2)
    cache, hot = make_cache(clock, success_size=310, jitter=lambda: 0.0)  # room for the 310 stored below
    busy = []
    for i in range(300):  # more than a slice: marked used over several calls
        q = query(f"busy{i}.example.com")
        busy.append(key_of(q))
        cache.admit(busy[-1], response(q, answer=[(f"busy{i}.example.com.", 300, "A", "192.0.2.1")]))
    idle = []
    for i in range(10):  # stored after them, with a short TTL: at its refresh point, unasked, it leaves the hot table
        q = query(f"idle{i}.example.com")
        idle.append(key_of(q))
        cache.admit(idle[-1], response(q, answer=[(f"idle{i}.example.com.", 5, "A", "192.0.2.2")]))
    for second in range(1001, 1006):
        clock.now = second + 0.1
        cache.tick()
        calls = 1
        while cache.stage():
            calls += 1
        assert calls >= 2  # 300 hot answers: more than one call's share of marking
    assert all(k in hot for k in busy) and not any(k in hot for k in idle)
    for i in range(10):  # ten more entries than the store holds: the ten nobody asks go
        q = query(f"new{i}.example.com")
        cache.admit(key_of(q), response(q, answer=[(f"new{i}.example.com.", 300, "A", "192.0.2.3")]))
    assert all(cache.get(k) is None for k in idle) and all(cache.get(k) is not None for k in busy)


def test_a_fresh_answer_stored_after_a_stale_one_in_the_same_second_stays_hot_through_the_turn() -> None:
    """An answer served stale (the upstreams down) is hot for the rest of its second only; a fresh answer for
    the same name stored in that second (the upstreams back) stays hot through the turn and after: the hit
    paths answer it, not Python, for its life."""
    clock = Clock(1000.2)
    cache, hot = make_cache(clock)
    q = query("a.example.com")
    key = key_of(q)
    _, old = cache.admit(key, response(q, answer=[("a.example.com.", 300, "A", "192.0.2.1")]))
    assert old is not None
    clock.now = 1040.3  # expired
    cache.serve_stale_answer(key, old, clock.now)
    _, entry = cache.admit(key, response(q, answer=[("a.example.com.", 300, "A", "192.0.2.2")]))  # back
    assert entry is not None
    clock.now = 1041.1
    cache.tick()
    while cache.stage():
        pass
    assert hot.hot.view.get(key) is entry.wire  # the stale one left at the turn, the fresh one stayed
    cache.serve(key, entry, clock.now)  # a query through the resolver (ForwardPath.rehit) changes nothing
    assert hot.hot.view.get(key) is entry.wire
    for second in range(1042, 1052):
        clock.now = second + 0.1
        cache.tick()
        while cache.stage():
            pass
        assert hot.hot.view.get(key) is entry.wire, second


def test_a_hot_answer_another_writer_took_out_is_put_back_by_its_next_query() -> None:
    """The hot table has other writers (the cluster answers drop keys by tag): a forwarded answer one of them
    took out is answered by the resolver at its next query and hot again from then on."""
    cache, hot, clock, keys = staged_cache(1)
    entry = cache.get(keys[0])
    assert entry is not None
    hot.hot.pop(keys[0])
    assert keys[0] not in hot
    clock.now = 1000.7
    cache.serve(keys[0], entry, clock.now)
    assert hot.hot.view.get(keys[0]) is entry.wire


@pytest.mark.parametrize("refresh", ["started", "at-the-caps", "none-asked"])
def test_an_entry_asked_in_its_life_stays_hot_at_its_prefetch_point_while_its_refresh_starts_or_waits(
        refresh: str) -> None:
    """docs/cache.md "Tail latency": at its prefetch point an entry asked in its life is refreshed ahead and kept
    hot meanwhile; a refresh the caps hold back is tried again at the next second's look, hot until then; a
    refresh started is started once, the entry then left to its queries; an entry nobody asked is left to the
    slow way."""
    cache, hot, clock, keys = staged_cache(1)
    entry = cache.get(keys[0])
    assert entry is not None and entry.prefetch_at == 1027 and entry.expires == 1030
    asked: list[bytes] = []
    cache.refresh = lambda key: asked.append(key) is None and refresh == "started"
    clock.now = 1026.2
    cache.tick()
    if refresh == "none-asked":
        entry.asked = False  # a life nobody asked in (loaded from a predecessor, say)
    stage_all(cache, clock.now)  # its look: the prefetch point falls in the next second
    if refresh == "none-asked":
        assert (keys[0] in hot, asked) == (False, [])
        return
    assert ttls(hot[keys[0]]) == [4]  # hot at its prefetch point: no client waits for the refresh
    assert asked == [keys[0]]
    clock.now = 1027.1
    cache.tick()
    stage_all(cache, clock.now)
    if refresh == "started":  # started once; the entry left to its queries until the new answer comes
        assert (keys[0] in hot, asked, cache.stats["refreshed_ahead"]) == (False, [keys[0]], 1)
    else:  # the caps held it back: tried again, hot meanwhile
        assert (ttls(hot[keys[0]]), asked, cache.stats["refreshed_ahead"]) == ([3], [keys[0]] * 2, 0)


@pytest.mark.parametrize("first", ["expiring", "at-its-prefetch-point", "asked-twice"])
def test_an_answer_left_to_the_slow_way_does_not_hold_back_the_ones_after_it(first: str) -> None:
    clock = Clock(1000.2)
    cache, hot = make_cache(clock, jitter=lambda: 0.0)
    q0 = query("first.example.com")
    ttl = {"expiring": 1, "at-its-prefetch-point": 10}.get(first, 300)  # TTL 10: its prefetch point is 1009
    cache.admit(key_of(q0), response(q0, answer=[("first.example.com.", ttl, "A", "192.0.2.1")]))
    entry = cache.get(key_of(q0))
    assert entry is not None
    if first == "at-its-prefetch-point":
        entry.asked = False  # nobody asked it in this life: the slow way, where a query starts its refresh
        clock.now = 1008.2
    elif first == "asked-twice":
        cache.serve(key_of(q0), entry, clock.now)  # asked again: still one hot answer
    keys = []
    for i in range(3):
        q = query(f"h{i}.example.com")
        keys.append(key_of(q))
        cache.admit(keys[-1], response(q, answer=[(f"h{i}.example.com.", 300, "A", "192.0.2.2")]))
    if first == "asked-twice":
        cache.serve(key_of(q0), entry, clock.now)
    clock.now = int(clock.now) + 1.0
    cache.tick()
    stage_all(cache, clock.now)
    assert (key_of(q0) in hot) == (first == "asked-twice")
    assert all(k in hot for k in keys)  # the answers after it hot all the same


def test_a_query_in_a_new_second_before_the_clock_ticks_is_sent_for_that_second_and_both_stay_hot() -> None:
    cache, hot, clock, keys = staged_cache(2)
    e0, e1 = cache.get(keys[0]), cache.get(keys[1])
    assert e0 is not None and e1 is not None
    clock.now = 1001.05  # the new second's first query comes before the forward cache's clock ticks
    assert ttls(cache.serve(keys[0], e0, clock.now)) == [29]
    cache.tick()  # the tick of 1001, a moment late
    assert ttls(hot[keys[0]]) == [29] and ttls(hot[keys[1]]) == [29]
    assert ttls(cache.serve(keys[1], e1, 1001.5)) == [29]


@pytest.mark.parametrize("change", ["filtered", "evicted"])
def test_an_entry_evicted_or_filtered_leaves_the_others_hot(change: str) -> None:
    cache, hot, clock, keys = staged_cache(3, success_size=3)
    if change == "filtered":  # --filter-aaaa turned on, say: out of the hot table at once
        cache.drop_hot(lambda key: key == keys[1])
        gone = [False, True, False]
    else:
        q = query("h3.example.com")  # a fourth entry in a store of three: h0, least recently used, goes
        cache.admit(key_of(q), response(q, answer=[("h3.example.com.", 300, "A", "192.0.2.3")]))
        gone = [True, False, False]
    assert [k not in hot for k in keys] == gone  # at once
    clock.now = 1001.0
    cache.tick()
    stage_all(cache, clock.now)
    assert [k not in hot for k in keys] == gone


def test_every_eviction_is_counted() -> None:
    cache, _, _, _ = staged_cache(5, success_size=2)
    assert cache.evictions()["success"] == 3
