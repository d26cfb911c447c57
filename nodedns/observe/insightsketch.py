"""The bounded state of per-Pod insight (nodedns.observe.insight): the names a Pod asks most, and a client's
recent names to tell its search-list misses.

`SpaceSaving` (Metwally et al. 2005) keeps the k most frequent names in k counters whatever the clients
send; `Walks` holds what one client asked (and its NXDOMAIN names not followed yet) for WINDOW seconds,
at most MAX_NAMES of them, the node's clients together NAMES_BUDGET (`Budget`; beyond it each keeps
MIN_NAMES); `readings` are the other spellings of a name by a search list.

Why hand-written: the well-kept sketch library (Apache DataSketches' frequent items) brings numpy
into the supervisor (~20 MB); space-saving is forty lines.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from typing import Any

MAX_NAMES = 2048  # names per client in the search-list state (asked and pending)
MIN_NAMES = 128  # ... which a client keeps however spent the node's budget is
NAMES_BUDGET = 16384  # names in the search-list state of every client of the node together
WINDOW = 10.0  # seconds within which a name asked with another suffix makes an NXDOMAIN a miss


# ----------------------------------------------------------------------------------------------
# The sketch


class SpaceSaving:
    """The heaviest items of a stream in `k` counters (space-saving): each counter's count overestimates
    its item's true count by at most its `error`; an item with more than total/k occurrences is
    always kept. Memory: k entries, whatever the stream."""

    __slots__ = ("k", "counters", "total", "_heap", "_seq")

    def __init__(self, k: int) -> None:
        self.k = k
        self.counters: dict[str, list[int]] = {}  # item -> [count, error]
        self.total = 0
        # One (count, seq, item) per counter, seq its arrival: a min-heap of the counters, where an entry
        # may be stale (its count lower than the counter's, which only grow) until it comes to the top.
        # The victim is the smallest count, the earliest arrival among equals: what a scan in arrival
        # order finds, in O(log k) amortised instead of a scan of k per new item.
        self._heap: list[tuple[int, int, str]] = []
        self._seq = 0

    def add(self, item: str, n: int = 1) -> None:
        self.total += n
        counters = self.counters
        c = counters.get(item)
        if c is not None:
            c[0] += n
            return
        self._seq += 1
        if len(counters) < self.k:
            counters[item] = [n, 0]
            heapq.heappush(self._heap, (n, self._seq, item))
            return
        heap = self._heap
        while True:
            count, seq, victim = heap[0]
            now = counters[victim][0]
            if now == count:
                break
            heapq.heapreplace(heap, (now, seq, victim))  # stale: put back with its count
        del counters[victim]
        counters[item] = [count + n, count]
        heapq.heapreplace(heap, (count + n, self._seq, item))

    def top(self, n: int | None = None) -> list[tuple[str, int, int]]:
        """(item, count, error) by count, heaviest first: at least count - error occurrences."""
        items = sorted(self.counters.items(), key=lambda kv: (-kv[1][0], kv[0]))
        return [(item, c, e) for item, (c, e) in items[:n]]

    def first(self) -> str | None:
        top = self.top(1)
        return top[0][0] if top else None


# ----------------------------------------------------------------------------------------------
# Search-list misses


class Budget:
    """The node's allowance of search-list state (names remembered by every client's `Walks`): beyond
    its share (MIN_NAMES), a client gives up its own oldest names once the node's NAMES_BUDGET is spent."""

    __slots__ = ("used", "limit")

    def __init__(self, limit: int = NAMES_BUDGET) -> None:
        self.used = 0
        self.limit = limit


