"""nodedns.app.agent: the waits of the start that a stop cuts short."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from nodedns.app.agent import Agent


@pytest.mark.parametrize(("stop_with_the_sync", "expected"), [(False, True), (True, False)])
def test_a_stop_that_comes_in_the_turn_the_index_syncs_is_not_missed(stop_with_the_sync: bool,
                                                                      expected: bool) -> None:
    async def main() -> bool:
        stop = asyncio.Event()
        index = SimpleNamespace(synced=False)

        async def wait_synced() -> None:
            await asyncio.sleep(0.01)
            if stop_with_the_sync:
                stop.set()  # SIGTERM handled in the very turn the last list arrived
            index.synced = True

        agent: Any = SimpleNamespace(_stop=stop, wait_synced=wait_synced, index=index)
        return await Agent._synced_unless_stopped(agent)

    assert asyncio.run(main()) is expected
