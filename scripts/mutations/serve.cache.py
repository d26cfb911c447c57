"""Mutations of nodedns/serve/cache.py (the hot dict, cluster answers and their tags, the forward cache)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",
         "tests/unit/serve/test_cache.py", "tests/unit/forward/test_forward.py",
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
         "tests/unit/serve/test_cache.py"),
        "the hot dict grows past its bound (a flood of random names grows memory)",
    ),
    Mutation(
        "cache-budget-overrun-by-one-entry",
        "nodedns/serve/cache.py",
        "        while self.bytes_used() + size > self.max_bytes:",
        "        while self.bytes_used() > self.max_bytes:",
        ("tests/e2e/test_cache_bytes.py::test_the_two_stores_share_one_budget",),
        "the forward cache makes room for a new entry only once it is already over its byte budget",
        found="yes (a test of one store alone let it through)",
    ),
    Mutation(
        "big-answers-stored",
        "nodedns/serve/cache.py",
        "        if len(wire) > self.max_entry:",
        "        if len(wire) > 4 * self.max_entry:",
        ("tests/e2e/test_cache_bytes.py::test_an_answer_over_the_entry_limit_is_served_but_not_stored",
         "tests/e2e/test_cache_bytes.py::test_the_shipped_agent_splits_the_budget_over_its_workers_and_keeps_no_60kb_"
         "answer"),
        "a 60 KB forwarded answer is stored (a few hundred of them push every usual answer out)",
        found="yes",
    ),
    Mutation(
        "answer-held-twice",
        "nodedns/serve/cache.py",
        "        self.wire = bytes(buf)\n        return self.wire",
        "        return bytes(buf)",
        ("tests/e2e/test_cache_bytes.py::test_each_answer_is_held_once_the_hot_copy_is_the_entrys_own_bytes",),
        "a rendered answer is a second copy beside the stored one (twice the memory for the hot entries)",
        found="yes",
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
    Mutation(
        "cache-min-ttl-ignored",
        "nodedns/serve/cache.py",
        "floor = 0 if cluster else self.min_ttl",
        "floor = 0",
        ("tests/e2e/test_operators.py::test_the_ttl_floor_raises_short_forwarded_ttls_and_the_answer_carries_it",),
        "--cache-min-ttl does not raise short TTLs",
    ),
    Mutation(
        "cache-min-ttl-above-the-cap",
        "nodedns/serve/cache.py",
        "min(max(t.min_ttl or 0, floor), self.success_ttl)",
        "max(min(t.min_ttl or 0, self.success_ttl), floor)",
        ("tests/e2e/test_operators.py::test_the_ttl_floor_never_goes_above_the_success_cap",),
        "--cache-min-ttl raises TTLs above --cache-success-ttl",
    ),
    Mutation(
        "cache-min-ttl-on-denials",
        "nodedns/serve/cache.py",
        "ttl = 0 if t.negative_ttl is None else min(t.negative_ttl, t.min_ttl or 0, cap)",
        "ttl = 0 if t.negative_ttl is None else min(max(t.negative_ttl, self.min_ttl), cap)",
        ("tests/e2e/test_operators.py::test_the_ttl_floor_leaves_negative_answers_and_the_cluster_zone_alone",),
        "--cache-min-ttl raises the TTL of NXDOMAIN/NODATA too (the negative answer outlives its SOA MINIMUM)",
    ),
    Mutation(
        "last-known-good-never-ends",
        "nodedns/serve/cache.py",
        "return not entry.denied_since or now < entry.denied_since + self.stale_nxdomain",
        "return True",
        ("tests/e2e/test_operators.py::test_a_name_an_upstream_suddenly_denies_keeps_its_last_answer_for_the_window",),
        "a deleted name keeps resolving forever, not for --stale-nxdomain",
    ),
    Mutation(
        "warm-export-writes-the-instant-not-the-time-left",
        "nodedns/serve/cache.py",
        "entry.rcode, entry.ttl, entry.expires - now, entry.stale_until - now,",
        "entry.rcode, entry.ttl, entry.expires, entry.stale_until - now,",
        ("tests/unit/serve/test_cache.py::test_a_successor_takes_every_usable_entry_with_the_time_it_had_left",),
        "a handed-over entry's expiry is read in the other process's clock: answers live far longer (or shorter) "
        "than their TTL after a restart",
    ),
    Mutation(
        "warm-load-overwrites-the-successors-own-answers",
        "nodedns/serve/cache.py",
        "            if store is None or stale <= 0 or wlen > self.max_entry or Cache.__contains__(store, key):",
        "            if store is None or stale <= 0 or wlen > self.max_entry:",
        ("tests/unit/serve/test_cache.py::test_an_entry_the_successor_already_holds_and_one_past_its_window_stay_out",),
        "the predecessor's older answer replaces one the successor fetched since",
    ),
    Mutation(
        "warm-export-hands-on-cluster-answers",
        "nodedns/serve/cache.py",
        "                if entry.cluster or entry.kind == SERVFAIL or entry.stale_until <= now or len(key) > 0xFFFF:",
        "                if entry.kind == SERVFAIL or entry.stale_until <= now or len(key) > 0xFFFF:",
        ("tests/unit/serve/test_cache.py::test_a_successor_takes_every_usable_entry_with_the_time_it_had_left",),
        "answers of ExternalName chases (tied to the index, invalidated by its tags) are handed on untracked: the "
        "successor serves them past a change",
    ),
    Mutation(
        "prefetch-spread-moves-the-point-later",
        "nodedns/serve/cache.py",
        "        return expires - max(1, math.ceil(ttl * PREFETCH_FRACTION)) - self.jitter() * ttl * PREFETCH_SPREAD",
        "        return expires - max(1, math.ceil(ttl * PREFETCH_FRACTION)) + self.jitter() * ttl * PREFETCH_SPREAD",
        ("tests/unit/serve/test_cache.py::test_the_prefetch_point_moves_up_to_another_tenth_of_the_ttl_earlier",
         "tests/unit/serve/test_cache.py::test_entries_stored_in_the_same_second_come_due_spread_over_a_tenth_of_the_"
         "ttl"),
        "the spread pushes refreshes past the expiry: entries expire before they are refreshed",
    ),
    Mutation(
        "prefetch-point-not-jittered",
        "nodedns/serve/cache.py",
        "        entry.prefetch_at = self.prefetch_point(ttl, expires)\n",
        "        entry.prefetch_at = float(expires - max(1, math.ceil(ttl * PREFETCH_FRACTION)))\n",
        ("tests/unit/serve/test_cache.py::test_entries_stored_in_the_same_second_come_due_spread_over_a_tenth_of_the_"
         "ttl",),
        "entries stored together (a restart, a burst) all come due in the same second: the refresh stall",
    ),
)
