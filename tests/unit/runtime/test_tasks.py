"""nodedns.runtime.tasks: the owned background tasks, kept referenced while they run and stopped together."""

from __future__ import annotations

import asyncio
import gc

from nodedns.runtime.tasks import Tasks


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
