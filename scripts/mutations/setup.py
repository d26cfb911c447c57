"""Mutations of setup.py (the optional C hit path: pip install with and without a C compiler)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_packaging.py",)

NO_COMPILER = "tests/e2e/test_packaging.py::test_the_sdist_installs_and_serves_without_a_c_compiler"

MUTATIONS = (
    Mutation("c-hit-path-required-to-install", "setup.py", '["nodedns/serve/_hitpath.c"], optional=True,',
             '["nodedns/serve/_hitpath.c"], optional=False,', (NO_COMPILER,),
             "pip install fails on a machine without a C compiler instead of serving from the Python hit path"),
)
