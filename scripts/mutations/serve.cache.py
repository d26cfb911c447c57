"""Mutations of nodedns/serve/cache.py (the hot table, cluster answers and their tags, the --filter-aaaa NODATA)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",
         "tests/unit/forward/test_store.py", "tests/unit/forward/test_forward.py",
         "tests/unit/serve/test_invalidation.py", "tests/unit/dns/test_wire.py",
         "tests/e2e/test_cache_bytes.py", "tests/unit/serve/test_cache.py")

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
        "            for key in held:\n                side = aside.get(key)",
        "            for key in list(held)[:1]:\n                side = aside.get(key)",
        ("tests/unit/serve/test_invalidation.py::test_a_change_drops_the_answers_of_its_tags_and_their_side_entries",
         "tests/unit/serve/test_invalidation.py::test_answers_served_through_the_table_equal_answers_computed_fresh"),
        "a change drops one stored answer of its tag and keeps the others (stale answers served)",
    ),
    Mutation(
        "table-bound-never-evicts",
        "nodedns/serve/cache.py",
        "len(charged) >= self.max_entries):",
        "len(charged) > 10 * self.max_entries):",
        ("tests/unit/serve/test_invalidation.py::test_the_table_stays_bounded_with_its_tags",),
        "the stored cluster answers grow past their entry bound (a flood of random names grows memory)",
    ),
    Mutation(
        "cluster-answers-unbounded-in-bytes",
        "nodedns/serve/cache.py",
        "while charged and (self.bytes + size > self.max_bytes or",
        "while charged and (self.bytes + size > 100 * self.max_bytes or",
        ("tests/unit/serve/test_cache.py::test_the_budget_holds_exactly_its_bytes_and_evicts_the_oldest_beyond",
         "tests/unit/serve/test_cache.py::test_aside_answers_are_charged_and_evicted_with_the_hot_ones"),
        "a Service with large answers fills the process: stored cluster answers bounded by count only",
    ),
    Mutation(
        "cluster-budget-one-answer-short",
        "nodedns/serve/cache.py",
        "while charged and (self.bytes + size > self.max_bytes or",
        "while charged and (self.bytes + size >= self.max_bytes or",
        ("tests/unit/serve/test_cache.py::test_the_budget_holds_exactly_its_bytes_and_evicts_the_oldest_beyond",),
        "an answer that fits the budget exactly pushes the oldest out",
    ),
    Mutation(
        "huge-cluster-answers-stored",
        "nodedns/serve/cache.py",
        "        if len(wire) > self.max_entry:\n",
        "        if len(wire) > 8 * self.max_entry:\n",
        ("tests/unit/serve/test_cache.py::test_an_answer_over_the_size_limit_is_built_for_each_query_not_stored",
         "tests/unit/serve/test_cache.py::test_a_small_budget_keeps_smaller_answers_only"),
        "a few 64 KB SRV answers stored push out thousands of usual ones",
    ),
    Mutation(
        "evicted-cluster-answer-keeps-its-charge",
        "nodedns/serve/cache.py",
        "            self.hot.pop(key)\n            self.bytes -= size",
        "            self.hot.pop(key)",
        ("tests/unit/serve/test_cache.py::test_invalidation_and_clear_give_the_bytes_back",
         "tests/unit/serve/test_cache.py::test_the_budget_holds_exactly_its_bytes_and_evicts_the_oldest_beyond"),
        "dropped answers stay charged: the budget fills with nothing and every new answer evicts",
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
