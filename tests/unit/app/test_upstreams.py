"""nodedns.app.upstreams: the hot answers whose second has come are looked at a turn's budget at a time."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from nodedns.app.upstreams import Upstreams
from nodedns.runtime.tasks import TURN_BUDGET

CALL = 0.00002  # seconds a call of SlowStage.stage takes


class SlowStage:
    """A forward cache whose every `stage()` call takes 50 us and which has `calls` of them to do."""

    def __init__(self, calls: int) -> None:
        self.left = calls
        self.done = 0

    def stage(self) -> bool:
        end = time.perf_counter() + CALL
        while time.perf_counter() < end:
            pass
        self.left -= 1
        self.done += 1
        return self.left > 0


def upstreams_of(cache: SlowStage) -> Upstreams:
    forwarding: Any = SimpleNamespace(forwarder=None, cache=cache, watcher=None, zones=None)
    return Upstreams(SimpleNamespace(), forwarding)  # type: ignore[arg-type]


def calls_by_turn(up: Upstreams, cache: SlowStage) -> list[int]:
    """Stage to the end on a loop; the calls done so far each time another task got the loop."""

    async def main() -> list[int]:
        per_turn: list[int] = []
        up._stage()
        while up._stager is not None:
            per_turn.append(cache.done)
            await asyncio.sleep(0)
        return per_turn

    return asyncio.run(main())


def test_the_hot_answers_due_are_looked_at_a_turn_s_budget_at_a_time_the_loop_running_between() -> None:
    cache = SlowStage(calls=200)  # 4 ms of looking in all
    up = upstreams_of(cache)

    per_turn = calls_by_turn(up, cache)
    assert cache.done == 200  # all rendered in the end
    steps = [b - a for a, b in zip([0, *per_turn], per_turn, strict=False)]
    # each turn stops once its budget is spent: a few calls of 20 us each, never the whole 4 ms at once
    assert len(per_turn) >= 200 * CALL / (TURN_BUDGET + 0.0001) - 1
    assert max(steps) <= TURN_BUDGET / CALL + 2


def test_a_turn_under_its_budget_looks_at_several_answers_before_letting_the_loop_run() -> None:
    cache = SlowStage(calls=200)  # 20 us a call: a turn of TURN_BUDGET has room for several
    up = upstreams_of(cache)

    per_turn = calls_by_turn(up, cache)
    steps = [b - a for a, b in zip([0, *per_turn], per_turn, strict=False)]  # every turn but the last
    assert TURN_BUDGET / CALL >= 3  # the budget holds several calls
    assert len(steps) >= 10
    # a turn goes on while under its budget; a turn the machine preempted in its first call may do one, not most
    assert sum(step >= 2 for step in steps) >= 0.8 * len(steps), steps
