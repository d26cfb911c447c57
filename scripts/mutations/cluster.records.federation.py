"""Mutations of nodedns/cluster/records/federation.py (kube-dns federations)."""

TESTS = ("tests/unit/cluster/test_records.py", "tests/unit/cluster/test_cluster_zone.py",
         "tests/unit/cluster/test_clusterset.py",
         "tests/e2e/test_clusterset_zone.py", "tests/unit/serve/test_invalidation.py",
         "tests/unit/forward/test_forward.py",
         "tests/unit/cluster/test_existence.py", "tests/e2e/test_clusterset_ptr.py", "tests/unit/cluster/test_index.py")

MUTATIONS = ()
