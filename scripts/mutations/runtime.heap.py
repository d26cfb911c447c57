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
)
