"""Mutations of nodedns/observe/looplag.py (the event-loop lag monitor: the histogram, the stalls kept, the minute)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_looplag.py",)

MUTATIONS = (
    Mutation("watchdog-looks-without-waiting-for-the-due-time", "nodedns/observe/looplag.py",
             "                if self._due != due:\n                    continue",
             "                if False:\n                    continue",
             ("tests/unit/observe/test_looplag.py::test_the_watchdog_of_a_loop_that_keeps_time_wakes_once_a_timer_"
              "period",),
             "the watchdog samples the stack of a loop that is on time and wakes every 2 ms"),
    Mutation("longest-stall-window-two-minutes", "nodedns/observe/looplag.py",
             "if second - WINDOW < s <= second)", "if second - 2 * WINDOW < s <= second)",
             ("tests/unit/observe/test_looplag.py::test_the_longest_stall_of_the_last_minute_forgets_older_ones",),
             "the status page's longest stall of the last minute keeps showing a stall older than a minute"),
    Mutation("watchdog-stack-never-kept", "nodedns/observe/looplag.py",
             "                    self._sample = (due, _stack(frame))", "                    pass",
             ("tests/unit/observe/test_looplag.py::test_a_turn_held_past_the_threshold_is_kept_with_the_stack_that_"
              "held_it",),
             "a stall is recorded without what ran in it: nobody can tell where the time went"),
    Mutation("gc-time-of-a-stalled-turn-dropped", "nodedns/observe/looplag.py",
             '"gc_ms": {f"gen{g}": round(s * 1000, 3) for g, s in sorted(gc_turn.items())},', '"gc_ms": {},',
             ("tests/unit/observe/test_looplag.py::test_a_full_collection_in_a_stalled_turn_is_timed_in_its_record",),
             "a stall caused by a full garbage collection is not told apart from others"),
    Mutation("stalls-kept-the-oldest-not-the-newest", "nodedns/observe/looplag.py",
             "        self.stalls: deque[dict[str, Any]] = deque(maxlen=keep)",
             "        self.stalls: deque[dict[str, Any]] = deque(maxlen=None)",
             ("tests/unit/observe/test_looplag.py::test_the_stalls_kept_are_bounded_and_the_newest",),
             "the record of stalls grows without bound"),
    Mutation("negative-lag-kept-as-is", "nodedns/observe/looplag.py", "        lag = max(lag, 0.0)\n",
             "        lag = min(lag, 0.0)\n",
             ("tests/unit/observe/test_looplag.py::test_turns_under_the_threshold_are_measured_but_not_kept_as_stalls",
              "tests/unit/observe/test_looplag.py::test_a_turn_held_past_the_threshold_is_kept_with_the_stack_that_"
              "held_it"),
             "every lag is counted as zero: the histogram and the longest stall say the loop never waits"),
    Mutation("longest-over-processes-is-the-first", "nodedns/observe/looplag.py",
             "    return max(numbers) if numbers else None", "    return numbers[0] if numbers else None",
             ("tests/unit/observe/test_looplag.py::test_the_longest_over_processes_is_the_largest_row",),
             "the supervisor's small lag hides a worker's stall"),
    Mutation(
        "start-up-counted-as-serving",
        "nodedns/observe/looplag.py",
        "        if self.ready_at is None:\n            self.startup_longest",
        "        if False:\n            self.startup_longest",
        ("tests/unit/observe/test_looplag.py::test_start_up_is_counted_apart_from_serving",),
        "a fresh agent's index load is its \"longest stall\": an idle agent's page shows it in red",
    ),
)
