"""Mutations of nodedns/serve/hostswatch.py (the --hosts files re-read as they change, their /status section)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_hosts.py", "tests/unit/serve/test_hosts.py", "tests/unit/serve/test_hostswatch.py")

MUTATIONS = (
    Mutation(
        "worker-maps-whatever-table-was-passed",
        "nodedns/serve/hostswatch.py",
        "            if tag == reloads and found is None:",
        "            if found is None:",
        ("tests/unit/serve/test_hosts.py::test_a_worker_gets_the_table_over_its_socket_without_any_proc_access",),
        "a worker maps the first table queued on its socket, an older reading's: it answers from stale hosts files",
    ),
    Mutation(
        "hosts-table-not-sealed",
        "nodedns/serve/hostswatch.py",
        "                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)",
        "                pass",
        ("tests/unit/serve/test_hosts.py::test_a_worker_gets_the_table_over_its_socket_without_any_proc_access",),
        "the hosts table's memfd is writable: whatever a worker is passed can rewrite every process's table",
    ),
    Mutation(
        "hosts-file-never-read-again",
        "nodedns/serve/hostswatch.py",
        "            if f.signature is not None and await self._in_thread(f, lambda: _signature(f.path)) == "
        "f.signature:",
        "            if f.signature is not None:",
        ("tests/e2e/test_hosts.py::test_a_changed_file_is_answered_without_a_restart_and_forwarded_answers_go",),
        "a hosts file read once is never read again (a change needs a restart)",
    ),
    Mutation(
        "hosts-skipped-lines-not-counted",
        "nodedns/serve/hostswatch.py",
        "            self.errors += p.skipped\n",
        "",
        ("tests/e2e/test_hosts.py::test_status_and_metrics_count_the_entries_and_the_answers",),
        "malformed hosts lines are not counted in /status errors",
    ),
    Mutation(
        "hosts-ignored-names-counted-as-skipped",
        "nodedns/serve/hostswatch.py",
        "            f.skipped, f.ignored = p.skipped, p.ignored",
        "            f.skipped, f.ignored = p.skipped + p.ignored, p.ignored",
        ("tests/e2e/test_hosts.py::test_status_and_metrics_count_the_entries_and_the_answers",),
        "a name left to the cluster zone is counted as a malformed line",
    ),
    Mutation(
        "hosts-read-without-a-timeout",
        "nodedns/serve/hostswatch.py",
        "            return await asyncio.wait_for(asyncio.shield(future), self.read_timeout)",
        "            return await future",
        ("tests/unit/serve/test_hosts.py::test_a_read_that_does_not_return_is_given_up_and_not_started_again",),
        "a hosts file on a file system that does not answer holds the start and every later reload",
    ),
    Mutation(
        "hosts-each-skipped-line-logged",
        "nodedns/serve/hostswatch.py",
        "                    f.path, p.skipped, p.ignored, \"; \".join(str(x) for x in p.sample))",
        "                    f.path, p.skipped, p.ignored, \"; \".join(str(x) for x in p.sample))\n"
        "                for x in p.sample:\n                    log.warning(\"--hosts %s\", x)",
        ("tests/unit/serve/test_hosts.py::test_skipped_lines_are_logged_once_per_reading_with_a_sample",),
        "each skipped line of a hosts file logged on its own line",
    ),
)
