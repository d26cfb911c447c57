"""The plain counters the parts keep (Histogram, ListenerStats, Sampler) and one Scrape of them (pure).

The transports keep plain integers (a list of 256 counters per listener and protocol, indexed by a
one-byte slot: nodedns.metrics.slots); the parts keep their own counters; at scrape time the Agent
gathers one `Scrape` of them on the event loop, which the Collector (nodedns.metrics.registry) turns
into metric families and /status into its document. `Histogram` (CoreDNS's time buckets) is the
type to keep latencies in; /status shows it as count/sum/mean. `Sampler` picks the queries the
query log shows, one integer comparison per query.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from nodedns.metrics.slots import UNCLASSIFIED_LABELS, Slots

# CoreDNS plugin.TimeBuckets = prometheus.ExponentialBuckets(0.00025, 2, 16): 0.25 ms .. 8.192 s
TIME_BUCKETS: tuple[float, ...] = tuple(0.00025 * 2**i for i in range(16))


class Histogram:
    """Latency observations in CoreDNS's time buckets (seconds)."""

    __slots__ = ("counts", "sum")

    bounds: tuple[float, ...] = TIME_BUCKETS

    def __init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)  # last: above the largest bound (+Inf)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)

    def merge(self, other: Histogram) -> None:
        for i, c in enumerate(other.counts):
            self.counts[i] += c
        self.sum += other.sum

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, c in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += c
            out.append(("+Inf" if bound == math.inf else repr(bound), float(running)))
        return out

    def summary(self) -> dict[str, float]:
        n = self.count
        return {"count": n, "sum": round(self.sum, 6), "mean": round(self.sum / n, 6) if n else 0.0}


def new_counts() -> list[int]:
    """Per-slot answer counters for one listener and protocol."""
    return [0] * 256


@dataclass(slots=True)
class ListenerStats:
    """Counters of one DNS listen address (UDP and TCP), kept by the transport."""

    server: str  # CoreDNS server label: "dns://127.0.0.1:53", "dns://[::1]:53"
    family: str  # "1" IPv4, "2" IPv6
    udp_hit: list[int] = field(default_factory=new_counts)  # answered on the UDP hit path
    udp: list[int] = field(default_factory=new_counts)  # answered (or dropped) on the UDP slow path
    tcp: list[int] = field(default_factory=new_counts)
    latency: dict[str, Histogram] = field(default_factory=dict)  # zone label -> slow-path latency
    tcp_open: int = 0
    tcp_accepted: int = 0
    tcp_refused: int = 0  # at --tcp-max-connections
    tcp_refused_client: int = 0  # at --tcp-max-connections-per-client
    tcp_aborted_unread: int = 0  # reset at the idle timeout with answers it never took
    tcp_aborted_owed: int = 0  # reset as the largest holder past server.TCP_PROCESS_OWED_MAX unsent
    tcp_aborted_evicted: int = 0  # reset at --tcp-max-connections for a client holding fewer
    udp_deferred: int = 0  # UDP misses that waited for a later loop turn (serve/udp.py `later`)
    udp_deferred_dropped: int = 0  # ... dropped, MAX_DEFERRED already waiting

    @staticmethod
    def label(host: str, port: int) -> str:
        return f"dns://[{host}]:{port}" if ":" in host else f"dns://{host}:{port}"

    def by_proto(self) -> tuple[tuple[str, list[int]], ...]:
        return (("udp", self.udp_hit), ("udp", self.udp), ("tcp", self.tcp))

    def observe(self, zone: str, seconds: float) -> None:
        h = self.latency.get(zone)
        if h is None:
            h = self.latency[zone] = Histogram()
        h.observe(seconds)


class Sampler:
    """Bernoulli sampling at `rate` by skip counts: the caller compares one integer per query.

    `first()` and `next(n)` return the sequence number of the next query to sample; the gaps are
    geometric, so every query has the same chance `rate` and no pattern in the traffic aligns with
    the sampling. rate 0 never samples, rate 1 samples every query.
    """

    NEVER = 1 << 62

    def __init__(self, rate: float, *, rng: Callable[[], float] = random.random) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be between 0 and 1")
        self.rate = rate
        self.rng = rng
        self._log1m = math.log1p(-rate) if 0.0 < rate < 1.0 else 0.0

    def gap(self) -> int:
        if self.rate <= 0.0:
            return self.NEVER
        if self.rate >= 1.0:
            return 1
        u = self.rng()
        if u <= 0.0:
            return 1
        return int(math.log(u) / self._log1m) + 1

    def first(self) -> int:
        return self.gap()

    def next(self, n: int) -> int:
        return n + self.gap()


@dataclass(slots=True)
class ClusterCacheStats:
    """The stored cluster answers, shown as a CoreDNS cache for the cluster zones."""

    zones: str  # CoreDNS zones label
    entries_success: int
    entries_denial: int
    hits_success: int
    hits_denial: int
    misses: int
    evictions: int
    clears: int
    bytes: int = 0  # what the stored cluster answers are charged (ClusterAnswers.bytes)
    max_bytes: int = 0  # their byte budget: the cluster share of --cache-max-bytes
    too_large: int = 0  # answers built but not stored for their size


@dataclass(slots=True)
class Scrape:
    """Everything one /metrics or /status read needs, gathered by the Agent on the event loop."""

    version: str
    slots: Slots
    listeners: Sequence[ListenerStats]
    alive: bool
    ready: bool
    index: Mapping[str, Any]  # synced, generation, counts, skipped, seconds_since_change
    cluster_cache: ClusterCacheStats | None
    panics: int = 0
    errors: Mapping[str, int] = field(default_factory=dict)  # consolidated error kind -> total
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # provider status()


class Totals(NamedTuple):
    """Answer counts summed over listeners (for /status and the HTML page)."""

    total: int
    by_rcode: dict[str, int]
    by_type: dict[str, int]
    by_proto: dict[str, int]
    by_path: dict[str, int]


def totals(scrape: Scrape) -> Totals:
    return answer_totals(scrape.slots, scrape.listeners)


def answer_totals(slots: Slots, listeners: Iterable[ListenerStats]) -> Totals:
    """Answers summed over listeners, by rcode, type, protocol and path."""
    by_rcode: dict[str, int] = {}
    by_type: dict[str, int] = {}
    by_proto: dict[str, int] = {"udp": 0, "tcp": 0}
    by_path: dict[str, int] = {}
    total = 0
    labels = slots.labels
    for ls in listeners:
        for proto, counts in ls.by_proto():
            for slot, n in enumerate(counts):
                if not n:
                    continue
                lab = labels[slot] if slot < len(labels) else UNCLASSIFIED_LABELS
                total += n
                by_proto[proto] += n
                by_type[lab.type] = by_type.get(lab.type, 0) + n
                by_path[lab.path] = by_path.get(lab.path, 0) + n
                if lab.rcode:
                    by_rcode[lab.rcode] = by_rcode.get(lab.rcode, 0) + n
    return Totals(total, by_rcode, by_type, by_proto, by_path)
