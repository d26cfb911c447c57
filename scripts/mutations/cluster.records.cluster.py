"""Mutations of nodedns/cluster/records/cluster.py (the cluster zone)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_records.py", "tests/unit/cluster/test_cluster_zone.py",
         "tests/unit/cluster/test_clusterset.py",
         "tests/e2e/test_clusterset_zone.py", "tests/unit/serve/test_invalidation.py",
         "tests/unit/forward/test_forward.py",
         "tests/unit/cluster/test_existence.py", "tests/e2e/test_clusterset_ptr.py", "tests/unit/cluster/test_index.py")

MUTATIONS = (
    Mutation(
        "cluster-srv-one-record-per-port-and-protocol",
        "nodedns/cluster/records/cluster.py",
        """        target = self._service_fqdn(svc)
        uniq = list(dict.fromkeys(p.port for p in ports))""",
        """        target = self._service_fqdn(svc)
        uniq = [p.port for p in ports]""",
        ("tests/unit/cluster/test_records.py", "tests/unit/cluster/test_cluster_zone.py"),
        "a Service exposing one port number on UDP and TCP (kube-dns) gets two identical SRV records",
    ),
)
