"""The forward cache: forwarded answers stored, rendered into the hot table once per second (pure).

`ForwardCache` owns the forwarded answers (RFC 2308 negative caching, RFC 8767 serve-stale). Its
store is two cachetools `TLRUCache`s (success and denial, separate sizes and TTL caps) that own
size, LRU eviction and expiry, and are read only on a hot miss. An entry's expiry is a whole
second of the clock; the first query in each second renders the entry with the TTLs set to the
seconds left (offsets precomputed when stored) and puts the bytes in the hot table it is given
(`nodedns.dns.hot.HotTable`, the one the hit path reads; the cluster answers write it too); `tick()` at
the next whole second removes them again, so TTLs go down by one each second and an entry never outlives its
expiry on the hit path. Cost: one render per active entry per second, none per hit. The answers
served this second that will still be fresh, and not due for a refresh, next second are rendered for
it ahead of time, a slice per loop turn in the last part of the second (`stage`), and `tick()` puts
them in the hot table as it removes the old ones: the turn of a second sends no hot name the slow way.

Counting: `stamp` (given by the wiring: `metrics.slots.Slots.stamp`, the "cache" plugin) writes each
template's label slot into its first byte when it is stored, the byte the hit path uses as its
counter index. `export`/`load` hand the entries to a successor process (the warm hand-over).
"""

from __future__ import annotations

import heapq
import math
import random
import struct
import time
from array import array
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from cachetools import Cache, TLRUCache

from nodedns.dns.hot import TRAILER, HotTable, rendered, split, with_ttls
from nodedns.dns.keys import key_flags, key_question
from nodedns.dns.truncate import opt_last
from nodedns.dns.wire import KF_DO, KF_EDNS, KF_RD, QT, RCODE, iter_rrs, opt_record
from nodedns.errors import FormatError
from nodedns.forward.zones import CachePolicy

Clock = Callable[[], float]

STALE_TTL = 30  # RFC 8767: TTL of a stale answer
STAGE_SLICE = 8  # hot answers looked at again per call (`ForwardCache.stage`) when their second comes: a
# caller takes a loop turn's share (nodedns.app.upstreams: calls for TURN_BUDGET of work, then the loop runs)
TOUCH_SLICE = 256  # hot answers marked used in the LRU order per call (`ForwardCache.stage`), first in each second
PREFETCH_FRACTION = 0.1  # refresh when this share of the original TTL is left (CoreDNS default 10%) ...
PREFETCH_SPREAD = 0.1  # ... or up to this share more, drawn per entry: entries stored together refresh apart

POSITIVE = "success"
NEGATIVE = "denial"
SERVFAIL = "servfail"


class Entry:
    """One forwarded answer, stored once: `wire` is the answer as a template whose TTLs are set at sending
    (nodedns.dns.hot.with_ttls: it expires at `expires`), served from the hot table as the very same bytes
    for its whole life; `ttl_offsets` where its records' TTLs sit (two bytes each); `size` what it is
    charged against the byte budget."""

    __slots__ = ("wire", "ttl_offsets", "kind", "rcode", "ttl", "expires", "stale_until", "fail_until", "size",
                 "denied_since", "prefetch_at", "cluster", "asked", "review")

    def __init__(
        self, wire: bytes, ttl_offsets: array[int], kind: str, rcode: int, ttl: int, expires: int,
        stale_until: float, size: int = 0,
    ) -> None:
        self.wire = with_ttls(wire, ttl_offsets, expires)
        self.ttl_offsets = ttl_offsets
        self.kind = kind
        self.rcode = rcode
        self.ttl = ttl  # the TTL it was stored with (after the cap)
        self.expires = expires  # whole second of the clock
        self.stale_until = stale_until
        self.fail_until = 0.0  # upstreams failed for it: serve stale without asking until then
        self.size = size
        self.denied_since = 0.0  # --stale-nxdomain: when an upstream first denied this positive answer (0: never)
        self.prefetch_at = float(expires)  # when a query for it starts a refresh (ForwardCache sets it: jittered)
        self.cluster = False  # an answer for a cluster name (ExternalName chase): tied to the index, never handed on
        # asked in this life: served by `serve` (every life starts outside the hot dict, so its first query
        # comes through Python); refreshed ahead at its prefetch point (`stage`)
        self.asked = False
        self.review = -1  # the second its place in the hot table is looked at again (`ForwardCache.stage`)

    def rendered(self, ttl: int) -> bytes:
        """The answer with every record's TTL set to `ttl`, as new bytes (the stored template unchanged)."""
        return rendered(self.wire, ttl)

    render = rendered

    def plain(self) -> bytes:
        """The answer as stored, without the template's trailer (its TTLs as received)."""
        end = split(self.wire)[0]
        return self.wire[:1] + b"\0" + self.wire[2:end]


