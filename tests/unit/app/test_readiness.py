"""nodedns.app.readiness: why the agent is not ready (what /readyz says), and --ready-file following it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nodedns.app import readiness
from nodedns.app.readiness import keep_ready_file, say_ready, unready_reasons
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


class VirtualTime:
    """The loop's clock and sleep as readiness meets them, in tenths of a second (exact), the sleeps recorded."""

    def __init__(self) -> None:
        self.tenths = 10_000  # the loop's clock is not 0 when the agent starts
        self.sleeps: list[float] = []
        self.stop_after: int | None = None

    def now(self) -> float:
        return self.tenths / 10

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.stop_after is not None and len(self.sleeps) >= self.stop_after:
            raise asyncio.CancelledError
        self.tenths += round(seconds * 10)

    def asyncio(self) -> Any:
        async def to_thread(f: Any, *args: Any) -> Any:
            return f(*args)

        return SimpleNamespace(get_running_loop=lambda: SimpleNamespace(time=self.now), sleep=self.sleep,
                               to_thread=to_thread)


def test_the_ready_line_comes_when_readyz_says_ready_and_before_it_why_not_once_late_and_on_each_change(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    clock = VirtualTime()
    monkeypatch.setattr(readiness, "asyncio", clock.asyncio())

    def reasons() -> list[str]:
        t = clock.now() - 1000.0
        return ["starting (binding)", "udp 127.0.0.1:53 is dead"] if t < 2.5 else [SYNCING] if t < 7 else []

    observer: Any = SimpleNamespace(readiness=reasons, warnings=lambda: ["--upstream 10.0.0.10 is this node"])
    index: Any = SimpleNamespace(counts=lambda: {"services": 3, "pods": 5})
    with caplog.at_level("INFO", logger="nodedns.app"):
        asyncio.run(say_ready(observer, index, unready_after=1.0))
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert said == [
        # once late: at exactly 1 s, every reason
        ("WARNING", "not ready yet (GET /readyz says 503): starting (binding); udp 127.0.0.1:53 is dead"),
        ("WARNING", f"not ready yet (GET /readyz says 503): {SYNCING}"),  # the reasons changed: said again
        ("INFO", "ready: services 3, pods 5"),  # the moment /readyz says ready, not before
        ("WARNING", "--upstream 10.0.0.10 is this node"),
    ]
    # asked ten times a second until late (exactly unready_after), then once a second
    assert clock.sleeps == [0.1] * 10 + [1.0] * 6


def test_an_agent_ready_at_once_says_ready_at_once_and_never_why_not(monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    clock = VirtualTime()
    monkeypatch.setattr(readiness, "asyncio", clock.asyncio())
    observer: Any = SimpleNamespace(readiness=lambda: [], warnings=lambda: [])
    index: Any = SimpleNamespace(counts=lambda: {"services": 1})
    with caplog.at_level("INFO", logger="nodedns.app"):
        asyncio.run(say_ready(observer, index, unready_after=0.0))
    assert [r.getMessage() for r in caplog.records] == ["ready: services 1"]
    assert clock.sleeps == []


def test_the_ready_file_follows_readyz_every_second_and_goes_when_its_task_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = VirtualTime()
    clock.stop_after = 5
    monkeypatch.setattr(readiness, "asyncio", clock.asyncio())
    answers = iter([[], [], ["shutting down"], [], ["superseded"]])
    observer: Any = SimpleNamespace(readiness=lambda: next(answers))
    written: list[bool] = []
    ready_file: Any = SimpleNamespace(set=written.append)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(keep_ready_file(observer, ready_file))
    assert written == [True, True, False, True, False, False]  # as /readyz said each second; removed at the end
    assert clock.sleeps == [1.0] * 5
