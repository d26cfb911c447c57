"""Mutations of nodedns/observe/explain.py (the explainer: /debug/lookup, `nodedns explain`)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_explain.py", "tests/e2e/test_explain_allowed.py", "tests/e2e/test_cli_explain.py",
         "tests/unit/observe/test_status.py",
         "tests/unit/observe/test_status_limits.py", "tests/e2e/test_cli_lookup.py")

MUTATIONS = (
    Mutation("walk-stops-at-nodata", "nodedns/observe/explain.py",
             '    return rcode in ("NXDOMAIN", "SERVFAIL") or (rcode == "NOERROR" and answers == 0)',
             '    return rcode in ("NXDOMAIN", "SERVFAIL")',
             ("tests/unit/observe/test_explain.py::test_the_explained_walk_goes_on_after_nodata_as_glibc_does",),
             "the explained walk stops at a NODATA answer (glibc goes on to the next search domain)", found="yes"),
    Mutation("upstream-budget-ignored", "nodedns/observe/explain.py",
             "        elif self.network + network > self.upstream:", "        elif False:",
             ("tests/unit/observe/test_status_limits.py::test_one_explain_makes_a_bounded_number_of_upstream_queries",),
             "one explanation may make any number of upstream queries (a Pod spec can make the agent flood)"),
)
