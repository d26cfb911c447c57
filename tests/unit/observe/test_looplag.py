"""nodedns.observe.looplag: how late the event loop runs, the stalls over 2 ms with what ran in them, and the
longest stall of the last minute, in /metrics, /status and on the status page of every serving process
(one process, and the shipped --workers 2 supervisor and workers)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import time
from pathlib import Path

import pytest
import uvloop

from nodedns.app.run import gc_freeze_after
from nodedns.metrics.counters import Histogram
from nodedns.observe.looplag import WINDOW, LoopLag, longest_last_minute
from tests.support.apiserver import FakeApiServer
from tests.support.helpers import wait_for
from tests.support.shipped import ShippedAgent, cluster
from tests.support.upstream_double import UpstreamDouble


def _hold_the_loop(seconds: float) -> None:
    """Busy work on the loop's thread (no sleep: the GIL stays held, as a long Python callback does)."""
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1


async def _run_with(lag: LoopLag, work: object) -> None:
    lag.start()
    try:
        await asyncio.sleep(0.05)
        assert callable(work)
        work()
        await asyncio.sleep(0.05)  # the timer fires after the stall and records it
    finally:
        lag.stop()


def test_a_turn_held_past_the_threshold_is_kept_with_the_stack_that_held_it() -> None:
    lag = LoopLag(process="main")

    def hold() -> None:
        _hold_the_loop(0.06)
        deadline = time.monotonic() + 10  # on a loaded machine the watchdog thread may run late: hold till it has
        while lag._sample is None and time.monotonic() < deadline:
            _hold_the_loop(0.001)

    uvloop.run(_run_with(lag, hold))
    assert lag.stall_count >= 1
    worst = max(lag.stalls, key=lambda s: s["lag_ms"])
    # held 60 ms from some point of the timer's 10 ms period: at least 50 ms late
    assert 60 - lag.interval * 1000 <= worst["lag_ms"] < 11_000
    assert any("_hold_the_loop" in frame for frame in worst["stack"]), worst  # the watchdog's sample
    assert lag.longest >= 0.05 and lag.longest_last_minute() >= 0.05
    assert lag.lag.count >= 5  # a turn every 10 ms is measured, stalled or not
    assert Histogram.bounds[6] == 0.016 and sum(lag.lag.counts[7:]) >= 1  # a turn over 16 ms counted


def test_the_watchdog_of_a_loop_that_keeps_time_wakes_once_a_timer_period() -> None:
    """It sleeps until the armed timer is overdue, not a fixed short pause: an idle agent's CPU."""
    lag = LoopLag(process="main")
    wakes = []

    class Counting(type(lag._stopping)):  # type: ignore[misc]
        def wait(self, timeout: float | None = None) -> bool:
            wakes.append(timeout)
            return super().wait(timeout)

    lag._stopping = Counting()

    async def idle() -> None:
        lag.start()
        try:
            await asyncio.sleep(0.5)
        finally:
            lag.stop()

    uvloop.run(idle())
    periods = 0.5 / lag.interval
    assert lag.lag.count >= periods / 2  # the timer ran
    assert 2 <= len(wakes) <= 1.5 * periods + 5, len(wakes)  # a look every threshold / 2: ~500
    assert all(w is not None and 0 < w <= lag.interval + lag.threshold for w in wakes), wakes


def test_turns_under_the_threshold_are_measured_but_not_kept_as_stalls() -> None:
    lag = LoopLag(process="main", watchdog=False)
    for i, late in enumerate((0.0, 0.0005, 0.0019, 0.002, -0.001)):  # a timer may fire early: counted as 0
        lag.observe(late, 100.0 + i / 10)
    assert lag.lag.count == 5 and lag.stall_count == 0 and not lag.stalls
    assert lag.lag.counts[0] == 2 and lag.lag.sum == pytest.approx(0.0044)
    assert lag.longest_last_minute(100.5) == 0.002
    lag.observe(0.0021, 100.6)
    assert lag.stall_count == 1 and lag.stalls[0]["lag_ms"] == 2.1


def test_a_full_collection_in_a_stalled_turn_is_timed_in_its_record() -> None:
    heap = [[i] for i in range(400_000)]  # tracked objects: a full collection walks them all

    def collect() -> None:
        gc.collect(2)
        _hold_the_loop(0.01)  # a stall whatever the machine's speed

    lag = LoopLag(process="main")
    uvloop.run(_run_with(lag, collect))
    del heap
    stalled = [s for s in lag.stalls if "gen2" in s["gc_ms"]]
    assert stalled and stalled[0]["gc_ms"]["gen2"] > 0
    assert lag.status()["processes"][0]["gc_seconds"]["gen2"] > 0


