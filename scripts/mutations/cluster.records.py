"""Mutations of nodedns/cluster/records/__init__.py (the answers of the zones: which zone a name is in)."""

TESTS = ("tests/unit/cluster/test_records.py", "tests/unit/cluster/test_cluster_zone.py",
         "tests/unit/cluster/test_clusterset.py",
         "tests/e2e/test_clusterset_zone.py", "tests/unit/serve/test_invalidation.py",
         "tests/unit/forward/test_forward.py",
         "tests/unit/cluster/test_existence.py", "tests/e2e/test_clusterset_ptr.py", "tests/unit/cluster/test_index.py")

MUTATIONS = ()