class Walks:
    """One client's recent names, to tell search-list misses (module docstring): the names it asked
    (`asked`: name -> when) and its NXDOMAIN names with a search suffix not followed yet by another
    reading of their name (`pending`: name -> [when, count]), each kept WINDOW seconds, oldest first.

    One entry per name asked, whatever the rate: a walk of ndots:5 is four names. A name confirms the
    pending names of each of its readings (base, suffix): base.other-suffix, or the base as it is.
    Bounded: at most MAX_NAMES entries per client, and only MIN_NAMES once the node's `budget` is spent."""

    __slots__ = ("asked", "pending", "budget")

    def __init__(self, budget: Budget | None = None) -> None:
        self.asked: dict[str, float] = {}
        self.pending: dict[str, list[float]] = {}
        self.budget = budget if budget is not None else Budget()

    def observe(self, name: str, nxdomain: bool, count: int, now: float, parts: Sequence[tuple[str, str]],
                suffixes: Sequence[str]) -> list[tuple[str, int]]:
        """Take one name (`parts`: its (name without suffix, suffix) readings, ("name", "") last;
        `suffixes`: every search suffix of the client); the search-list misses this makes known, as
        (name without suffix, count)."""
        self.expire(now)
        found: list[tuple[str, int]] = []
        pending, asked = self.pending, self.asked
        confirmed: str | None = None
        searched = False
        for base, suffix in parts:
            if suffix:
                searched = True
            for other in _other_readings(base, suffix, suffixes):
                waiting = pending.pop(other, None)
                if waiting is not None:
                    self.budget.used -= 1
                    found.append((base, int(waiting[1])))
                if nxdomain and suffix and confirmed is None and other in asked:
                    confirmed = base
        if nxdomain and searched:
            if confirmed is not None:
                found.append((confirmed, count))
            else:
                waiting = pending.pop(name, None)
                if waiting is None:
                    self._room()
                    pending[name] = [now, float(count)]
                else:
                    pending[name] = [now, waiting[1] + count]  # to the end: the newest
        if asked.pop(name, None) is None:
            self._room()
        asked[name] = now
        return found

    def _room(self) -> None:
        """Room for one more entry: this client's oldest goes when it is at its bound, or past its share
        of a node budget that is spent."""
        held = len(self.asked) + len(self.pending)
        budget = self.budget
        if held >= MAX_NAMES or (held >= MIN_NAMES and budget.used >= budget.limit):
            table: dict[str, Any] = self.asked
            if self.pending and (not self.asked or _when(next(iter(self.pending.values())))
                                 <= _when(next(iter(self.asked.values())))):
                table = self.pending
            del table[next(iter(table))]
        else:
            budget.used += 1

    def expire(self, now: float) -> None:
        """Forget what is older than WINDOW (each table is oldest first)."""
        for table in (self.asked, self.pending):
            while table:
                first = next(iter(table))
                if now - _when(table[first]) <= WINDOW:
                    break
                del table[first]
                self.budget.used -= 1

    def clear(self) -> None:
        """Forget everything (the client is gone), giving its entries back to the node's budget."""
        self.budget.used -= len(self.asked) + len(self.pending)
        self.asked.clear()
        self.pending.clear()


def _when(value: float | list[float]) -> float:
    return value if isinstance(value, float) else value[0]


def _other_readings(base: str, suffix: str, suffixes: Sequence[str]) -> Iterator[str]:
    """The names a client forms from `base` with a suffix other than `suffix` (or none)."""
    for s in suffixes:
        if s != suffix:
            yield f"{base}.{s}"
    if suffix:
        yield base


def readings(name: str, searches: Sequence[str], zone: str = "", *,
             any_namespace: bool = False) -> list[tuple[str, str]]:
    """The ways a client may have formed `name`: (name, suffix) for each search domain it ends with,
    and (name, "") as it is. `any_namespace`: every `<ns>.svc.<zone>` counts as a search domain (the
    groups, whose search lists are not known one by one)."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    candidates = list(searches)
    if any_namespace and zone:
        tail = f".svc.{zone}"
        if name.endswith(tail):
            rest = name[: -len(tail)]
            if "." in rest:
                candidates.append(f"{rest.rsplit('.', 1)[1]}.svc.{zone}")
    for s in candidates:
        if s and s not in seen and len(name) > len(s) + 1 and name.endswith(s) and name[-len(s) - 1] == ".":
            seen.add(s)
            out.append((name[: -len(s) - 1], s))
    out.append((name, ""))
    return out
