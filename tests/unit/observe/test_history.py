"""The history ring (nodedns.observe.history): points from counter readings, quantiles, bounds, the JSON document."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from nodedns.metrics.counters import TIME_BUCKETS
from nodedns.observe.history import BOUNDS_MS, INTERVAL, MAX_UPSTREAMS, WINDOW, History, Point, Reading, quantile_ms

N = len(TIME_BUCKETS) + 1  # buckets with +Inf


class Clocks:
    """A monotonic clock and a wall clock that move together."""

    def __init__(self) -> None:
        self.mono = 100.0
        self.wall_time = 1_800_000_000.0

    def tick(self, seconds: float = INTERVAL) -> None:
        self.mono += seconds
        self.wall_time += seconds


def history(clocks: Clocks, **kw: Any) -> History:
    return History(clock=lambda: clocks.mono, wall=lambda: clocks.wall_time, **kw)


def timed(**at: int) -> tuple[int, ...]:
    """Bucket counts: timed(b0=3, b5=1) puts 3 in the first bucket, 1 in the sixth."""
    out = [0] * N
    for key, n in at.items():
        out[int(key[1:])] = n
    return tuple(out)


def reading(queries: int = 0, *, rcodes: dict[str, int] | None = None, memory: int = 0, worked: int = 0,
            buckets: tuple[int, ...] | None = None, hit_path: int = 0,
            upstreams: tuple[tuple[str, bool], ...] = ()) -> Reading:
    return Reading(queries, rcodes or {}, memory, worked, buckets or timed(), hit_path, upstreams)


def test_the_first_reading_is_the_baseline_and_each_next_one_a_point() -> None:
    clocks = Clocks()
    h = history(clocks)
    assert h.add(reading(1000, rcodes={"NOERROR": 1000}, memory=900, worked=100)) is None
    clocks.tick()
    p = h.add(reading(1500, rcodes={"NOERROR": 1400, "NXDOMAIN": 100}, memory=1350, worked=150))
    assert p is not None
    assert (p.queries, p.seconds, p.qps) == (500, 5.0, 100.0)
    assert p.rcodes == (("NOERROR", 400), ("NXDOMAIN", 100))
    assert (p.from_memory, p.worked_out, p.hit_ratio) == (450, 50, 0.9)
    assert p.wall == clocks.wall_time
    assert list(h.points) == [p]


def test_a_counter_that_goes_back_counts_zero_not_a_negative_rate() -> None:
    """A --workers worker started again begins its counters at zero."""
    clocks = Clocks()
    h = history(clocks)
    h.add(reading(1000, rcodes={"NOERROR": 1000}, memory=800, worked=200, hit_path=700, buckets=timed(b0=300)))
    clocks.tick()
    p = h.add(reading(400, rcodes={"NOERROR": 400}, memory=100, worked=300, hit_path=50, buckets=timed(b0=10)))
    assert p is not None
    assert (p.queries, p.rcodes, p.from_memory, p.worked_out) == (0, (), 0, 100)
    assert sum(p.buckets) == 0


def test_hit_path_answers_count_in_the_first_bucket() -> None:
    clocks = Clocks()
    h = history(clocks)
    h.add(reading())
    clocks.tick()
    p = h.add(reading(buckets=timed(b3=2), hit_path=98))
    assert p is not None
    assert p.buckets[0] == 98 and p.buckets[3] == 2 and sum(p.buckets) == 100


@pytest.mark.parametrize(
    ("buckets", "q", "expected"),
    [
        (timed(), 0.5, None),
        (timed(b0=100), 0.5, BOUNDS_MS[0]),
        (timed(b0=100), 0.99, BOUNDS_MS[0]),
        (timed(b0=98, b3=2), 0.5, BOUNDS_MS[0]),
        (timed(b0=98, b3=2), 0.99, BOUNDS_MS[2] + (BOUNDS_MS[3] - BOUNDS_MS[2]) * 0.5),
        (timed(b2=4), 0.5, BOUNDS_MS[1] + (BOUNDS_MS[2] - BOUNDS_MS[1]) * 0.5),
        (timed(b2=4), 1.0, BOUNDS_MS[2]),
        (timed(b16=5), 0.5, BOUNDS_MS[-1]),
    ],
    ids=["no-answers", "all-hits-p50", "all-hits-p99", "mostly-hits-p50", "mostly-hits-p99-interpolated",
         "one-bucket-middle", "one-bucket-top", "above-the-last-bound"],
)
def test_quantiles_read_the_buckets_as_histogram_quantile_does(buckets: tuple[int, ...], q: float,
                                                               expected: float | None) -> None:
    got = quantile_ms(buckets, q)
    assert got == pytest.approx(expected) if expected is not None else got is None


def test_the_ring_keeps_the_window_and_no_more() -> None:
    clocks = Clocks()
    h = history(clocks)
    h.add(reading())
    for i in range(1, 1000):
        clocks.tick()
        h.add(reading(i * 10, rcodes={"NOERROR": i * 10}, upstreams=(("10.0.0.10:53", True),)))
    assert len(h.points) == WINDOW / INTERVAL == 180
    doc = h.document()
    assert len(doc["points"]) == 180
    assert doc["points"][0]["queries"] == 10 and doc["points"][-1]["t"] == round(clocks.wall_time, 3)


def test_the_ring_s_memory_is_bounded_whatever_the_upstreams() -> None:
    clocks = Clocks()
    h = history(clocks)
    many = tuple((f"10.0.{i // 256}.{i % 256}:53", i % 2 == 0) for i in range(1000))
    h.add(reading(upstreams=many))
    for i in range(400):
        clocks.tick()
        h.add(reading(i, rcodes={"NOERROR": i, "NXDOMAIN": i}, buckets=timed(b0=i, b4=i), upstreams=many))
    assert all(len(p.upstreams) == MAX_UPSTREAMS for p in h.points)
    size = sum(sys.getsizeof(p) + sys.getsizeof(p.buckets) + sys.getsizeof(p.rcodes) + sys.getsizeof(p.upstreams)
               for p in h.points)
    assert size < 200_000, size


def test_points_older_than_the_window_are_left_out_after_a_pause() -> None:
    """The agent's clock moved on without samples (a stopped process): the old points are not "recent"."""
    clocks = Clocks()
    h = history(clocks)
    h.add(reading())
    clocks.tick()
    h.add(reading(10))
    clocks.tick(WINDOW + 60)
    assert h.recent() == []
    assert h.document()["points"] == [] and h.document()["window"]["qps"] is None


