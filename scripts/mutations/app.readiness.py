"""Mutations of nodedns/app/readiness.py (why /readyz says 503, the `ready:` log line and --ready-file).

The first ones (ready-before-the-index-synced, ready-before-the-roster-says-serving) are in scripts/mutate's
MUTATIONS."""

from mutate import Mutation

TESTS = ("tests/e2e/test_kube_agent.py", "tests/e2e/test_zero_downtime.py", "tests/e2e/test_lifecycle.py",
         "tests/e2e/test_handover.py",
         "tests/unit/app/test_readiness.py")

MUTATIONS = (
    Mutation("dead-listeners-still-ready", "nodedns/app/readiness.py",
             "    reasons.extend(listeners.problems())\n", "", ("tests/e2e/test_lifecycle.py",),
             "/readyz says ready while the DNS listeners are dead"),
    Mutation(
        "ready-logged-before-readyz",
        "nodedns/app/readiness.py",
        "    while reasons := observer.readiness():",
        "    while False:",
        ("tests/e2e/test_kube_agent.py::test_the_log_says_ready_only_when_readyz_does_and_says_why_not_before",),
        "the log says `ready:` while /readyz says 503",
        found="yes",
    ),
    Mutation(
        "node-problems-still-ready",
        "nodedns/app/readiness.py",
        "    if node is not None:\n        reasons.extend(node.problems())",
        "    if node is not None:\n        pass",
        ("tests/unit/app/test_readiness.py::test_the_agent_is_ready_only_when_every_part_is_and_says_why_not",),
        "/readyz says ready while the interface does not hold the local IPs: Pods' queries go nowhere",
        found="yes",
    ),
    Mutation(
        "not-announced-while-starting",
        "nodedns/app/readiness.py",
        '    elif roster is not None and state == "running" and not roster.announced:',
        '    elif roster is not None and state == "starting" and not roster.announced:',
        ("tests/unit/app/test_readiness.py::test_the_agent_is_ready_only_when_every_part_is_and_says_why_not",),
        "in a hand-over, /readyz says ready before the roster marks the agent serving (a successor may take over "
        "from an agent nobody knows serves)",
    ),
    Mutation(
        "ready-file-left-after-the-stop",
        "nodedns/app/readiness.py",
        "    try:\n        while True:\n            await asyncio.to_thread(ready_file.set, not observer.readiness())\n"
        "            await asyncio.sleep(1.0)\n    finally:\n        ready_file.set(False)",
        "    while True:\n        await asyncio.to_thread(ready_file.set, not observer.readiness())\n"
        "        await asyncio.sleep(1.0)",
        ("tests/unit/app/test_readiness.py::test_the_ready_file_is_removed_when_its_task_is_cancelled",),
        "--ready-file stays after the agent stopped keeping it: the exec probe says ready until the file is stale",
        found="yes",
    ),
)
