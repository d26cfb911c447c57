"""Shared by several test modules (carried out of tests/unit/forward/test_forward.py): Clock, advance."""

from __future__ import annotations

from tests.support.helpers import RunningAgent


class Clock:
    """A clock the test moves; the agent's forward cache reads it."""

    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now


def advance(agent: RunningAgent, clock: Clock, seconds: float) -> None:
    """Move the cache's clock and let it notice (its ticker also runs on its own)."""
    clock.now += seconds
    cache = agent.agent.forward_cache
    assert cache is not None
    agent.call(cache.tick)
