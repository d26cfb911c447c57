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
        "worker-never-says-it-is-bound",
        "nodedns/workers/modes.py",
        "defer=start.defer, on_bound=client.report)",
        "defer=start.defer, on_bound=None)",
        ("tests/e2e/test_fleet.py::test_workers_share_one_api_watch_and_every_worker_sees_each_change",),
        "a worker never tells the supervisor it bound: the supervisor never serves, /readyz never says ready",
    ),
)
