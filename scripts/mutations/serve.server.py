"""Mutations of nodedns/serve/server.py (the DNS server: binds, caps, the process's bound on answers owed)."""

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
    Mutation(
        "tcp-process-owed-bound-doubled",
        "nodedns/serve/server.py",
        "while total > TCP_PROCESS_OWED_MAX and held:",
        "while total > 2 * TCP_PROCESS_OWED_MAX and held:",
        ("tests/e2e/test_tcp_bounds.py::test_past_the_process_bound_on_answers_unsent_the_largest_holders_are_reset_"
         "and_"
         "the_rest_kept",),
        "clients that never read make one process hold twice the answers it may",
        found="yes",
    ),
    Mutation(
        "tcp-process-owed-sheds-the-smallest",
        "nodedns/serve/server.py",
        "victim = max(held, key=held.__getitem__)",
        "victim = min(held, key=held.__getitem__)",
        ("tests/e2e/test_tcp_bounds.py::test_past_the_process_bound_on_answers_unsent_the_largest_holders_are_reset_"
         "and_"
         "the_rest_kept",),
        "the connections holding least are reset first: more are reset than needed",
        found="yes",
    ),
    Mutation(
        "tcp-cap-never-makes-room",
        "nodedns/serve/server.py",
        "if len(conns) < held + 2 or victim is None:",
        "if True:",
        ("tests/e2e/test_tcp_bounds.py::test_at_the_connection_cap_a_client_holding_fewer_gets_in_and_the_largest_"
         "holder_loses_its_oldest",),
        "once attacker Pods fill --tcp-max-connections, every other client's TCP connection is refused",
        found="yes",
    ),
)
