"""What exists in the cluster zone, pushed to --workers processes so they answer an NXDOMAIN alone.

A worker holds no index; with an `Existence` it answers the misses that existence alone decides
(`ClusterRecords.absent`: no such namespace, no such Service, a name of no valid shape) as the owner would:
the Namespace names exactly, the Services as a counting Bloom filter (never a false negative; a false
positive is asked of the owner), the SOA serial of a negative answer, whether federations are configured.

The owner's `Feed`, fed every index change, makes a `State` at each flush holding only what changed (a new
worker gets the whole); the supervisor sends it before that flush's invalidations on the same ordered stream,
so what a worker answers alone is byte for byte the owner's answer at that point, serial and tags included.
Why: docs/restarts.md "Workers: all cores" (cluster misses).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from nodedns.cluster import objects as k8s
from nodedns.cluster.index import Index

BITS_PER_SERVICE = 16  # filter size: at least this many bits per Service (a power of two, >= MIN_BITS)
MIN_BITS = 1 << 12
MAX_COUNT = 255  # a count that reaches this stays (its bits are never cleared: a false positive only)


def _slots(namespace: str, name: str, mask: int) -> tuple[int, int]:
    """The filter's two bit positions for a Service (the same in every process: no PYTHONHASHSEED)."""
    h = int.from_bytes(hashlib.blake2b(f"{namespace}/{name}".encode(), digest_size=8).digest(), "little")
    return h & mask, (h >> 32) & mask


def filter_bits(services: int) -> int:
    """The filter size for this many Services."""
    bits = MIN_BITS
    while bits < services * BITS_PER_SERVICE:
        bits <<= 1
    return bits


@dataclass(slots=True)
class State:
    """One update of what exists: None fields are unchanged. `bits` replaces the filter (its size
    in bits is len(bits) * 8); `changed` sets bytes of the current one."""

    serial: float
    namespaces: frozenset[str] | None = None
    bits: bytes | None = None
    changed: dict[int, int] | None = None
    federated: bool | None = None


@dataclass(slots=True)
class Existence:
    """A worker's view of what exists (from the owner's `State` messages); `ready` once the first
    whole state arrived."""

    serial: float = 0.0
    namespaces: frozenset[str] = frozenset()
    bits: bytearray = field(default_factory=bytearray)
    mask: int = 0
    federated: bool = True
    ready: bool = False

    def apply(self, state: State) -> None:
        self.serial = state.serial
        if state.namespaces is not None:
            self.namespaces = state.namespaces
        if state.bits is not None:
            self.bits = bytearray(state.bits)
            self.mask = len(state.bits) * 8 - 1
            self.ready = True
        if state.changed:
            bits = self.bits
            for at, value in state.changed.items():
                bits[at] = value
        if state.federated is not None:
            self.federated = state.federated

    def has_namespace(self, namespace: str) -> bool:
        return namespace in self.namespaces

    def may_have_service(self, namespace: str, name: str) -> bool:
        """False: no such Service for sure. True: there may be one (ask the owner)."""
        a, b = _slots(namespace, name, self.mask)
        bits = self.bits
        return bool(bits[a >> 3] & (1 << (a & 7))) and bool(bits[b >> 3] & (1 << (b & 7)))


class Feed:
    """The owner's side: the filter's counts, kept up to date from the index's changes (`changed`),
    and the messages for the workers (`update`: what changed since the last one; `whole`)."""

    def __init__(self, index: Index, *, federated: bool) -> None:
        self.index = index
        self.federated = federated
        self._counts = bytearray()
        self._bits = bytearray()
        self._mask = 0
        self._dirty: set[int] = set()  # bytes of the filter changed since the last update
        self._resized = True
        self._namespaces_changed = True
        self._federated_changed = True
        self._rebuild()

    def _rebuild(self) -> None:
        size = filter_bits(len(self.index.services))
        self._counts = bytearray(size)
        self._bits = bytearray(size // 8)
        self._mask = size - 1
        for ns, name in self.index.services:
            self._add(ns, name)
        self._dirty.clear()
        self._resized = True

    def _add(self, namespace: str, name: str) -> None:
        counts, bits = self._counts, self._bits
        for slot in set(_slots(namespace, name, self._mask)):
            if counts[slot] < MAX_COUNT:
                counts[slot] += 1
            if counts[slot] == 1:
                bits[slot >> 3] |= 1 << (slot & 7)
                self._dirty.add(slot >> 3)

    def _remove(self, namespace: str, name: str) -> None:
        counts, bits = self._counts, self._bits
        for slot in set(_slots(namespace, name, self._mask)):
            if 0 < counts[slot] < MAX_COUNT:
                counts[slot] -= 1
                if counts[slot] == 0:
                    bits[slot >> 3] &= ~(1 << (slot & 7)) & 0xFF
                    self._dirty.add(slot >> 3)

    def changed(self, kind: str, old: Any, new: Any) -> None:
        """An index change (Index.on_record)."""
        if kind == k8s.SERVICE:
            if old is None and new is not None:
                if len(self.index.services) * BITS_PER_SERVICE > len(self._counts):
                    self._rebuild()
                else:
                    self._add(new.namespace, new.name)
            elif new is None and old is not None:
                self._remove(old.namespace, old.name)
        elif kind == k8s.NAMESPACE:
            self._namespaces_changed = True
        elif not kind:
            self._rebuild()
            self._namespaces_changed = True

    def set_federated(self, federated: bool) -> None:
        if federated != self.federated:
            self.federated = federated
            self._federated_changed = True

    def update(self) -> State:
        """What changed since the last update (or whole), and the current serial."""
        state = State(serial=self.index.last_change)
        if self._resized:
            state.bits = bytes(self._bits)
        elif self._dirty:
            state.changed = {at: self._bits[at] for at in self._dirty}
        if self._namespaces_changed:
            state.namespaces = frozenset(self.index.namespaces)
        if self._federated_changed:
            state.federated = self.federated
        self._dirty.clear()
        self._resized = self._namespaces_changed = self._federated_changed = False
        return state

    def whole(self) -> State:
        """The whole state (for a worker that starts)."""
        return State(serial=self.index.last_change, namespaces=frozenset(self.index.namespaces),
                     bits=bytes(self._bits), federated=self.federated)