def test_the_longest_stall_of_the_last_minute_forgets_older_ones() -> None:
    lag = LoopLag(process="main", clock=lambda: 1000.0, watchdog=False)
    lag.observe(0.080, 1000.0)
    lag.observe(0.010, 1030.5)
    assert lag.longest_last_minute(1030.9) == 0.080
    assert lag.longest_last_minute(1000.0 + WINDOW - 0.5) == 0.080  # still within the minute
    assert lag.longest_last_minute(1000.0 + WINDOW + 0.5) == 0.010  # a minute on: the older one is gone
    assert lag.longest_last_minute(1030.0 + WINDOW + 1) == 0.0
    assert lag.longest == 0.080  # since the start


def test_a_stall_a_minute_old_is_forgotten_when_its_second_comes_round_again() -> None:
    """The minute is a ring of seconds: the second a stall fell in, a minute later, holds that new second's
    longest turn only."""
    lag = LoopLag(process="main", clock=lambda: 1000.0, watchdog=False)
    lag.observe(0.080, 1000.2)
    lag.observe(0.002, 1000.0 + WINDOW + 0.1)  # the same slot of the ring, a minute on
    assert lag.longest_last_minute(1000.0 + WINDOW + 0.5) == 0.002
    lag.observe(0.050, 1000.0 + 2 * WINDOW + 0.3)
    lag.observe(0.001, 1000.0 + 2 * WINDOW + 0.6)  # later in that second, shorter: the longest stays
    assert lag.longest_last_minute(1000.0 + 2 * WINDOW + 0.9) == 0.050


def test_the_stalls_kept_are_bounded_and_the_newest() -> None:
    lag = LoopLag(process="main", keep=4, watchdog=False)
    for i in range(10):
        lag.observe(0.003 + i / 1000, 100.0 + i)
    assert lag.stall_count == 10 and len(lag.stalls) == 4
    assert [s["lag_ms"] for s in lag.stalls] == [9.0, 10.0, 11.0, 12.0]


def test_the_longest_over_processes_is_the_largest_row() -> None:
    section = {"processes": [{"process": "supervisor", "longest_last_minute_seconds": 0.004},
                             {"process": "worker 0", "longest_last_minute_seconds": 0.12},
                             {"process": "worker 1", "longest_last_minute_seconds": "junk"}]}
    assert longest_last_minute(section) == 0.12
    assert longest_last_minute({}) is None


@pytest.mark.parametrize(("text", "after"), [("", 10.0), ("off", None), ("OFF", None), ("2.5", 2.5), ("0", 0.0),
                                             ("soon", 10.0), ("-1", 10.0), ("1e9", 10.0)])
def test_nodedns_gc_freeze_says_when_to_freeze_again_or_off(text: str, after: float | None) -> None:
    assert gc_freeze_after(text) == after


def _stop_for(pid: int, seconds: float) -> None:
    """SIGSTOP a process for `seconds`: its loop runs that late when it comes back."""
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


def _rows(agent: ShippedAgent) -> dict[str, dict[str, object]]:
    code, body = agent.get("/status")
    assert code == 200, body
    return {str(p["process"]): p for p in json.loads(body)["event_loop"]["processes"]}


def test_the_shipped_agent_shows_each_process_loop_lag_and_a_stopped_workers_stall(tmp_path: Path) -> None:
    with FakeApiServer() as api, UpstreamDouble() as up:
        cluster(api)
        with ShippedAgent(tmp_path, api, up) as agent:  # --workers 2, the allow list and the rate limit on
            agent.wait_ready()
            wait_for(lambda: set(_rows(agent)) == {"supervisor", "worker 0", "worker 1"}, timeout=20,
                     what="a row per process")
            for process in ("supervisor", "worker 0", "worker 1"):
                wait_for(lambda p=process: (agent.metric("nodedns_event_loop_lag_seconds_count", process=p) or 0) > 0,
                         timeout=20, what=f"the lag histogram of {process}")
            # the collector's long-lived objects frozen once the index synced, in every process (run_agent)
            wait_for(lambda: all(int(r["gc_freezes"]) >= 1 for r in _rows(agent).values()), timeout=20,
                     what="gc.freeze in each process")
            code, body = agent.get("/status")
            workers = json.loads(body)["workers"]["workers"]
            pid = next(int(w["pid"]) for w in workers if str(w["worker"]) == "1")
            _stop_for(pid, 0.3)
            wait_for(lambda: float(_rows(agent)["worker 1"]["longest_last_minute_seconds"]) >= 0.25, timeout=20,
                     what="worker 1's stall in /status")
            assert float(_rows(agent)["worker 0"]["longest_last_minute_seconds"]) < 0.25
            wait_for(lambda: (agent.metric("nodedns_event_loop_longest_stall_seconds", process="worker 1") or 0)
                     >= 0.25, timeout=20, what="worker 1's stall in /metrics")
            assert (agent.metric("nodedns_event_loop_lag_seconds_bucket", process="worker 1", le="0.256") or 0) < \
                (agent.metric("nodedns_event_loop_lag_seconds_bucket", process="worker 1", le="+Inf") or 0)
            code, page = agent.get("/")
            assert code == 200 and "Longest stall, last minute" in page and "worker 1" in page


