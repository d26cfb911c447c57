"""Mutations of nodedns/workers/zygote.py (the process --workers processes are forked from)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_zygote.py", "tests/e2e/test_fleet.py", "tests/e2e/test_sighup.py")

STATUS = "tests/e2e/test_zygote.py::test_workers_report_their_pid_and_exit_status_and_are_killed_by_pidfd"
DIES = "tests/e2e/test_zygote.py::test_when_the_zygote_dies_its_workers_are_killed_and_the_next_spawn_starts_a_new_one"

MUTATIONS = (
    Mutation("raw-wait-status-reported", "nodedns/workers/zygote.py",
             '            control.send(b"X" + _EXIT.pack(pid, os.waitstatus_to_exitcode(status)))',
             '            control.send(b"X" + _EXIT.pack(pid, status))', (STATUS,),
             "a worker's exit status 3 reads as 768 (a start-up failure is not recognised, a signal not seen)"),
    Mutation("a-worker-always-exits-0", "nodedns/workers/zygote.py", "        os._exit(code)", "        os._exit(0)",
             (STATUS,), "a worker that fails exits 0: the supervisor never stops on a bind error"),
    Mutation("workers-of-a-dead-zygote-left-running", "nodedns/workers/zygote.py",
             "        for child in self.children.values():\n            child.kill()",
             "        for child in self.children.values():\n            pass", (DIES,),
             "when the zygote dies its workers keep running beside the new ones (two answering sets)"),
    Mutation("zygote-stays-after-the-supervisor", "nodedns/workers/zygote.py",
             "        if not message:\n            return 0  # the supervisor is gone",
             "        if not message:\n            continue  # the supervisor is gone", (STATUS,),
             "the zygote outlives its supervisor (spinning on a closed socket until killed)"),
    Mutation(
        "sighup-ends-the-zygote",
        "nodedns/workers/zygote.py",
        "    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a hang-up of the group (a terminal closing) is not "
        "ours to end",
        "    pass",
        ("tests/e2e/test_sighup.py::test_sighup_to_any_process_of_the_shipped_agent_stops_none_and_every_worker_rereads",),
        "SIGHUP kills the zygote, and with it every worker (they are started again from a new one)",
        found="yes",
    ),
)
