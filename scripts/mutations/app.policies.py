"""Mutations of nodedns/app/policies.py (the DNS policy book kept up to date by the index owner)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_policy_agent.py", "tests/e2e/test_policy_rpz.py", "tests/e2e/test_policy_crds.py",
         "tests/unit/cluster/test_changes.py")

MUTATIONS: tuple[Mutation, ...] = ()
