"""The last 15 minutes of the agent's own counters, a point every few seconds in a ring (pure).

The status page draws its charts from here and `GET /debug/history` serves it as JSON. Nothing here
runs per query: a timer of the agent (every `INTERVAL` seconds) hands `History.add` a `Reading` of the
counters the parts keep anyway (`observer.Observer.reading()`; the --workers supervisor's: its workers',
summed), and `add` keeps the difference to the previous one as a `Point`: answers, by rcode and by path
(`metrics.slots.SlotLabels.path`), from memory or worked out, answer times in CoreDNS's buckets
(`metrics.counters.TIME_BUCKETS`; the hit path's untimed answers in the first), each upstream's health.
The ring holds `WINDOW / INTERVAL` points, so the memory is bounded whatever the traffic. A counter that
goes backwards (a worker started again) counts as zero for that interval, never a negative rate.
Quantiles read from the buckets as `histogram_quantile` does, one in the first bucket reported as its
bound: docs/status.md "The status page".
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from nodedns.metrics.counters import TIME_BUCKETS

INTERVAL = 5.0  # seconds between points
WINDOW = 900.0  # seconds the ring covers (15 minutes)
MAX_UPSTREAMS = 16  # upstreams kept per point (a ring of bounded size whatever the configuration)
BOUNDS_MS: tuple[float, ...] = tuple(b * 1000 for b in TIME_BUCKETS)  # 0.25 ms .. 8192 ms


class Reading(NamedTuple):
    """The agent's cumulative counters at one moment (what `Observer.reading()` returns)."""

    queries: int
    rcodes: Mapping[str, int]
    from_memory: int  # answers sent from a stored answer (hit path, stored cluster answers, forward cache)
    worked_out: int  # answers built from the index or asked of an upstream
    timed: tuple[int, ...]  # slow-path answer times per bucket (len(TIME_BUCKETS) + 1, the last: +Inf)
    hit_path: int  # answers the hit path sent (not timed: counted in the first bucket)
    upstreams: tuple[tuple[str, bool], ...] = ()  # (upstream, healthy) now
    paths: Mapping[str, int] = MappingProxyType({})  # answers by how they were made (cluster, cache, upstream, ...)


class Point(NamedTuple):
    """One interval: what changed between two readings."""

    wall: float  # end of the interval, seconds since the epoch
    seconds: float  # length of the interval
    queries: int
    rcodes: tuple[tuple[str, int], ...]
    from_memory: int
    worked_out: int
    buckets: tuple[int, ...]  # answer times, the hit path in the first bucket
    upstreams: tuple[tuple[str, bool], ...]
    paths: tuple[tuple[str, int], ...] = ()

    @property
    def qps(self) -> float:
        return self.queries / self.seconds if self.seconds > 0 else 0.0

    @property
    def hit_ratio(self) -> float | None:
        seen = self.from_memory + self.worked_out
        return self.from_memory / seen if seen else None

    def quantile_ms(self, q: float) -> float | None:
        return quantile_ms(self.buckets, q)


def quantile_ms(buckets: Iterable[int], q: float) -> float | None:
    """The q-quantile (0..1) of answer times in milliseconds from bucket counts (None: no answers).

    As Prometheus's histogram_quantile: the bucket holding rank q*total, linear within it; a rank in
    the first bucket gives its bound (0.25 ms, "at most"), a rank above the last bound gives the
    last bound (8192 ms, "at least")."""
    counts = list(buckets)
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    running = 0
    for i, n in enumerate(counts):
        if n and running + n >= rank:
            if i == 0:
                return BOUNDS_MS[0]
            if i >= len(BOUNDS_MS):
                return BOUNDS_MS[-1]
            lower, upper = BOUNDS_MS[i - 1], BOUNDS_MS[i]
            return lower + (upper - lower) * max(0.0, rank - running) / n
        running += n
    return BOUNDS_MS[-1]


def _delta(now: int, before: int) -> int:
    return now - before if now >= before else 0  # a counter that went back: a restarted worker


