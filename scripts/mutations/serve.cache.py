"""Mutations of nodedns/serve/cache.py (the hot table, cluster answers and their tags, the --filter-aaaa NODATA)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",
         "tests/unit/forward/test_store.py", "tests/unit/forward/test_forward.py",
         "tests/unit/serve/test_invalidation.py", "tests/unit/dns/test_wire.py",
         "tests/e2e/test_cache_bytes.py")

MUTATIONS = (
    Mutation(
        "claimed-address-keeps-its-forwarded-answer",
        "nodedns/serve/cache.py",
        "                if side == b\"\" and self.on_not_ours is not None:\n"
        "                    self.on_not_ours(key)  # the forwarded answer of a name that may be ours now",
        "                if False:\n"
        "                    self.on_not_ours(key)  # the forwarded answer of a name that may be ours now",
        ("tests/unit/forward/test_forward.py::test_a_forwarded_reverse_answer_gives_way_to_a_service_that_claims_the_"
         "address_and_"
         "comes_back_after",),
        "once a Service claims an address, its PTR keeps coming from the forward cache (the upstream's name)",
        found="yes",
    ),
    Mutation(
        "invalidation-drops-only-the-first-key-of-a-tag",
        "nodedns/serve/cache.py",
        "            for key in held:\n                hot = table.pop(key, None)",
        "            for key in list(held)[:1]:\n                hot = table.pop(key, None)",
        ("tests/unit/serve/test_invalidation.py::test_a_change_drops_the_answers_of_its_tags_and_their_side_entries",
         "tests/unit/serve/test_invalidation.py::test_answers_served_through_the_table_equal_answers_computed_fresh"),
        "a change drops one stored answer of its tag and keeps the others (stale answers served)",
    ),
    Mutation(
        "table-bound-never-evicts",
        "nodedns/serve/cache.py",
        "            if len(table) >= self.max_entries and key not in table:",
        "            if len(table) > 10 * self.max_entries and key not in table:",
        ("tests/unit/serve/test_invalidation.py::test_the_table_stays_bounded_with_its_tags",
         "tests/unit/forward/test_store.py"),
        "the hot dict grows past its bound (a flood of random names grows memory)",
    ),
    Mutation(
        "filter-aaaa-nodata-without-soa",
        "nodedns/serve/cache.py",
        "return head + key_question(key) + soa + tail",
        "return head[:8] + b\"\\x00\\x00\" + head[10:] + key_question(key) + tail",
        ("tests/e2e/test_operators.py::test_forwarded_aaaa_questions_get_nodata_with_an_soa_and_the_upstream_is_never_"
         "asked",),
        "the filtered NODATA has no SOA: clients cannot cache it (RFC 2308) and ask again at once",
    ),

)
