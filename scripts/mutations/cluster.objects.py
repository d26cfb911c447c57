"""Mutations of nodedns/cluster/objects/__init__.py (`slim`: a raw object to its kind's record)."""

TESTS = ("tests/unit/cluster/test_objects.py", "tests/unit/cluster/test_records.py",
         "tests/unit/observe/test_insight.py", "tests/e2e/test_cli_serve.py",
         "tests/e2e/test_unusable_names.py", "tests/unit/serve/test_invalidation.py")

MUTATIONS = ()