ENTRY_OVERHEAD = 768  # bytes an entry costs beyond its answer, key and offsets, hot (its slots in the hot table and
# among the kept ones) or not (tracemalloc: ~730; test_cache_bytes.py)


def charge(key: bytes, wire: bytes, offsets: array[int]) -> int:  # `wire`: the template (its trailer too)
    """What an entry is charged against the byte budget: its answer, its key, its TTL offsets and the
    bookkeeping (the Entry, the stores' dict slots, cachetools' order records)."""
    return len(wire) + len(key) + 4 * len(offsets) + TRAILER.size + ENTRY_OVERHEAD


class _Store(TLRUCache[bytes, Entry]):
    """A TLRUCache bounded by bytes (cachetools' size, each entry's `size`) and by entries, that counts
    evictions (LRU) and drops the evicted key from the hot table."""

    def __init__(self, max_entries: int, max_bytes: int, timer: Clock, hot: HotTable,
                 kept: dict[bytes, Entry]) -> None:
        super().__init__(max(max_bytes, 1), ttu=_time_to_use, timer=timer, getsizeof=_size_of)
        self.max_entries = max_entries
        self.hot = hot
        self.kept = kept  # the entries whose template is hot (ForwardCache.serve): an evicted key leaves them too
        self.evictions = 0

    def __setitem__(self, key: bytes, value: Entry) -> None:
        while len(self) >= self.max_entries and not Cache.__contains__(self, key):
            self.popitem()
        super().__setitem__(key, value)

    def touch(self, keys: Iterable[bytes]) -> None:
        """Mark these keys of the store used now (the hot answers, once a second: the hit paths answer them
        without a lookup here), so the byte budget evicts what nobody asks first."""
        items = getattr(self, "_TLRUCache__items", None)  # cachetools' LRU order, oldest first
        if items is None:
            return
        move = items.move_to_end
        for key in keys:
            if key in items:
                move(key)

    def popitem(self) -> tuple[bytes, Entry]:
        key, entry = super().popitem()
        self.evictions += 1
        self.hot.pop(key)
        self.kept.pop(key, None)
        return key, entry


def _size_of(entry: Entry) -> int:
    return entry.size


def _time_to_use(_key: Hashable, entry: Entry, _now: float) -> float:
    return entry.stale_until


class Template:
    """An upstream response made storable: ID 0, our header flags and OPT, the key's question."""

    __slots__ = ("wire", "ttl_offsets", "rcode", "min_ttl", "negative_ttl", "has_answer")

    def __init__(self, wire: bytes, ttl_offsets: array[int], rcode: int, min_ttl: int | None,
                 negative_ttl: int | None, has_answer: bool) -> None:
        self.wire = wire
        self.ttl_offsets = ttl_offsets
        self.rcode = rcode
        self.min_ttl = min_ttl  # smallest TTL of any record (None: no records)
        self.negative_ttl = negative_ttl  # RFC 2308: min(SOA TTL, SOA MINIMUM) of the authority SOA
        self.has_answer = has_answer


def make_template(key: bytes, response: bytes, *, udp_size: int) -> Template:
    """Normalize an upstream response to `key`'s query. Raises FormatError when it is malformed.

    The header keeps opcode, AD and rcode; AA and TC are cleared; RD and CD come from the key, RA
    is set. The question becomes the key's (lowercase). The upstream's OPT (with its options,
    e.g. cookies) is dropped wherever it sits in the additional section (RFC 6891 section 6.1.1:
    one that is not the last record is first moved there); a bare OPT with our payload size and
    the key's DO bit is added at the end when the key's query had EDNS.
    """
    question = key_question(key)
    qend = 12 + len(question)
    kflags = key_flags(key)
    if len(response) < qend:
        raise FormatError("response shorter than its question")
    rrs = iter_rrs(response, qend)
    if any(r[2] == QT.OPT for r in rrs[:-1]):
        response = opt_last(response)
        rrs = iter_rrs(response, qend)
    flags = struct.unpack_from("!H", response, 2)[0]
    an, ns = struct.unpack_from("!HH", response, 6)
    rcode = flags & 0xF
    ext_rcode = 0
    opt_at: tuple[int, int] | None = None
    offsets: list[int] = []
    min_ttl: int | None = None
    negative_ttl: int | None = None
    for section, start, rtype, ttl_off, end in rrs:
        if rtype == QT.OPT:
            if section != 2 or opt_at is not None:
                raise FormatError("misplaced or repeated OPT record")
            opt_at = (start, end)
            ext_rcode = response[ttl_off]
            continue
        ttl = struct.unpack_from("!I", response, ttl_off)[0] & 0x7FFFFFFF
        if min_ttl is None or ttl < min_ttl:
            min_ttl = ttl
        if section == 1 and rtype == QT.SOA:
            minimum = struct.unpack_from("!I", response, end - 4)[0]
            soa_ttl = min(ttl, minimum)
            negative_ttl = soa_ttl if negative_ttl is None else min(negative_ttl, soa_ttl)
        offsets.append(ttl_off)
    body_end = len(response)
    body = response[qend:]
    arcount = struct.unpack_from("!H", response, 10)[0]
    if opt_at is not None:
        start, end = opt_at
        if end != body_end:
            raise FormatError("OPT record is not the last record")  # not reached: moved there above
        body = response[qend:start]
        arcount -= 1
    if kflags & KF_EDNS:
        body += opt_record(udp_size, bool(kflags & KF_DO), ext_rcode)
        arcount += 1
    # QR | opcode | RD(key) ; RA | AD(upstream) | CD(key) | rcode
    b2 = 0x80 | (response[2] & 0x78) | (kflags & KF_RD)
    b3 = 0x80 | (response[3] & 0x20) | (kflags & 0x10) | rcode
    head = struct.pack("!HBBHHHH", 0, b2, b3, 1, an, ns, arcount)
    wire = head + question + body
    return Template(wire, array("H", offsets), rcode | (ext_rcode << 4), min_ttl, negative_ttl, an > 0)