def _deltas(now: Mapping[str, int], before: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple((k, d) for k, n in sorted(now.items()) if (d := _delta(n, before.get(k, 0))))


class History:
    """A ring of `Point`s over the last `window` seconds, one per `add()` after the first."""

    def __init__(self, *, interval: float = INTERVAL, window: float = WINDOW,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.interval = interval
        self.window = window
        self.clock = clock
        self.wall = wall
        self.points: deque[Point] = deque(maxlen=max(1, math.ceil(window / interval)))
        self._last: Reading | None = None
        self._last_at = 0.0
        self.started = wall()

    def add(self, reading: Reading) -> Point | None:
        """Keep the change since the previous reading as a point (None for the first reading)."""
        now = self.clock()
        last, last_at = self._last, self._last_at
        self._last, self._last_at = reading, now
        if last is None:
            return None
        buckets = [_delta(a, b) for a, b in zip(reading.timed, last.timed, strict=False)]
        if buckets:
            buckets[0] += _delta(reading.hit_path, last.hit_path)
        rcodes = _deltas(reading.rcodes, last.rcodes)
        point = Point(
            wall=self.wall(),
            seconds=max(0.0, now - last_at),
            queries=_delta(reading.queries, last.queries),
            rcodes=rcodes,
            from_memory=_delta(reading.from_memory, last.from_memory),
            worked_out=_delta(reading.worked_out, last.worked_out),
            buckets=tuple(buckets),
            upstreams=reading.upstreams[:MAX_UPSTREAMS],
            paths=_deltas(reading.paths, last.paths),
        )
        self.points.append(point)
        return point

    def recent(self) -> list[Point]:
        """The points of the last `window` seconds, oldest first."""
        if not self.points:
            return []
        since = self.wall() - self.window
        return [p for p in self.points if p.wall >= since]

    def document(self) -> dict[str, Any]:
        """`GET /debug/history`: every point of the window, and the window's totals."""
        points = self.recent()
        total = [0] * (len(BOUNDS_MS) + 1)
        rcodes: dict[str, int] = {}
        paths: dict[str, int] = {}
        for p in points:
            for i, n in enumerate(p.buckets):
                total[i] += n
            for rcode, n in p.rcodes:
                rcodes[rcode] = rcodes.get(rcode, 0) + n
            for path, n in p.paths:
                paths[path] = paths.get(path, 0) + n
        queries = sum(p.queries for p in points)
        seconds = sum(p.seconds for p in points)
        memory = sum(p.from_memory for p in points)
        seen = memory + sum(p.worked_out for p in points)
        return {
            "interval_seconds": self.interval,
            "window_seconds": self.window,
            "now": _iso(self.wall()),
            "points": [point_doc(p) for p in points],
            "window": {
                "seconds": round(seconds, 3),
                "queries": queries,
                "qps": _round(queries / seconds) if seconds else None,
                "latency_ms": {"p50": _round(quantile_ms(total, 0.5)), "p99": _round(quantile_ms(total, 0.99))},
                "hit_ratio": _round(memory / seen, 4) if seen else None,
                "rcodes": dict(sorted(rcodes.items(), key=lambda kv: -kv[1])),
                "rcode_shares": {k: round(n / queries, 4) for k, n in sorted(rcodes.items(), key=lambda kv: -kv[1])}
                if queries else {},
                "paths": dict(sorted(paths.items(), key=lambda kv: -kv[1])),
            },
            "notes": {
                "latency_ms": "answer times from CoreDNS's duration buckets; hit-path answers (stored answers, "
                              "microseconds, not timed) count in the first bucket, so 0.25 means at most 0.25 ms",
                "hit_ratio": "answers sent from a stored answer / (those + answers built from the index or asked "
                             "of an upstream)",
            },
        }


def point_doc(p: Point) -> dict[str, Any]:
    return {
        "time": _iso(p.wall),
        "t": round(p.wall, 3),
        "seconds": round(p.seconds, 3),
        "queries": p.queries,
        "qps": _round(p.qps),
        "latency_ms": {"p50": _round(p.quantile_ms(0.5)), "p99": _round(p.quantile_ms(0.99))},
        "hit_ratio": _round(p.hit_ratio, 4),
        "from_memory": p.from_memory,
        "worked_out": p.worked_out,
        "rcodes": dict(p.rcodes),
        "paths": dict(p.paths),
        "upstreams": {name: healthy for name, healthy in p.upstreams},
    }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _iso(wall: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))
