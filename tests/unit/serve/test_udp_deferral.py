"""nodedns.serve.udp's bound on slow-path work per loop turn (`UDPListener.later`, `_drain`): a wake-up spends at
most SLOW_TURN_SECONDS on misses and queues the rest, later turns take SLOW_TURN_SECONDS of them each, at most
MAX_DEFERRED wait (beyond, dropped and counted), a sampled query goes at once (the module docstring;
docs/cache.md "What keeps the loop free"). On a fake clock: each miss takes the time it is given."""

from __future__ import annotations

import collections
from types import SimpleNamespace
from typing import Any

import pytest

from nodedns.metrics.counters import ListenerStats
from nodedns.serve import udp
from nodedns.serve.udp import MAX_DEFERRED, SLOW_TURN_SECONDS, UDPListener

TURN = 2.0 ** -11  # SLOW_TURN_SECONDS's order of magnitude, exact in binary
assert TURN / 2 < SLOW_TURN_SECONDS < TURN * 2


class Turns:
    """The loop's callbacks run by hand, a turn at a time."""

    def __init__(self) -> None:
        self.soon: list[Any] = []

    def call_soon(self, callback: Any) -> None:
        self.soon.append(callback)

    def turn(self) -> None:
        callbacks, self.soon = self.soon, []
        for callback in callbacks:
            callback()


def listener(monkeypatch: pytest.MonkeyPatch, miss_seconds: float) -> tuple[Any, list[tuple[Any, ...]], Turns,
                                                                           list[float]]:
    """A UDP listener whose slow path records each miss and takes `miss_seconds` of the fake clock."""
    now = [100.0]
    monkeypatch.setattr(udp, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(udp, "SLOW_TURN_SECONDS", TURN)  # a binary fraction: the clock's sums are exact
    turns = Turns()
    answered: list[tuple[Any, ...]] = []
    ls: Any = object.__new__(UDPListener)
    ls.deferred = collections.deque()
    ls.turn_end = 0.0
    ls.stats = ListenerStats("dns://127.0.0.1:53", "ipv4")
    ls.sock = SimpleNamespace(loop=turns, closing=False)
    dropped: list[Any] = []
    ls.server = SimpleNamespace(dropped=dropped.append)

    def slow(data: bytes, addr: Any, t0: float = 0.0, logged: bool = False) -> None:
        answered.append((data, addr, t0, logged))
        now[0] += miss_seconds

    ls.slow = slow
    ls.dropped_counts = dropped
    return ls, answered, turns, now


def wake_up(ls: Any) -> None:
    ls.turn_end = 0.0  # what `readable` does at each wake-up


def test_a_wake_up_spends_its_turn_s_time_on_misses_and_queues_the_rest_for_later_turns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    per_turn = 4
    ls, answered, turns, _ = listener(monkeypatch, TURN / per_turn)
    wake_up(ls)
    for i in range(12):
        ls.later(b"q%d" % i, ("10.0.0.1", 1000 + i))
    assert len(answered) == per_turn  # this turn's time used up at exactly SLOW_TURN_SECONDS: the rest wait
    assert ls.stats.udp_deferred == 12 - per_turn
    turns.turn()
    assert len(answered) == 2 * per_turn  # the next turn: exactly SLOW_TURN_SECONDS more, the loop polled between
    turns.turn()
    assert len(answered) == 12
    assert [a[0] for a in answered] == [b"q%d" % i for i in range(12)]  # every miss, in its order
    assert [a[1] for a in answered] == [("10.0.0.1", 1000 + i) for i in range(12)]
    assert turns.soon == []  # nothing left: no more turns asked for


def test_a_miss_after_others_wait_waits_behind_them_even_with_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    ls, answered, turns, now = listener(monkeypatch, TURN)  # one miss uses a turn
    wake_up(ls)
    ls.later(b"a", ("10.0.0.1", 1))
    ls.later(b"b", ("10.0.0.1", 2))
    wake_up(ls)  # a new wake-up, time left, but b waits: c goes behind it
    ls.later(b"c", ("10.0.0.1", 3))
    assert [a[0] for a in answered] == [b"a"]
    turns.turn()
    turns.turn()
    assert [a[0] for a in answered] == [b"a", b"b", b"c"]


def test_a_sampled_query_goes_to_the_slow_path_at_once_timed_and_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    ls, answered, turns, _ = listener(monkeypatch, TURN)
    wake_up(ls)
    ls.later(b"a", ("10.0.0.1", 1))
    ls.later(b"b", ("10.0.0.1", 2))  # waits
    ls.later(b"sampled", ("10.0.0.2", 3), 99.5)  # sampled by the query log: at once, timed from its t0
    assert answered == [(b"a", ("10.0.0.1", 1), 0.0, False), (b"sampled", ("10.0.0.2", 3), 99.5, True)]


def test_at_most_max_deferred_wait_and_the_rest_are_dropped_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    ls, answered, turns, _ = listener(monkeypatch, 1.0)  # one miss uses the turn
    wake_up(ls)
    for i in range(MAX_DEFERRED + 3):
        ls.later(b"q", ("10.0.0.1", i))
    assert len(answered) == 1
    assert (ls.stats.udp_deferred, ls.stats.udp_deferred_dropped) == (MAX_DEFERRED, 2)  # exactly MAX_DEFERRED wait
    assert ls.dropped_counts == [ls.stats.udp, ls.stats.udp]  # counted as dropped queries too
    ls.sock.closing = True  # the listener closes under them: they go, their clients ask again
    turns.turn()
    assert len(answered) == 1 and not ls.deferred
