"""Mutations of nodedns/serve/hostswatch.py (the --hosts files re-read as they change, their /status section)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_hosts.py", "tests/unit/serve/test_hostswatch.py")

MUTATIONS = (
    Mutation(
        "hosts-file-never-read-again",
        "nodedns/serve/hostswatch.py",
        "if f.signature is not None and await asyncio.to_thread(_signature, f.path) == f.signature:",
        "if f.signature is not None:",
        ("tests/e2e/test_hosts.py::test_a_changed_file_is_answered_without_a_restart_and_forwarded_answers_go",),
        "a hosts file read once is never read again (a change needs a restart)",
    ),
    Mutation(
        "hosts-skipped-lines-not-counted",
        "nodedns/serve/hostswatch.py",
        "                    self.errors += 1\n                    log.warning",
        "                    log.warning",
        ("tests/e2e/test_hosts.py::test_status_and_metrics_count_the_entries_and_the_answers",),
        "malformed hosts lines are not counted in /status errors",
    ),
    Mutation(
        "hosts-ignored-names-counted-as-skipped",
        "nodedns/serve/hostswatch.py",
        "f.skipped = sum(1 for p in problems if not p.ignored)",
        "f.skipped = len(problems)",
        ("tests/e2e/test_hosts.py::test_status_and_metrics_count_the_entries_and_the_answers",),
        "a name left to the cluster zone is counted as a malformed line",
    ),
)
