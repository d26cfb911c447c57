"""Every worker watched, in the shipped configuration (tests/support/shipped.py: the ConfigMap's two workers): a worker
whose event loop stops (SIGSTOP, a hang) is killed and started again within about 2 s, /readyz, /status and
the metrics say so meanwhile, and a stopped supervisor does not mistake its own pause for its workers'."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodedns import config as cfgmod
from nodedns.workers import modes
from nodedns.workers import supervisor as supervisor_mod
from nodedns.workers.messages import State
from nodedns.workers.supervisor import Fleet, Worker
from tests.support.apiserver import FakeApiServer
from tests.support.helpers import EXAMPLE, wait_for
from tests.support.shipped import ShippedAgent, cluster
from tests.support.tenant import Prober
from tests.support.upstream_double import UpstreamDouble

DETECTION = 2.0  # supervisor.HEARTBEAT_TIMEOUT


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[ShippedAgent]:
    with FakeApiServer() as api, UpstreamDouble() as up:
        cluster(api)
        with ShippedAgent(tmp_path, api, up) as a:
            a.wait_ready()
            wait_for(lambda: all(w["serving"] for w in workers(a)), timeout=10, what="both workers serving")
            yield a


def workers(agent: ShippedAgent) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(agent.get("/status")[1])["workers"]["workers"]
    return found


def test_a_stopped_worker_is_killed_and_restarted_within_seconds_and_readyz_says_why_meanwhile(
        agent: ShippedAgent) -> None:
    probes = Prober(agent.port)
    probes.start()
    try:
        time.sleep(0.5)  # the good Pod's probes flowing before the failure
        victim = workers(agent)[0]
        stopped = time.monotonic()
        os.kill(victim["pid"], signal.SIGSTOP)
        reasons: set[str] = set()
        silent_seen: list[float] = []

        def restarted() -> bool:
            code, body = agent.get("/readyz", timeout=2)
            if code != 200:
                reasons.update(line.strip("- ").strip() for line in body.splitlines()[1:])
            now = workers(agent)[0]
            if now["pid"] == victim["pid"] and now["silent_seconds"] is not None and now["silent_seconds"] > 1:
                silent_seen.append(now["silent_seconds"])
            return bool(now["pid"] != victim["pid"] and now["serving"])

        took = wait_for(restarted, timeout=10, what="worker 0 started again", interval=0.05)
        back = time.monotonic()
        wait_for(lambda: len(probes.window(back)) >= 50, timeout=10, what="the good Pod's probes after the restart")
    finally:
        if pid_alive(victim["pid"]):
            os.kill(victim["pid"], signal.SIGCONT)
        probes.stop()
    assert took < DETECTION + 1.5, f"restarted after {took:.1f}s"
    assert any(r.startswith("worker 0 silent for") or r.startswith("worker 0 restarting: silent") for r in reasons), \
        reasons
    assert silent_seen, "/status never showed the worker silent"
    assert not pid_alive(victim["pid"])  # killed, not left stopped
    now = workers(agent)[0]
    assert now["restarts"] == 1 and now["restarts_by_reason"] == {"died": 0, "silent": 1, "stuck": 0}
    assert agent.metric("nodedns_worker_restarts_total", worker="0", reason="silent") == 1
    assert agent.metric("nodedns_worker_restarts_total", worker="1", reason="silent") == 0
    assert agent.get("/readyz")[0] == 200
    # only what the stopped worker was handed before it was noticed is lost
    lost = probes.lost(stopped)
    assert all(t - stopped < DETECTION + 0.6 for t in lost), [round(t - stopped, 2) for t in lost]
    assert len(probes.window(stopped)) > 50
    assert "no heartbeat for" in agent.log.read_text()


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_stopped_supervisor_does_not_kill_its_workers_when_it_wakes(agent: ShippedAgent) -> None:
    assert agent.proc is not None
    before = [w["pid"] for w in workers(agent)]
    os.kill(agent.proc.pid, signal.SIGSTOP)
    time.sleep(DETECTION + 1.5)  # longer than a worker may be silent: the workers' beats wait unread
    os.kill(agent.proc.pid, signal.SIGCONT)
    # once both are heard from again, the rounds that could have killed one wrongly are behind us
    wait_for(lambda: all(w["silent_seconds"] is not None and w["silent_seconds"] < 0.5 for w in workers(agent)),
             timeout=10, what="both workers heard from")
    assert agent.get("/readyz", timeout=2)[0] == 200
    assert [w["pid"] for w in workers(agent)] == before
    assert all(w["restarts"] == 0 for w in workers(agent))
    assert "no heartbeat" not in agent.log.read_text()


class Proc:
    """A worker process as the supervisor sees it (nodedns.workers.zygote.ForkedProcess): running."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def kill(self) -> None:
        self.returncode = -9