def test_one_process_shows_its_loop_lag_and_a_stall_in_metrics_status_and_the_page(tmp_path: Path) -> None:
    with FakeApiServer() as api, UpstreamDouble() as up:
        cluster(api)
        with ShippedAgent(tmp_path, api, up, workers=1) as agent:
            agent.wait_ready()
            wait_for(lambda: list(_rows(agent)) == ["main"], timeout=20, what="one row")
            _stop_for(agent.proc.pid, 0.3)
            wait_for(lambda: float(_rows(agent)["main"]["longest_last_minute_seconds"]) >= 0.25, timeout=20,
                     what="the stall in /status")
            assert (agent.metric("nodedns_event_loop_longest_stall_seconds", process="main") or 0) >= 0.25
            assert (agent.metric("nodedns_event_loop_stalls_total", process="main") or 0) >= 1
            code, page = agent.get("/")
            assert code == 200 and "Longest stall, last minute" in page


def test_start_up_is_counted_apart_from_serving() -> None:
    """A fresh agent's index load holds the loop: counted as start-up's, not as its longest stall serving."""
    now = [100.0]
    lag = LoopLag(process="main", clock=lambda: now[0], watchdog=False, starting=True)
    lag.observe(0.145, 100.2)  # loading the index
    lag.observe(0.003, 100.4)
    lag.observe(0.001, 100.5)
    assert lag.stall_count == 0 and not lag.stalls and lag.longest == 0.0 and lag.lag.count == 0
    assert lag.longest_last_minute(100.5) == 0.0
    starting = lag.record()["startup"]
    assert starting == {"ready": False, "seconds": 0.0, "longest_seconds": 0.145, "stalls": 2}
    now[0] = 101.5
    lag.mark_ready()
    lag.observe(0.004, 101.6)
    lag.observe(0.001, 101.7)
    assert lag.stall_count == 1 and lag.longest == 0.004 and lag.lag.count == 2
    assert lag.longest_last_minute(101.8) == 0.004
    assert lag.record()["startup"] == {"ready": True, "seconds": 1.5, "longest_seconds": 0.145, "stalls": 2}
    now[0] = 200.0
    lag.mark_ready()  # once: a second call does not move it
    assert lag.record()["startup"]["seconds"] == 1.5


def test_the_page_shows_the_stall_since_it_serves_and_start_up_apart() -> None:
    from nodedns.observe.page import render_page

    row = {"process": "main", "longest_last_minute_seconds": 0.004, "stalls": 1,
           "startup": {"ready": True, "seconds": 1.5, "longest_seconds": 0.145, "stalls": 2}}
    page = render_page({"version": "0.1.0", "state": "running", "ready": True, "event_loop": {"processes": [row]}})
    card = page[page.index("Longest stall, last minute"):]
    assert "<b class=ok>4.0 ms</b>" in card, card[:400]  # green: the 145 ms of start-up is not the serving figure
    assert "start-up, not counted above: serving after 1.5 s; its longest turn 145 ms, 2 turns over 2 ms" in card
    row["startup"] = {"ready": False, "seconds": 0.5, "longest_seconds": 0.145, "stalls": 2}
    card = render_page({"event_loop": {"processes": [row]}})
    assert "starting: its turns count from when it serves (the longest so far 145 ms)" in card


def test_an_agent_counts_its_turns_from_when_it_serves(tmp_path: Path) -> None:
    from tests.support.helpers import EXAMPLE, running_agent

    with running_agent({"manifests": str(EXAMPLE)}) as agent:
        lag = agent.agent.looplag
        assert lag.ready_at is not None and lag.ready_at >= lag.started  # marked when it began to serve
        record = agent.agent.looplag.record()
        assert record["startup"]["ready"] is True and record["startup"]["seconds"] >= 0
