"""Mutations of nodedns/app/run.py (one agent on uvloop: its exit code, the fatal line)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_looplag.py", "tests/e2e/test_cli_serve.py", "tests/e2e/test_duplicates.py")

MUTATIONS = (
    Mutation(
        "gc-never-frozen-in-a-serving-process",
        "nodedns/app/run.py",
        "        agent.freeze_gc_after = gc_freeze_after(os.environ.get(\"NODEDNS_GC_FREEZE\", \"\"))\n",
        "",
        ("tests/unit/observe/test_looplag.py::test_the_shipped_agent_shows_each_process_loop_lag_and_a_stopped_workers_"
         "stall",),
        "full collections keep walking the modules and the index: tens of milliseconds every few minutes",
    ),
    Mutation(
        "gc-freeze-off-is-ignored",
        "nodedns/app/run.py",
        '    if text == "off":\n        return None',
        '    if text == "off":\n        return GC_FREEZE_AFTER',
        ("tests/unit/observe/test_looplag.py::test_nodedns_gc_freeze_says_when_to_freeze_again_or_off",),
        "NODEDNS_GC_FREEZE=off (to measure what freezing does) still freezes",
    ),
    Mutation(
        "duplicate-agent-exits-1",
        "nodedns/app/run.py",
        '        code, text = EXIT_CONFIG, f"nodedns: refusing to start: {exc}"',
        '        code, text = 1, f"nodedns: refusing to start: {exc}"',
        ("tests/e2e/test_duplicates.py",),
        "a duplicate agent exits 1 (a crash to a supervisor) instead of 2 (refused: a configuration problem)",
    ),
)
