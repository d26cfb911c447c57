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
        ("tests/unit/dns/test_hot.py::test_the_writes_are_seen_in_the_view_the_hit_paths_read_and_pops_say_what_"
         "they_dropped",),
        "answers hot for one second only (served stale, an ExternalName chase's) stay hot after it, and forwarded "
        "answers a --filter-aaaa drop takes out are still answered",
    ),
    Mutation(
        "template-ttl-not-counted-down",
        "nodedns/dns/hot.py",
        "    return rendered(w, expires - second)",
        "    return rendered(w, expires - second + 1)",
        ("tests/unit/dns/test_hot.py::test_a_template_is_sent_with_the_seconds_it_has_left_and_never_at_its_"
         "expiry",),
        "a forwarded answer is sent with a TTL one second longer than it has left (a client keeps it past the "
        "cache's own expiry)",
    ),
    Mutation(
        "template-sent-at-its-expiry",
        "nodedns/dns/hot.py",
        "    if expires <= second:\n        return None",
        "    if expires < second:\n        return None",
        ("tests/unit/dns/test_hot.py::test_a_template_is_sent_with_the_seconds_it_has_left_and_never_at_its_"
         "expiry",),
        "a forwarded answer is sent with TTL 0 in its expiry second (the slow path's refresh and serve-stale "
        "never see it)",
    ),
)
