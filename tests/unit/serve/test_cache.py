"""The stored cluster answers' byte budget (nodedns/serve/cache.py `ClusterAnswers`): what an answer is
charged, the budget held to the byte, answers too large to keep built again, the bytes given back."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from nodedns.serve.cache import (
    CLUSTER_SHARE,
    ENTRY_OVERHEAD,
    MAX_ENTRY_BYTES,
    MIN_BUDGET_SHARE,
    ClusterAnswers,
    cluster_share,
)


def stamp(wire: bytes) -> bytes:
    return b"\x07" + wire[1:]  # as metrics.Slots.stamp: a new bytes object with the label slot in byte 0


def charge(key: bytes, wire: bytes) -> int:
    return len(key) + len(wire) + ENTRY_OVERHEAD


@pytest.mark.parametrize("size", [60, 400, 4000])
def test_what_a_cluster_answer_is_charged_covers_what_it_costs(size: int) -> None:
    answers = ClusterAnswers(max_bytes=1 << 30, stamp=stamp)
    wires = [bytes([i % 256]) * size for i in range(300)]
    tags = [frozenset({f"s:ns{i % 7}/svc{i}", f"n:ns{i % 7}", f"e:ns{i % 7}/svc{i}"}) for i in range(300)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, wire in enumerate(wires):
            answers.put(b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00svc%d\x03ns0\x00\x00\x01\x00\x01" % i, wire, tags[i])
        gc.collect()
        cost = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cost <= answers.bytes, f"{cost / 300:.0f} bytes an answer, charged {answers.bytes / 300:.0f}"
    assert answers.bytes - cost < 300 * (ENTRY_OVERHEAD // 2)  # and not much more


def test_the_budget_holds_exactly_its_bytes_and_evicts_the_oldest_beyond() -> None:
    key = b"k%03d"
    wire = b"\x00" * 100
    one = charge(key % 0, wire)
    answers = ClusterAnswers(max_bytes=10 * one)
    for i in range(10):  # exactly the budget: everything kept
        answers.put(key % i, wire, frozenset({f"s:a/{i}"}))
    assert answers.bytes == answers.max_bytes and len(answers.hot.view) == 10 and answers.evictions == 0
    answers.put(key % 10, wire, frozenset({"s:a/10"}))  # one byte more would not fit: the oldest goes
    assert answers.bytes == answers.max_bytes and answers.evictions == 1
    assert key % 0 not in answers.hot.view and key % 10 in answers.hot.view
    assert answers.tagged() == 10 and answers.with_tag("s:a/0") == 0  # its tags with it


def test_aside_answers_are_charged_and_evicted_with_the_hot_ones() -> None:
    wire = b"\x00" * 30
    answers = ClusterAnswers(max_bytes=3 * charge(b"k0", wire))
    answers.put(b"k0", wire, frozenset({"s:a/x"}), hot=False)
    answers.put(b"k1", wire, frozenset({"s:a/y"}))
    answers.put(b"k2", wire, frozenset({"s:a/z"}), hot=False)
    assert answers.bytes == 3 * charge(b"k0", wire) and len(answers.aside) == 2
    answers.put(b"k3", wire, frozenset({"s:a/w"}))
    assert b"k0" not in answers.aside and set(answers.hot.view) == {b"k1", b"k3"} and answers.aside.keys() == {b"k2"}
    assert answers.bytes == 3 * charge(b"k0", wire)


def test_an_answer_over_the_size_limit_is_built_for_each_query_not_stored() -> None:
    answers = ClusterAnswers(max_bytes=MAX_ENTRY_BYTES * MIN_BUDGET_SHARE)
    assert answers.max_entry == MAX_ENTRY_BYTES
    fits = b"\x00" * MAX_ENTRY_BYTES
    out = answers.put(b"k", fits, frozenset({"s:a/big"}))
    assert answers.hot.view[b"k"] == out == fits and answers.too_large == 0
    over = b"\x01" * (MAX_ENTRY_BYTES + 1)
    out = answers.put(b"k", over, frozenset({"s:a/big"}))
    assert out == over and answers.too_large == 1  # sent, not kept ...
    assert b"k" not in answers.hot.view and answers.bytes == 0 and answers.tagged() == 0  # ... nor the older one


def test_a_small_budget_keeps_smaller_answers_only() -> None:
    answers = ClusterAnswers(max_bytes=64 << 10)
    assert answers.max_entry == (64 << 10) // MIN_BUDGET_SHARE
    answers.put(b"k", b"\x00" * (answers.max_entry + 1))
    assert answers.too_large == 1 and not answers.hot.view


def test_invalidation_and_clear_give_the_bytes_back() -> None:
    answers = ClusterAnswers(max_bytes=1 << 20)
    answers.put(b"k1", b"\x00" * 500, frozenset({"s:a/web"}))
    answers.put(b"k2", b"\x00" * 500, frozenset({"s:a/db"}), hot=False)
    answers.put(b"k3", b"\x00" * 500, frozenset({"s:a/db"}))
    answers.hot.put(b"fwd", b"\x00" * 50)  # a forwarded answer: the forward cache's, never charged here
    assert answers.invalidate({"s:a/db"}) == 2
    assert answers.bytes == charge(b"k1", b"\x00" * 500)
    answers.put(b"k1", b"\x00" * 100, frozenset({"s:a/web"}))  # replaced: charged once, at its new size
    assert answers.bytes == charge(b"k1", b"\x00" * 100)
    answers.clear()
    assert answers.bytes == 0 and set(answers.hot.view) == {b"fwd"}
    answers.put(b"k4", b"\x00" * 10)
    assert answers.bytes == charge(b"k4", b"\x00" * 10)


def test_a_process_keeps_a_quarter_of_its_share_for_cluster_answers() -> None:
    assert CLUSTER_SHARE == 4 and cluster_share(32 << 20) == 8 << 20
