"""Background tasks an owner starts, keeps referenced, and cancels together at shutdown; work a stop cuts short."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")

# seconds of background work (the insight hand-over, the look at the hot answers whose second has come) per
# loop turn: a datagram that arrives meanwhile waits at most about this long for the listeners
TURN_BUDGET = 0.0001


class Tasks:
    """A set of running tasks: `spawn` keeps a reference until each ends, `cancel_all` stops them."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def __len__(self) -> int:
        return len(self._tasks)


async def unless_stopped(stop: asyncio.Event, work: Coroutine[Any, Any, object]) -> bool:
    """Run `work` unless `stop` is set first (then it is cancelled); whether it ran to its end."""
    running = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait((running, stopped), return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not running.done():
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        return False
    running.result()
    return True


async def in_turns(steps: Generator[None, None, T], budget: float | None = None,
                   clock: Callable[[], float] = time.perf_counter) -> T:
    """Run `steps` (each `next()` a small piece of work) to its end, in loop turns of about `budget` seconds
    (TURN_BUDGET): the loop runs what is ready between two turns. The generator's return value."""
    budget = TURN_BUDGET if budget is None else budget
    start = clock()
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if clock() - start >= budget:
            await asyncio.sleep(0)
            start = clock()
