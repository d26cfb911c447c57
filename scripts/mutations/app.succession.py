"""Mutations of nodedns/app/succession.py (the hand-over: duplicates refused, the warm cache, the node left)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_handover.py", "tests/e2e/test_duplicates.py", "tests/e2e/test_lifecycle.py")

MUTATIONS = (
    Mutation(
        "node-cache-holder-not-awaited",
        "nodedns/app/succession.py",
        "            found = await self._let_go(found)",
        "            pass",
        ("tests/e2e/test_duplicates.py::test_an_agent_managing_the_node_waits_for_a_foreign_holder_of_its_address_to_"
         "let_go",),
        "nodedns refuses to start (exit 2) while node-cache's terminating Pod still holds 169.254.20.10:53",
        found="yes (exit 2 in a migration)",
    ),
    Mutation(
        "leaving-agent-takes-node-caches-interface",
        "nodedns/app/succession.py",
        "        foreign = [o for o in found if not o.is_nodedns]",
        "        foreign = []",
        ("tests/e2e/test_duplicates.py::test_on_the_way_back_a_leaving_agent_leaves_the_interface_to_node_cache",),
        "on the way back nodedns removes the interface node-cache already serves on (its addresses gone for up to "
        "its -syncinterval)",
        found="yes",
    ),
    Mutation(
        "old-agent-tears-down-successors-node",
        "nodedns/app/succession.py",
        "                await node.teardown(retry=retry, keep=True)",
        "                await node.teardown(retry=retry, keep=False)",
        ("tests/e2e/test_handover.py::test_a_restart_keeps_the_interface_and_the_rules_the_successor_uses",),
        "an agent that stops beside its successor removes the interface and rules the successor uses",
        found="yes (only the dnsperf restart test saw it)",
    ),
)
