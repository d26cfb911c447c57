"""nodedns.serve.tally: answers counted by client address in one interval, handed on as rows keyed by Pod generation,
within fixed bounds whatever the clients send."""

from __future__ import annotations

import pytest

from nodedns.dns.queries import make_query
from nodedns.dns.wire import QT
from nodedns.metrics.slots import PLUGIN_CACHE, PLUGIN_CLUSTER, PLUGIN_FORWARD, PLUGIN_SERVER, SlotLabels, Slots
from nodedns.serve.tally import (
    CLUSTER,
    FORWARDED,
    HOST,
    MAX_ANSWERS,
    MAX_CLIENTS,
    MAX_SEALED,
    OVERFLOW,
    SERVER,
    UNKNOWN,
    Row,
    Tally,
)

SLOTS = Slots(("cluster.local",), authoritative=("cluster.local",))
CLUSTER_NX = SLOTS.slot(SlotLabels("cluster.local.", "A", "NXDOMAIN", PLUGIN_CLUSTER, False, True))
CLUSTER_OK = SLOTS.slot(SlotLabels("cluster.local.", "A", "NOERROR", PLUGIN_CLUSTER, False, False))
CACHED = SLOTS.slot(SlotLabels(".", "A", "NOERROR", PLUGIN_CACHE, False, False))
UPSTREAM = SLOTS.slot(SlotLabels(".", "A", "NOERROR", PLUGIN_FORWARD, False, False))
REFUSED = SLOTS.slot(SlotLabels(".", "A", "REFUSED", PLUGIN_SERVER, False, False))
DROPPED = SLOTS.dropped()


def stored(name: str, slot: int, qtype: int = QT.A) -> bytes:
    """A stored answer as the hot dict holds it: its label slot in byte 0, the question from byte 12."""
    return bytes((slot,)) + make_query(name, qtype)[1:]


def by_name(rows: list[Row]) -> dict[tuple[int, str, str], Row]:
    return {(r.gen, r.client, r.name): r for r in rows}


def test_hits_and_slow_answers_become_one_row_per_client_name_and_rcode() -> None:
    t = Tally()
    t.gens = {"10.0.0.5": 7}
    web = stored("web.default.svc.cluster.local", CLUSTER_OK)
    for _ in range(3):
        t.hit("10.0.0.5", web)
    t.answered("10.0.0.5", make_query("web.default.svc.cluster.local", QT.A), CLUSTER_OK, None)
    t.answered("10.0.0.5", make_query("api.example.com", QT.A), UPSTREAM, 0.020)
    t.hit("10.0.0.5", stored("api.example.com", CACHED))
    t.answered("10.0.0.5", make_query("api.example.com", QT.A), CACHED, None)  # from the cache over TCP
    rows = by_name(t.flush(SLOTS.labels))
    assert rows[(7, "", "web.default.svc.cluster.local")] == Row(7, "", "web.default.svc.cluster.local", QT.A,
                                                                 "NOERROR", CLUSTER, 4, 3, 0, 0.0)
    api = rows[(7, "", "api.example.com")]  # one from the upstream, two from the cache: one row
    assert (api.source, api.answers, api.cached, api.upstream) == (FORWARDED, 3, 2, 1)
    assert api.upstream_seconds == pytest.approx(0.020)
    assert t.empty() and t.flush(SLOTS.labels) == []  # counting starts again


@pytest.mark.parametrize(
    ("address", "gens", "gen", "client"),
    [
        ("10.0.0.5", {"10.0.0.5": 3}, 3, ""),
        ("10.0.0.9", {"10.0.0.5": 3}, UNKNOWN, "10.0.0.9"),
        ("192.0.2.1", {"192.0.2.1": HOST}, HOST, "192.0.2.1"),
    ],
    ids=["a-pod-address-carries-its-generation", "an-unknown-address-keeps-the-address",
         "a-host-address-keeps-the-address"],
)
def test_rows_carry_the_generation_the_map_gives_the_address(address: str, gens: dict[str, int], gen: int,
                                                             client: str) -> None:
    t = Tally()
    t.gens = gens
    t.hit(address, stored("web.default.svc.cluster.local", CLUSTER_OK))
    (row,) = t.flush(SLOTS.labels)
    assert (row.gen, row.client) == (gen, client)


