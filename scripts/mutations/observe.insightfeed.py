"""Mutations of nodedns/observe/insightfeed.py (the tally handed to the Insight; /debug/top's document)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_insight_agent.py", "tests/unit/observe/test_insightfeed.py", "tests/unit/serve/test_tail.py",
         "tests/unit/cluster/test_changes.py",
         "tests/unit/observe/test_insight_hitpath.py")

MUTATIONS = (
    Mutation("debug-top-without-the-last-seconds-counts", "nodedns/observe/insightfeed.py",
             "        self.insight.take(self.rows())\n        doc = self.insight.document(",
             "        doc = self.insight.document(",
             ("tests/e2e/test_insight_agent.py::test_debug_top_has_each_pod_its_figures_and_the_advice",),
             "/debug/top leaves out what the listeners counted since the last second's hand-over"),
    Mutation(
        "insight-take-not-sliced",
        "nodedns/observe/insightfeed.py",
        "        await in_turns(steps())",
        "        await in_turns(steps(), budget=3600.0)",
        ("tests/unit/serve/test_tail.py::test_the_insight_hand_over_lets_the_loop_run_between_its_slices",),
        "the Insight takes a second's rows in one block: the loop stalls for milliseconds every second",
    ),
)
