"""Mutations of nodedns/app/readiness.py (why /readyz says 503, the `ready:` log line and --ready-file).

The first ones (ready-before-the-index-synced, ready-before-the-roster-says-serving) are in scripts/mutate's
MUTATIONS."""

from mutate import Mutation

TESTS = ("tests/e2e/test_kube_agent.py", "tests/e2e/test_zero_downtime.py", "tests/e2e/test_lifecycle.py",
         "tests/e2e/test_handover.py")

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
)