def test_retag_hands_on_what_was_counted_under_the_old_map_first() -> None:
    """Address reuse: what the old Pod asked stays with its generation, the new Pod's goes to the new one."""
    t = Tally()
    t.gens = {"10.0.0.5": 1}
    w = stored("web.default.svc.cluster.local", CLUSTER_OK)
    t.hit("10.0.0.5", w)
    before = t.retag({"10.0.0.5": 2}, SLOTS.labels)
    t.hit("10.0.0.5", w)
    t.hit("10.0.0.5", w)
    after = t.flush(SLOTS.labels)
    assert [(r.gen, r.answers) for r in before] == [(1, 1)]
    assert [(r.gen, r.answers) for r in after] == [(2, 2)]


def test_a_client_asking_many_names_in_an_interval_is_counted_name_by_name_in_pieces() -> None:
    """A Pod walking its search list fast sends hundreds of names a second: each full piece of its
    counts is set aside whole, so every answer keeps its name (insight tells its search-list misses)."""
    t = Tally()
    for i in range(MAX_ANSWERS * 3 + 5):
        t.hit("10.0.0.5", stored(f"r{i}.example.com", CACHED))
        t.answered("10.0.0.5", make_query(f"s{i}.example.com", QT.A), UPSTREAM, 0.001)
    assert len(t.hits["10.0.0.5"]) == 5 and len(t.slow["10.0.0.5"]) == 5
    assert [len(piece) for _, piece in t.sealed] == [MAX_ANSWERS] * 3 == [len(p) for _, p in t.sealed_slow]
    rows = t.flush(SLOTS.labels)
    assert sum(r.answers for r in rows) == (MAX_ANSWERS * 3 + 5) * 2  # every answer counted
    assert all(r.name for r in rows) and len(rows) == (MAX_ANSWERS * 3 + 5) * 2  # each with its name
    assert t.empty() and not t.sealed and not t.sealed_slow


def test_a_client_spraying_names_is_counted_whole_but_named_only_up_to_the_bound() -> None:
    t = Tally()
    total = MAX_ANSWERS * (MAX_SEALED + 3)
    for i in range(total):
        t.hit("10.0.0.5", stored(f"r{i}.example.com", CACHED))
        t.answered("10.0.0.5", make_query(f"s{i}.example.com", QT.A), UPSTREAM, 0.001)
    assert len(t.sealed) == len(t.sealed_slow) == MAX_SEALED  # the pieces set aside stay bounded
    # a full piece, then the slot counts: by hit the BY_SLOT mark with them
    assert len(t.hits["10.0.0.5"]) <= MAX_ANSWERS + 2 and len(t.slow["10.0.0.5"]) <= MAX_ANSWERS + 1
    rows = t.flush(SLOTS.labels)
    assert sum(r.answers for r in rows) == total * 2  # every answer counted
    named = [r for r in rows if r.name]
    assert len(named) == 2 * MAX_ANSWERS * (MAX_SEALED + 1)  # names only up to the bound, per path
    assert {r.answers for r in rows if not r.name} == {MAX_ANSWERS * 4}  # the rest by rcode and source only


def test_clients_beyond_the_bound_share_the_overflow_entry() -> None:
    t = Tally()
    w = stored("web.default.svc.cluster.local", CLUSTER_OK)
    for i in range(MAX_CLIENTS + 100):
        t.hit(f"10.1.{i // 250}.{i % 250}", w)
        t.answered(f"10.1.{i // 250}.{i % 250}", make_query("x.example", QT.A), REFUSED, None)
    assert len(t.hits) == MAX_CLIENTS + 1 and OVERFLOW in t.hits and t.hits[OVERFLOW][w] == 100
    assert len(t.slow) == MAX_CLIENTS + 1 and OVERFLOW in t.slow
    rows = t.flush(SLOTS.labels)
    assert sum(r.answers for r in rows) == 2 * (MAX_CLIENTS + 100)
    overflow = [r for r in rows if r.client == OVERFLOW]
    assert {(r.gen, r.source) for r in overflow} == {(UNKNOWN, CLUSTER), (UNKNOWN, SERVER)}
    # a client beyond the bound whose piece fills (the overflow entry's): its piece is set aside in the
    # overflow entry, no entry of its own is made
    for i in range(MAX_CLIENTS):
        t.hit(f"10.1.{i // 250}.{i % 250}", w)
    for i in range(MAX_ANSWERS + 5):
        t.hit("10.9.9.9", stored(f"n{i}.example.com", CACHED))
    assert "10.9.9.9" not in t.hits and len(t.hits) == MAX_CLIENTS + 1
    assert [key for key, _ in t.sealed] == [OVERFLOW]
    assert sum(r.answers for r in t.flush(SLOTS.labels)) == MAX_CLIENTS + MAX_ANSWERS + 5