WARM_MAGIC = b"nodedns forward cache 1\n"  # ForwardCache.export: the format's name and version
# kind, rcode, ttl, expires, stale_until, fail_until, denied_since (seconds from now), key, wire, offsets lengths
_WARM_ENTRY = struct.Struct("=BHidddd HIH".replace(" ", ""))
_WARM_END = struct.Struct("=I")  # the entry count, last: a cut-off export is told from a whole one
_NEVER = -1e300  # fail_until / denied_since not set
_WARM_HORIZON = float(1 << 31)  # seconds: a time in an export further from now than this is not one we wrote
_MIN_KEY = 15  # bytes of the shortest cache key: the canonical header (10) and a question for the root (5)
_KINDS = (POSITIVE, NEGATIVE, SERVFAIL)
_KIND_CODES = {k: i for i, k in enumerate(_KINDS)}



def export_count(data: bytes) -> int:
    """The entries of a ForwardCache export, from its last bytes (0 for what is no export)."""
    if not data.startswith(WARM_MAGIC) or len(data) < len(WARM_MAGIC) + _WARM_END.size:
        return 0
    return int(_WARM_END.unpack_from(data, len(data) - _WARM_END.size)[0])


def _warm_problem(rcode: int, ttl: int, expires: float, stale: float, fail: float, denied: float) -> str:
    """Why the values of an exported entry cannot be ours ("" when they can): an rcode past 12 bits, a
    negative TTL, a time that is not finite or further than `_WARM_HORIZON` from now (fail and denied may
    be `_NEVER`), an expiry after the end of its stale window."""
    if not 0 <= rcode <= 0xFFF:
        return f"rcode {rcode} out of range"
    if ttl < 0:
        return f"TTL {ttl} out of range"
    for name, value in (("expiry", expires), ("stale window", stale), ("failure time", fail),
                        ("denial time", denied)):
        if value == _NEVER and name in ("failure time", "denial time"):
            continue
        if not math.isfinite(value) or abs(value) > _WARM_HORIZON:
            return f"{name} {value!r} out of range"
    if expires > stale:
        return "expiry after the end of its stale window"
    return ""


DEFAULT_MAX_BYTES = 32 << 20  # --cache-max-bytes: the whole agent's forward cache (docs/cache.md "The byte budget")
MAX_ENTRY_BYTES = 16 << 10  # an answer longer than this is served, not stored (docs/cache.md)
MIN_BUDGET_SHARE = 64  # ... nor one over 1/64 of the process's budget: one answer never flushes the cache