def test_answers_by_how_they_were_made_are_kept_per_point() -> None:
    clocks = Clocks()
    h = history(clocks)
    h.add(reading()._replace(paths={"cluster": 10}))
    clocks.tick()
    p = h.add(reading()._replace(paths={"cluster": 110, "upstream": 5, "refused": 0}))
    assert p is not None and p.paths == (("cluster", 100), ("upstream", 5))
    assert h.document()["window"]["paths"] == {"cluster": 100, "upstream": 5}


def test_the_document_sums_the_window() -> None:
    clocks = Clocks()
    h = history(clocks)
    h.add(reading())
    clocks.tick()
    h.add(reading(500, rcodes={"NOERROR": 400, "SERVFAIL": 100}, memory=300, worked=100, buckets=timed(b5=50),
                  hit_path=450, upstreams=(("10.0.0.10:53", False),)))
    clocks.tick()
    h.add(reading(1500, rcodes={"NOERROR": 1300, "SERVFAIL": 200}, memory=1200, worked=200, buckets=timed(b5=150),
                  hit_path=1350, upstreams=(("10.0.0.10:53", True),)))
    doc = h.document()
    w = doc["window"]
    assert (w["seconds"], w["queries"], w["qps"]) == (10.0, 1500, 150.0)
    assert w["rcodes"] == {"NOERROR": 1300, "SERVFAIL": 200}
    assert w["rcode_shares"] == {"NOERROR": round(1300 / 1500, 4), "SERVFAIL": round(200 / 1500, 4)}
    assert w["hit_ratio"] == round(1200 / 1400, 4)
    # p99: rank 1485 of 1500, the 135th of the 150 answers between 4 and 8 ms
    assert w["latency_ms"] == {"p50": 0.25, "p99": pytest.approx(BOUNDS_MS[4] + (BOUNDS_MS[5] - BOUNDS_MS[4]) * 0.9)}
    first, second = doc["points"]
    assert first["upstreams"] == {"10.0.0.10:53": False} and second["upstreams"] == {"10.0.0.10:53": True}
    assert first["time"].endswith("Z") and first["qps"] == 100.0 and second["qps"] == 200.0


def test_a_point_without_answers_has_no_ratio_and_no_latency() -> None:
    p = Point(wall=0.0, seconds=5.0, queries=0, rcodes=(), from_memory=0, worked_out=0, buckets=timed(),
              upstreams=())
    assert (p.qps, p.hit_ratio, p.quantile_ms(0.5)) == (0.0, None, None)
