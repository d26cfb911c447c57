"""Mutations of nodedns/dns/hot.py (the hot table: its one write API)."""

from mutate import Mutation

TESTS = ("tests/unit/dns/test_hot.py", "tests/unit/serve/test_cache.py", "tests/unit/forward/test_store.py")

MUTATIONS = (
    Mutation(
        "hot-pop-leaves-the-answer",
        "nodedns/dns/hot.py",
        "        return self.view.pop(key, None)",
        "        return self.view.get(key)",
        ("tests/unit/serve/test_cache.py::test_invalidation_and_clear_give_the_bytes_back",),
        "a cluster answer dropped by an index change stays in the hot table: the hit path serves what the index "
        "no longer says",
    ),
    Mutation(
        "hot-pop-many-leaves-them",
        "nodedns/dns/hot.py",
        "            if pop(key, None) is not None:",
        "            if self.view.get(key) is not None:",
        ("tests/unit/forward/test_store.py::test_ttls_count_down_once_per_second_and_the_hot_copy_leaves_at_each_"
         "second",),
        "the forwarded answers rendered for a second stay hot after it: their TTLs stop counting down on the hit path",
    ),
)
