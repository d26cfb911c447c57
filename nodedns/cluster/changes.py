"""The watch path in one place: each index change, its dependency tags named once, handed to every listener.

    API watch event / manifest -> cluster.apisync / app (load) -> Index.apply_change -> Index._changed
        -> Changes (one per index) makes a `Change`: kind, old, new, and `tags`
           (`records.change_tags`, computed on first use and at most once per change)
        -> every listener, in the order the wiring registered them (app.agent.Agent._wire_changes, then
           workers.modes or shadow.agent; nowhere else): the resolver's stored answers
           (`ClusterReplies.index_changed`), the allow list's inputs, the node's rules, insight's
           address -> Pod map, and by mode the supervisor's flush to its workers (`Fleet.index_changed`)
           or the shadow's propagation race (`Shadow.record_changed`)

kind "" means anything may have changed (a relist, the first sync): `tags` is then None, every
stored cluster answer goes.
"""

from __future__ import annotations

from collections.abc import Callable

from nodedns.cluster.index import Index
from nodedns.cluster.objects import Record
from nodedns.cluster.records import change_tags

_UNNAMED = object()


class Change:
    """One effective index change: what kind of object, its old and new form (None: absent), and the
    tags of the stored answers built from it (computed once, when a listener first asks). What a source
    says of an object is an `index.SlimChange`; this is what it changed in the index, if anything."""

    __slots__ = ("kind", "new", "old", "_tags")

    def __init__(self, kind: str, old: Record | None, new: Record | None) -> None:
        self.kind = kind
        self.old = old
        self.new = new
        self._tags: object = _UNNAMED

    @property
    def tags(self) -> frozenset[str] | None:
        """The dependency tags this change touches (None: everything)."""
        if self._tags is _UNNAMED:
            self._tags = change_tags(self.kind, self.old, self.new)
        return self._tags  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Change({self.kind!r}, {self.old!r}, {self.new!r})"


ChangeListener = Callable[[Change], None]


class Changes:
    """The fan-out of one index's changes: `add` a listener (the wiring does), each change reaches
    every listener in the order they were added."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._listeners: list[ChangeListener] = []
        index.on_record(self._changed)

    def add(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    @property
    def listeners(self) -> tuple[ChangeListener, ...]:
        return tuple(self._listeners)

    def _changed(self, kind: str, old: Record | None, new: Record | None) -> None:
        change = Change(kind, old, new)
        for listener in self._listeners:
            listener(change)
