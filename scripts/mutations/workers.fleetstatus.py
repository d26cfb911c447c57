"""Mutations of nodedns/workers/fleetstatus.py (a supervisor's /status and /metrics: its workers' counters summed)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_looplag.py", "tests/e2e/test_fleet.py", "tests/unit/workers/test_modes.py",
         "tests/e2e/test_worker_watch.py")

MUTATIONS = (
    Mutation(
        "supervisor-drops-the-workers-loop-lag",
        "nodedns/workers/fleetstatus.py",
        '                out[name] = {"processes": [*out[name].get("processes", ()), *section.get("processes", ())]}',
        '                out[name] = {"processes": [*out[name].get("processes", ())]}',
        ("tests/unit/observe/test_looplag.py::test_the_shipped_agent_shows_each_process_loop_lag_and_a_stopped_workers_"
         "stall",),
        "with --workers only the supervisor's loop lag shows: the workers that answer DNS are not measured",
    ),
)
