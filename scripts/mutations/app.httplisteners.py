"""Mutations of nodedns/app/httplisteners.py (the status and debug listeners, in a hand-over too)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_cli_serve.py", "tests/e2e/test_handover.py", "tests/unit/observe/test_status.py",
         "tests/e2e/test_history_agent.py", "tests/e2e/test_duplicates.py")

MUTATIONS: tuple[Mutation, ...] = ()
