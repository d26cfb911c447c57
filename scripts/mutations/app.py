"""Mutations of nodedns/app.py (the agent: start, readiness, liveness, the node, reloads, the stop).

The first ones (resolv-conf-never-reread, old-agent-tears-down-successors-node, ready-before-the-index-synced,
ready-before-the-roster-says-serving, duplicate-agent-not-refused) are in scripts/mutate.py's MUTATIONS."""

from mutate import Mutation

TESTS = ("tests/test_lifecycle.py", "tests/test_status.py", "tests/test_kube_agent.py", "tests/test_handover.py",
         "tests/test_forward.py", "tests/test_upstream_default.py", "tests/test_duplicates.py",
         "tests/test_monitoring.py", "tests/test_insight_agent.py")

MUTATIONS = (
    Mutation("dead-listeners-still-live", "nodedns/app.py",
             "            dead = self.listener_problems()\n            if dead:\n                return False, dead",
             "            dead = self.listener_problems()\n            if False:\n                return False, dead",
             ("tests/test_lifecycle.py", "tests/test_status.py"),
             "/healthz says alive while the DNS listeners are dead: the kubelet never restarts the agent"),
    Mutation("dead-listeners-still-ready", "nodedns/app.py",
             "        reasons.extend(self.listener_problems())\n", "", ("tests/test_lifecycle.py",),
             "/readyz says ready while the DNS listeners are dead"),
    Mutation("debug-top-without-the-last-seconds-counts", "nodedns/app.py",
             "        self.insight.take(self.insight_rows())\n        return self.insight.document(",
             "        return self.insight.document(",
             ("tests/test_insight_agent.py::test_debug_top_has_each_pod_its_figures_and_the_advice",),
             "/debug/top leaves out what the listeners counted since the last second's hand-over"),
)
