"""Mutations of nodedns/observe/insightsketch.py (insight's bounded state: the sketch, a client's walks)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_insight.py",)

MUTATIONS = (
    Mutation("space-saving-trusts-a-stale-count", "nodedns/observe/insightsketch.py",
             "            if now == count:\n                break", "            if True:\n                break",
             ("tests/unit/observe/test_insight.py::test_space_saving_evicts_what_a_scan_in_arrival_order_evicts",),
             "the sketch evicts a counter by the count it had when it last moved in the heap: a heavy name that "
             "grew since is thrown out for a light one"),
    Mutation("space-saving-victim-by-last-arrival", "nodedns/observe/insightsketch.py",
             "        heapq.heapreplace(heap, (count + n, self._seq, item))",
             "        heapq.heapreplace(heap, (count + n, -self._seq, item))",
             ("tests/unit/observe/test_insight.py::test_space_saving_evicts_what_a_scan_in_arrival_order_evicts",),
             "among counters of equal count the sketch evicts the newest, not the oldest"),
    Mutation(
        "walks-forget-a-walk-split-between-workers",
        "nodedns/observe/insightsketch.py",
        "MAX_NAMES = 2048  # names per client",
        "MAX_NAMES = 64  # names per client",
        ("tests/unit/observe/test_insight.py::test_a_fast_walk_split_between_two_workers_counts_every_miss",),
        "the search-list state forgets the first half of walks split between two workers' batches",
        found="yes",
    ),
    Mutation(
        "walks-never-confirm-a-pending-miss",
        "nodedns/observe/insightsketch.py",
        "                waiting = pending.pop(other, None)",
        "                waiting = None",
        ("tests/unit/observe/test_insight.py::test_search_list_misses_are_the_nxdomains_followed_by_another_suffix",),
        "an NXDOMAIN asked before the rest of its walk is never counted as a miss",
    ),
)
