"""The cluster answers in the hot table the hit path reads before anything else (pure).

The hot table (`nodedns.dns.hot.HotTable`, key: see `keys.KEY_HEAD`, value = a response template with ID 0
and the question lowercased) holds every answer the UDP hit path may send as is: the cluster
answers of the current index generation, put and popped here, and the forwarded answers rendered for
the current second, put and popped by `nodedns.forward.store.ForwardCache` (given the same table). The
hit path does one lookup in its dict, patches ID and question case, and sends.

`ClusterAnswers` entries never expire by time: each is stored with the dependency tags it was built
from (`records` names them), and an index change drops only the entries of the tags it names
(`invalidate`); forwarded answers in the same table are never touched by it. Side structures only:
`_keys` (tag -> keys) and `_tags` (key -> tags), written on insert and read on invalidation, never
on a hit. `aside` holds cluster answers the hit path must not read (an NXDOMAIN that an autopath
walk may replace; a worker's "not ours" marks), under the same tags. `expect`/`settled` tell an
answer that spans an await (an ExternalName chase) whether its tags changed meanwhile. The
--filter-aaaa NODATAs (`filtered_template`) are stored here too.

Bounded in bytes as the forward cache is (docs/cache.md "The byte budget"): each cluster answer, hot or
aside, is charged its answer, its key and ENTRY_OVERHEAD (the dict slots, the tag sets, its place in the
order), and past `max_bytes` (this process's cluster share of --cache-max-bytes, `CLUSTER_SHARE`) or
`max_entries` the oldest stored answers go (their tags with them), so neither a flood of random names
nor a Service whose answers are large can grow it without limit. An answer over `max_entry` (16 KiB,
or 1/64 of the budget when that is less) is never stored: it is built again for each query
(`too_large` counts them), so a few hundred such answers cannot push out thousands of usual ones.
Forwarded answers in the hot table are the forward cache's, charged there; an ExternalName chase held
hot for a second likewise.

Counting: `stamp` (given by the wiring: `metrics.slots.Slots.stamp`) writes each template's label slot
into its first byte, the byte the hit path uses as its counter index. `hits` counts by slot the
stored answers the resolver serves (TCP, and UDP queries the hit path passes over); `misses` counts
answers built and stored (or built and, too large, not stored); `evictions` the entries pushed
out by the bounds. `ForwardCache` stamps
its templates the same way when they are stored (its wiring passes the "cache" plugin), so the hit
path counts forwarded and cluster answers alike.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

from nodedns.dns.hot import HotTable
from nodedns.dns.keys import key_flags, key_question
from nodedns.dns.pack import encode_name
from nodedns.dns.wire import KF_DO, KF_EDNS, KF_RD, QT, opt_record

DEFAULT_MAX_BYTES = 8 << 20  # a one-process agent's cluster share of the default --cache-max-bytes
MAX_ENTRY_BYTES = 16 << 10  # an answer longer than this is built for each query, not stored ...
MIN_BUDGET_SHARE = 64  # ... nor one over 1/64 of the budget: one answer never flushes the others
CLUSTER_SHARE = 4  # a process's share of --cache-max-bytes: 1/CLUSTER_SHARE for cluster answers, the rest forwarded
# bytes a stored cluster answer costs beyond its answer and key: the bytes objects, the hot dict's slot,
# its tags (the key -> tags slot, the tag sets it is in) and its place in the order (tracemalloc: ~720
# with two tags of its own; tests/unit/serve/test_cache.py)
ENTRY_OVERHEAD = 800


def cluster_share(process_bytes: int) -> int:
    """The cluster answers' part of a process's share of --cache-max-bytes (the forward cache keeps the rest)."""
    return process_bytes // CLUSTER_SHARE


class ClusterAnswers:
    """The cluster answers (response templates: ID 0, lowercase question) in the hot table of the hit
    paths, and their dependency tags."""

    __slots__ = ("hot", "aside", "max_entries", "max_bytes", "max_entry", "bytes", "too_large", "clears", "stamp",
                 "hits", "misses", "evictions", "invalidated", "on_not_ours", "_keys", "_tags", "_pending",
                 "_charged")

    def __init__(self, max_entries: int = 50_000, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 stamp: Callable[[bytes], bytes] | None = None, hot: HotTable | None = None) -> None:
        self.hot = hot if hot is not None else HotTable()  # shared with the forward cache
        self.aside: dict[bytes, bytes] = {}  # cluster answers the hit path must not serve (see the docstring)
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry = min(MAX_ENTRY_BYTES, max_bytes // MIN_BUDGET_SHARE)
        self.bytes = 0  # what the stored cluster answers are charged (hot and aside)
        self.too_large = 0  # answers built but not stored for their size
        self.clears = 0  # invalidations of everything (the first sync, a new federation map)
        self.invalidated = 0  # entries dropped by targeted invalidation
        self.stamp = stamp
        self.hits = [0] * 256  # by label slot
        self.misses = 0
        self.evictions = 0
        self._keys: dict[str, set[bytes]] = {}  # tag -> keys stored with it
        self._tags: dict[bytes, frozenset[str]] = {}  # key -> its tags (every cluster entry, hot or aside)
        self._pending: set[bytes] = set()  # expect()ed keys whose tags have not changed since
        # key -> its charge, oldest first, of every stored cluster answer: > 0 in the hot dict, < 0 aside
        self._charged: dict[bytes, int] = {}
        # a "not ours" mark (b"" aside) dropped: its forwarded answer goes too (set by the resolver)
        self.on_not_ours: Callable[[bytes], None] | None = None

    def get(self, key: bytes) -> bytes | None:
        w = self.hot.get(key)  # as sent now (a forwarded template's TTLs set)
        if w is not None:
            self.hits[w[0]] += 1
        return w

    def put(self, key: bytes, wire: bytes, tags: frozenset[str] = frozenset(), *, hot: bool = True) -> bytes:
        """Store a cluster answer built from `tags`: in the hot dict, or (`hot=False`) aside; one over
        `max_entry` is not stored (counted in `too_large`). The stamped bytes, stored or not."""
        if self.stamp is not None and wire:
            wire = self.stamp(wire)
        self.misses += 1
        self._unstore(key)
        self._forget(key)
        if len(wire) > self.max_entry:
            self.too_large += 1  # built for each query: a few such answers never push out the usual ones
            return wire
        size = len(key) + len(wire) + ENTRY_OVERHEAD
        charged = self._charged
        while charged and (self.bytes + size > self.max_bytes or len(charged) >= self.max_entries):
            oldest = next(iter(charged))
            self._unstore(oldest)
            self._forget(oldest)
            self.evictions += 1
        if hot:
            self.hot.put(key, wire)
            charged[key] = size
        else:
            self.aside[key] = wire
            charged[key] = -size
        self.bytes += size
        self._remember(key, tags)
        return wire

    def _unstore(self, key: bytes) -> bool:
        """Drop the cluster answer stored for `key` (hot or aside) and its charge; False when none was."""
        size = self._charged.pop(key, None)
        if size is None:
            return False
        if size > 0:
            self.hot.pop(key)
            self.bytes -= size
        else:
            self.aside.pop(key, None)
            self.bytes += size
        return True

    def watch(self, key: bytes, tags: frozenset[str]) -> None:
        """An answer that another part put in the hot dict (an ExternalName chase, for the rest of the
        second) depends on `tags`: drop it from the hot dict when one of them changes."""
        self._forget(key)
        if len(self._tags) >= 2 * self.max_entries:
            self._prune()
        self._remember(key, tags)

    def _prune(self) -> None:
        """Forget the tags of keys no longer stored (held answers that left at the turn of a second)."""
        table, aside, pending = self.hot.view, self.aside, self._pending
        for key in [k for k in self._tags if k not in table and k not in aside and k not in pending]:
            self._forget(key)

    def expect(self, key: bytes, tags: frozenset[str]) -> None:
        """An answer for `key` built from `tags` will be stored after an await: `settled` tells whether
        they are still unchanged then."""
        if key not in self._tags:
            self._remember(key, tags)
        else:
            for tag in tags:
                self._keys.setdefault(tag, set()).add(key)
            self._tags[key] = self._tags[key] | tags
        self._pending.add(key)

    def settled(self, key: bytes) -> bool:
        """No tag given to `expect(key, ...)` changed since (and the expectation is consumed)."""
        if key in self._pending:
            self._pending.discard(key)
            return True
        return False

    def _remember(self, key: bytes, tags: frozenset[str]) -> None:
        self._tags[key] = tags
        keys = self._keys
        for tag in tags:
            held = keys.get(tag)
            if held is None:
                keys[tag] = {key}
            else:
                held.add(key)

    def _forget(self, key: bytes) -> None:
        tags = self._tags.pop(key, None)
        if tags is None:
            return
        keys = self._keys
        for tag in tags:
            held = keys.get(tag)
            if held is not None:
                held.discard(key)
                if not held:
                    del keys[tag]

    def invalidate(self, tags: Iterable[str] | None) -> int:
        """Drop the cluster answers built from any of `tags` (None: every cluster answer, hot or aside;
        forwarded answers stay). The number of entries dropped."""
        if tags is None:
            return self.clear()
        keys = self._keys
        hot, aside, pending = self.hot, self.aside, self._pending
        dropped = 0
        for tag in tags:
            held = keys.pop(tag, None)
            if held is None:
                continue
            for key in held:
                side = aside.get(key)
                # the stored answer, and what else the hot dict holds for it: a watched chase, or the
                # forwarded answer of a "not ours"
                if self._unstore(key) | (hot.pop(key) is not None):
                    dropped += 1
                if side == b"" and self.on_not_ours is not None:
                    self.on_not_ours(key)  # the forwarded answer of a name that may be ours now
                pending.discard(key)
                self._forget(key)
        self.invalidated += dropped
        return dropped

    def clear(self) -> int:
        """Drop every cluster answer (hot, aside, held chases); forwarded answers stay."""
        dropped = len(self.aside) + self.hot.pop_many(self._tags)
        if self.on_not_ours is not None:
            for key, wire in self.aside.items():
                if not wire:
                    self.on_not_ours(key)
        self.aside.clear()
        self._charged.clear()
        self.bytes = 0
        self._tags.clear()
        self._keys.clear()
        self._pending.clear()
        self.clears += 1
        return dropped

    def with_tag(self, tag: str) -> int:
        """How many stored answers carry `tag`."""
        held = self._keys.get(tag)
        return len(held) if held is not None else 0

    def tagged(self) -> int:
        """Cluster entries with their tags (hot, aside, held): the side structures' size."""
        return len(self._tags)

    def __len__(self) -> int:
        return len(self.hot)



