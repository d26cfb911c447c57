"""nodedns.runtime.tasks: the owned background tasks, kept referenced while they run and stopped together; work a
stop cuts short."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Generator

import pytest

from nodedns.runtime.tasks import TURN_BUDGET, Tasks, in_turns, unless_stopped


def test_a_finished_task_leaves_and_a_running_one_is_kept_even_without_other_references() -> None:
    async def main() -> tuple[int, int, bool]:
        tasks = Tasks()
        gate = asyncio.Event()
        done: list[str] = []

        async def quick() -> None:
            done.append("quick")

        async def waiting() -> None:
            await gate.wait()
            done.append("waiting")

        tasks.spawn(quick(), "quick")
        tasks.spawn(waiting(), "waiting")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        after_quick = len(tasks)
        gc.collect()  # the event loop holds tasks weakly: only the set keeps "waiting" alive
        gate.set()
        for _ in range(5):
            await asyncio.sleep(0)
        return after_quick, len(tasks), done == ["quick", "waiting"]

    assert asyncio.run(main()) == (1, 0, True)


def test_cancel_all_stops_every_running_task_and_waits_for_it() -> None:
    async def main() -> tuple[list[str], int]:
        tasks = Tasks()
        seen: list[str] = []

        async def forever(name: str) -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                await asyncio.sleep(0.01)  # cleans up before it ends: cancel_all waits for that
                seen.append(name)
                raise

        async def failing() -> None:
            raise RuntimeError("a task's own error does not stop the others from being cancelled")

        for name in ("a", "b"):
            tasks.spawn(forever(name), name)
        tasks.spawn(failing(), "failing")
        await asyncio.sleep(0)
        await asyncio.wait_for(tasks.cancel_all(), 5)
        return sorted(seen), len(tasks)

    assert asyncio.run(main()) == (["a", "b"], 0)


def test_work_unless_stopped_runs_to_its_end_or_is_cancelled_when_the_stop_comes_first() -> None:
    async def main() -> tuple[bool, bool, list[str]]:
        seen: list[str] = []

        async def work(seconds: float) -> None:
            try:
                await asyncio.sleep(seconds)
                seen.append("done")
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        stop = asyncio.Event()
        ran = await unless_stopped(stop, work(0))
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, stop.set)
        cut = await unless_stopped(stop, work(3600))
        return ran, cut, seen

    assert asyncio.run(main()) == (True, False, ["done", "cancelled"])


def test_the_error_of_work_unless_stopped_is_raised() -> None:
    async def failing() -> None:
        raise ValueError("bad file")

    async def main() -> None:
        await unless_stopped(asyncio.Event(), failing())

    with pytest.raises(ValueError, match="bad file"):
        asyncio.run(main())


@pytest.mark.parametrize(("budget", "per_turn"), [
    (None, round(TURN_BUDGET / 0.00005)),  # the default: TURN_BUDGET's worth of pieces a turn
    (0.0001, 2),  # a budget given: that one, not the default
    (0.0005, 10),
])
def test_in_turns_lets_the_loop_run_once_a_turn_has_used_its_budget(budget: float | None, per_turn: int) -> None:

    now = [0.0]
    pieces: list[int] = []

    def steps() -> Generator[None, None, str]:
        for i in range(20):
            now[0] += 0.00005  # each piece takes 50 us of the clock
            pieces.append(i)
            yield
        return "done"

    async def main() -> tuple[str, list[int]]:
        seen: list[int] = []  # how many pieces had run each time another task got the loop

        async def other() -> None:
            for _ in range(40):
                seen.append(len(pieces))
                await asyncio.sleep(0)

        task = asyncio.ensure_future(other())
        result = await in_turns(steps(), budget=budget, clock=lambda: now[0])
        await task
        return result, seen

    result, seen = asyncio.run(main())
    assert result == "done"
    assert pieces == list(range(20))
    turns = sorted(set(seen))
    assert per_turn in turns and 2 * per_turn in turns  # a budget's worth of pieces a turn, then the other task ran
    assert all(n % per_turn == 0 or n == 20 for n in turns)  # never more than a budget's worth between two looks


def test_in_turns_of_a_generator_that_ends_at_once_returns_its_value() -> None:

    def steps() -> Generator[None, None, list[int]]:
        return [1]
        yield

    assert asyncio.run(in_turns(steps())) == [1]


def test_work_cut_short_by_a_stop_is_cancelled_and_over_when_unless_stopped_returns() -> None:
    async def main() -> tuple[bool, list[str]]:
        seen: list[str] = []

        async def work() -> None:
            try:
                await asyncio.sleep(3600)
                seen.append("done")
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise
            finally:
                seen.append("cleaned up")

        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, stop.set)
        ran = await unless_stopped(stop, work())
        return ran, list(seen)  # as it was when unless_stopped returned, before anything else ran

    assert asyncio.run(main()) == (False, ["cancelled", "cleaned up"])
