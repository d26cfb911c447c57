"""Mutations of nodedns/metrics/slots.py (the labels an answer is counted under, as one byte)."""

from mutate import Mutation

TESTS = ("tests/unit/metrics/test_metrics.py", "tests/e2e/test_operators.py", "tests/e2e/test_hosts.py")

MUTATIONS = (
    Mutation("nodata-not-a-denial", "nodedns/metrics/slots.py",
             '        denial = rcode == _NXDOMAIN or (rcode == _NOERROR and r[6:8] == b"\\x00\\x00")',
             "        denial = rcode == _NXDOMAIN",
             ("tests/unit/metrics/test_metrics.py::test_classify_gives_coredns_labels",),
             "NODATA answers count as cache successes, not denials"),
    Mutation("most-specific-zone-not-first", "nodedns/metrics/slots.py",
             "        self.zones: tuple[str, ...] = tuple(sorted(names, key=len, reverse=True))",
             "        self.zones: tuple[str, ...] = tuple(sorted(names, key=len))",
             ("tests/unit/metrics/test_metrics.py::test_classify_gives_coredns_labels",),
             "every answer is counted under the root zone \".\" (the shortest zone matches first)"),
    Mutation("extended-rcode-ignored", "nodedns/metrics/slots.py", "            rcode |= r[-6] << 4",
             "            pass",
             ("tests/unit/metrics/test_metrics.py::test_badvers_extended_rcode_is_read_from_the_opt_record",),
             "BADVERS answers are counted as NOERROR"),
    Mutation(
        "filter-aaaa-not-counted-on-the-slow-path",
        "nodedns/metrics/slots.py",
        "and r.startswith(self.filtered, pos + 5):",
        "and r.startswith(self.filtered, pos + 4):",
        ("tests/e2e/test_operators.py::test_forwarded_aaaa_questions_get_nodata_with_an_soa_and_the_upstream_is_never_"
         "asked",),
        "filtered answers are counted as forwarded ones: nodedns_filtered_aaaa_total stays 0",
    ),
    Mutation(
        "hosts-answers-counted-as-forwarded",
        "nodedns/metrics/slots.py",
        "            elif aa:  # authoritative outside the index's zones",
        "            elif False:  # authoritative outside the index's zones",
        ("tests/e2e/test_hosts.py::test_hosts_answers_are_counted_under_the_hosts_plugin_and_chaos_under_chaos",),
        "answers from --hosts files are counted under plugin=\"forward\": the dashboards show upstream traffic "
        "that never left the node",
    ),
)
