"""Mutations of nodedns/cluster/objects/node.py (a Node slimmed)."""

TESTS = ("tests/unit/cluster/test_objects.py", "tests/unit/cluster/test_records.py",
         "tests/unit/observe/test_insight.py", "tests/e2e/test_cli_serve.py",
         "tests/e2e/test_unusable_names.py", "tests/unit/serve/test_invalidation.py")

MUTATIONS = ()
