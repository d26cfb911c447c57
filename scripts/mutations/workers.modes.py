"""Mutations of nodedns/workers/modes.py (each mode's agent built from its parts)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_changes.py", "tests/e2e/test_sighup.py", "tests/e2e/test_fleet.py",
         "tests/unit/workers/test_entry.py")

MUTATIONS = (
    Mutation(
        "supervisor-workers-not-on-the-watch-path",
        "nodedns/workers/modes.py",
        "    agent.changes.add(fleet.index_changed)  # the workers hold no index: told what exists and what changed\n",
        "",
        ("tests/unit/cluster/test_changes.py::test_a_supervisor_names_the_tags_of_a_change_once_for_its_answers_and_"
         "its_workers",),
        "the workers are never told what changed: each serves its stored answers past the change",
    ),
    Mutation(
        "sighup-not-passed-on-by-the-supervisor",
        "nodedns/workers/modes.py",
        "    agent.on_hangup = fleet.hangup  # the workers re-read the upstream files too\n",
        "",
        ("tests/e2e/test_sighup.py::test_sighup_to_any_process_of_the_shipped_agent_stops_none_and_every_worker_"
         "rereads",),
        "SIGHUP to the supervisor re-reads its own upstream files only: its workers keep forwarding to the old ones",
    ),
    Mutation(
        "supervisor-metrics-without-the-workers",
        "nodedns/workers/modes.py",
        "    agent.observer = FleetObserver(agent, fleet)\n",
        "",
        ("tests/e2e/test_fleet.py::test_metrics_sum_the_workers_and_keep_a_dead_workers_counts",),
        "the supervisor's /metrics and /status show its own counters only: every answer its workers gave is missing",
    ),
)
