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
             "the next second's forwarded answers are rendered in one loop turn: with thousands hot, datagrams "
             "wait milliseconds every second"),
    Mutation(
        "stage-one-answer-a-turn",
        "nodedns/app/upstreams.py",
        "        while more and time.perf_counter() - start < TURN_BUDGET:",
        "        while more and time.perf_counter() - start > TURN_BUDGET:",
        ("tests/unit/app/test_upstreams.py::test_a_turn_under_its_budget_renders_several_answers_before_letting_the_"
         "loop_run",),
        "the next second's forwarded answers are rendered one a loop turn: with thousands hot, they are not all "
        "ready when their second comes",
        found="yes",
    ),
)
