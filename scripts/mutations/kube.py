"""Mutations of nodedns/kube.py (the API watch: lists, watches, errors, back-off)."""

from mutate import Mutation

TESTS = ("tests/test_kube.py", "tests/test_kube_agent.py", "tests/test_sync_degraded.py", "tests/test_own_node.py")

MUTATIONS = (
    Mutation("backoff-without-doubling", "nodedns/kube.py",
             "        d = min(self.maximum, self.initial * float(1 << min(self.failures, 30)))",
             "        d = min(self.maximum, self.initial)",
             ("tests/test_kube.py::test_backoff_doubles_with_jitter_up_to_the_maximum_and_resets",),
             "a failing API server is asked again every half second, forever"),
    Mutation("expired-status-not-a-relist", "nodedns/kube.py",
             '    if code == 410 or reason in ("Expired", "Gone"):', "    if code == 410:",
             ("tests/test_kube.py::test_status_errors_map_to_the_decision",),
             "an ERROR watch event with reason Expired (no HTTP 410) is retried from the same resourceVersion "
             "forever instead of relisting"),
    Mutation("every-pod-of-the-cluster-watched", "nodedns/kube.py",
             "        if self.resource.field_selector:\n"
             "            params[\"fieldSelector\"] = self.resource.field_selector",
             "        if False:\n            params[\"fieldSelector\"] = self.resource.field_selector",
             ("tests/test_kube.py", "tests/test_own_node.py"),
             "the agent lists and watches every Pod of the cluster instead of its node's"),
)
