"""Mutations of nodedns/__init__.py (the package's version)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_cli_args.py", "tests/unit/observe/test_page.py", "tests/unit/metrics/test_metrics.py")

VERSION = "tests/e2e/test_cli_args.py::test_the_version_printed_is_the_packages_version"

MUTATIONS = (
    Mutation("version-bumped-in-one-place-only", "nodedns/__init__.py", '__version__ = "0.1.0"',
             '__version__ = "0.1.1"', (VERSION,),
             "the version the agent reports (--version, /status, build_info) is not the package's"),
    Mutation("version-empty", "nodedns/__init__.py", '__version__ = "0.1.0"', '__version__ = ""', (VERSION,),
             "the agent reports no version"),
    Mutation("version-prefixed", "nodedns/__init__.py", '__version__ = "0.1.0"', '__version__ = "v0.1.0"',
             (VERSION,), "the version is spelled as a git tag, not as the package's"),
)
