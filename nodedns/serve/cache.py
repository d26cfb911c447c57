"""The hot table the hit path reads before anything else, and the cluster answers in it (pure).

One hot dict, `ClusterAnswers.table` (key: see `keys.KEY_HEAD`, value = a response template with ID 0
and the question lowercased), holds every answer the UDP hit path may send as is: the cluster
answers of the current index generation, and the forwarded answers rendered for the current
second (by `nodedns.forward.store.ForwardCache`, which is handed the same dict). The hit path does
one lookup in it, patches ID and question case, and sends.

`ClusterAnswers` entries never expire by time: each is stored with the dependency tags it was built
from (`records` names them), and an index change drops only the entries of the tags it names
(`invalidate`); forwarded answers in the same dict are never touched by it. Side structures only:
`_keys` (tag -> keys) and `_tags` (key -> tags), written on insert and read on invalidation, never
on a hit. `aside` holds cluster answers the hit path must not read (an NXDOMAIN that an autopath
walk may replace; a worker's "not ours" marks), under the same tags. `expect`/`settled` tell an
answer that spans an await (an ExternalName chase) whether its tags changed meanwhile. It is
bounded: past `max_entries` the oldest entry goes (its tags with it), so a flood of random names
cannot grow it without limit. The --filter-aaaa NODATAs (`filtered_template`) are stored here too.

Counting: `stamp` (given by the wiring: `metrics.Slots.stamp`) writes each template's label slot
into its first byte, the byte the hit path uses as its counter index. `hits` counts by slot the
stored answers the resolver serves (TCP, and UDP queries the hit path passes over); `misses` counts
answers built and stored; `evictions` the entries pushed out by the size bound. `ForwardCache` stamps
its templates the same way when they are stored (its wiring passes the "cache" plugin), so the hit
path counts forwarded and cluster answers alike.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

from nodedns.dns.keys import key_flags, key_question
from nodedns.dns.pack import encode_name
from nodedns.dns.wire import KF_DO, KF_EDNS, KF_RD, QT, opt_record


class ClusterAnswers:
    """key -> response template (ID 0, lowercase question): the hot dict of the UDP hit path, and
    the dependency tags of the cluster answers in it."""

    __slots__ = ("table", "aside", "max_entries", "clears", "stamp", "hits", "misses", "evictions", "invalidated",
                 "on_not_ours", "_keys", "_tags", "_pending")

    def __init__(self, max_entries: int = 50_000, *, stamp: Callable[[bytes], bytes] | None = None) -> None:
        self.table: dict[bytes, bytes] = {}
        self.aside: dict[bytes, bytes] = {}  # cluster answers the hit path must not serve (see the docstring)
        self.max_entries = max_entries
        self.clears = 0  # invalidations of everything (the first sync, a new federation map)
        self.invalidated = 0  # entries dropped by targeted invalidation
        self.stamp = stamp
        self.hits = [0] * 256  # by label slot
        self.misses = 0
        self.evictions = 0
        self._keys: dict[str, set[bytes]] = {}  # tag -> keys stored with it
        self._tags: dict[bytes, frozenset[str]] = {}  # key -> its tags (every cluster entry, hot or aside)
        self._pending: set[bytes] = set()  # expect()ed keys whose tags have not changed since
        # a "not ours" mark (b"" aside) dropped: its forwarded answer goes too (set by the resolver)
        self.on_not_ours: Callable[[bytes], None] | None = None

    def get(self, key: bytes) -> bytes | None:
        w = self.table.get(key)
        if w is not None:
            self.hits[w[0]] += 1
        return w

    def put(self, key: bytes, wire: bytes, tags: frozenset[str] = frozenset(), *, hot: bool = True) -> bytes:
        """Store a cluster answer built from `tags`: in the hot dict, or (`hot=False`) aside. The stored
        (stamped) bytes."""
        if self.stamp is not None and wire:
            wire = self.stamp(wire)
        self.misses += 1
        self._forget(key)
        if hot:
            self.aside.pop(key, None)
            table = self.table
            if len(table) >= self.max_entries and key not in table:
                oldest = next(iter(table))
                del table[oldest]
                self._forget(oldest)
                self.evictions += 1
            table[key] = wire
        else:
            if len(self.aside) >= self.max_entries:
                oldest = next(iter(self.aside))
                del self.aside[oldest]
                self._forget(oldest)
                self.evictions += 1
            self.aside[key] = wire
        self._remember(key, tags)
        return wire

    def watch(self, key: bytes, tags: frozenset[str]) -> None:
        """An answer that another part put in the hot dict (an ExternalName chase, for the rest of the
        second) depends on `tags`: drop it from the hot dict when one of them changes."""
        self._forget(key)
        if len(self._tags) >= 2 * self.max_entries:
            self._prune()
        self._remember(key, tags)

    def _prune(self) -> None:
        """Forget the tags of keys no longer stored (held answers that left at the turn of a second)."""
        table, aside, pending = self.table, self.aside, self._pending
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
        table, aside, pending = self.table, self.aside, self._pending
        dropped = 0
        for tag in tags:
            held = keys.pop(tag, None)
            if held is None:
                continue
            for key in held:
                hot = table.pop(key, None)
                side = aside.pop(key, None)
                if hot is not None or side is not None:
                    dropped += 1
                if side == b"" and self.on_not_ours is not None:
                    self.on_not_ours(key)  # the forwarded answer of a name that may be ours now
                pending.discard(key)
                self._forget(key)
        self.invalidated += dropped
        return dropped

    def clear(self) -> int:
        """Drop every cluster answer (hot, aside, held chases); forwarded answers stay."""
        table = self.table
        dropped = len(self.aside)
        for key in self._tags:
            if table.pop(key, None) is not None:
                dropped += 1
        if self.on_not_ours is not None:
            for key, wire in self.aside.items():
                if not wire:
                    self.on_not_ours(key)
        self.aside.clear()
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
        return len(self.table)



FILTER_TTL = 30  # --filter-aaaa: the TTL and SOA MINIMUM of the NODATA (RFC 2308: how long a client keeps it)


def filter_soa(zone: str) -> bytes:
    """The authority record of a --filter-aaaa NODATA, in wire form (uncompressed, the same bytes in every
    answer: `metrics.Slots` tells a filtered answer by them): an SOA for the root, as a CoreDNS `template`
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