FILTER_TTL = 30  # --filter-aaaa: the TTL and SOA MINIMUM of the NODATA (RFC 2308: how long a client keeps it)


def filter_soa(zone: str) -> bytes:
    """The authority record of a --filter-aaaa NODATA, in wire form (uncompressed, the same bytes in every
    answer: `metrics.slots.Slots` tells a filtered answer by them): an SOA for the root, as a CoreDNS `template`
    for `.` would write it, naming this agent's cluster zone (`ns.dns.<zone>`, `hostmaster.<zone>`), TTL
    and MINIMUM FILTER_TTL."""
    rdata = (encode_name(f"ns.dns.{zone}") + encode_name(f"hostmaster.{zone}")
             + struct.pack("!IIIII", 1, 7200, 1800, 86400, FILTER_TTL))
    return b"\x00" + struct.pack("!HHIH", QT.SOA, 1, FILTER_TTL, len(rdata)) + rdata


def filtered_template(key: bytes, soa: bytes, *, udp_size: int) -> bytes:
    """The NODATA for a filtered AAAA question (`key`): NOERROR, RA, RD and CD from the key, no answer, `soa`
    in authority, our bare OPT when the key's query had EDNS (ID 0, the key's lowercase question)."""
    kflags = key_flags(key)
    edns = bool(kflags & KF_EDNS)
    head = struct.pack("!HBBHHHH", 0, 0x80 | (kflags & KF_RD), 0x80 | (kflags & 0x10), 1, 0, 1, int(edns))
    tail = opt_record(udp_size, bool(kflags & KF_DO)) if edns else b""
    return head + key_question(key) + soa + tail

