"""Event-loop lag: how late each turn of the loop runs, and what ran in the turns that stalled.

`LoopLag` arms a timer every `interval` on the event loop; how late it fires goes into a histogram
(`nodedns_event_loop_lag_seconds`) and a ring of per-second maxima (the longest stall of the last `WINDOW`
seconds). A turn later than `threshold` is a stall; the last `keep` are kept, each with the loop thread's
stack (sampled by a watchdog thread while the stall goes on; a stall too short to catch has none) and the
collector's time in it by generation (`gc.callbacks`). No work per query. `start()` on the loop, `stop()`
at the end.

An agent made with `starting=True` counts the turns before `mark_ready()` apart, as `startup`. `status()`
is the provider section "event_loop"; a --workers supervisor lists its own and each worker's under
`processes`. What each figure means and why start-up is apart: docs/status.md "Event-loop lag".
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from nodedns.metrics.counters import Histogram

Clock = Callable[[], float]

INTERVAL = 0.01  # the timer's period: the lag's resolution
THRESHOLD = 0.002  # a turn later than this is a stall (recorded with what ran)
KEEP = 32  # stalls kept (the newest)
WINDOW = 60  # seconds over which the longest stall is shown
STACK_FRAMES = 6  # frames of the sampled stack kept, innermost first


def _stack(frame: Any, frames: int = STACK_FRAMES) -> list[str]:
    """The innermost `frames` frames of a stack as "file:line function", skipping this module's own."""
    out: list[str] = []
    while frame is not None and len(out) < frames:
        code = frame.f_code
        name = code.co_filename
        if name == __file__:  # the monitor's own hook (gc.callbacks) is no part of what ran
            frame = frame.f_back
            continue
        short = name.rsplit("/site-packages/", 1)[-1].rsplit("/nodedns/", 1)[-1]
        if "/nodedns/" in name and not short.startswith("nodedns"):
            short = "nodedns/" + short
        out.append(f"{short}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return out


class LoopLag:
    """The loop-lag monitor of one process (see the module docstring)."""

    def __init__(self, *, process: str, interval: float = INTERVAL, threshold: float = THRESHOLD, keep: int = KEEP,
                 clock: Clock = time.monotonic, wall: Clock = time.time, watchdog: bool = True,
                 starting: bool = False) -> None:
        self.process = process
        self.started = clock()
        self.ready_at: float | None = None if starting else self.started  # turns before it: start-up's
        self.startup_longest = 0.0  # the longest turn before ready
        self.startup_stalls = 0  # turns later than `threshold` before ready
        self.interval = interval
        self.threshold = threshold
        self.clock = clock
        self.wall = wall
        self.lag = Histogram()
        self.stalls: deque[dict[str, Any]] = deque(maxlen=keep)
        self.stall_count = 0
        self.longest = 0.0  # the longest lag since the start
        self._maxima = [0.0] * WINDOW  # per second (index: second % WINDOW): the longest lag seen in it
        self._seconds = [-1] * WINDOW  # which second each slot holds
        self._due = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watchdog = watchdog
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._loop_thread = 0
        self._sample: tuple[float, list[str]] | None = None  # (due time it belongs to, stack)
        self._gc_started = 0.0
        self._gc_turn: dict[int, float] = {}  # generation -> seconds collected since the last fire
        self.gc_freezes = 0  # times the agent moved the collector's objects out of its reach (gc.freeze)
        self.gc_seconds = [0.0, 0.0, 0.0]  # time spent collecting, by generation, since the start

    # -- running ---------------------------------------------------------------------------

    def mark_ready(self) -> None:
        """The agent serves: from now on the turns count as the serving figures (once; later calls change
        nothing)."""
        if self.ready_at is None:
            self.ready_at = self.clock()

    def start(self) -> None:
        """Arm the timer on the running loop, hook the collector, start the watchdog thread."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._due = self.clock() + self.interval
        self._timer = self._loop.call_at(self._loop.time() + self.interval, self._fire)
        gc.callbacks.append(self._on_gc)
        if self._watchdog:
            self._thread = threading.Thread(target=self._watch, name="looplag-watchdog", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(1.0)
            self._thread = None

    def _fire(self) -> None:
        now = self.clock()
        self.observe(now - self._due, now)
        self._due = self.clock() + self.interval
        assert self._loop is not None
        self._timer = self._loop.call_at(self._loop.time() + self.interval, self._fire)

    def observe(self, lag: float, now: float) -> None:
        """One turn `lag` seconds late, ending at `now`: counted; a stall is kept with what ran in it. Before
        `mark_ready()`, counted as start-up's only."""
        lag = max(lag, 0.0)
        if self.ready_at is None:
            self.startup_longest = max(self.startup_longest, lag)
            if lag > self.threshold:
                self.startup_stalls += 1
            self._gc_turn = {}
            self._sample = None
            return
        self.lag.observe(lag)
        second = int(now)
        slot = second % WINDOW
        if self._seconds[slot] != second:
            self._seconds[slot] = second
            self._maxima[slot] = lag
        elif lag > self._maxima[slot]:
            self._maxima[slot] = lag
        if lag > self.longest:
            self.longest = lag
        gc_turn = self._gc_turn
        if lag > self.threshold:
            self.stall_count += 1
            sample = self._sample
            stall: dict[str, Any] = {
                "at": round(self.wall() - lag, 3),
                "lag_ms": round(lag * 1000, 3),
                "gc_ms": {f"gen{g}": round(s * 1000, 3) for g, s in sorted(gc_turn.items())},
                "stack": sample[1] if sample is not None and sample[0] == self._due else [],
            }
            self.stalls.append(stall)
        if gc_turn:
            self._gc_turn = {}
        self._sample = None

    def longest_last_minute(self, now: float | None = None) -> float:
        """The longest lag of the last WINDOW seconds (the current one included)."""
        second = int(self.clock() if now is None else now)
        return max((m for m, s in zip(self._maxima, self._seconds, strict=True) if second - WINDOW < s <= second),
                   default=0.0)

    # -- the collector and the watchdog ----------------------------------------------------

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started:
            gen = info.get("generation", 0)
            took = time.perf_counter() - self._gc_started
            self._gc_turn[gen] = self._gc_turn.get(gen, 0.0) + took
            if 0 <= gen < len(self.gc_seconds):
                self.gc_seconds[gen] += took
            self._gc_started = 0.0

    def _watch(self) -> None:
        """Sleep until the armed timer is `threshold` overdue; if the loop has not come back by then
        (the timer's due time unchanged), sample its stack once for that turn. A loop that keeps time
        wakes the watchdog once a timer period (it sleeps past the next due time each round)."""
        while True:
            due = self._due
            wait = due + self.threshold - self.clock()
            if wait > 0:
                if self._stopping.wait(wait):
                    return
                if self._due != due:
                    continue  # the timer fired in time: watch the next one
            if self._sample is None or self._sample[0] != due:
                frame = sys._current_frames().get(self._loop_thread)
                if frame is not None:
                    self._sample = (due, _stack(frame))
                del frame
            if self._stopping.wait(self.threshold):  # the stall goes on, or was sampled: look again later
                return

    # -- reporting -------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The "event_loop" section: one record for this process (a supervisor adds its workers')."""
        return {"processes": [self.record()]}

    def record(self) -> dict[str, Any]:
        return {
            "process": self.process,
            "lag": self.lag,
            "longest_last_minute_seconds": round(self.longest_last_minute(), 6),
            "longest_seconds": round(self.longest, 6),
            "stalls": self.stall_count,
            "threshold_seconds": self.threshold,
            "gc_seconds": {f"gen{g}": round(t, 6) for g, t in enumerate(self.gc_seconds)},
            "gc_freezes": self.gc_freezes,
            "recent_stalls": list(self.stalls),
            # the turns before the agent served, not counted above
            "startup": {"ready": self.ready_at is not None,
                        "seconds": round((self.ready_at if self.ready_at is not None else self.clock()) - self.started,
                                         3),
                        "longest_seconds": round(self.startup_longest, 6), "stalls": self.startup_stalls},
        }


def longest_last_minute(section: Any) -> float | None:
    """The longest stall of the last minute over every process of an "event_loop" section (None: none)."""
    procs = section.get("processes") if isinstance(section, dict) else None
    values = [p.get("longest_last_minute_seconds") for p in procs or () if isinstance(p, dict)]
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    return max(numbers) if numbers else None
