"""Mutations of nodedns/config/zones.py (`zones:` of the config file)."""

from mutate import Mutation

TESTS = ("tests/unit/test_config.py", "tests/e2e/test_cli_serve.py", "tests/e2e/test_cli_args.py",
         "tests/unit/forward/test_upstream_config.py",
         "tests/e2e/test_dot.py")

MUTATIONS: tuple[Mutation, ...] = ()
