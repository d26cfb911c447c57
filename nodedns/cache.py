"""Stored answers served from wire bytes: the table the hit path reads before anything else (pure).

`ClusterAnswers` holds the cluster-zone answers built from the current index generation, keyed by
`wire.fast_key`. They never expire by time: the whole table is dropped when the index changes
(the resolver registers `clear` as an index listener). It is bounded: past `max_entries` the oldest
entry goes, so a flood of random names cannot grow it without limit.
"""

from __future__ import annotations


class ClusterAnswers:
    """key -> response template (ID 0, lowercase question) for the current index generation."""

    __slots__ = ("table", "max_entries", "clears")

    def __init__(self, max_entries: int = 50_000) -> None:
        self.table: dict[bytes, bytes] = {}
        self.max_entries = max_entries
        self.clears = 0

    def get(self, key: bytes) -> bytes | None:
        return self.table.get(key)

    def put(self, key: bytes, wire: bytes) -> None:
        table = self.table
        if len(table) >= self.max_entries and key not in table:
            del table[next(iter(table))]
        table[key] = wire

    def clear(self) -> None:
        if self.table:
            self.table.clear()
            self.clears += 1

    def __len__(self) -> int:
        return len(self.table)
