"""A KubeSync against the API double, for the tests of the sync: `syncing` (started, synced with every watch open
unless wait=False, stopped at the end) and `eventually` (poll a condition from the event loop)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from nodedns.cluster import apisync, kubeapi, watcher
from nodedns.cluster.index import Index

FAST = watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5, connect_timeout=2, backoff_initial=0.05,
                   backoff_max=0.2,
                   relist_spread=0.0)  # a relist at once: the tests of the spread set their own window


async def eventually(pred: Callable[[], Any], within: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def syncing(
    kubeconfig: str,
    *,
    pods: str = "insecure",
    node_name: str = "node-a",
    timing: watcher.Timing = FAST,
    wait: bool = True,
    source: kubeapi.ApiSource | None = None,
    rng: Callable[[], float] | None = None,
) -> AsyncIterator[tuple[Index, apisync.KubeSync]]:
    index = Index()
    sync = apisync.KubeSync(
        index=index,
        source=source or kubeapi.ApiSource(kubeconfig=kubeconfig),
        resources=apisync.resources(pods=pods, node_name=node_name),
        timing=timing,
        **({"rng": rng} if rng is not None else {}),
    )
    await sync.start()
    try:
        if wait:
            async with asyncio.timeout(10):
                await sync.wait_synced()
            await eventually(lambda: all(r["connected"] for r in sync.status()["resources"].values()),
                             what="every watch to be open")
        yield index, sync
    finally:
        await sync.stop(grace=3)
