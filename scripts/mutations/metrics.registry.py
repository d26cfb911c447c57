"""Mutations of nodedns/metrics/registry.py (label slots, histograms, the CoreDNS-compatible metrics)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",
         "tests/unit/metrics/test_metrics.py", "tests/e2e/test_monitoring.py", "tests/unit/observe/test_status.py",
         "tests/e2e/test_hosts.py",
         "tests/unit/observe/test_looplag.py", "tests/e2e/test_shadow.py")

MUTATIONS = (
    Mutation("histogram-le-bucket-one-up", "nodedns/metrics/registry.py",
             "        self.counts[bisect_left(self.bounds, seconds)] += 1",
             "        self.counts[bisect_left(self.bounds, seconds) + (seconds in self.bounds)] += 1",
             ("tests/unit/metrics/test_metrics.py::test_histogram_puts_observations_in_the_le_bucket",),
             "an answer of exactly 1 ms lands in the bucket above le=\"0.001\""),
    Mutation("slots-overflow-one-early", "nodedns/metrics/registry.py", "            if len(self.labels) >= 256:",
             "            if len(self.labels) >= 255:",
             ("tests/unit/metrics/test_metrics.py::test_slots_are_reused_and_overflow_into_slot_zero",),
             "the last of the 255 label slots is never used"),
    Mutation("nodata-not-a-denial", "nodedns/metrics/registry.py",
             '        denial = rcode == _NXDOMAIN or (rcode == _NOERROR and r[6:8] == b"\\x00\\x00")',
             "        denial = rcode == _NXDOMAIN",
             ("tests/unit/metrics/test_metrics.py::test_classify_gives_coredns_labels",),
             "NODATA answers count as cache successes, not denials"),
    Mutation("most-specific-zone-not-first", "nodedns/metrics/registry.py",
             "        self.zones: tuple[str, ...] = tuple(sorted(names, key=len, reverse=True))",
             "        self.zones: tuple[str, ...] = tuple(sorted(names, key=len))",
             ("tests/unit/metrics/test_metrics.py::test_classify_gives_coredns_labels",),
             "every answer is counted under the root zone \".\" (the shortest zone matches first)"),
    Mutation("extended-rcode-ignored", "nodedns/metrics/registry.py", "            rcode |= r[-6] << 4",
             "            pass",
             ("tests/unit/metrics/test_metrics.py::test_badvers_extended_rcode_is_read_from_the_opt_record",),
             "BADVERS answers are counted as NOERROR"),
    Mutation(
        "filter-aaaa-not-counted-on-the-slow-path",
        "nodedns/metrics/registry.py",
        "and r.startswith(self.filtered, pos + 5):",
        "and r.startswith(self.filtered, pos + 4):",
        ("tests/e2e/test_operators.py::test_forwarded_aaaa_questions_get_nodata_with_an_soa_and_the_upstream_is_never_"
         "asked",),
        "filtered answers are counted as forwarded ones: nodedns_filtered_aaaa_total stays 0",
    ),
    Mutation(
        "hosts-answers-counted-as-forwarded",
        "nodedns/metrics/registry.py",
        "            elif aa:  # authoritative outside the index's zones",
        "            elif False:  # authoritative outside the index's zones",
        ("tests/e2e/test_hosts.py::test_hosts_answers_are_counted_under_the_hosts_plugin_and_chaos_under_chaos",),
        "answers from --hosts files are counted under plugin=\"forward\": the dashboards show upstream traffic "
        "that never left the node",
    ),
    Mutation(
        "loop-lag-metric-without-the-process",
        "nodedns/metrics/registry.py",
        "                lag.add_metric([name], h.cumulative(), h.sum)",
        "                lag.add_metric([\"\"], h.cumulative(), h.sum)",
        ("tests/unit/observe/test_looplag.py::test_the_shipped_agent_shows_each_process_loop_lag_and_a_stopped_workers_"
         "stall",
         "tests/unit/observe/test_looplag.py::test_one_process_shows_its_loop_lag_and_a_stall_in_metrics_status_and_"
         "the_page"),
        "nodedns_event_loop_lag_seconds cannot tell the workers apart (their series collide)",
    ),
    Mutation(
        "longest-stall-gauge-reads-the-stall-count",
        "nodedns/metrics/registry.py",
        '            for key, fam in (("longest_last_minute_seconds", longest), ("stalls", stalls)):',
        '            for key, fam in (("stalls", longest), ("longest_last_minute_seconds", stalls)):',
        ("tests/unit/observe/test_looplag.py::test_one_process_shows_its_loop_lag_and_a_stall_in_metrics_status_and_"
         "the_page",),
        "the longest-stall gauge shows the number of stalls and the counter the seconds",
    ),
    Mutation("metrics-shadow-mismatch-name", "nodedns/metrics/registry.py",
             '("mismatches", "nodedns_shadow_mismatches_total", "reason"',
             '("mismatches", "nodedns_shadow_mismatch_total", "reason"',
             ("tests/e2e/test_shadow.py::test_shadow_beside_a_stand_in_dns_reports_the_wrong_service_and_matches_"
              "the_rest",),
             "the mismatch counter under another name than the documented one"),
)