def test_dropped_queries_are_no_answers() -> None:
    t = Tally()
    t.answered("10.0.0.5", make_query("x.example", QT.A), DROPPED, None)
    assert t.flush(SLOTS.labels) == []


def test_loop_probes_are_no_clients_questions() -> None:
    t = Tally()
    t.answered("127.0.0.1", make_query("2458382123404699427.654779148380720816.cluster.local", QT.HINFO), REFUSED,
               None)
    t.answered("127.0.0.1", make_query("2458382123404699427.example", QT.HINFO), REFUSED, None)  # not probe-shaped
    assert [r.name for r in t.flush(SLOTS.labels)] == ["2458382123404699427.example"]


def test_the_flush_in_slices_yields_every_step_and_gives_the_rows_of_a_flush_at_once() -> None:
    def fill(tally: Tally) -> None:
        for c in range(8):  # 8 clients x 60 names: 480 entries
            for i in range(60):
                tally.hit(f"10.244.0.{c}", stored(f"n{i}.example.com", CACHED))
                tally.answered(f"10.244.0.{c}", make_query(f"s{i}.example.com", QT.A), UPSTREAM, 0.001)

    whole, sliced = Tally(), Tally()
    fill(whole)
    fill(sliced)
    steps = sliced.flusher(SLOTS.labels, 64)
    yields = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            rows = done.value
            break
        yields += 1
    # the loop gets back after every 64 entries, a client's piece (at most MAX_ANSWERS) whole
    assert yields >= (8 * 60 * 2) // (64 + MAX_ANSWERS)
    assert sorted(rows) == sorted(whole.flush(SLOTS.labels)) and len(rows) == 8 * 120
    assert sliced.empty()  # the interval ended at the first step


def test_a_flush_in_slices_leaves_later_counts_to_the_next_interval() -> None:
    tally = Tally()
    tally.hit("10.244.0.1", stored("a.example.com", CACHED))
    steps = tally.flusher(SLOTS.labels, 1)
    with pytest.raises(StopIteration):
        while True:
            next(steps)
            tally.hit("10.244.0.1", stored("b.example.com", CACHED))  # counted while the slices run
    assert [r.name for r in tally.flush(SLOTS.labels)] == ["b.example.com"]


def test_the_questions_of_hot_answers_are_read_once_and_kept_within_their_bound() -> None:
    """A flush reads the name of each stored answer once and keeps it for the next intervals (the same hot
    answers come every second); past NAMES_KEPT answers it keeps none, so a client spraying names does not
    hold their answers here after its interval."""
    from nodedns.serve.tally import NAMES_KEPT

    t = Tally()
    hot = [stored(f"h{i}.example.com", CACHED) for i in range(100)]
    for w in hot:
        t.hit("10.0.0.5", w)
    first = by_name(t.flush(SLOTS.labels))
    assert set(t.names) == set(hot) and len(first) == 100
    t.names[hot[0]] = ("renamed.example.com", QT.A)  # read from here, not from the answer, the next time
    t.hit("10.0.0.5", hot[0])
    assert [r.name for r in t.flush(SLOTS.labels)] == ["renamed.example.com"]
    kept = len(t.names)
    for many in range(NAMES_KEPT - kept):  # up to the bound: all kept
        t.hit(f"10.1.{many // 250}.{many % 250}", stored(f"s{many}.example.com", CACHED))
    assert sum(r.answers for r in t.flush(SLOTS.labels)) == NAMES_KEPT - kept
    assert len(t.names) == NAMES_KEPT
    t.hit("10.0.0.6", stored("one-more.example.com", CACHED))
    assert [r.name for r in t.flush(SLOTS.labels)] == ["one-more.example.com"]
    assert t.names == {}  # past the bound: kept none


def test_large_answers_are_named_but_not_kept_past_their_interval() -> None:
    """The kept questions hold their answers: only answers of at most KEPT_ANSWER_BYTES are kept, so a
    tenant's large answers (a TXT record of kilobytes, many names) are not held here after the cache let
    them go; they are named all the same."""
    from nodedns.serve.tally import KEPT_ANSWER_BYTES

    t = Tally()
    small = stored("small.example.com", CACHED)
    big = stored("big.example.com", CACHED) + b"\x00" * KEPT_ANSWER_BYTES  # records after the question
    exact = stored("exact.example.com", CACHED)
    exact += b"\x00" * (KEPT_ANSWER_BYTES - len(exact))
    for w in (small, big, exact):
        t.hit("10.0.0.5", w)
    assert {r.name for r in t.flush(SLOTS.labels)} == {"small.example.com", "big.example.com", "exact.example.com"}
    assert set(t.names) == {small, exact}