class ForwardCache:
    """Forwarded answers: success and denial stores, bounded in entries and together in bytes, rendered
    into the hot table once per second."""

    def __init__(
        self,
        *,
        hot: HotTable,
        success_size: int = 9984,
        success_ttl: float = 30.0,
        denial_size: int = 9984,
        denial_ttl: float = 5.0,
        servfail_ttl: float = 5.0,
        serve_stale: float = 3600.0,
        min_ttl: float = 0.0,
        stale_nxdomain: float = 0.0,
        prefetch: bool = True,
        udp_size: int = 1232,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Clock = time.monotonic,
        stamp: Callable[[bytes], bytes] | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.hot = hot
        hot.clock = clock  # a template's TTLs count down by this cache's clock
        # refresh ahead (`stage`): start the refresh of this key now; False when it cannot start (its caps)
        self.refresh: Callable[[bytes], bool] | None = None
        self.jitter = jitter  # [0, 1): where in the spread an entry's prefetch point falls
        self.clock = clock
        self.stamp = stamp
        self.success_ttl = int(success_ttl)
        self.denial_ttl = int(denial_ttl)
        self.servfail_ttl = int(servfail_ttl)
        self.serve_stale = serve_stale
        self.min_ttl = int(min_ttl)  # --cache-min-ttl (unbound's cache-min-ttl; `admit` caps it as cache-max-ttl)
        self.stale_nxdomain = stale_nxdomain
        self.prefetch_enabled = prefetch
        self.udp_size = udp_size
        self.max_bytes = max_bytes
        self.max_entry = min(MAX_ENTRY_BYTES, max_bytes // MIN_BUDGET_SHARE)
        # the entries whose template is hot (`serve`), until their second to be looked at again comes (`stage`)
        self._kept: dict[bytes, Entry] = {}
        self._reviews: dict[int, list[bytes]] = {}  # second -> the kept keys looked at again then
        self._review_at: list[int] = []  # those seconds (a heap)
        self._due: deque[bytes] = deque()  # kept keys whose second has come, in order, not looked at yet (`stage`)
        # the kept keys as of the turn of the second, marked used in the store TOUCH_SLICE a call (`stage`)
        self._untouched: list[bytes] = []
        self._touch_pos = 0
        # the hot templates the hit paths answered this second (they add them) and the last one: a hot answer
        # a client asked just before its prefetch point is refreshed ahead (`stage`)
        self.asked: set[bytes] = set()
        self._asked_before: set[bytes] = set()
        # a TLRUCache of size 0 refuses every item (ValueError): size 0 means "do not cache"
        self.success = _Store(success_size, max_bytes, clock, hot, self._kept) if success_size > 0 else None
        self.denial = _Store(denial_size, max_bytes, clock, hot, self._kept) if denial_size > 0 else None
        self._hot_keys: list[bytes] = []  # answers hot for this second only (stale ones, `hold`'s)
        self._held = 0  # bytes of the answers held hot for this second that no entry owns (`hold`)
        self._second = int(clock())
        self.stats = {"renders": 0, "inserts": 0, "uncacheable": 0, "stale": 0, "prefetch_due": 0, "too_large": 0,
                      "not_held": 0, "reviewed": 0, "refreshed_ahead": 0}

    # -- reading ---------------------------------------------------------------------------

    def now(self) -> float:
        return self.clock()

    def get(self, key: bytes) -> Entry | None:
        """The stored entry for a key, fresh or stale (None once past the serve-stale window)."""
        entry = self.success.get(key) if self.success is not None else None
        if entry is None and self.denial is not None:
            entry = self.denial.get(key)
        return entry

    @staticmethod
    def fresh(entry: Entry, now: float) -> bool:
        return int(now) < entry.expires

    def stale_usable(self, entry: Entry, now: float, policy: CachePolicy | None = None) -> bool:
        """The entry may be served stale now: within the serve-stale window of its zone (`policy`; None: the
        flags')."""
        window = self.serve_stale if policy is None else policy.stale_window
        return entry.kind != SERVFAIL and now < entry.expires + window

    def serve(self, key: bytes, entry: Entry, now: float, *, asked: bool = True) -> bytes:
        """A fresh entry rendered for the current second (to send now); its template hot from now on, until
        its second to be looked at again (`review_second`: its prefetch point or its expiry) comes. `asked`:
        a client's query (not a refresh's answer): the entry is refreshed ahead at its prefetch point."""
        second = int(now)
        if second != self._second:
            self.tick(now)
        if asked:
            entry.asked = True
        self.stats["renders"] += 1
        if self._kept.get(key) is not entry or self.hot.view.get(key) is not entry.wire:
            self.hot.put(key, entry.wire)
            self._kept[key] = entry
            self._schedule(key, entry, self.review_second(entry, second))
        return entry.rendered(entry.expires - second)

    def review_second(self, entry: Entry, second: int) -> int:
        """The first second after `second` its template is not to stay hot without a look: its expiry, the
        second its prefetch point falls in the second after (refreshed ahead then, `stage`), the next one for
        an entry the upstreams failed or denied, or a SERVFAIL (each query of those comes to the resolver)."""
        if entry.kind == SERVFAIL or entry.denied_since or entry.fail_until > second:
            return second + 1
        due = entry.expires
        if self.prefetch_enabled:
            due = min(due, math.floor(entry.prefetch_at) - 1)
        return max(due, second + 1)

    def _schedule(self, key: bytes, entry: Entry, second: int) -> None:
        entry.review = second
        keys = self._reviews.get(second)
        if keys is None:
            keys = self._reviews[second] = []
            heapq.heappush(self._review_at, second)
        keys.append(key)

    def _unkeep(self, key: bytes) -> None:
        if self._kept.pop(key, None) is not None:
            self.hot.pop(key)

    def serve_stale_answer(self, key: bytes, entry: Entry, now: float, ttl: int = STALE_TTL, *,
                           hot: bool = True) -> bytes:
        """An expired entry with TTL 30 (RFC 8767; `ttl` for last-known-good), kept hot for the rest of this
        second (`hot`; else every query for it comes to the resolver)."""
        second = int(now)
        if second != self._second:
            self.tick(now)
        wire = entry.render(ttl)
        self.stats["stale"] += 1
        if not hot:
            return wire
        self._kept.pop(key, None)
        self.hot.put(key, wire)
        self._hot_keys.append(key)
        return wire

    def hold(self, key: bytes, wire: bytes) -> None:
        """Keep an answer built from cached parts (an ExternalName chase) hot for the rest of this second,
        within the byte budget (beyond it the answer is sent, not held)."""
        second = int(self.clock())
        if second != self._second:
            self.tick()
        if len(wire) > self.max_entry or self.bytes_used() + len(wire) > self.max_bytes:
            self.stats["not_held"] += 1
            return
        self._held += len(wire)
        self._kept.pop(key, None)
        self.hot.put(key, wire if self.stamp is None else self.stamp(wire))
        self._hot_keys.append(key)

    def drop_hot(self, match: Callable[[bytes], bool]) -> int:
        """Take the hot answers whose key `match`es out of the hot table (they are answered otherwise from now
        on); how many."""
        gone = [key for key in self._kept if match(key)]
        for key in gone:
            del self._kept[key]
        return self.hot.pop_many([*gone, *(key for key in self._hot_keys if match(key))])

    def near_expiry(self, entry: Entry, now: float) -> bool:
        """The entry's prefetch point is reached (10% of its TTL, at least 1 s, is left, or up to 10% of the
        TTL earlier: drawn when it was stored), and prefetching applies to it."""
        if not self.prefetch_enabled or entry.kind == SERVFAIL:
            return False
        return now >= entry.prefetch_at

    def prefetch_point(self, ttl: int, expires: int) -> float:
        """When an entry stored now with `ttl`, expiring at `expires`, is refreshed by the next query for it:
        with 10% of the TTL (at least 1 s) left, moved earlier by a random part of another 10%, so the
        entries of a burst (a restart, a busy minute) come due apart, not in the same loop turn."""
        return expires - max(1, math.ceil(ttl * PREFETCH_FRACTION)) - self.jitter() * ttl * PREFETCH_SPREAD

    def prefetch_due(self, entry: Entry, now: float) -> bool:
        """A fresh entry that is being asked for and has reached its prefetch point (`near_expiry`)."""
        due = self.near_expiry(entry, now)
        if due:
            self.stats["prefetch_due"] += 1
        return due

    def last_known_good(self, entry: Entry, now: float, policy: CachePolicy | None = None) -> bool:
        """--stale-nxdomain (of the entry's zone, `policy`): this positive entry may still be served over an
        upstream's NXDOMAIN or NODATA (never denied yet, or first denied less than --stale-nxdomain ago)."""
        window = self.stale_nxdomain if policy is None else policy.stale_nxdomain
        if entry.kind != POSITIVE or window <= 0:
            return False
        return not entry.denied_since or now < entry.denied_since + window

    def denied(self, entry: Entry, now: float, policy: CachePolicy | None = None) -> bool:
        """An entry an upstream denied (NXDOMAIN/NODATA) within --stale-nxdomain: served as last-known-good."""
        window = self.stale_nxdomain if policy is None else policy.stale_nxdomain
        return bool(entry.denied_since) and now < entry.denied_since + window

    def mark_failed(self, entry: Entry, now: float, recheck: float) -> None:
        """The upstreams failed for this entry: serve it stale for `recheck` seconds without asking. (A hot one is
        looked at again the next second at the latest: a refresh is only under way at or past its look.)"""
        entry.fail_until = now + recheck

    # -- writing ---------------------------------------------------------------------------

    def admit(self, key: bytes, response: bytes, *, cluster: bool = False,
              policy: CachePolicy | None = None, asked: bool = True) -> tuple[bytes, Entry | None]:
        """Store an upstream response for `key` and return (template to serve now, entry or None).

        Positive answers are kept min(max(record TTLs, --cache-min-ttl), success cap) (the floor not for
        `cluster` answers); NXDOMAIN and NODATA for
        min(SOA TTL, SOA MINIMUM, denial cap) (RFC 2308; without an SOA they are not cached);
        SERVFAIL for the servfail TTL; anything else is served but not kept. TTL 0 is not cached.
        `cluster`: an answer for a cluster name (ExternalName chase): never served stale. `policy`: the caps
        of the name's zone (None: the flags'). `asked`: a client's query brought it (False: a refresh's
        answer, hot but refreshed ahead again only once a client asks it: `stage`).
        Raises FormatError for a malformed response.
        """
        p = policy
        t = make_template(key, response, udp_size=self.udp_size)
        now = self.clock()
        rcode = t.rcode
        store: _Store | None
        if rcode == RCODE.NOERROR and t.has_answer:
            floor = 0 if cluster else self.min_ttl if p is None else p.min_ttl
            cap = self.success_ttl if p is None else p.success_ttl
            kind, store, ttl = POSITIVE, self.success, min(max(t.min_ttl or 0, floor), cap)
        elif rcode in (RCODE.NOERROR, RCODE.NXDOMAIN):
            cap = self.denial_ttl if p is None else p.denial_ttl
            ttl = 0 if t.negative_ttl is None else min(t.negative_ttl, t.min_ttl or 0, cap)
            kind, store = NEGATIVE, self.denial
        elif rcode == RCODE.SERVFAIL:
            kind, store, ttl = SERVFAIL, self.denial, self.servfail_ttl if p is None else p.servfail_ttl
        else:
            kind, store, ttl = "other", None, 0
        if store is None or ttl <= 0:
            self.stats["uncacheable"] += 1
            self.discard(key)
            return t.wire, None
        return self._put(store, key, t.wire, t.ttl_offsets, kind, rcode, ttl, now, cluster, p, asked)

    def admit_servfail(self, key: bytes, template: bytes, policy: CachePolicy | None = None) -> None:
        """Remember that the upstreams failed for a key (a template we built) for the servfail TTL."""
        ttl = self.servfail_ttl if policy is None else policy.servfail_ttl
        if self.denial is None or ttl <= 0:
            return
        self._put(self.denial, key, template, array("H"), SERVFAIL, RCODE.SERVFAIL, ttl, self.clock(), True)

    def _put(self, store: _Store, key: bytes, wire: bytes, offsets: array[int], kind: str, rcode: int,
             ttl: int, now: float, cluster: bool, policy: CachePolicy | None = None,
             asked: bool = True) -> tuple[bytes, Entry | None]:
        if self.stamp is not None:
            wire = self.stamp(wire)  # byte 0 (the ID, never sent) is the hit path's counter slot
        expires = int(now) + ttl
        if cluster or kind == SERVFAIL:
            stale_until = float(expires)
        elif kind == POSITIVE:  # kept for serve-stale, and for last-known-good over a denial (--stale-nxdomain)
            stale_until = expires + (max(self.serve_stale, self.stale_nxdomain) if policy is None else
                                     max(policy.stale_window, policy.stale_nxdomain))
        else:
            stale_until = expires + (self.serve_stale if policy is None else policy.stale_window)
        entry = Entry(wire, offsets, kind, rcode, ttl, expires, stale_until, charge(key, wire, offsets))
        entry.prefetch_at = self.prefetch_point(ttl, expires)
        entry.cluster = cluster
        for s in (self.success, self.denial):
            if s is not None:
                s.pop(key, None)
        self.hot.pop(key)
        self._kept.pop(key, None)
        if len(wire) > self.max_entry:
            # served, not kept: an answer this large (TCP only) would push hundreds of usual ones out
            self.stats["too_large"] += 1
            return entry.render(max(ttl, 0)), None
        self._make_room(store, entry.size)
        store[key] = entry
        self.stats["inserts"] += 1
        return self.serve(key, entry, now, asked=asked), entry

    def _make_room(self, store: _Store, size: int) -> None:
        """Evict until `size` more bytes fit the budget the two stores share (and this second's held
        answers): least recently used first, from the store written to, then from the other."""
        other = self.denial if store is self.success else self.success
        while self.bytes_used() + size > self.max_bytes:
            victim = store if len(store) else other
            if victim is None or not len(victim):
                break  # nothing left to evict (held answers drop at the next second)
            try:
                victim.popitem()
            except KeyError:  # only expired entries were left, and they are gone now
                continue

    # -- hand-over -------------------------------------------------------------------------

    def export(self) -> bytes:
        """Every entry still usable (fresh, or within its serve-stale / last-known-good window), as bytes
        a successor's `load` takes: times relative to now (both clocks are CLOCK_MONOTONIC of the same
        node), the answer as stored. Answers for cluster names (ExternalName chases) are left out: they
        follow the index, which the successor has its own of; so are remembered SERVFAILs (a successor
        asks again)."""
        now = self.clock()
        out = [WARM_MAGIC]
        count = 0
        for store in (self.success, self.denial):
            if store is None:
                continue
            for key in list(store.keys()):
                try:
                    entry: Entry = Cache.__getitem__(store, key)  # not TLRUCache's: no LRU touch, no expiry
                except KeyError:
                    continue
                if entry.cluster or entry.kind == SERVFAIL or entry.stale_until <= now or len(key) > 0xFFFF:
                    continue
                offsets = entry.ttl_offsets.tobytes()
                out.append(_WARM_ENTRY.pack(
                    _KIND_CODES[entry.kind], entry.rcode, entry.ttl, entry.expires - now, entry.stale_until - now,
                    entry.fail_until - now if entry.fail_until else _NEVER,
                    entry.denied_since - now if entry.denied_since else _NEVER,
                    len(key), len(plain := entry.plain()), len(entry.ttl_offsets)))
                out += (key, plain, offsets)
                count += 1
        out.append(_WARM_END.pack(count))
        return b"".join(out)

    def load(self, data: bytes) -> int:
        """Take the entries a predecessor's `export` wrote; how many were stored. An entry this cache already
        holds (answered since) stays as it is; one past its usable window, too large or of a store that is
        off is skipped; the byte budget evicts as for any insert. Every value is range-checked (a kind, an
        rcode, a TTL, times that are finite and within `_WARM_HORIZON` of now, lengths inside the bytes):
        bytes that are not an export, or one value out of range, raise FormatError and nothing of them is
        kept (the entries stored before the one that broke are taken out again)."""
        if not data.startswith(WARM_MAGIC):
            raise FormatError("not a forward cache export")
        taken: list[bytes] = []
        try:
            return self._load(data, taken)
        except FormatError:
            for key in taken:
                self.discard(key)
            raise

    def _load(self, data: bytes, taken: list[bytes]) -> int:
        now = self.clock()
        pos, end = len(WARM_MAGIC), len(data) - _WARM_END.size
        stored = seen = 0
        room = self.max_bytes - self.bytes_used()  # while it lasts, no eviction to look for (the fast way)
        free = {id(s): s.max_entries - len(s) for s in (self.success, self.denial) if s is not None}
        while pos < end:
            try:
                kind_code, rcode, ttl, expires, stale, fail, denied, klen, wlen, nofs = \
                    _WARM_ENTRY.unpack_from(data, pos)
            except struct.error:
                raise FormatError(f"truncated entry at byte {pos}") from None
            pos += _WARM_ENTRY.size
            if pos + klen + wlen + 2 * nofs > end:
                raise FormatError(f"entry at byte {pos} runs past the end")
            key, wire = data[pos:pos + klen], data[pos + klen:pos + klen + wlen]
            offsets = array("H", data[pos + klen + wlen:pos + klen + wlen + 2 * nofs])
            pos += klen + wlen + 2 * nofs
            if kind_code >= len(_KINDS) or any(o + 4 > wlen for o in offsets) or wlen < 12 or klen < _MIN_KEY:
                raise FormatError(f"malformed entry ending at byte {pos}")
            problem = _warm_problem(rcode, ttl, expires, stale, fail, denied)
            if problem:
                raise FormatError(f"entry ending at byte {pos}: {problem}")
            seen += 1
            kind = _KINDS[kind_code]
            store = self.success if kind == POSITIVE else self.denial
            if store is None or stale <= 0 or wlen > self.max_entry or Cache.__contains__(store, key):
                continue
            other = self.denial if store is self.success else self.success
            if other is not None and Cache.__contains__(other, key):
                continue
            if self.stamp is not None:
                wire = self.stamp(wire)  # this process's counter slot
            entry = Entry(wire, offsets, kind, rcode, ttl, math.floor(now + expires + 0.5), now + stale,
                          charge(key, wire, offsets))  # the stored answer, as a template
            entry.prefetch_at = self.prefetch_point(ttl, entry.expires)
            entry.fail_until = now + fail if fail != _NEVER else 0.0
            entry.denied_since = now + denied if denied != _NEVER else 0.0
            if entry.size <= room and free[id(store)] > 0:
                TLRUCache.__setitem__(store, key, entry)
                room -= entry.size
                free[id(store)] -= 1
            else:
                self._make_room(store, entry.size)
                store[key] = entry
                room = self.max_bytes - self.bytes_used()
                free[id(store)] = store.max_entries - len(store)
            taken.append(key)
            stored += 1
        if pos != end or _WARM_END.unpack_from(data, end)[0] != seen:
            raise FormatError("the export is cut short")
        return stored

    def bytes_used(self) -> int:
        """Bytes charged now: every stored entry (fresh or in its serve-stale window) and the held answers."""
        return int(sum(s.currsize for s in (self.success, self.denial) if s is not None)) + self._held

    def discard(self, key: bytes) -> None:
        for store in (self.success, self.denial):
            if store is not None:
                store.pop(key, None)
        self.hot.pop(key)
        self._kept.pop(key, None)

    def drop(self, match: Callable[[bytes], bool]) -> int:
        """Forget every stored answer (fresh or stale, and its rendering in the hot table) whose key
        `match`es; how many (--hosts: the names a hosts file answers now are never served as forwarded)."""
        dropped = 0
        for store in (self.success, self.denial):
            if store is not None:
                for key in [k for k in store if match(k)]:
                    if store.pop(key, None) is not None:
                        dropped += 1
        dropped += self.drop_hot(match)
        return dropped

    # -- time ------------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> float:
        """At a new second, drop the answers hot for the last one only (stale ones, `hold`'s), and take the
        kept templates whose second to be looked at has come into the list `stage` goes through. Seconds to
        the next one."""
        now = self.clock() if now is None else now
        second = int(now)
        if second != self._second:
            kept = self._kept  # a key served stale, then stored fresh in the same second: its template stays
            self.hot.pop_many([key for key in self._hot_keys if key not in kept])
            self._hot_keys = []
            self._held = 0
            self._second = second
            self._untouched = list(self._kept)
            self._touch_pos = 0
            self._asked_before, self.asked = self.asked, set()
            at, reviews, due = self._review_at, self._reviews, self._due
            while at and at[0] <= second:
                due.extend(reviews.pop(heapq.heappop(at)))
        return second + 1 - now

    def stage(self, limit: int = STAGE_SLICE, now: float | None = None) -> bool:
        """Mark the hot answers used (once a second, TOUCH_SLICE a call: the hit paths answer them without a lookup
        here, so the byte budget evicts what nobody asks first), then look again at up to `limit` hot templates
        whose second has come (`tick`), each as `review_second` decided: one expired, or of an entry the
        upstreams failed or denied, leaves the hot table (its next query comes to the resolver); one at its
        prefetch point that a client asked (through the resolver in its life, or answered by a hit path within
        the last second: `asked`) is refreshed now and kept hot meanwhile (no client waits, even when nobody
        asks before it expires), one not asked leaves (its next query starts the refresh,
        `ForwardPath.forward`); the others stay until their next second.
        True while some remain."""
        now = self.clock() if now is None else now
        second = int(now)
        if second != self._second:
            self.tick(now)
        due, kept = self._due, self._kept
        untouched, pos = self._untouched, self._touch_pos
        if pos < len(untouched):  # the hot answers, used once a second (as the hit paths use them)
            self._touch_pos = end = min(pos + TOUCH_SLICE, len(untouched))
            for store in (self.success, self.denial):
                if store is not None:
                    store.touch(untouched[pos:end])
            if end < len(untouched):
                return True
            self._untouched = []
        for _ in range(min(limit, len(due))):
            key = due.popleft()
            entry = kept.get(key)
            if entry is None or entry.review > second:
                continue  # gone, or its second moved (looked at again later)
            self.stats["reviewed"] += 1
            if (not self._holds(key, entry) or entry.kind == SERVFAIL or entry.expires <= second
                    or entry.denied_since or entry.fail_until > second):
                self._unkeep(key)
                continue
            if self.prefetch_enabled and entry.prefetch_at < second + 2:
                if not entry.asked and (entry.wire in self._asked_before or entry.wire in self.asked):
                    entry.asked = True  # answered by a hit path within the last second
                if not entry.asked or entry.cluster or self.refresh is None or not self._refresh_ahead(key, entry):
                    self._unkeep(key)
                    continue
                self._schedule(key, entry, second + 1)  # refreshed meanwhile, or tried again then
                continue
            self._schedule(key, entry, self.review_second(entry, second))
        return bool(due)

    def _holds(self, key: bytes, entry: Entry) -> bool:
        """`entry` is what a store holds for `key` (a look that is no use of it: the LRU order unchanged)."""
        for store in (self.success, self.denial):
            if store is not None and Cache.__contains__(store, key):
                return Cache.__getitem__(store, key) is entry
        return False

    def _refresh_ahead(self, key: bytes, entry: Entry) -> bool:
        """Start the refresh of an asked entry at its prefetch point (`refresh`): True while it stays hot
        (started now, or in flight already: the entry is marked as not asked, so it is started once)."""
        assert self.refresh is not None
        if not self.refresh(key):
            return True  # the caps: tried again at the next second's staging, hot until then
        entry.asked = False
        self.stats["refreshed_ahead"] += 1
        return True

    def evictions(self) -> dict[str, int]:
        """Entries pushed out by the size bound, per store."""
        return {name: store.evictions if store is not None else 0
                for name, store in (("success", self.success), ("denial", self.denial))}

    def counts(self) -> dict[str, Any]:
        return {
            "success": len(self.success) if self.success is not None else 0,
            "denial": len(self.denial) if self.denial is not None else 0,
            "hot": len(self._hot_keys) + len(self._kept),
            "evictions": sum(s.evictions for s in (self.success, self.denial) if s is not None),
            "bytes": self.bytes_used(),
            "max_bytes": self.max_bytes,
            "max_entry_bytes": self.max_entry,
            **self.stats,
        }
