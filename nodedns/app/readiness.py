"""The agent's readiness: why it is not ready (`unready_reasons`, what /readyz says), and outside HTTP the
`ready:` log line (and, before it, why not) and --ready-file, both following /readyz (`Observer.readiness`)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from nodedns.app.parts import Listeners
from nodedns.app.succession import NOT_ANNOUNCED
from nodedns.cluster.index import Index
from nodedns.node import handover
from nodedns.observe.observer import Observer

if TYPE_CHECKING:  # imported where used: --workers processes never load pyroute2
    from nodedns.node.netif import NodeNetwork

log = logging.getLogger("nodedns.app")  # the name every log line of the agent has had


def unready_reasons(state: str, listeners: Listeners, index: Index, node: NodeNetwork | None,
                    roster: handover.Handover | None) -> list[str]:
    """Why the agent is not ready (empty: ready): ready only when the listeners serve, the index has synced,
    the interface holds the local IPs, no shutdown is under way and, in a hand-over, the roster says it
    serves and no newer agent does."""
    reasons: list[str] = []
    if state in ("stopping", "stopped"):
        reasons.append("shutting down")
    elif state != "running":
        reasons.append(f"starting ({state})")
    reasons.extend(listeners.problems())
    if not index.synced:
        reasons.append("the cluster index has not synced yet")
    if node is not None:
        reasons.extend(node.problems())
    if roster is not None and roster.superseded is not None:
        reasons.append(f"superseded by a newer nodedns on this node (pid {roster.superseded.pid})")
    elif roster is not None and state == "running" and not roster.announced:
        reasons.append(NOT_ANNOUNCED)
    return reasons


async def say_ready(observer: Observer, index: Index, *, unready_after: float) -> None:
    """Log `ready: <counts>` the moment /readyz first says ready (the log never says ready while
    /readyz says 503); while it does not, why not: once `unready_after` seconds in, then whenever
    the reasons change."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    said: list[str] | None = None
    while reasons := observer.readiness():
        late = loop.time() - started >= unready_after
        if late and reasons != said:
            log.warning("not ready yet (GET /readyz says 503): %s", "; ".join(reasons))
            said = reasons
        await asyncio.sleep(1.0 if late else 0.1)  # every part's status is asked: not ten times a second for long
    log.info("ready: %s", ", ".join(f"{k} {v}" for k, v in index.counts().items()))
    for warning in observer.warnings():  # wrong, but no reason not to answer: /readyz says them too
        log.warning("%s", warning)


async def keep_ready_file(observer: Observer, ready_file: handover.ReadyFile) -> None:
    """--ready-file: touched every second while /readyz would say ready, removed otherwise."""
    try:
        while True:
            await asyncio.to_thread(ready_file.set, not observer.readiness())
            await asyncio.sleep(1.0)
    finally:
        ready_file.set(False)
