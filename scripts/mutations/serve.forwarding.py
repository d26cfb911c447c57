"""Mutations of nodedns/serve/forwarding.py (forwarded answers: coalescing, stale, prefetch, share, filter)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",
         "tests/unit/forward/test_forward.py", "tests/unit/dns/test_wire.py", "tests/unit/serve/test_invalidation.py",
         "tests/unit/serve/test_interop.py",
         "tests/unit/cluster/test_cluster_zone.py", "tests/e2e/test_hostile.py", "tests/unit/podconf/test_autopath.py",
         "tests/e2e/test_unusable_names.py", "tests/e2e/test_upstream_share.py", "tests/e2e/test_hosts.py",
         "tests/unit/serve/test_tail.py", "tests/unit/forward/test_zones.py")

MUTATIONS = (
    Mutation(
        "zone-servfail-ttl-ignored-for-stale",
        "nodedns/serve/forwarding.py",
        "        return self.stale_recheck if policy is None else max(float(policy.servfail_ttl), 1.0)",
        "        return self.stale_recheck",
        ("tests/unit/forward/test_zones.py::test_a_zones_servfail_ttl_is_how_long_its_failed_names_are_served_stale_"
         "unasked",),
        "a zone's servfail-ttl does not set how long its failed names are served stale before they are asked again",
    ),
    Mutation(
        "client-share-across-every-zone",
        "nodedns/serve/forwarding.py",
        '        return client if zone is None or not zone.name else f"{client} {zone.name}"',
        "        return client",
        ("tests/unit/forward/test_zones.py::test_a_client_holding_its_share_of_a_stalled_zone_still_asks_the_other_"
         "zones",),
        "a client holding its share of a stalled zone's upstream queries is refused in every other zone too",
    ),
    Mutation(
        "serve-stale-immediate-waits-for-the-upstream",
        "nodedns/serve/forwarding.py",
        '                if (policy.stale_mode if policy is not None else self.stale_mode) == "immediate":',
        "                if False:",
        ("tests/unit/forward/test_zones.py::test_serve_stale_modes_show_in_the_answers",),
        "serve-stale immediate asks the upstream first like verify: the client waits",
    ),
    Mutation(
        "serve-stale-verify-waits-out-the-upstream",
        "nodedns/serve/forwarding.py",
        "            done, _ = await asyncio.wait((asked,), timeout=self.stale_timer)",
        "            done, _ = await asyncio.wait((asked,))",
        ("tests/unit/forward/test_zones.py::test_serve_stale_modes_show_in_the_answers",),
        "serve-stale verify has no client-response timer: a late upstream holds the client until it answers",
    ),
    Mutation("refresh-slot-never-given-back", "nodedns/serve/forwarding.py",
             "        finally:\n            self._refreshing -= 1",
             "        finally:\n            pass",
             ("tests/unit/serve/test_tail.py::test_at_most_prefetch_in_flight_refreshes_wait_for_the_upstream_at_once",),
             "after the first refreshes no entry is ever refreshed again: every name expires into a miss"),
    Mutation("identical-misses-not-shared", "nodedns/serve/forwarding.py",
             "        pending = self._inflight.get(key)\n        if pending is not None:",
             "        pending = self._inflight.get(key)\n        if False:",
             ("tests/unit/forward/test_forward.py::test_identical_misses_in_flight_share_one_upstream_query",),
             "a burst of the same uncached name asks the upstream once per query"),
    Mutation("prefetch-for-every-hit-near-expiry", "nodedns/serve/forwarding.py",
             "                if cache.prefetch_due(entry, now) and q.key not in self._inflight and "
             "self._prefetch_slot():",
             "                if cache.prefetch_due(entry, now) and self._prefetch_slot():",
             ("tests/unit/forward/test_forward.py::test_an_entry_asked_for_near_expiry_is_refreshed_once_in_the_"
              "background",),
             "every hit past an entry's prefetch point starts another refresh of it", found="yes"),
    Mutation("upstream-servfail-cached-as-an-answer", "nodedns/serve/forwarding.py",
             "            if rcode == RCODE.SERVFAIL:\n                raise UpstreamError",
             "            if False:\n                raise UpstreamError",
             ("tests/unit/forward/test_forward.py::test_servfail_is_cached_briefly_and_a_stale_answer_wins_over_it",),
             "an upstream's SERVFAIL is cached for its TTL and wins over the stale answer"),
    Mutation("stale-answer-not-served-when-the-upstream-is-down", "nodedns/serve/forwarding.py",
             "        if stale is not None and cache.stale_usable(stale, now, policy):\n"
             "            self.stats[\"stale\"] += 1",
             "        if False:\n            self.stats[\"stale\"] += 1",
             ("tests/unit/forward/test_forward.py::test_an_expired_answer_is_served_stale_while_the_upstream_is_down",),
             "an expired answer is not served while every upstream fails (RFC 8767): SERVFAIL instead"),
    Mutation(
        "client-share-one-too-many",
        "nodedns/serve/forwarding.py",
        "        if self.client_share and self._by_client.get(client, 0) >= self.client_share:",
        "        if self.client_share and self._by_client.get(client, 0) > self.client_share:",
        ("tests/e2e/test_upstream_share.py::test_a_client_over_its_share_is_refused_while_another_clients_new_names_"
         "are_asked",),
        "a client may hold one upstream query more than its share",
        found="yes",
    ),
    Mutation(
        "namespace-share-one-too-many",
        "nodedns/serve/forwarding.py",
        "            if ns is not None and self._by_namespace.get(ns, 0) >= self.namespace_share:",
        "            if ns is not None and self._by_namespace.get(ns, 0) > self.namespace_share:",
        ("tests/e2e/test_upstream_share.py::test_the_pods_of_one_namespace_hold_its_share_together_and_another_"
         "namespace_is_still_asked",),
        "the Pods of a namespace may hold one upstream query more than its share",
    ),
    Mutation(
        "namespace-share-never-given-back",
        "nodedns/serve/forwarding.py",
        "            if ns is not None:\n                _release(by_namespace, ns)",
        "            if False:\n                _release(by_namespace, ns)",
        ("tests/e2e/test_upstream_share.py::test_the_pods_of_one_namespace_hold_its_share_together_and_another_"
         "namespace_is_still_asked",),
        "a namespace's upstream queries stay counted after they end: its Pods are refused for good",
    ),
    Mutation(
        "client-share-min-for-max",
        "nodedns/serve/forwarding.py",
        "    share = max(CLIENT_SHARE_FLOOR, max_concurrent // CLIENT_SHARE_FRACTION)",
        "    share = min(CLIENT_SHARE_FLOOR, max_concurrent // CLIENT_SHARE_FRACTION)",
        ("tests/e2e/test_upstream_share.py::test_a_clients_share_is_an_eighth_of_max_concurrent_at_least_16",),
        "a client's share is at most 16 upstream queries whatever --max-concurrent is",
        found="yes",
    ),
    Mutation(
        "filter-aaaa-asks-upstream",
        "nodedns/serve/forwarding.py",
        """        if self.filtered(q, zone):
            soa = """,
        """        if False:
            soa = """,
        ("tests/e2e/test_operators.py::test_forwarded_aaaa_questions_get_nodata_with_an_soa_and_the_upstream_is_never_"
         "asked",),
        "--filter-aaaa on still forwards AAAA questions",
    ),
    Mutation(
        "filter-aaaa-flood-fills-the-table",
        "nodedns/serve/forwarding.py",
        "if self.cluster_answers.with_tag(FILTER_TAG) < self.filter_stored_max:",
        "if True:",
        ("tests/e2e/test_operators.py::test_a_flood_of_made_up_aaaa_names_is_answered_without_pushing_cluster_answers_"
         "out",),
        "a flood of made-up AAAA names fills the hot table and pushes the cluster answers out",
    ),
    Mutation(
        "last-known-good-ignored",
        "nodedns/serve/forwarding.py",
        "if cache.last_known_good(stale, now, policy):",
        "if False:",
        ("tests/e2e/test_operators.py::test_a_name_an_upstream_suddenly_denies_keeps_its_last_answer_for_the_window",
         "tests/e2e/test_operators.py::test_nodata_counts_as_a_denial_too"),
        "--stale-nxdomain passes a sudden NXDOMAIN on",
    ),
    Mutation(
        "last-known-good-asks-on-every-query",
        "nodedns/serve/forwarding.py",
        """            if cache.denied(entry, now, policy) and not cache.fresh(entry, now):
                return patch(self._last_known_good(q, entry, now), data, qend)
