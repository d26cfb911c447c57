"""Mutations of nodedns/metrics/sections.py (the families of the provider sections)."""

from mutate import Mutation

TESTS = ("tests/unit/metrics/test_metrics.py", "tests/e2e/test_monitoring.py", "tests/unit/observe/test_status.py",
         "tests/unit/observe/test_looplag.py", "tests/e2e/test_shadow.py")

MUTATIONS = (
    Mutation(
        "loop-lag-metric-without-the-process",
        "nodedns/metrics/sections.py",
        "            lag.add_metric([name], h.cumulative(), h.sum)",
        "            lag.add_metric([\"\"], h.cumulative(), h.sum)",
        ("tests/unit/observe/test_looplag.py::test_the_shipped_agent_shows_each_process_loop_lag_and_a_stopped_workers_"
         "stall",
         "tests/unit/observe/test_looplag.py::test_one_process_shows_its_loop_lag_and_a_stall_in_metrics_status_and_"
         "the_page"),
        "nodedns_event_loop_lag_seconds cannot tell the workers apart (their series collide)",
    ),
    Mutation(
        "longest-stall-gauge-reads-the-stall-count",
        "nodedns/metrics/sections.py",
        '        for key, fam in (("longest_last_minute_seconds", longest), ("stalls", stalls)):',
        '        for key, fam in (("stalls", longest), ("longest_last_minute_seconds", stalls)):',
        ("tests/unit/observe/test_looplag.py::test_one_process_shows_its_loop_lag_and_a_stall_in_metrics_status_and_"
         "the_page",),
        "the longest-stall gauge shows the number of stalls and the counter the seconds",
    ),
    Mutation("metrics-shadow-mismatch-name", "nodedns/metrics/sections.py",
             '("mismatches", "nodedns_shadow_mismatches_total", "reason"',
             '("mismatches", "nodedns_shadow_mismatch_total", "reason"',
             ("tests/e2e/test_shadow.py::test_shadow_beside_a_stand_in_dns_reports_the_wrong_service_and_matches_"
              "the_rest",),
             "the mismatch counter under another name than the documented one"),
)