def supervised(config: cfgmod.Config, *, count: int) -> Fleet:
    """The workers part of a supervisor built as `nodedns serve --workers` builds it."""
    fleet = modes.supervisor(config, count=count).listeners
    assert isinstance(fleet, Fleet)
    return fleet


def test_the_supervisor_holds_the_put_back_while_a_worker_is_silent_or_restarting_after_it() -> None:
    """What the node loop asks before it puts the local IPs and rules back (Fleet.capture_hold), and what
    /readyz shows, as the supervisor's clock moves past a worker's last heartbeat."""
    now = [100.0]
    fleet = supervised(cfgmod.build({"manifests": str(EXAMPLE), "upstream": "none"}, environ={}), count=2)
    fleet.clock = lambda: now[0]
    for number in (0, 1):
        worker = Worker(number, Proc(1000 + number), started=90.0, heard=100.0)  # type: ignore[arg-type]
        worker.bound = worker.synced = worker.served = True
        worker.channel = object()  # type: ignore[assignment]  # its channel is open (never written here)
        fleet.workers[number] = worker
    assert fleet.capture_hold() is None and fleet.problems() == []
    now[0] = 100.0 + supervisor_mod.HEARTBEAT_LATE + 0.2  # worker 1 beat since, worker 0 did not
    fleet.workers[1].heard = now[0]
    assert fleet.capture_hold() == "worker 0 silent for 1.2s (no heartbeat)"
    assert fleet.problems() == ["worker 0 silent for 1.2s (no heartbeat)"]
    now[0] = 100.0 + supervisor_mod.HEARTBEAT_TIMEOUT + 0.1
    fleet.workers[1].heard = now[0]
    fleet._watch(now[0])  # killed for its silence
    assert fleet.workers[0].proc.returncode == -9 and fleet.workers[0].killed == "silent"
    assert fleet.capture_hold() == "worker 0 restarting: silent for 2.1s (no heartbeat)"
    fleet.workers[0] = Worker(0, Proc(1002), started=now[0], heard=now[0])  # type: ignore[arg-type]
    assert fleet.capture_hold() == "worker 0 restarting: silent for 2.1s (no heartbeat)"  # not serving yet
    fleet._received(fleet.workers[0], State(bound=True, synced=True, live=True))
    assert fleet.capture_hold() is None and fleet.problems() == []


def test_a_late_watch_round_counts_every_worker_as_heard_from() -> None:
    """The supervisor's own loop was busy for 3 s (a large relist): the workers' beats wait unread in their
    channels, so a round that comes late kills nobody; a round on time after a real silence does."""
    fleet = supervised(cfgmod.build({"manifests": str(EXAMPLE), "upstream": "none"}, environ={}), count=1)
    worker = Worker(0, Proc(1000), started=90.0, heard=100.0)  # type: ignore[arg-type]
    worker.bound = worker.synced = worker.served = True
    worker.channel = object()  # type: ignore[assignment]
    fleet.workers[0] = worker
    fleet._last_round = 100.0
    fleet.clock = lambda: 103.0
    fleet._watch_round(103.0)  # 3 s since the last round: our loop did not run
    assert worker.proc.returncode is None and worker.heard == 103.0 and fleet.capture_hold() is None
    fleet._watch_round(103.1)
    fleet._watch_round(105.2)  # late again: heard from again, alive
    assert worker.proc.returncode is None
    for now in (105.3, 105.4, 105.5, 105.6, 105.7, 105.8, 105.9, 106.0, 106.1, 106.2, 106.3, 106.4, 106.5, 106.6,
                106.7, 106.8, 106.9, 107.0, 107.1, 107.2, 107.3):  # rounds on time, no beat: silent 2.1 s
        fleet._watch_round(now)
    assert worker.proc.returncode == -9 and worker.killed == "silent"
