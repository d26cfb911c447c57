"""Shared by several test modules (carried out of tests/e2e/test_clusterset_zone.py): fast_agent, live_config,
wait_synced."""

from __future__ import annotations

from typing import Any

from nodedns.cluster import watcher
from tests.support import clusterset_fixture as mc
from tests.support.helpers import (
    RunningAgent,
    agent_with_timing,
)

ZONE = mc.ZONE


FAST = watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5, connect_timeout=2, backoff_initial=0.05,
                   backoff_max=0.2, forbidden_initial=0.05, forbidden_max=0.3,
                   relist_spread=0.0)  # a relist at once: the tests of the spread set their own window


fast_agent = agent_with_timing(FAST)


def live_config(kubeconfig: str, **extra: Any) -> dict[str, Any]:
    return {"kubeconfig": kubeconfig, "node-name": "node-a", "multicluster-zone": ZONE,
            "status-listen": "127.0.0.1:0", "debug-listen": "127.0.0.1:0", **extra}


def wait_synced(agent: RunningAgent, within: float = 10.0) -> None:
    async def synced() -> None:
        await agent.agent.wait_synced()

    agent.run(synced(), timeout=within)
