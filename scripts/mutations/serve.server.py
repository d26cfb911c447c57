"""Mutations of nodedns/serve/server.py (the DNS server: binds, caps, the process's bound on answers owed)."""

from mutate import Mutation

TESTS = ("tests/unit/serve/test_hit_paths.py", "tests/unit/serve/test_hitpath_differential.py",
         "tests/e2e/test_hitpath_c.py", "tests/e2e/test_hostile.py", "tests/unit/serve/test_interop.py",
         "tests/unit/observe/test_insight_hitpath.py",
         "tests/e2e/test_lifecycle.py", "tests/unit/forward/test_forward.py", "tests/unit/metrics/test_metrics.py",
         "tests/e2e/test_tcp_bounds.py")

DIFFERENTIAL = ("tests/unit/serve/test_hit_paths.py::test_the_c_and_python_hit_paths_send_the_same_bytes_and_count_the_"
                "same")
BOUNDARIES = ("tests/unit/serve/test_hit_paths.py::test_a_cut_at_each_section_boundary_counts_the_records_kept_in_the_"
              "header")
PRODUCTION = ("tests/unit/serve/test_hitpath_differential.py::test_the_c_and_python_hit_paths_return_send_and_count_"
              "the_same")

MUTATIONS = (
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
