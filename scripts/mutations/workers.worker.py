"""Mutations of nodedns/workers/worker.py (a --workers process: the agent without an index)."""

from mutate import Mutation

TESTS = ("tests/unit/workers/test_messages.py", "tests/unit/workers/test_entry.py", "tests/e2e/test_operators.py",
         "tests/e2e/test_fleet.py", "tests/e2e/test_sighup.py",
         "tests/e2e/test_handover.py", "tests/e2e/test_hosts.py")

MUTATIONS = (
    Mutation(
        "filter-aaaa-workers-never-told",
        "nodedns/workers/worker.py",
        """    def _on_filter_aaaa(self, message: FilterAaaa) -> None:
        self.agent.resolver.set_aaaa_filter(message.active, message.reason)""",
        """    def _on_filter_aaaa(self, message: FilterAaaa) -> None:
        pass""",
        ("tests/e2e/test_operators.py::test_as_shipped_with_workers_auto_is_decided_by_the_supervisor_and_every_worker_"
         "follows",),
        "with --workers, the workers never learn the auto decision: they never filter",
    ),
    Mutation(
        "worker-dispatch-drops-the-answers",
        "nodedns/workers/worker.py",
        "    .on(Answers, IndexClient._on_answers)\n",
        "",
        ("tests/unit/workers/test_messages.py::test_each_side_has_one_handler_for_every_message_it_can_be_sent",
         "tests/e2e/test_fleet.py::test_workers_share_one_api_watch_and_every_worker_sees_each_change"),
        "a worker's dispatch table has no handler for the supervisor's answers: every cluster name it is asked "
        "times out (SERVFAIL)",
    ),
    Mutation(
        "worker-ignores-the-hosts-table",
        "nodedns/workers/worker.py",
        "        self.agent.resolver.set_hosts(table)\n",
        "",
        ("tests/e2e/test_hosts.py::test_the_shipped_config_answers_from_the_file_in_every_worker_and_reloads",),
        "a worker maps the supervisor's --hosts table but never answers from it (the names forwarded)",
    ),
    Mutation(
        "worker-table-socket-left-blocking",
        "nodedns/workers/worker.py",
        "        table_sock.setblocking(False)\n",
        "        pass\n",
        ("tests/unit/workers/test_entry.py::test_a_workers_table_socket_is_non_blocking_so_a_table_not_queued_is_an_"
         "error_at_once",),
        "a worker's --hosts table socket is blocking: a Hosts message whose table is not queued blocks its event "
        "loop in recvmsg for good (receive_table's MSG_DONTWAIT is ignored by socket.recv_fds)",
        found="yes",
    ),
)
