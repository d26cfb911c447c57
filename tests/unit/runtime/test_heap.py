"""nodedns.runtime.heap: the heap a burst left free goes back to the system, and only then (an idle process, or one
whose caches fill and stay, is never trimmed); the collector's objects frozen once the index has synced."""

from __future__ import annotations

import asyncio
import gc
from types import SimpleNamespace

import pytest

from nodedns.runtime import heap
from nodedns.runtime.heap import HeapTrimmer
from tests.support.helpers import EXAMPLE, running_agent, wait_for

MB = 1 << 20


class Readings:
    """RSS and heap in use as a test sets them (bytes)."""

    def __init__(self, rss: int, in_use: int | None) -> None:
        self.rss_value, self.in_use_value = rss, in_use

    def rss(self) -> int:
        return self.rss_value

    def in_use(self) -> int | None:
        return self.in_use_value


# each step: (RSS MB, heap in use MB, due?), starting from RSS 40 MB with 10 MB in use
STEPS = [
    ("idle", [(40, 10, False), (40, 10, False), (40, 10, False)]),
    ("caches fill and stay", [(90, 60, False), (140, 110, False), (140, 110, False)]),
    ("a burst freed", [(240, 210, False), (240, 15, True)]),
    ("a small burst freed", [(50, 20, False), (50, 12, False)]),
    ("freed heap reused, then freed", [(240, 210, False), (240, 100, True)]),
    ("freed heap reused first", [(40, 25, False), (40, 10, False), (60, 10, True)]),
    # less held than at the start (the top of the heap went back by itself): the floor comes down with it,
    # and the threshold counts from there, to the byte (16 MB more held: due; 15 MB: not yet)
    ("the floor comes down", [(30, 20, False), (40, 15, False), (40, 14, True)]),
]


@pytest.mark.parametrize("steps", [s[1] for s in STEPS], ids=[s[0] for s in STEPS])
def test_a_trim_is_due_only_once_the_heap_shrank_under_rss_that_stayed(steps: list[tuple[int, int, bool]]) -> None:
    r = Readings(40 * MB, 10 * MB)
    trimmer = HeapTrimmer(rss=r.rss, in_use=r.in_use)
    for rss, in_use, due in steps:
        r.rss_value, r.in_use_value = rss * MB, in_use * MB
        assert trimmer.due() is due, (rss, in_use)


def test_after_a_trim_what_is_held_is_the_new_baseline() -> None:
    r = Readings(240 * MB, 15 * MB)
    trimmer = HeapTrimmer(rss=r.rss, in_use=r.in_use)
    r.rss_value = 240 * MB
    trimmer.baseline = 30 * MB  # held before the burst
    assert trimmer.due()
    r.rss_value = 60 * MB  # malloc_trim gave back what it could; some stays (fragments, pymalloc arenas)
    trimmer.trimmed()
    assert trimmer.trims == 1 and not trimmer.due()
    r.rss_value = 60 * MB + heap.TRIM_THRESHOLD - 1
    assert not trimmer.due()
    r.rss_value = 60 * MB + heap.TRIM_THRESHOLD
    assert trimmer.due()


def test_without_glibc_nothing_is_ever_due() -> None:
    r = Readings(400 * MB, None)
    trimmer = HeapTrimmer(rss=r.rss, in_use=r.in_use)
    r.rss_value = 900 * MB
    assert not trimmer.due()


@pytest.mark.skipif(heap.heap_in_use() is None, reason="not glibc 2.33+: no mallinfo2, no malloc_trim")
def test_a_running_agent_gives_back_the_heap_a_burst_left_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent in this process (its trim task on its own loop); a burst of 60 KB objects, the size of large
    TCP answers, allocated and freed here: the agent's next look returns it to the system."""
    monkeypatch.setattr(heap, "TRIM_PERIOD", 0.2)
    with running_agent({"manifests": str(EXAMPLE)}) as agent:
        assert agent.agent.mode.trim_heap
        wait_for(lambda: heap.resident() > 0, what="/proc readable")
        before = heap.resident()
        burst = [bytes(60_000) + bytes([i & 0xFF]) for i in range(4000)]  # 240 MB
        kept = burst[::50]  # a few survive, scattered: the heap cannot shrink from its top alone
        del burst
        grown = heap.resident()
        assert grown - before > 150 * MB
        wait_for(lambda: heap.resident() - before < 60 * MB, timeout=10, what="the freed heap given back")
        del kept


@pytest.mark.parametrize("synced", [True, False])
def test_the_collector_is_frozen_once_synced_and_again_later_and_never_when_a_stop_came_first(synced: bool) -> None:
    count = SimpleNamespace(gc_freezes=0)

    async def main() -> None:
        async def wait_synced() -> bool:
            return synced

        await heap.freeze_collector(wait_synced, 0.01, count)

    gc.unfreeze()
    try:
        asyncio.run(main())
        frozen = gc.get_freeze_count()
    finally:
        gc.unfreeze()  # this test process's objects back in the collector's reach
    assert (count.gc_freezes, frozen > 0) == ((2, True) if synced else (0, False))


@pytest.mark.parametrize("synced", [True, False])
def test_the_collector_is_frozen_the_moment_the_index_syncs_and_again_after_its_delay(
        synced: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    after = 0.3
    freezes: list[float] = []  # the loop's time of each gc.freeze()
    monkeypatch.setattr(heap, "gc", SimpleNamespace(freeze=lambda: freezes.append(asyncio.get_running_loop().time())))
    count = SimpleNamespace(gc_freezes=0)

    async def main() -> float:
        loop = asyncio.get_running_loop()
        synced_at = loop.time() + 0.05  # the index syncs (or a stop comes) a while after the start
        done = asyncio.Event()
        loop.call_at(synced_at, done.set)

        async def wait_synced() -> bool:  # as the agent's: at once when asked after the sync
            await done.wait()
            return synced

        await heap.freeze_collector(wait_synced, after, count)
        return synced_at

    synced_at = asyncio.run(main())
    if not synced:  # a stop came first: nothing frozen
        assert (freezes, count.gc_freezes) == ([], 0)
        return
    assert len(freezes) == 2 == count.gc_freezes
    first, second = freezes
    assert first - synced_at < after / 2  # at once, not `after` later
    assert second - first >= after - 0.02  # then once more, `after` later
