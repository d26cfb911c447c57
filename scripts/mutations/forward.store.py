"""Mutations of nodedns/forward/store.py (the forward cache: stores, budget, serve-stale, prefetch, hand-over)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",
         "tests/unit/forward/test_store.py", "tests/unit/forward/test_forward.py",
         "tests/unit/serve/test_invalidation.py", "tests/unit/dns/test_wire.py",
         "tests/e2e/test_cache_bytes.py", "tests/unit/serve/test_tail.py")

MUTATIONS = (
    Mutation(
        "cache-budget-overrun-by-one-entry",
        "nodedns/forward/store.py",
        "        while self.bytes_used() + size > self.max_bytes:",
        "        while self.bytes_used() > self.max_bytes:",
        ("tests/e2e/test_cache_bytes.py::test_the_two_stores_share_one_budget",),
        "the forward cache makes room for a new entry only once it is already over its byte budget",
        found="yes (a test of one store alone let it through)",
    ),
    Mutation(
        "big-answers-stored",
        "nodedns/forward/store.py",
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
        "nodedns/forward/store.py",
        "            self.hot.put(key, entry.wire)\n",
        "            self.hot.put(key, with_ttls(entry.plain(), entry.ttl_offsets, entry.expires))\n",
        ("tests/e2e/test_cache_bytes.py::test_each_answer_is_held_once_the_hot_copy_is_the_entrys_own_bytes",
         "tests/unit/forward/test_store.py::test_a_hot_answer_costs_no_bytes_beyond_its_entry"),
        "a hot answer is a second copy beside the stored one (twice the memory for the hot entries)",
        found="yes",
    ),
    Mutation(
        "cache-min-ttl-ignored",
        "nodedns/forward/store.py",
        "floor = 0 if cluster else self.min_ttl",
        "floor = 0",
        ("tests/e2e/test_operators.py::test_the_ttl_floor_raises_short_forwarded_ttls_and_the_answer_carries_it",),
        "--cache-min-ttl does not raise short TTLs",
    ),
    Mutation(
        "cache-min-ttl-above-the-cap",
        "nodedns/forward/store.py",
        "min(max(t.min_ttl or 0, floor), cap)",
        "max(min(t.min_ttl or 0, cap), floor)",
        ("tests/e2e/test_operators.py::test_the_ttl_floor_never_goes_above_the_success_cap",),
        "--cache-min-ttl raises TTLs above --cache-success-ttl",
    ),
    Mutation(
        "cache-min-ttl-on-denials",
        "nodedns/forward/store.py",
        "ttl = 0 if t.negative_ttl is None else min(t.negative_ttl, t.min_ttl or 0, cap)",
        "ttl = 0 if t.negative_ttl is None else min(max(t.negative_ttl, self.min_ttl), cap)",
        ("tests/e2e/test_operators.py::test_the_ttl_floor_leaves_negative_answers_and_the_cluster_zone_alone",),
        "--cache-min-ttl raises the TTL of NXDOMAIN/NODATA too (the negative answer outlives its SOA MINIMUM)",
    ),
    Mutation(
        "last-known-good-never-ends",
        "nodedns/forward/store.py",
        "return not entry.denied_since or now < entry.denied_since + window",
        "return True",
        ("tests/e2e/test_operators.py::test_a_name_an_upstream_suddenly_denies_keeps_its_last_answer_for_the_window",),
        "a deleted name keeps resolving forever, not for --stale-nxdomain",
    ),
    Mutation(
        "warm-export-writes-the-instant-not-the-time-left",
        "nodedns/forward/store.py",
        "entry.rcode, entry.ttl, entry.expires - now, entry.stale_until - now,",
        "entry.rcode, entry.ttl, entry.expires, entry.stale_until - now,",
        ("tests/unit/forward/test_store.py::test_a_successor_takes_every_usable_entry_with_the_time_it_had_left",),
        "a handed-over entry's expiry is read in the other process's clock: answers live far longer (or shorter) "
        "than their TTL after a restart",
    ),
    Mutation(
        "warm-load-overwrites-the-successors-own-answers",
        "nodedns/forward/store.py",
        "            if store is None or stale <= 0 or wlen > self.max_entry or Cache.__contains__(store, key):",
        "            if store is None or stale <= 0 or wlen > self.max_entry:",
        ("tests/unit/forward/test_store.py::test_an_entry_the_successor_already_holds_and_one_past_its_window_stay_out",),
        "the predecessor's older answer replaces one the successor fetched since",
    ),
    Mutation(
        "warm-export-hands-on-cluster-answers",
        "nodedns/forward/store.py",
        "                if entry.cluster or entry.kind == SERVFAIL or entry.stale_until <= now or len(key) > 0xFFFF:",
        "                if entry.kind == SERVFAIL or entry.stale_until <= now or len(key) > 0xFFFF:",
        ("tests/unit/forward/test_store.py::test_a_successor_takes_every_usable_entry_with_the_time_it_had_left",),
        "answers of ExternalName chases (tied to the index, invalidated by its tags) are handed on untracked: the "
        "successor serves them past a change",
    ),
    Mutation(
        "prefetch-point-not-jittered",
        "nodedns/forward/store.py",
        "        entry.prefetch_at = self.prefetch_point(ttl, expires)\n",
        "        entry.prefetch_at = float(expires - max(1, math.ceil(ttl * PREFETCH_FRACTION)))\n",
        ("tests/unit/forward/test_store.py::test_entries_stored_in_the_same_second_come_due_spread_over_a_tenth_of_the_"
         "ttl",),
        "entries stored together (a restart, a burst) all come due in the same second: the refresh stall",
    ),
    Mutation(
        "hot-answers-leave-at-each-second",
        "nodedns/forward/store.py",
        "            self.hot.pop_many([key for key in self._hot_keys if key not in kept])\n",
        "            self.hot.pop_many([*self._hot_keys, *kept])\n            kept.clear()\n",
        ("tests/unit/forward/test_store.py::test_hot_answers_stay_hot_from_second_to_second_without_a_query_or_a_"
         "look",),
        "every hot forwarded name goes the slow way at the turn of each second: the per-second burst of renders",
    ),
    Mutation(
        "hot-past-the-refresh-point",
        "nodedns/forward/store.py",
        "            due = min(due, math.floor(entry.prefetch_at) - 1)",
        "            due = min(due, math.floor(entry.prefetch_at) + 1)",
        ("tests/unit/forward/test_store.py::test_an_answer_due_for_its_refresh_or_expiring_next_second_is_left_to_the_"
         "slow_way",),
        "an answer whose refresh point falls within the next second stays on the hit path through it: the refresh "
        "starts late",
    ),
    Mutation(
        "filtered-answers-kept-hot",
        "nodedns/forward/store.py",
        "        for key in gone:\n            del self._kept[key]\n",
        "",
        ("tests/unit/forward/test_store.py::test_an_answer_taken_out_of_the_hot_table_leaves_what_another_part_"
         "puts_there_alone",),
        "a forwarded AAAA answer dropped when --filter-aaaa turns on is still taken for hot: the filter's own "
        "answer for the name is dropped at its look, and the name is forwarded again",
    ),
    Mutation(
        "warm-infinite-expiry-taken",
        "nodedns/forward/store.py",
        "        if not math.isfinite(value) or abs(value) > _WARM_HORIZON:",
        "        if math.isnan(value):",
        ("tests/unit/forward/test_store.py::test_an_export_with_a_value_out_of_range_is_refused_whole",),
        "a handed-over entry expiring at +inf reaches math.floor: OverflowError past the loader, the successor dies",
    ),
    Mutation(
        "warm-broken-part-half-kept",
        "nodedns/forward/store.py",
        "            for key in taken:\n                self.discard(key)\n",
        "",
        ("tests/unit/forward/test_store.py::test_an_export_broken_after_its_first_entries_leaves_none_of_them",),
        "a handed-over part that breaks half-way leaves the entries read before the break in the cache",
    ),
    Mutation(
        "hit-path-asks-forgotten-at-the-turn",
        "nodedns/forward/store.py",
        "            self._asked_before, self.asked = self.asked, set()",
        "            self._asked_before, self.asked = set(), set()",
        ("tests/unit/serve/test_tail.py::test_a_refreshed_copy_the_hit_path_answers_before_its_prefetch_point_is_"
         "refreshed_ahead_again",),
        "what the hit paths answered in the second before a refreshed copy's prefetch point is forgotten at the "
        "turn: the copy leaves the hot table and its next query goes through Python",
    ),
    Mutation(
        "hot-answers-never-marked-used",
        "nodedns/forward/store.py",
        "                    store.touch(untouched[pos:end])",
        "                    pass",
        ("tests/unit/forward/test_store.py::test_hot_answers_are_marked_used_each_second_so_the_budget_evicts_what_"
         "nobody_asks_first",),
        "the hit paths' answers never count as a use: the byte budget evicts the names in steady use before one "
        "stored after them that nobody asks",
    ),
    Mutation(
        "hot-answers-marked-used-one-slice-only",
        "nodedns/forward/store.py",
        "            if end < len(untouched):\n                return True\n",
        "",
        ("tests/unit/forward/test_store.py::test_hot_answers_are_marked_used_each_second_so_the_budget_evicts_what_"
         "nobody_asks_first",),
        "only the first TOUCH_SLICE hot answers are marked used each second: on a busy node the rest are "
        "evicted before answers nobody asks",
    ),
    Mutation(
        "fresh-answer-dropped-with-the-stale-one",
        "nodedns/forward/store.py",
        "            self.hot.pop_many([key for key in self._hot_keys if key not in kept])",
        "            self.hot.pop_many(self._hot_keys)",
        ("tests/unit/forward/test_store.py::test_a_fresh_answer_stored_after_a_stale_one_in_the_same_second_stays_"
         "hot_through_the_turn",),
        "a name served stale and then stored fresh in the same second (the upstreams back) leaves the hot table "
        "at the turn: its queries go through Python until one puts it back",
    ),
    Mutation(
        "served-again-not-put-back",
        "nodedns/forward/store.py",
        "        if self._kept.get(key) is not entry or self.hot.view.get(key) is not entry.wire:",
        "        if self._kept.get(key) is not entry:",
        ("tests/unit/forward/test_store.py::test_a_hot_answer_another_writer_took_out_is_put_back_by_its_next_"
         "query",),
        "a hot entry whose template another writer replaced is never put back by its next query: every query "
        "goes through Python for the rest of its life",
    ),
)
