"""Mutations of nodedns/config/options.py (the option table, `near`)."""

from mutate import Mutation

TESTS = ("tests/unit/test_config.py", "tests/e2e/test_cli_serve.py", "tests/e2e/test_cli_args.py",
         "tests/unit/forward/test_upstream_config.py",
         "tests/e2e/test_dot.py")

MUTATIONS = (
    Mutation(
        "near-ignores-the-words-of-a-name",
        "nodedns/config/options.py",
        "    worded = [k for k in known if k != given and len(words) > 1 and holds(k)]\n",
        "    worded: list[str] = []\n",
        ("tests/e2e/test_cli_args.py::test_a_mistyped_flag_is_told_the_flag_it_means",),
        "a flag made of the words `cache` and `ttl` is told `--cache-min-ttl` (the closest spelling: a floor), not "
        "the TTL caps it means",
    ),
)
