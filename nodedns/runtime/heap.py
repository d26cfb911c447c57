"""Giving freed C heap back to the system: glibc `malloc_trim`, at once or when the heap has shrunk; and the
collector's long-lived objects frozen once the agent has synced (`freeze_collector`).

glibc keeps what a process frees for later mallocs, so after a burst (a flood of TCP answers, a relist's
parsed pages) a process may hold a lot of free heap near its memory limit. `release_free_heap()` hands the
free pages back at once (`malloc_trim(0)`).

`HeapTrimmer` decides when (looked at every TRIM_PERIOD by `trim_heap`) from two cheap readings: RSS
(/proc/self/statm) and the heap in use (`mallinfo2`). When the memory held without use (RSS minus in use) has
grown by `threshold` since the last trim, the heap shrank under an RSS that stayed: it trims, in a worker
thread, never on the loop. An idle process, or one whose caches fill and stay, is never trimmed. Without glibc
(musl) every function here does nothing. Where it matters for sizing: docs/node.md "Resources".
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Protocol

log = logging.getLogger("nodedns.heap")

TRIM_PERIOD = 5.0  # seconds between two looks (and so between two trims, at most one per look)
TRIM_THRESHOLD = 16 << 20  # bytes of newly held free memory that make a trim worth its milliseconds
_PAGE = os.sysconf("SC_PAGE_SIZE")
GC_FREEZE_AFTER = 10.0  # seconds after the sync: then the collector's long-lived objects are frozen (gc.freeze)


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


_LIBC = _libc()
_TRIM = getattr(_LIBC, "malloc_trim", None)
_MALLINFO2 = getattr(_LIBC, "mallinfo2", None)
if _MALLINFO2 is not None:
    _MALLINFO2.restype = _Mallinfo2
    _MALLINFO2.argtypes = []


def release_free_heap() -> None:
    """Give the C heap's free pages back to the system (glibc `malloc_trim`); a no-op without glibc.

    It can take tens of milliseconds on a large fragmented heap (ctypes lets go of the GIL
    meanwhile): call it from a worker thread, not the event loop, unless nothing else runs yet.
    """
    if _TRIM is not None:
        _TRIM(0)


def heap_in_use() -> int | None:
    """Bytes of the C heap in use (glibc `mallinfo2`: the arenas' allocated chunks plus mmapped ones);
    None without glibc 2.33+."""
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    return int(info.uordblks + info.hblkhd)


def resident() -> int:
    """This process's resident set size in bytes (0 when /proc cannot tell)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class HeapTrimmer:
    """When to trim (module docstring): RSS minus the heap in use has grown by `threshold` since the
    last trim (or the start)."""

    def __init__(self, *, threshold: int = TRIM_THRESHOLD, rss: Callable[[], int] = resident,
                 in_use: Callable[[], int | None] = heap_in_use) -> None:
        self.threshold = threshold
        self.rss = rss
        self.in_use = in_use
        self.trims = 0
        self.baseline = self._held()

    def _held(self) -> int | None:
        used = self.in_use()
        return None if used is None else self.rss() - used

    def due(self) -> bool:
        """The memory held without use has grown by the threshold since the last trim."""
        held = self._held()
        if held is None or self.baseline is None:
            return False
        if held < self.baseline:
            self.baseline = held  # less held than before (a trim of the top, a smaller start): the new floor
        return held - self.baseline >= self.threshold

    def trimmed(self) -> None:
        """A trim ran: what is held now is the new baseline."""
        self.trims += 1
        self.baseline = self._held()


async def trim_heap(trimmer: HeapTrimmer, *, period: float | None = None,
                    trim: Callable[[], None] = release_free_heap) -> None:
    """Every `period` (TRIM_PERIOD), trim the heap when `trimmer` says it shrank (a named task of every
    process that answers DNS)."""
    while True:
        await asyncio.sleep(TRIM_PERIOD if period is None else period)
        if trimmer.due():
            before = trimmer.rss()
            await asyncio.to_thread(trim)
            trimmer.trimmed()
            log.debug("returned %.1f MB of free heap to the system", (before - trimmer.rss()) / (1 << 20))


class FreezeCount(Protocol):
    """Where the freezes are counted (the "event_loop" section's `gc_freezes`)."""

    gc_freezes: int


async def freeze_collector(synced: Callable[[], Awaitable[bool]], after: float, count: FreezeCount) -> None:
    """Once `synced()` says the index has synced (False: a stop came first, nothing is frozen), and again `after`
    seconds later (the first answers made and stored), move every object the collector tracks into its
    permanent generation (gc.freeze): a full collection no longer walks the modules, the index and the warm
    cache, and those walks were its long pauses (docs/cache.md "Tail latency"). Objects frozen are still freed
    when their last reference goes; only a reference cycle among them would stay."""
    if not await synced():
        return
    gc.freeze()  # O(1): the generations' lists joined to the permanent one (never gc.get_freeze_count(): it
    count.gc_freezes += 1  # walks that list, 12 ms for a forwarder's objects, on the loop)
    await asyncio.sleep(after)
    gc.freeze()
    count.gc_freezes += 1
