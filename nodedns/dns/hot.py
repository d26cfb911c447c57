"""The hot table: the one dict the hit paths read, written only through `HotTable` (pure).

Key: a cache key (`keys.KEY_HEAD`); value: a response template (ID 0, the question lowercased, its
first byte the label slot) that the hit paths patch and send as is. Two writers share it: the cluster
answers (`nodedns.serve.cache.ClusterAnswers`) and the forward cache (`nodedns.forward.store.ForwardCache`,
its renderings for the current second). Each writes through `put`, `pop` and `put_many`; the hit paths
(`nodedns.serve.hitpath`, the C one in nodedns/serve/_hitpath.c) and the other readers take `view`, the
plain dict itself, so a lookup costs what a dict lookup costs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class HotTable:
    """key -> response template: `view` is read (a plain dict), never written but through the methods."""

    __slots__ = ("view",)

    def __init__(self) -> None:
        self.view: dict[bytes, bytes] = {}

    def put(self, key: bytes, wire: bytes) -> None:
        """Serve `wire` for `key` from now on (replacing what was there)."""
        self.view[key] = wire

    def put_many(self, answers: Mapping[bytes, bytes]) -> None:
        """Serve each of `answers` from now on."""
        self.view.update(answers)

    def pop(self, key: bytes) -> bytes | None:
        """Stop serving `key`: what was served for it, or None."""
        return self.view.pop(key, None)

    def pop_many(self, keys: Iterable[bytes]) -> int:
        """Stop serving each of `keys`; how many were served."""
        pop = self.view.pop
        dropped = 0
        for key in keys:
            if pop(key, None) is not None:
                dropped += 1
        return dropped

    def get(self, key: bytes) -> bytes | None:
        return self.view.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self.view

    def __len__(self) -> int:
        return len(self.view)
