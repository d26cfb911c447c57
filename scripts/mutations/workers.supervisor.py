"""Mutations of nodedns/workers/supervisor.py (--workers: the supervisor of the worker processes)."""

from mutate import Mutation

TESTS = ("tests/unit/workers/test_messages.py", "tests/e2e/test_operators.py",
         "tests/e2e/test_fleet.py", "tests/e2e/test_worker_watch.py", "tests/e2e/test_sighup.py",
         "tests/e2e/test_handover.py",
         "tests/unit/observe/test_looplag.py", "tests/e2e/test_hosts.py")

MUTATIONS = (
    Mutation(
        "fleet-invalidates-only-the-last-change-of-a-turn",
        "nodedns/workers/supervisor.py",
        "                self._tags.update(tags)",
        "                self._tags = set(tags)",
        ("tests/e2e/test_fleet.py::test_several_changes_in_one_loop_turn_drop_the_answers_of_every_one_in_every_worker",),
        "of several index changes in one event-loop turn, the workers drop only the answers of the last one",
        found="yes",
    ),
    Mutation(
        "silent-worker-waits-its-start-timeout",
        "nodedns/workers/supervisor.py",
        "if silent > (HEARTBEAT_TIMEOUT if worker.served else START_TIMEOUT):",
        "if silent > START_TIMEOUT:",
        ("tests/e2e/test_worker_watch.py::test_a_stopped_worker_is_killed_and_restarted_within_seconds_and_readyz_says_"
         "why_meanwhile",),
        "a worker that served and went silent is killed only after 30 s: its share of the queries is lost "
        "meanwhile",
        found="yes",
    ),
    Mutation(
        "supervisor-pause-kills-its-workers",
        "nodedns/workers/supervisor.py",
        "        if now - self._last_round > SUPERVISOR_LAG:",
        "        if False:",
        ("tests/e2e/test_worker_watch.py::test_a_late_watch_round_counts_every_worker_as_heard_from",),
        "a supervisor that was itself stopped or busy kills every worker whose beats wait unread in its channels",
        found="yes",
    ),
    Mutation(
        "restart-reason-always-died",
        "nodedns/workers/supervisor.py",
        'reason = worker.killed or "died"',
        'reason = "died"',
        ("tests/e2e/test_worker_watch.py::test_a_stopped_worker_is_killed_and_restarted_within_seconds_and_readyz_says_"
         "why_meanwhile",),
        "a worker killed for its silence is counted as one that died",
        found="yes",
    ),
    Mutation(
        "hold-forgets-a-worker-restarting-after-silence",
        "nodedns/workers/supervisor.py",
        """out.append((number, f"worker {number} restarting: {why}", why.startswith("silent")))""",
        """out.append((number, f"worker {number} restarting: {why}", False))""",
        ("tests/e2e/test_worker_watch.py::test_the_supervisor_holds_the_put_back_while_a_worker_is_silent_or_"
         "restarting_"
         "after_it",),
        "the local IPs go back while the killed worker's successor is not serving yet",
        found="yes",
    ),
    Mutation(
        "sighup-not-passed-to-the-workers",
        "nodedns/workers/supervisor.py",
        """                worker.channel.send(Reload())""",
        """                pass""",
        ("tests/e2e/test_sighup.py::test_sighup_to_any_process_of_the_shipped_agent_stops_none_and_every_worker_rereads",),
        "the supervisor's SIGHUP re-reads the upstream files in the supervisor only: the workers, which forward, "
        "keep the old upstreams for up to --kube-dns-config-period",
        found="yes",
    ),
    Mutation(
        "warm-workers-not-asked-for-their-caches",
        "nodedns/workers/supervisor.py",
        "            if worker.channel is not None and worker.serving:",
        "            if worker.channel is not None and not worker.serving:",
        ("tests/e2e/test_handover.py::test_the_successor_answers_from_the_predecessors_forward_cache",),
        "with --workers, the supervisor leaves the successor an empty forward cache",
    ),
    Mutation(
        "supervisor-ignores-a-workers-state",
        "nodedns/workers/supervisor.py",
        "            .on(State, self._on_state)\n",
        "",
        ("tests/unit/workers/test_messages.py::test_each_side_has_one_handler_for_every_message_it_can_be_sent",
         "tests/unit/workers/test_messages.py::test_a_known_message_is_handled_without_a_warning",
         "tests/e2e/test_worker_watch.py::test_the_supervisor_holds_the_put_back_while_a_worker_is_silent_or_"
         "restarting_after_it"),
        "the supervisor's dispatch table has no handler for a worker's State: it never learns a worker serves",
    ),
    Mutation(
        "supervisor-hosts-table-not-flushed",
        "nodedns/workers/supervisor.py",
        "            self._flush()  # the new table goes to the workers with the derived data (_derived: Hosts)",
        "            pass",
        ("tests/e2e/test_hosts.py::test_the_shipped_config_answers_from_the_file_in_every_worker_and_reloads",),
        "a reloaded --hosts file reaches the workers only with the next index change (the old table answers)",
    ),
    Mutation(
        "supervisor-keeps-the-handed-over-parts",
        "nodedns/workers/supervisor.py",
        "                self._warm_offer = None  # handed to every worker started while starting: not kept after",
        "                pass",
        ("tests/unit/workers/test_messages.py::test_the_supervisor_drops_the_handed_over_parts_once_the_agent_"
         "runs",),
        "the supervisor keeps the running agent's forward caches for good after the hand-over (hundreds of MB)",
    ),
)
