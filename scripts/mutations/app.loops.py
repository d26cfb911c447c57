"""Mutations of nodedns/app/loops.py (the forwarding-loop probes through the agent's own listener)."""

from mutate import Mutation

TESTS = ("tests/unit/forward/test_forward.py",)

MUTATIONS = (
    Mutation(
        "loop-fixed-outside-never-cleared",
        "nodedns/app/loops.py",
        "                group.loop = None\n",
        "                pass\n",
        ("tests/unit/forward/test_forward.py::test_a_loop_fixed_outside_our_config_is_found_gone_by_the_recheck",),
        "a route marked as a loop stays SERVFAIL after its upstream's operator fixed the forwarding",
    ),
    Mutation(
        "loop-recheck-never-probes",
        "nodedns/app/loops.py",
        "            if looping:\n                await self.probe(looping)",
        "            if not looping:\n                await self.probe(looping)",
        ("tests/unit/forward/test_forward.py::test_a_loop_fixed_outside_our_config_is_found_gone_by_the_recheck",),
        "the routes marked as loops are never probed again: only a reload brings them back",
    ),
    Mutation(
        "loop-detected-not-marked",
        "nodedns/app/loops.py",
        "        group = self.forwarder.mark_loop(qname, seen)\n",
        "        group = None\n",
        ("tests/unit/forward/test_forward.py",),
        "a probe that came back through the upstreams marks no route: queries keep circling between the agent "
        "and its upstream",
    ),
)
