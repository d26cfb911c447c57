"""Mutations of nodedns/serve/server.py (the DNS server: binds, the query log's sampling by zone)."""

from mutate import HIT_PATH_TESTS, Mutation

TESTS = (*HIT_PATH_TESTS, "tests/unit/forward/test_zones.py")

MUTATIONS = (
    Mutation(
        "query-log-ignores-the-zones-share",
        "nodedns/serve/server.py",
        "        if log_rate < rate and self._pick() * rate >= log_rate:",
        "        if False:",
        ("tests/unit/forward/test_zones.py::test_each_zone_logs_its_own_share_of_queries",),
        "every sampled query is logged whatever its zone's `query-log` says",
    ),
)
