"""Mutations of nodedns/runtime/heap.py (when the C heap a burst left free goes back to the system)."""

from mutate import Mutation

TESTS = ("tests/unit/runtime/test_heap.py",)

MUTATIONS = (
    Mutation(
        "heap-trim-when-the-heap-grows",
        "nodedns/runtime/heap.py",
        "return held - self.baseline >= self.threshold",
        "return self.baseline - held >= self.threshold",
        ("tests/unit/runtime/test_heap.py",),
        "the heap is trimmed when it grows, never after a burst was freed",
        found="yes",
    ),
    Mutation(
        "heap-trim-keeps-the-old-baseline",
        "nodedns/runtime/heap.py",
        "        self.trims += 1\n        self.baseline = self._held()",
        "        self.trims += 1",
        ("tests/unit/runtime/test_heap.py::test_after_a_trim_what_is_held_is_the_new_baseline",),
        "what a trim could not give back counts as newly freed heap: a trim is due again every period",
    ),
    Mutation(
        "collector-frozen-once-only",
        "nodedns/runtime/heap.py",
        "    await asyncio.sleep(after)\n    gc.freeze()\n",
        "    await asyncio.sleep(after)\n",
        ("tests/unit/runtime/test_heap.py::test_the_collector_is_frozen_the_moment_the_index_syncs_and_again_after_"
         "its_delay",),
        "the first answers made and stored after the sync stay in the collector's reach: its full collections walk "
        "the warm cache (long pauses)",
        found="yes",
    ),
    Mutation(
        "collector-frozen-late-after-the-sync",
        "nodedns/runtime/heap.py",
        "    if not await synced():\n        return\n    gc.freeze()  # O(1): the generations' lists joined to the "
        "permanent one (never gc.get_freeze_count(): it\n    count.gc_freezes += 1  # walks that list, 12 ms for a "
        "forwarder's objects, on the loop)\n    await asyncio.sleep(after)\n",
        "    await asyncio.sleep(after)\n    if not await synced():\n        return\n    gc.freeze()\n"
        "    count.gc_freezes += 1\n",
        ("tests/unit/runtime/test_heap.py::test_the_collector_is_frozen_the_moment_the_index_syncs_and_again_after_"
         "its_delay",),
        "the synced index is frozen only `after` seconds late: the collector's first full collections walk it",
        found="yes",
    ),
)
