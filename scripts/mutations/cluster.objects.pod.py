"""Mutations of nodedns/cluster/objects/pod.py (a Pod slimmed, its owner)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_objects.py", "tests/unit/cluster/test_records.py",
         "tests/unit/observe/test_insight.py", "tests/e2e/test_cli_serve.py",
         "tests/e2e/test_unusable_names.py", "tests/unit/serve/test_invalidation.py")

MUTATIONS = (
    Mutation("deployment-not-named-after-its-replicaset", "nodedns/cluster/objects/pod.py",
             '        kind, name = "Deployment", name[: -len(template_hash) - 1]', "        pass",
             ("tests/unit/observe/test_insight.py", "tests/unit/cluster/test_objects.py"),
             "a Deployment's Pods are shown under their ReplicaSet (`web-7d9f8`), not the Deployment"),
    Mutation("finished-pod-not-terminating", "nodedns/cluster/objects/pod.py",
             '        terminating=meta.get("deletionTimestamp") is not None or phase in ("Succeeded", "Failed"),',
             '        terminating=meta.get("deletionTimestamp") is not None,',
             ("tests/unit/cluster/test_objects.py::test_a_pod_is_terminating_when_deleted_or_finished",),
             "a Pod that finished (Succeeded, Failed) still holds its address", found="yes"),
)
