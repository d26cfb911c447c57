"""Stored answers served from wire bytes: the table the hit path reads before anything else (pure).

`ClusterAnswers` holds the cluster-zone answers built from the current index generation, keyed by
`wire.fast_key`. They never expire by time: the whole table is dropped when the index changes
(the resolver registers `clear` as an index listener). It is bounded: past `max_entries` the oldest
entry goes, so a flood of random names cannot grow it without limit.

Counting: `stamp` (given by the wiring: `metrics.Slots.stamp`) writes each template's label slot
into its first byte, the byte the hit path uses as its counter index. `hits` counts by slot the
stored answers the resolver serves (TCP, and UDP queries the hit path passes over); `misses` counts
answers built and stored; `evictions` the entries pushed out by the size bound.
"""

from __future__ import annotations

from collections.abc import Callable


class ClusterAnswers:
    """key -> response template (ID 0, lowercase question) for the current index generation."""

    __slots__ = ("table", "max_entries", "clears", "stamp", "hits", "misses", "evictions")

    def __init__(self, max_entries: int = 50_000, *, stamp: Callable[[bytes], bytes] | None = None) -> None:
        self.table: dict[bytes, bytes] = {}
        self.max_entries = max_entries
        self.clears = 0
        self.stamp = stamp
        self.hits = [0] * 256  # by label slot
        self.misses = 0
        self.evictions = 0

    def get(self, key: bytes) -> bytes | None:
        w = self.table.get(key)
        if w is not None:
            self.hits[w[0]] += 1
        return w

    def put(self, key: bytes, wire: bytes) -> None:
        table = self.table
        if len(table) >= self.max_entries and key not in table:
            del table[next(iter(table))]
            self.evictions += 1
        if self.stamp is not None:
            wire = self.stamp(wire)
        self.misses += 1
        table[key] = wire

    def clear(self) -> None:
        if self.table:
            self.table.clear()
            self.clears += 1

    def __len__(self) -> int:
        return len(self.table)
