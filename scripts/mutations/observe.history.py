"""Mutations of nodedns/observe/history.py (the ring of the last 15 minutes behind the status page and
/debug/history)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_history.py", "tests/e2e/test_history_agent.py", "tests/unit/observe/test_page.py")

MUTATIONS = (
    Mutation("a-counter-going-back-gives-a-negative-rate", "nodedns/observe/history.py",
             "    return now - before if now >= before else 0  # a counter that went back: a restarted worker",
             "    return now - before  # a counter that went back: a restarted worker",
             ("tests/unit/observe/test_history.py::test_a_counter_that_goes_back_counts_zero_not_a_negative_rate",),
             "a restarted worker's counters give the charts a negative rate"),
    Mutation("hit-path-answers-not-counted-as-fast", "nodedns/observe/history.py",
             "            buckets[0] += _delta(reading.hit_path, last.hit_path)", "            pass",
             ("tests/unit/observe/test_history.py::test_hit_path_answers_count_in_the_first_bucket",),
             "answers of the hit path (the fastest) are left out of the latency quantiles"),
    Mutation("old-points-kept-after-a-pause", "nodedns/observe/history.py",
             "        return [p for p in self.points if p.wall >= since]", "        return list(self.points)",
             ("tests/unit/observe/test_history.py::test_points_older_than_the_window_are_left_out_after_a_pause",),
             "after a pause, points older than 15 minutes are still charted"),
)
