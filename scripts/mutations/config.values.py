"""Mutations of nodedns/config/values.py (the values an option takes and their parsers)."""

from mutate import Mutation

TESTS = ("tests/unit/test_config.py", "tests/e2e/test_cli_serve.py", "tests/e2e/test_cli_args.py",
         "tests/unit/forward/test_upstream_config.py",
         "tests/e2e/test_dot.py")

MUTATIONS = (
    Mutation("lowest-value-of-a-range-refused", "nodedns/config/values.py",
             '            raise ValueError("must be a whole number") from None\n        if not lo <= n <= hi:',
             '            raise ValueError("must be a whole number") from None\n        if not lo < n <= hi:',
             ("tests/unit/test_config.py::test_numbers_are_taken_at_their_bounds_and_refused_past_them",),
             "`--max-udp-size 512` and `--workers 0` are refused", found="yes"),
    Mutation("junk-between-duration-parts-accepted", "nodedns/config/values.py",
             "        if m.start() != pos:\n            break", "        if False:\n            break",
             ("tests/unit/test_config.py::test_what_is_no_duration_is_refused",),
             "`1mx2s` is read as 62 seconds", found="yes"),
)
