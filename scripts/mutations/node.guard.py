"""Mutations of nodedns/node/guard.py (the guard's rounds and its decision)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_guard.py",)

MUTATIONS = (
    Mutation(
        "guard-probe-waits-less-than-the-interval",
        "nodedns/node/guard.py",
        "self.wait = max(interval, 0.1)",
        "self.wait = min(interval, 0.1)",
        ("tests/e2e/test_guard.py::test_the_guard_takes_the_addresses_away_as_its_flags_say",),
        "a probe's answer counts only within 0.1 s whatever --probe-interval says: a slow but live agent is "
        "never seen answering",
        found="yes",
    ),
    Mutation(
        "guard-arms-a-round-late",
        "nodedns/node/guard.py",
        "if not self.armed and self.answered >= self.failures:",
        "if not self.armed and self.answered > self.failures:",
        ("tests/e2e/test_guard.py::test_the_guard_takes_the_addresses_away_as_its_flags_say",
         "tests/e2e/test_guard.py::test_the_guard_falls_back_only_after_seeing_the_agent_answer_and_then_fail_in_a_row"),
        "the guard needs one answered round more than --failures before it guards",
    ),
)
