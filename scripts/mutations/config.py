"""Mutations of nodedns/config/__init__.py (every name of the configuration, imported from its modules).

The mutations of the configuration are in the tables of its modules (config.values, config.zones, config.options,
config.build, config.files)."""

from mutate import Mutation

TESTS = ("tests/unit/test_config.py", "tests/e2e/test_cli_serve.py", "tests/e2e/test_cli_args.py",
         "tests/unit/forward/test_upstream_config.py",
         "tests/e2e/test_dot.py")

MUTATIONS: tuple[Mutation, ...] = ()
