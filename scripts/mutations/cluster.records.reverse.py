"""Mutations of nodedns/cluster/records/reverse.py (the reverse zones' PTRs)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_records.py", "tests/unit/cluster/test_cluster_zone.py",
         "tests/unit/cluster/test_clusterset.py",
         "tests/e2e/test_clusterset_zone.py", "tests/unit/serve/test_invalidation.py",
         "tests/unit/forward/test_forward.py",
         "tests/unit/cluster/test_existence.py", "tests/e2e/test_clusterset_ptr.py", "tests/unit/cluster/test_index.py")

MUTATIONS = (
    Mutation(
        "mcs-ptr-missing",
        "nodedns/cluster/records/reverse.py",
        "            targets = self.clusterset_ptr_targets(ip)  # the cluster-local PTR wins (spec: Limitations)",
        "            targets = []",
        ("tests/unit/cluster/test_clusterset.py::test_clusterset_records_answer_as_the_mcs_spec_says",
         "tests/e2e/test_clusterset_ptr.py::test_clusterset_ptrs_follow_imports_and_yield_to_the_cluster_zone"),
        "a clusterset IP or an imported headless endpoint has no PTR (MCS DNS spec 2.3.3, 2.4.3)",
        found="yes (the spec's PTRs were missing)",
    ),
    Mutation(
        "mcs-ptr-wins-over-the-cluster-local-one",
        "nodedns/cluster/records/reverse.py",
        "        if not targets and ip is not None:\n            targets = self.clusterset_ptr_targets(ip)",
        "        if ip is not None:\n            targets = self.clusterset_ptr_targets(ip) or targets",
        ("tests/unit/cluster/test_clusterset.py::test_clusterset_records_answer_as_the_mcs_spec_says",),
        "an address with a cluster-local PTR answers the clusterset one instead (the spec's Limitations)",
    ),
    Mutation(
        "mcs-ptr-for-an-endpoint-not-ready",
        "nodedns/cluster/records/reverse.py",
        "                if ep.ready:\n                    for name, addr in self._endpoint_names(ep):\n"
        "                        if addr == ip:\n                            targets[f\"{name}.{base}\"] = None",
        "                if True:\n                    for name, addr in self._endpoint_names(ep):\n"
        "                        if addr == ip:\n                            targets[f\"{name}.{base}\"] = None",
        ("tests/unit/cluster/test_clusterset.py::test_clusterset_records_answer_as_the_mcs_spec_says",),
        "an imported endpoint that is not ready keeps a PTR",
    ),
)
