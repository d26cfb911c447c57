"""Shared by several test modules (carried out of tests/e2e/test_kube_agent.py): api, fast_agent, kubeconfig,
wait_synced."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nodedns.cluster import watcher
from tests.support.apiserver import FakeApiServer, namespace
from tests.support.helpers import (
    RunningAgent,
    agent_with_timing,
)

FAST = watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5, connect_timeout=2, backoff_initial=0.05,
                   backoff_max=0.2,
                   relist_spread=0.0)  # a relist at once: the tests of the spread set their own window


fast_agent = agent_with_timing(FAST)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.put("Namespace", namespace("default"))
        yield server


def wait_synced(agent: RunningAgent, within: float = 10.0) -> None:
    async def synced() -> None:
        await agent.agent.wait_synced()

    agent.run(synced(), timeout=within)
