"""Mutations of nodedns/runtime/logutil.py (consolidated errors, the query log, the formats)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_logs.py", "tests/unit/metrics/test_metrics.py")

MUTATIONS = (
    Mutation("every-repeated-error-logged", "nodedns/runtime/logutil.py",
             "        if now - self.window_start >= self.interval:",
             "        if True:", ("tests/e2e/test_logs.py::test_repeated_errors_give_at_most_two_lines_a_minute",),
             "one log line per failed query instead of one a minute and a summary"),
    Mutation("summary-never-written-without-a-new-error", "nodedns/runtime/logutil.py",
             "        if self.suppressed and self.clock() - self.window_start >= self.interval:",
             "        if self.suppressed and self.clock() - self.window_start >= 2 * self.interval:",
             ("tests/e2e/test_logs.py::test_the_summary_is_written_when_the_minute_ends_without_new_errors",),
             "the count of suppressed errors is written a minute late"),
    Mutation("error-totals-count-only-the-last-reporter", "nodedns/runtime/logutil.py",
             "        out[c.what] = out.get(c.what, 0) + c.total", "        out[c.what] = c.total",
             ("tests/e2e/test_logs.py::test_error_totals_add_up_the_reporters_of_one_kind",),
             "nodedns_errors_total counts one reporter of a kind (several listeners report the same kind)",
             found="yes"),
    Mutation("json-log-without-the-query-fields", "nodedns/runtime/logutil.py",
             "        if isinstance(extra, dict):\n            out.update(extra)",
             "        if False:\n            out.update(extra)",
             ("tests/e2e/test_logs.py::test_json_logs_are_one_json_object_per_line_with_query_fields",),
             "--log-format json query-log lines lack their client, name, type, rcode, duration fields"),
)
