"""Mutations of nodedns/workers/launch.py (`nodedns serve`: one agent or a supervisor, the workers' count and ports)."""

from mutate import Mutation

TESTS = ("tests/unit/workers/test_entry.py", "tests/e2e/test_fleet.py")

SERVE = "tests/unit/workers/test_entry.py::test_one_worker_runs_one_agent_and_more_run_a_supervisor_of_that_many"
PORTS = "tests/unit/workers/test_entry.py::test_port_zero_becomes_one_port_free_for_udp_and_tcp_and_a_given_port_stays"

MUTATIONS = (
    Mutation("zero-workers-means-one", "nodedns/workers/launch.py", "    return config.workers or cpu_count()",
             "    return config.workers or 1",
             ("tests/e2e/test_fleet.py::test_the_worker_count_defaults_to_one_process",),
             "--workers 0 runs one process instead of one per CPU"),
)
