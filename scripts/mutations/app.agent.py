"""Mutations of nodedns/app/agent.py (the agent: start, liveness, the node, reloads, the stop).

The first one (duplicate-agent-not-refused) is in scripts/mutate's MUTATIONS."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",
         "tests/e2e/test_lifecycle.py", "tests/unit/observe/test_status.py", "tests/e2e/test_kube_agent.py",
         "tests/e2e/test_handover.py",
         "tests/unit/forward/test_forward.py", "tests/e2e/test_upstream_default.py", "tests/e2e/test_duplicates.py",
         "tests/e2e/test_monitoring.py", "tests/e2e/test_insight_agent.py", "tests/unit/runtime/test_heap.py",
         "tests/unit/test_config_readers.py", "tests/e2e/test_upstream_share.py", "tests/e2e/test_cli_serve.py",
         "tests/unit/serve/test_tail.py", "tests/unit/observe/test_looplag.py", "tests/unit/cluster/test_changes.py",
         "tests/e2e/test_hosts.py",
         "tests/unit/app/test_agent.py")

MUTATIONS = (
    Mutation("dead-listeners-still-live", "nodedns/app/agent.py",
             "            dead = self.listeners.dead()\n            if dead:\n                return False, dead",
             "            dead = self.listeners.dead()\n            if False:\n                return False, dead",
             ("tests/e2e/test_lifecycle.py", "tests/unit/observe/test_status.py"),
             "/healthz says alive while the DNS listeners are dead: the kubelet never restarts the agent"),
    Mutation(
        "heap-never-trimmed-by-an-agent",
        "nodedns/app/agent.py",
        "        if self.mode.trim_heap:\n",
        "        if not self.mode.trim_heap:\n",
        ("tests/unit/runtime/test_heap.py::test_a_running_agent_gives_back_the_heap_a_burst_left_free",),
        "an answering process keeps the heap a burst left free: the next burst starts near the memory limit",
        found="yes",
    ),
    Mutation(
        "host-resolv-conf-read-once",
        "nodedns/app/agent.py",
        '            self._tasks.spawn(self.host_file.run(), "host-resolv-conf")',
        "            self.host_file.text  # noqa: B018",
        ("tests/unit/test_config_readers.py::test_the_agent_renders_pod_resolv_conf_from_the_hosts_file_as_it_changes",),
        "the node's resolv.conf is read once: Pod resolv.conf files are rendered from a stale copy",
        found="yes",
    ),
    Mutation(
        "cli-answers-name-another-agent",
        "nodedns/app/agent.py",
        '"pid": os.getpid(),',
        '"pid": 1,',
        ("tests/e2e/test_cli_serve.py::test_a_taken_debug_port_is_a_warning_and_the_cli_names_the_agent_that_answers",),
        "`nodedns lookup`/`explain`/`top` name a process that did not answer them",
        found="yes",
    ),
    Mutation(
        "resolver-not-on-the-watch-path",
        "nodedns/app/agent.py",
        "        add(self.resolver.answers.index_changed)  # the stored answers built from what changed go\n",
        "",
        ("tests/unit/cluster/test_changes.py::test_the_agent_registers_every_index_listener_in_one_place",
         "tests/unit/cluster/test_changes.py::test_a_supervisor_names_the_tags_of_a_change_once_for_its_answers_and_"
         "its_workers"),
        "an index change drops no stored answer: the agent serves what a Service was before it changed",
    ),
    Mutation(
        "hosts-parse-holds-the-stop",
        "nodedns/app/agent.py",
        "            if not await unless_stopped(self._stop, self.hosts_files.poll_once()):",
        "            await self.hosts_files.poll_once()\n            if False:",
        ("tests/e2e/test_hosts.py::test_sigterm_while_a_blocklist_is_parsed_at_start_is_honoured_at_once",),
        "SIGTERM while a large --hosts file is parsed at start waits for the whole parse (seconds)",
    ),
    Mutation(
        "stop-in-the-sync-s-turn-missed",
        "nodedns/app/agent.py",
        "        return await unless_stopped(self._stop, self.wait_synced()) and self.index.synced \\\n"
        "            and not self._stop.is_set()",
        "        return await unless_stopped(self._stop, self.wait_synced()) and self.index.synced",
        ("tests/unit/app/test_agent.py::test_a_stop_that_comes_in_the_turn_the_index_syncs_is_not_missed",),
        "a stop that comes in the turn the index syncs is missed: the hand-over binds and the collector is frozen "
        "while the agent stops",
        found="yes",
    ),
)
