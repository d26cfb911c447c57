"""Mutations of nodedns/app/upstreams.py (the forwarding at run time: the cache's clock, reloads, loop probes)."""

from mutate import Mutation

TESTS = ("tests/unit/forward/test_forward.py", "tests/unit/forward/test_zones.py", "tests/e2e/test_sighup.py",
         "tests/unit/forward/test_config_reload_model.py", "tests/e2e/test_upstream_default.py",
         "tests/unit/app/test_upstreams.py")

MUTATIONS = (
    Mutation("stage-ignores-the-turn-budget", "nodedns/app/upstreams.py",
             "        while more and time.perf_counter() - start < TURN_BUDGET:",
             "        while more:",
             ("tests/unit/app/test_upstreams.py",),
             "the hot forwarded answers whose second has come are looked at in one loop turn: with thousands "
             "coming due together, datagrams wait milliseconds"),
    Mutation(
        "stage-one-answer-a-turn",
        "nodedns/app/upstreams.py",
        "        while more and time.perf_counter() - start < TURN_BUDGET:",
        "        while more and time.perf_counter() - start > TURN_BUDGET:",
        ("tests/unit/app/test_upstreams.py::test_a_turn_under_its_budget_looks_at_several_answers_before_letting_"
         "the_loop_run",),
        "the hot forwarded answers whose second has come are looked at one a loop turn: with thousands coming due "
        "together, expired ones and those at their refresh point wait seconds for their look",
        found="yes",
    ),
)