""",
        "",
        ("tests/e2e/test_operators.py::test_a_name_an_upstream_suddenly_denies_keeps_its_last_answer_for_the_window",),
        "every query within the window waits for the upstream again instead of the kept answer at once",
    ),
    Mutation(
        "last-known-good-not-counted",
        "nodedns/serve/forwarding.py",
        """        self.stats["stale_nxdomain"] += 1
        recheck =""",
        """        recheck =""",
        ("tests/e2e/test_operators.py::test_a_name_an_upstream_suddenly_denies_keeps_its_last_answer_for_the_window",),
        "nodedns_stale_nxdomain_served_total stays 0",
    ),
    Mutation(
        "prefetch-cap-never-reset",
        "nodedns/serve/forwarding.py",
        "            asyncio.get_running_loop().call_soon(self._new_turn)",
        "            pass",
        ("tests/unit/serve/test_tail.py::test_entries_coming_due_in_one_turn_start_at_most_the_turns_share_of_refreshes",),
        "after the first busy turn no refresh ever starts again: every entry expires and is asked the slow way",
    ),
    Mutation(
        "prefetch-cap-ignored",
        "nodedns/serve/forwarding.py",
        "q.key not in self._inflight and self._prefetch_slot():",
        "q.key not in self._inflight:",
        ("tests/unit/serve/test_tail.py::test_entries_coming_due_in_one_turn_start_at_most_the_turns_share_of_refreshes",),
        "every entry coming due in a turn starts its refresh in that turn: the refresh stall",
    ),
)
