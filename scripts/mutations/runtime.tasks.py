"""Mutations of nodedns/runtime/tasks.py (the owned background tasks)."""

from mutate import Mutation

TESTS = ("tests/unit/runtime/test_tasks.py", "tests/e2e/test_lifecycle.py")

MUTATIONS = (
    Mutation("finished-tasks-kept", "nodedns/runtime/tasks.py",
             "        task.add_done_callback(self._tasks.discard)\n", "",
             ("tests/unit/runtime/test_tasks.py",),
             "every finished background task stays referenced (memory grows with each)"),
    Mutation("running-tasks-not-kept", "nodedns/runtime/tasks.py", "        self._tasks.add(task)\n", "",
             ("tests/unit/runtime/test_tasks.py",),
             "a background task is referenced by nobody: the garbage collector may end it mid-way, and the stop "
             "does not cancel it"),
    Mutation("cancel-all-cancels-nothing", "nodedns/runtime/tasks.py", "            task.cancel()", "            pass",
             ("tests/unit/runtime/test_tasks.py",), "stopping the agent waits forever for its background loops"),
    Mutation("cancel-all-does-not-wait", "nodedns/runtime/tasks.py",
             "        if self._tasks:\n            await asyncio.gather(*self._tasks, return_exceptions=True)",
             "        if False:\n            await asyncio.gather(*self._tasks, return_exceptions=True)",
             ("tests/unit/runtime/test_tasks.py",),
             "the stop goes on while cancelled tasks still clean up (they touch what "
             "is being closed)"),
    Mutation("in-turns-never-yields", "nodedns/runtime/tasks.py",
             "        if clock() - start >= budget:", "        if False:",
             ("tests/unit/runtime/test_tasks.py",),
             "background work in turns (the insight hand-over) holds the loop for all of it: datagrams wait "
             "milliseconds"),
    Mutation(
        "stopped-work-keeps-running",
        "nodedns/runtime/tasks.py",
        "        running.cancel()\n        with contextlib.suppress(asyncio.CancelledError):\n"
        "            await running\n",
        "",
        ("tests/unit/runtime/test_tasks.py::test_work_cut_short_by_a_stop_is_cancelled_and_over_when_unless_stopped_"
         "returns",),
        "work a stop cut short goes on running beside the stop (the start's waits touch what is being closed)",
        found="yes",
    ),
)
