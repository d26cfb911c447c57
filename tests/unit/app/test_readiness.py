"""nodedns.app.readiness: why the agent is not ready (what /readyz says), and --ready-file following it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nodedns.app.readiness import keep_ready_file, unready_reasons
from nodedns.app.succession import NOT_ANNOUNCED
from nodedns.node import handover

SYNCING = "the cluster index has not synced yet"
SUPERSEDED = "superseded by a newer nodedns on this node (pid 4242)"


def problems(*reasons: str) -> Any:
    """A part (the listeners, the node's network) with these problems."""
    return SimpleNamespace(problems=lambda: list(reasons))


def roster(*, superseded: bool = False, announced: bool = True) -> Any:
    """A hand-over roster: a newer agent serving beside us or not, our entry marked serving or not."""
    return SimpleNamespace(superseded=SimpleNamespace(pid=4242) if superseded else None, announced=announced)


# (state, the listeners' problems, index synced, the node (None: no node side), the roster (None: no hand-over)),
# and the reasons
CASES = [
    (("running", (), True, None, None), []),
    (("running", (), True, problems(), roster()), []),
    (("starting", (), True, None, None), ["starting (starting)"]),
    (("binding", (), True, None, None), ["starting (binding)"]),
    (("stopping", (), True, None, None), ["shutting down"]),
    (("stopped", (), True, None, None), ["shutting down"]),
    (("running", ("udp 127.0.0.1:53 is dead",), True, None, None), ["udp 127.0.0.1:53 is dead"]),
    (("running", (), False, None, None), [SYNCING]),
    (("running", (), True, problems("169.254.20.10 is not on nodedns0"), None), ["169.254.20.10 is not on nodedns0"]),
    (("running", (), True, None, roster(superseded=True)), [SUPERSEDED]),
    (("running", (), True, None, roster(superseded=True, announced=False)), [SUPERSEDED]),
    (("running", (), True, None, roster(announced=False)), [NOT_ANNOUNCED]),
    # a starting agent is not marked serving yet: that it is starting is the reason
    (("starting", (), True, None, roster(announced=False)), ["starting (starting)"]),
    (("stopping", (), True, None, roster(announced=False)), ["shutting down"]),
    (("starting", ("tcp 127.0.0.1:53 is dead",), False, problems("no nodedns0"), roster(superseded=True)),
     ["starting (starting)", "tcp 127.0.0.1:53 is dead", SYNCING, "no nodedns0", SUPERSEDED]),
]


@pytest.mark.parametrize(("given", "reasons"), CASES)
def test_the_agent_is_ready_only_when_every_part_is_and_says_why_not(given: tuple[Any, ...],
                                                                      reasons: list[str]) -> None:
    state, listener_problems, synced, node, rost = given
    index: Any = SimpleNamespace(synced=synced)
    assert unready_reasons(state, problems(*listener_problems), index, node, rost) == reasons


def test_the_ready_file_is_removed_when_its_task_is_cancelled(tmp_path: Path) -> None:
    path = tmp_path / "ready"
    observer: Any = SimpleNamespace(readiness=lambda: [])  # ready all along

    async def main() -> tuple[bool, bool]:
        task = asyncio.create_task(keep_ready_file(observer, handover.ReadyFile(str(path))))
        for _ in range(200):
            if path.exists():
                break
            await asyncio.sleep(0.01)
        touched = path.exists()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return touched, path.exists()

    assert asyncio.run(main()) == (True, False)  # there while ready, gone once the agent stopped keeping it
