"""Mutations of nodedns/policy/status.py (the policies' status conditions, written by one agent in practice)."""

from mutate import Mutation

TESTS = ("tests/unit/policy/test_status.py", "tests/e2e/test_policy_crds.py")

_T = "tests/unit/policy/test_status.py::"

MUTATIONS = (
    Mutation("status-written-though-unchanged", "nodedns/policy/status.py",
             "        if wanted is None or not differs(wanted, record):",
             "        if wanted is None:",
             (_T + "test_written_once_then_left_alone_and_other_conditions_kept",
              _T + "test_a_write_is_checked_again_against_the_latest_object_when_its_delay_ends"),
             "every agent of the DaemonSet writes the same conditions again and again"),
    Mutation("status-refused-write-retried", "nodedns/policy/status.py",
             "            self._given_up[key] = record.resource_version",
             "            pass",
             (_T + "test_a_refused_write_is_said_once_and_not_retried_for_that_version",),
             "a 403/404/409 on the status patch is retried in a loop"),
    Mutation("status-patch-without-precondition", "nodedns/policy/status.py",
             '    return {"metadata": {"resourceVersion": record.resource_version}, "status": {"conditions": out}}',
             '    return {"status": {"conditions": out}}',
             (_T + "test_written_once_then_left_alone_and_other_conditions_kept",),
             "two agents racing both write: no 409 Conflict stops the second"),
    Mutation("status-others-conditions-dropped", "nodedns/policy/status.py",
             "    out = [c for t, c in shown.items() if t not in OURS]",
             "    out = []",
             (_T + "test_written_once_then_left_alone_and_other_conditions_kept",),
             "a condition another controller set on the policy is wiped by the agent's write"),
)
