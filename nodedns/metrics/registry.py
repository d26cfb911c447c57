"""Metric declarations and the scrape-time Collector: counters live in the parts, names live here (pure).

Nothing on the DNS path calls prometheus_client. The transports keep plain integers (a list of 256
counters per listener and protocol, indexed by a one-byte "slot"); the parts keep their own
counters; at scrape time `Collector.collect()` asks the Agent for one `Scrape` snapshot and turns it
into metric families with CoreDNS's names and labels where CoreDNS measures the same thing, and
`nodedns_*` names for what is ours. `render(scrape_fn)` gives the Prometheus text.

Slots. `Slots` gives each combination of the labels an answer is counted under (zone, type, rcode,
plugin, DO, denial) a number 1..255 (0 = unclassified). A stored answer template carries its slot
in its first byte (the ID bytes of a template are never sent: the hit path copies the query's ID
over them), so the hit path counts an answer with `counts[w[0]] += 1`: exact per type and rcode,
no dict lookup. The slow path classifies each response it sends with `Slots.classify(response)`.
Any table the hit path reads must hold templates stamped with `Slots.stamp` (unstamped templates
count as slot 0, `type="other"`, `rcode="unknown"`).

The provider contract (how a part shows up in /metrics and /status). A part registers with
`Agent.add_provider(section, part)`; `part.status()` returns a JSON-able mapping, read on the event
loop at scrape time (cheap: no I/O, no locks). Every key is optional; a missing one omits its metric.
`status()` may also hold an `unready` list of reasons, which makes /readyz answer 503.

    section "sync" (API watch: `kube.KubeSync.status()`):
      {"stale_seconds": float, "resources": {RESOURCE: {"resource_version": str, "synced": bool,
       "connected": bool, "seconds_since_event": float | None, "watch_restarts": int,
       "relists": int, "events": int, "errors": int, "forbidden": bool}}, "unready": [str]}
      -> nodedns_sync_stale_seconds, nodedns_sync_synced, nodedns_sync_resource_forbidden, nodedns_watch_connected,
         nodedns_sync_seconds_since_last_event, nodedns_watch_restarts_total, nodedns_relists_total,
         nodedns_watch_events_total, nodedns_watch_errors_total {resource}
    section "cache" (forward cache):
      {"caches": [{"zones": "." (CoreDNS zones label: zones with trailing dots, comma-joined),
                   "entries": {"success": int, "denial": int}, "hits": {"success": int, "denial": int},
                   "misses": int, "requests": int, "prefetch": int, "served_stale": int,
                   "evictions": {"success": int, "denial": int}, "drops": int, "stale_nxdomain_served": int,
                   "prefetch_deferred": int}]}
      -> coredns_cache_{entries,hits_total,misses_total,requests_total,prefetch_total,
         served_stale_total,evictions_total,drops_total}, nodedns_stale_nxdomain_served_total,
         nodedns_cache_prefetch_deferred_total
    section "filter_aaaa" (--filter-aaaa on|auto: `app.FilterReport`):
      {"mode": "on" | "auto", "filtering": bool, "reason": str, "filtered": int}
      -> nodedns_filtered_aaaa_total, nodedns_filter_aaaa_active (both 0 without the section)
    section "hosts" (--hosts: `app.HostsReport`):
      {"files": [{"path": str, "read": bool, "error": str, "skipped": int, "ignored": int}], "entries": int,
       "names": int, "reloads": int, "last_reload": str | None, "errors": int, "answers": int}
      -> nodedns_hosts_answers_total, nodedns_hosts_entries (both 0 without the section)
    section "upstream" (forwarder):
      {"upstreams": [{"to": "10.0.0.10:53", "zone": ".", "healthy": bool, "fails": int,
                      "healthcheck_failures": int, "duration": {RCODE: Histogram},
                      "conn_cache": {PROTO: {"hits": int, "misses": int}}}],
       "healthcheck_broken": int, "max_concurrent_rejects": int, "loops": [{"zone": ".", ...}], "unready": [str]}
      -> nodedns_upstream_healthy{to,zone}, nodedns_forward_loop{zone},
         coredns_proxy_request_duration_seconds{proxy_name,to,rcode},
         coredns_proxy_healthcheck_failures_total{proxy_name,to},
         coredns_proxy_conn_cache_{hits,misses}_total{proxy_name,to,proto},
         coredns_forward_healthcheck_broken_total, coredns_forward_max_concurrent_rejects_total
    section "node" (interface and firewall: `netif.NodeNetwork.state()`):
      {"interface": {"name": str, "ok": bool | None, ...} | None, "firewall": str,
       "rules_installed": bool, "setup_errors": {ERRORTYPE: int}, "added_back": int, "reconciles": int}
      -> nodedns_setup_errors_total{errortype}, nodedns_interface_present, nodedns_rules_installed,
         nodedns_node_added_back_total, nodedns_node_reconciles_total

    section "workers" (the --workers supervisor: `nodedns.workers.supervisor.Fleet`):
      {"configured": int, "workers": [{"worker": "0", "pid": int, "up": bool, "serving": bool,
                                        "restarts": int, "restarts_by_reason": {"died"|"silent"|"stuck": int},
                                        "silent_seconds": float | None, "restarting": str | None,
                                        "cpu_seconds": float, "rss_bytes": int,
                                        "cluster_asks": int, "heavy_imports": [str]}]}
        (silent_seconds, restarting, cluster_asks, heavy_imports: /status only)
      -> nodedns_workers, nodedns_worker_up, nodedns_worker_serving, nodedns_worker_cpu_seconds_total,
         nodedns_worker_resident_memory_bytes {worker}; nodedns_worker_restarts_total {worker, reason}

    section "autopath" (node-local autopath: `searchpath.Autopath.status()`):
      {"success": int, "walks": {RESULT: int}, "queries_saved": int}
      -> coredns_autopath_success_total{server} (walks that found a name, CoreDNS's meaning),
         nodedns_autopath_walks_total{result: as_asked|searched|not_found|gave_up},
         nodedns_autopath_queries_saved_total

    section "limits" (who may query and how much: `app.Limits.status()`, docs/hardening.md):
      {"allow_from": {"mode": str, "refused": int, "admitted_pods_outside_cidr": int, ...},
       "rate_limit": {"dropped": int, "slipped": int, "clients": int, "table_full": int, ...},
       "pending": {"now": int, "max": int, "refused": int}, "tcp": {...}}
      -> nodedns_refused_by_acl_total, nodedns_acl_open, nodedns_rate_limited_total{action},
         nodedns_rate_limit_clients, nodedns_rate_limit_table_full_total, nodedns_pending_queries,
         nodedns_pending_refused_total (TCP connections refused at the caps: nodedns_tcp_refused_total{reason},
         reset for not reading: nodedns_tcp_aborted_total{reason};
         upstream queries refused at --max-concurrent: coredns_forward_max_concurrent_rejects_total)

    section "insight" (per-Pod DNS insight: `insight.Insight.status()`, docs/insight.md):
      {"namespaces": {NAMESPACE: {"queries": {RCODE: int}, "search_misses": int}}, ...}
      (NAMESPACE: the namespaces of this node's Pods, and "(host-network)", "(unknown)")
      -> nodedns_namespace_queries_total{namespace,rcode}, nodedns_namespace_search_misses_total{namespace}

    section "event_loop" (the loop-lag monitor of each process: `looplag.LoopLag.status()`; a --workers
    supervisor lists its own row and each worker's):
      {"processes": [{"process": "main" | "supervisor" | "worker N", "lag": Histogram,
                      "longest_last_minute_seconds": float, "longest_seconds": float, "stalls": int,
                      "threshold_seconds": float, "recent_stalls": [{"at": float, "lag_ms": float,
                      "gc_ms": {"genN": float}, "stack": [str]}]}]}
      -> nodedns_event_loop_lag_seconds (histogram), nodedns_event_loop_longest_stall_seconds,
         nodedns_event_loop_stalls_total {process}
    section "shadow" (`nodedns shadow` only: `shadowagent.ShadowReport`, docs/shadow.md):
      {"answers": {RESULT: int}, "mismatches": {REASON: int}, "known": {REASON: int}, "unknown": {REASON: int},
       "dropped": {REASON: int}, "pending": int, ...}
      -> nodedns_shadow_answers_total{result: match|mismatch|known|unknown}, nodedns_shadow_mismatches_total{reason},
         nodedns_shadow_known_differences_total{reason}, nodedns_shadow_dropped_total{reason},
         nodedns_shadow_pending

    section "http" (the status and debug listeners: `status.StatusServer.status()`):
      {"listeners": [{"listener": "status" | "debug", "address": str, "listening": bool, "open": int,
                      "refused": int, "requests": int, "busy": int, "too_large": int, "body_timeouts": int,
                      "stalled": int, ...}],
       "renders": {"metrics": int, "status": int}, "explains_busy": int}
      -> nodedns_http_listening, nodedns_http_connections_open, nodedns_http_connections_refused_total,
         nodedns_http_requests_total {listener}, nodedns_http_rejected_total{listener, reason},
         nodedns_http_renders_total{route}, nodedns_explain_busy_total

`Histogram` (CoreDNS's time buckets) is the type to keep latencies in; /status shows it as
count/sum/mean.
"""

from __future__ import annotations

import math
import platform
import random
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

if TYPE_CHECKING:  # prometheus_client (~5 MB) is loaded by the process that renders /metrics, not by workers
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
    from prometheus_client.registry import CollectorRegistry

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_M = TypeVar("_M", "CounterMetricFamily", "GaugeMetricFamily", "HistogramMetricFamily")

# CoreDNS plugin.TimeBuckets = prometheus.ExponentialBuckets(0.00025, 2, 16): 0.25 ms .. 8.192 s
TIME_BUCKETS: tuple[float, ...] = tuple(0.00025 * 2**i for i in range(16))

# CoreDNS plugin/metrics/vars/monitor.go: the types counted under their own name; the rest is "other"
MONITORED_TYPES: frozenset[int] = frozenset(
    {1, 28, 5, 48, 43, 15, 50, 47, 2, 12, 46, 6, 33, 16, 65, 251, 252, 255}
)
_TYPE_TEXT = {1: "A", 28: "AAAA", 5: "CNAME", 48: "DNSKEY", 43: "DS", 15: "MX", 50: "NSEC3", 47: "NSEC",
              2: "NS", 12: "PTR", 46: "RRSIG", 6: "SOA", 33: "SRV", 16: "TXT", 65: "HTTPS", 251: "IXFR",
              252: "AXFR", 255: "ANY"}

# Rcode names as miekg/dns prints them (CoreDNS's rcode label)
_RCODE_TEXT = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED",
               6: "YXDOMAIN", 7: "YXRRSET", 8: "NXRRSET", 9: "NOTAUTH", 10: "NOTZONE", 16: "BADVERS"}

# plugin label values (CoreDNS: the plugin that wrote the response; "" = the server itself)
PLUGIN_CLUSTER = "kubernetes"
PLUGIN_CACHE = "cache"
PLUGIN_FORWARD = "forward"
PLUGIN_FILTER = "filter"  # --filter-aaaa: our NODATA for a forwarded AAAA question (nodedns_filtered_aaaa_total)
PLUGIN_HOSTS = "hosts"  # --hosts: a name or address of a hosts file (CoreDNS's hosts plugin)
PLUGIN_CHAOS = "chaos"  # class CH: id.server., version.bind. (CoreDNS's chaos plugin)
PLUGIN_SERVER = ""

DROPPED_ZONE = "dropped"  # CoreDNS's zone label for queries that never entered the chain
UNCLASSIFIED = 0
NO_RESPONSE = ""  # rcode of a dropped query: counted as a request, not as a response


def type_label(qtype: int) -> str:
    """CoreDNS's `type` label: the type name for monitored types, else "other"."""
    return _TYPE_TEXT[qtype] if qtype in MONITORED_TYPES else "other"


def rcode_label(rcode: int) -> str:
    return _RCODE_TEXT.get(rcode, f"RCODE{rcode}")


def zone_label(zone: str) -> str:
    """`cluster.local` -> `cluster.local.`; the root `` -> `.`."""
    return zone + "." if zone else "."


# ----------------------------------------------------------------------------------------------
# Slots: the labels an answer is counted under, as one byte


class SlotLabels(NamedTuple):
    zone: str  # CoreDNS zone label: "cluster.local.", "in-addr.arpa.", ".", or "dropped"
    type: str  # CoreDNS type label
    rcode: str  # "NOERROR", ...; "" for a dropped query (no response)
    plugin: str  # "kubernetes" | "cache" | "forward" | "filter" | "hosts" | "chaos" | "" (server)
    do: bool  # the DO bit was set (coredns_dns_do_requests_total)
    denial: bool  # NXDOMAIN or NODATA (cache type "denial")

    @property
    def path(self) -> str:
        """How the answer was made, in the words of the query log and the explainer."""
        if self.zone == DROPPED_ZONE:
            return "dropped"
        if self.plugin == PLUGIN_CLUSTER:
            return "cluster"
        if self.plugin == PLUGIN_CACHE:
            return "cache"
        if self.plugin == PLUGIN_FORWARD:
            return "upstream" if self.zone == "." else "stub"
        if self.plugin == PLUGIN_FILTER:
            return "filtered"
        if self.plugin == PLUGIN_HOSTS:
            return "hosts"
        if self.plugin == PLUGIN_CHAOS:
            return "chaos"
        return self.rcode.lower() or "unknown"


_UNCLASSIFIED_LABELS = SlotLabels(".", "other", "unknown", PLUGIN_SERVER, False, False)
_NOERROR, _FORMERR, _SERVFAIL, _NXDOMAIN, _NOTIMP, _REFUSED, _BADVERS = 0, 1, 2, 3, 4, 5, 16
_SERVER_RCODES = frozenset({_FORMERR, _NOTIMP, _REFUSED, _BADVERS})


class Slots:
    """Numbers the label combinations answers are counted under (1..255; 0 = unclassified).

    zones: every zone a query can be counted under, without trailing dot ("" is the root, always
    added); authoritative: the zones answered from the index (cluster zone, configured reverse
    zones); stub: the stub domains (their forwarded answers have path "stub").
    """

    __slots__ = ("zones", "authoritative", "stub", "labels", "_by_key", "overflow", "filtered")

    def __init__(self, zones: Iterable[str] = (), *, authoritative: Iterable[str] = (),
                 stub: Iterable[str] = ()) -> None:
        names = {z.strip(".").lower() for z in zones} | {""}
        self.zones: tuple[str, ...] = tuple(sorted(names, key=len, reverse=True))
        self.authoritative = frozenset(z.strip(".").lower() for z in authoritative)
        self.stub = frozenset(z.strip(".").lower() for z in stub)
        self.labels: list[SlotLabels] = [_UNCLASSIFIED_LABELS]
        self._by_key: dict[SlotLabels, int] = {}
        self.overflow = 0  # label combinations that found no free slot (counted as slot 0)
        # --filter-aaaa: the authority record of our filtered NODATA (cache.filter_soa), by which
        # `classify` tells it from an upstream's NODATA (plugin "filter"); b"": no filter
        self.filtered = b""

    def slot(self, labels: SlotLabels) -> int:
        n = self._by_key.get(labels)
        if n is None:
            if len(self.labels) >= 256:
                self.overflow += 1
                return UNCLASSIFIED
            n = len(self.labels)
            self.labels.append(labels)
            self._by_key[labels] = n
        return n

    def zone_of(self, qname: str) -> str:
        """The most specific configured zone containing qname (both lowercase, no trailing dot)."""
        for z in self.zones:
            if not z or qname == z or qname.endswith("." + z):
                return z
        return ""

    def dropped(self, proto_do: bool = False) -> int:
        return self.slot(SlotLabels(DROPPED_ZONE, "other", NO_RESPONSE, PLUGIN_SERVER, proto_do, False))

    def classify(self, response: bytes, plugin: str | None = None) -> int:
        """The slot of a response we send (or store). Never raises: unreadable means slot 0.

        plugin: who made it when the caller knows (a cache stamping its templates passes "cache");
        else inferred: server-level rcodes without AA are the server's, class CH is "chaos", names in an
        authoritative zone are the index's ("kubernetes"), any other AA answer is a hosts file's (an
        upstream's answer is stored and served with AA cleared), the rest was forwarded.
        """
        try:
            return self._classify(response, plugin)
        except (IndexError, ValueError):
            return UNCLASSIFIED

    def _classify(self, r: bytes, plugin: str | None) -> int:
        if len(r) < 12:
            return UNCLASSIFIED
        if r[4:6] == b"\x00\x00":  # header-only replies (FORMERR, NOTIMP, SERVFAIL after an error)
            return self.slot(SlotLabels(".", "other", rcode_label(r[3] & 0x0F), PLUGIN_SERVER, False, False))
        if r[4:6] != b"\x00\x01":
            return UNCLASSIFIED
        labels: list[str] = []
        pos = 12
        while True:
            n = r[pos]
            if n == 0:
                break
            if n > 63:
                return UNCLASSIFIED
            labels.append(r[pos + 1 : pos + 1 + n].decode("ascii", "replace").lower())
            pos += n + 1
        if pos + 5 > len(r):
            return UNCLASSIFIED
        qtype = (r[pos + 1] << 8) | r[pos + 2]
        rcode = r[3] & 0x0F
        do = False
        # a trailing OPT without options (what we and most servers send): extended rcode and DO
        if r[10:12] != b"\x00\x00" and len(r) >= 11 and r[-11] == 0 and r[-10:-8] == b"\x00\x29" \
                and r[-2:] == b"\x00\x00":
            rcode |= r[-6] << 4
            do = bool(r[-4] & 0x80)
        zone = self.zone_of(".".join(labels))
        aa = bool(r[2] & 0x04)
        if plugin is None:
            if self.filtered and qtype == 28 and rcode == _NOERROR and r[6:10] == b"\x00\x00\x00\x01" \
                    and r.startswith(self.filtered, pos + 5):
                plugin = PLUGIN_FILTER
            elif rcode in _SERVER_RCODES and not aa:
                plugin = PLUGIN_SERVER
            elif r[pos + 3:pos + 5] == b"\x00\x03":  # class CH: ours (nothing of class CH is forwarded)
                plugin = PLUGIN_CHAOS
            elif zone in self.authoritative and (aa or rcode == _SERVFAIL):
                plugin = PLUGIN_CLUSTER
            elif aa:  # authoritative outside the index's zones: a hosts file (forwarded answers lose AA: cache)
                plugin = PLUGIN_HOSTS
            else:
                plugin = PLUGIN_FORWARD
        denial = rcode == _NXDOMAIN or (rcode == _NOERROR and r[6:8] == b"\x00\x00")
        return self.slot(SlotLabels(zone_label(zone), type_label(qtype), rcode_label(rcode), plugin, do, denial))

    def stamp(self, template: bytes, plugin: str | None = None) -> bytes:
        """The template with its slot in byte 0 (the hit path's counter index)."""
        return bytes((self.classify(template, plugin),)) + template[1:]


# ----------------------------------------------------------------------------------------------
# Plain counters the parts keep


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


# ----------------------------------------------------------------------------------------------
# One scrape


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
                lab = labels[slot] if slot < len(labels) else _UNCLASSIFIED_LABELS
                total += n
                by_proto[proto] += n
                by_type[lab.type] = by_type.get(lab.type, 0) + n
                by_path[lab.path] = by_path.get(lab.path, 0) + n
                if lab.rcode:
                    by_rcode[lab.rcode] = by_rcode.get(lab.rcode, 0) + n
    return Totals(total, by_rcode, by_type, by_proto, by_path)


# ----------------------------------------------------------------------------------------------
# The Collector


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


class _Families:
    """Metric families by name, created on first use, in declaration order."""

    def __init__(self) -> None:
        self.out: dict[str, Metric] = {}

    def _family(self, cls: type[_M], name: str, doc: str, labels: Sequence[str]) -> _M:
        fam = self.out.get(name)
        if fam is None:
            fam = self.out[name] = cls(name, doc, labels=labels)
        assert isinstance(fam, cls), f"{name} declared twice with different types"
        return fam

    def counter(self, name: str, doc: str, labels: Sequence[str]) -> CounterMetricFamily:
        from prometheus_client.core import CounterMetricFamily

        return self._family(CounterMetricFamily, name, doc, labels)

    def gauge(self, name: str, doc: str, labels: Sequence[str]) -> GaugeMetricFamily:
        from prometheus_client.core import GaugeMetricFamily

        return self._family(GaugeMetricFamily, name, doc, labels)

    def histogram(self, name: str, doc: str, labels: Sequence[str]) -> HistogramMetricFamily:
        from prometheus_client.core import HistogramMetricFamily

        return self._family(HistogramMetricFamily, name, doc, labels)

    def scalars(self, section: Mapping[str, Any], specs: Iterable[tuple[str, str, str, str]]) -> None:
        """Unlabelled gauges and counters from a section: (key, "gauge" | "counter", name, doc) each."""
        for key, kind, name, doc in specs:
            v = _num(section.get(key))
            if v is not None:
                fam = self.gauge(name, doc, []) if kind == "gauge" else self.counter(_strip_total(name), doc, [])
                fam.add_metric([], v)


UPSTREAM_CONFIG_SCALARS = (
    ("reloads", "counter", "nodedns_upstream_config_reloads_total",
     "Upstream config files (resolv.conf, the kube-dns ConfigMap) read again and applied."),
    ("errors", "counter", "nodedns_upstream_config_errors_total",
     "Upstream config files found unusable (not UTF-8, not JSON, no nameserver, unreadable); each bad content "
     "once. The previous config stays in use."),
    ("invalid", "gauge", "nodedns_upstream_config_invalid",
     "1 while the upstream config files on disk cannot be used and the previous config is in use."),
)


HOST_RESOLV_CONF_SCALARS = (
    ("changes", "counter", "nodedns_host_resolv_conf_changes_total",
     "Times the node's resolv.conf (--host-resolv-conf) changed and was taken up."),
    ("errors", "counter", "nodedns_host_resolv_conf_errors_total",
     "Problems with the node's resolv.conf, each once: unreadable (the last text is kept), or a text the kubelet "
     "cannot form Pod DNS from."),
)


def _strip_total(name: str) -> str:
    # prometheus_client appends _total to counter samples itself
    return name[: -len("_total")] if name.endswith("_total") else name


class Collector:
    """A prometheus_client collector that reads one `Scrape` per collection."""

    def __init__(self, scrape: Callable[[], Scrape]) -> None:
        self.scrape = scrape

    def collect(self) -> Iterator[Metric]:
        s = self.scrape()
        f = _Families()
        self._build(f, s)
        self._dns(f, s)
        self._cluster_cache(f, s)
        self._filter_aaaa(f, s)
        self._hosts(f, s)
        self._index(f, s)
        self._sections(f, s)
        yield from f.out.values()

    # -- process ---------------------------------------------------------------------------

    def _build(self, f: _Families, s: Scrape) -> None:
        f.gauge("coredns_build_info", "A metric with a constant '1' value labeled by version, revision, and "
                "goversion from which CoreDNS was built (nodedns: goversion holds the Python version).",
                ["version", "revision", "goversion"]).add_metric(
            [s.version, "", f"python{platform.python_version()}"], 1.0)
        f.counter(_strip_total("coredns_panics_total"), "A metrics that counts the number of panics "
                  "(nodedns: unexpected exceptions while answering a query).", []).add_metric([], s.panics)
        f.gauge("nodedns_ready", "1 when /readyz answers 200.", []).add_metric([], float(s.ready))
        f.gauge("nodedns_listeners_alive", "1 when every DNS listener is open.", []).add_metric([], float(s.alive))
        errs = f.counter(_strip_total("nodedns_errors_total"), "Errors by kind (logged consolidated, at most "
                         "two lines a minute per kind).", ["kind"])
        for kind, n in sorted(s.errors.items()):
            errs.add_metric([kind], n)
        f.counter(_strip_total("nodedns_metric_slots_overflow_total"), "Answers counted as unclassified "
                  "because all 255 label slots were taken.", []).add_metric([], s.slots.overflow)

    # -- DNS traffic -----------------------------------------------------------------------

    def _dns(self, f: _Families, s: Scrape) -> None:
        req = f.counter(_strip_total("coredns_dns_requests_total"),
                        "Counter of DNS requests made per zone, protocol and family.",
                        ["server", "zone", "view", "proto", "family", "type"])
        resp = f.counter(_strip_total("coredns_dns_responses_total"), "Counter of response status codes.",
                         ["server", "zone", "view", "rcode", "plugin"])
        do = f.counter(_strip_total("coredns_dns_do_requests_total"),
                       "Counter of DNS requests with DO bit set per zone.", ["server", "zone", "view"])
        dur = f.histogram("coredns_dns_request_duration_seconds",
                          "Histogram of the time (in seconds) each request took per zone (nodedns: answers "
                          "made on the slow path; hit-path answers are counted, not timed).",
                          ["server", "zone", "view"])
        hits = f.counter(_strip_total("nodedns_hit_path_answers_total"),
                         "Answers sent by the UDP hit path (stored answer, no parsing).", ["server"])
        tcp_open = f.gauge("nodedns_tcp_connections_open", "Open TCP client connections.", ["server"])
        tcp_acc = f.counter(_strip_total("nodedns_tcp_connections_total"), "TCP client connections accepted.",
                            ["server"])
        tcp_ref = f.counter(_strip_total("nodedns_tcp_refused_total"),
                            "TCP client connections refused: at --tcp-max-connections (reason max_connections) or "
                            "at --tcp-max-connections-per-client (reason per_client).", ["server", "reason"])
        tcp_abort = f.counter(_strip_total("nodedns_tcp_aborted_total"),
                              "TCP client connections reset: answers not taken by the idle timeout (reason "
                              "not_reading), the largest holder of answers unsent when the process holds more "
                              "than 8 MiB of them (reason owed), or at --tcp-max-connections to make room for a client "
                              "holding fewer (reason evicted).",
                              ["server", "reason"])
        labels = s.slots.labels
        for ls in s.listeners:
            requests: dict[tuple[str, ...], int] = {}
            responses: dict[tuple[str, ...], int] = {}
            dos: dict[str, int] = {}
            for proto, counts in ls.by_proto():
                for slot, n in enumerate(counts):
                    if not n:
                        continue
                    lab = labels[slot] if slot < len(labels) else _UNCLASSIFIED_LABELS
                    k = (lab.zone, proto, lab.type)
                    requests[k] = requests.get(k, 0) + n
                    if lab.rcode:
                        r = (lab.zone, lab.rcode, lab.plugin)
                        responses[r] = responses.get(r, 0) + n
                    if lab.do:
                        dos[lab.zone] = dos.get(lab.zone, 0) + n
            for (zone, proto, qtype), n in sorted(requests.items()):
                req.add_metric([ls.server, zone, "", proto, ls.family, qtype], n)
            for (zone, rcode, plugin), n in sorted(responses.items()):
                resp.add_metric([ls.server, zone, "", rcode, plugin], n)
            for zone, n in sorted(dos.items()):
                do.add_metric([ls.server, zone, ""], n)
            for zone, h in sorted(ls.latency.items()):
                dur.add_metric([ls.server, zone, ""], h.cumulative(), h.sum)
            hits.add_metric([ls.server], sum(ls.udp_hit))
            tcp_open.add_metric([ls.server], ls.tcp_open)
            tcp_acc.add_metric([ls.server], ls.tcp_accepted)
            tcp_ref.add_metric([ls.server, "max_connections"], ls.tcp_refused)
            tcp_ref.add_metric([ls.server, "per_client"], ls.tcp_refused_client)
            tcp_abort.add_metric([ls.server, "not_reading"], ls.tcp_aborted_unread)
            tcp_abort.add_metric([ls.server, "owed"], ls.tcp_aborted_owed)
            tcp_abort.add_metric([ls.server, "evicted"], ls.tcp_aborted_evicted)

    # -- caches ----------------------------------------------------------------------------

    def _primary_server(self, s: Scrape) -> str:
        return s.listeners[0].server if s.listeners else ""

    def _cache_families(self, f: _Families) -> dict[str, Any]:
        return {
            "entries": f.gauge("coredns_cache_entries", "The number of elements in the cache.",
                               ["server", "type", "zones", "view"]),
            "requests": f.counter(_strip_total("coredns_cache_requests_total"), "The count of cache requests.",
                                  ["server", "zones", "view"]),
            "hits": f.counter(_strip_total("coredns_cache_hits_total"), "The count of cache hits.",
                              ["server", "type", "zones", "view"]),
            "misses": f.counter(_strip_total("coredns_cache_misses_total"), "The count of cache misses. "
                                "Deprecated, derive misses from cache hits/requests counters.",
                                ["server", "zones", "view"]),
            "prefetch": f.counter(_strip_total("coredns_cache_prefetch_total"),
                                  "The number of times the cache has prefetched a cached item.",
                                  ["server", "zones", "view"]),
            "served_stale": f.counter(_strip_total("coredns_cache_served_stale_total"),
                                      "The number of requests served from stale cache entries.",
                                      ["server", "zones", "view"]),
            "evictions": f.counter(_strip_total("coredns_cache_evictions_total"), "The count of cache evictions.",
                                   ["server", "type", "zones", "view"]),
            "drops": f.counter(_strip_total("coredns_cache_drops_total"),
                               "The number responses that are not cached, because the reply is malformed.",
                               ["server", "zones", "view"]),
        }

    def _cluster_cache(self, f: _Families, s: Scrape) -> None:
        c = s.cluster_cache
        if c is None:
            return
        fam = self._cache_families(f)
        server = self._primary_server(s)
        fam["entries"].add_metric([server, "success", c.zones, ""], c.entries_success)
        fam["entries"].add_metric([server, "denial", c.zones, ""], c.entries_denial)
        fam["hits"].add_metric([server, "success", c.zones, ""], c.hits_success)
        fam["hits"].add_metric([server, "denial", c.zones, ""], c.hits_denial)
        fam["misses"].add_metric([server, c.zones, ""], c.misses)
        fam["requests"].add_metric([server, c.zones, ""], c.hits_success + c.hits_denial + c.misses)
        fam["evictions"].add_metric([server, "success", c.zones, ""], c.evictions)
        f.counter(_strip_total("nodedns_cluster_answers_clears_total"),
                  "Times the stored cluster answers were dropped because the index changed.", []).add_metric(
            [], c.clears)

    def _forward_cache(self, f: _Families, s: Scrape, section: Mapping[str, Any]) -> None:
        caches = section.get("caches")
        if not isinstance(caches, list):
            return
        fam = self._cache_families(f)
        server = self._primary_server(s)
        for c in caches:
            if not isinstance(c, Mapping):
                continue
            zones = str(c.get("zones", "."))
            for key in ("entries", "hits", "evictions"):
                by_type = c.get(key)
                if isinstance(by_type, Mapping):
                    for t in ("success", "denial"):
                        v = _num(by_type.get(t))
                        if v is not None:
                            fam[key].add_metric([server, t, zones, ""], v)
            for key in ("requests", "misses", "prefetch", "served_stale", "drops"):
                v = _num(c.get(key))
                if v is not None:
                    fam[key].add_metric([server, zones, ""], v)
            f.scalars(c, (
                ("bytes", "gauge", "nodedns_cache_bytes",
                 "Bytes the forward cache holds (stale answers included), against its budget."),
                ("max_bytes", "gauge", "nodedns_cache_max_bytes",
                 "The forward cache's byte budget (--cache-max-bytes; summed over the processes that answer)."),
                ("too_large", "counter", "nodedns_cache_too_large_total",
                 "Forwarded answers served but not stored: over the size an entry may have."),
                ("stale_nxdomain_served", "counter", "nodedns_stale_nxdomain_served_total",
                 "Cached positive answers served over an upstream's NXDOMAIN or NODATA (--stale-nxdomain)."),
                ("prefetch_deferred", "counter", "nodedns_cache_prefetch_deferred_total",
                 "Refreshes put off to the entry's next query: the event-loop turn had started its share."),
            ))

    def _filter_aaaa(self, f: _Families, s: Scrape) -> None:
        """--filter-aaaa: the NODATAs made for forwarded AAAA questions (0 with the filter off), and
        whether it filters now."""
        section = s.sections.get("filter_aaaa") or {}
        f.counter(_strip_total("nodedns_filtered_aaaa_total"), "Forwarded AAAA questions answered NODATA here "
                  "without asking upstream (--filter-aaaa).", []).add_metric([], _num(section.get("filtered")) or 0.0)
        f.gauge("nodedns_filter_aaaa_active", "1 while --filter-aaaa filters (on, or auto finding no IPv6).",
                []).add_metric([], 1.0 if section.get("filtering") else 0.0)

    def _hosts(self, f: _Families, s: Scrape) -> None:
        """--hosts: the answers made from the files (0 without --hosts), and the (address, name) entries in use."""
        section = s.sections.get("hosts") or {}
        f.counter(_strip_total("nodedns_hosts_answers_total"), "Queries answered from the --hosts files.",
                  []).add_metric([], _num(section.get("answers")) or 0.0)
        f.gauge("nodedns_hosts_entries", "Address and name pairs in use from the --hosts files.",
                []).add_metric([], _num(section.get("entries")) or 0.0)

    # -- index and the parts ---------------------------------------------------------------

    def _index(self, f: _Families, s: Scrape) -> None:
        ix = s.index
        objs = f.gauge("nodedns_index_objects", "Objects in the cluster index by kind.", ["kind"])
        counts = ix.get("counts")
        if isinstance(counts, Mapping):
            for kind, n in sorted(counts.items()):
                objs.add_metric([str(kind)], float(n))
        for key, name, doc in (
            ("generation", "nodedns_index_generation", "Index generation: moves on every effective change."),
            ("synced", "nodedns_index_synced", "1 once the index has completed its first full sync."),
            ("seconds_since_change", "nodedns_index_seconds_since_change",
             "Seconds since the index last changed."),
        ):
            v = _num(ix.get(key))
            if v is not None:
                f.gauge(name, doc, []).add_metric([], v)
        v = _num(ix.get("skipped"))
        if v is not None:
            f.counter(_strip_total("nodedns_index_skipped_objects_total"),
                      "Invalid Kubernetes objects skipped.", []).add_metric([], v)
        unusable = ix.get("unusable_names")
        if isinstance(unusable, Mapping):
            fam = f.gauge("nodedns_index_unusable_names", "Objects kept whose name field cannot be a DNS name (a "
                          "Service's spec.externalName): they answer as if the field were empty (NXDOMAIN).",
                          ["field"])
            for field_name, n in sorted(unusable.items()):
                v = _num(n)
                if v is not None:
                    fam.add_metric([str(field_name)], v)

    def _sections(self, f: _Families, s: Scrape) -> None:
        """Each provider section the scrape carries, through its family builder."""
        builders: tuple[tuple[str, Callable[[Mapping[str, Any]], None]], ...] = (
            ("sync", lambda section: self._sync(f, section)),
            ("cache", lambda section: self._forward_cache(f, s, section)),
            ("upstream", lambda section: self._upstream(f, section)),
            ("upstream_config", lambda section: f.scalars(section, UPSTREAM_CONFIG_SCALARS)),
            ("host_resolv_conf", lambda section: f.scalars(section, HOST_RESOLV_CONF_SCALARS)),
            ("node", lambda section: self._node(f, section)),
            ("workers", lambda section: self._workers(f, section)),
            ("autopath", lambda section: self._autopath(f, s, section)),
            ("limits", lambda section: self._limits(f, section)),
            ("http", lambda section: self._http(f, section)),
            ("insight", lambda section: self._insight(f, section)),
            ("event_loop", lambda section: self._event_loop(f, section)),
            ("shadow", lambda section: self._shadow(f, section)),
        )
        for name, build in builders:
            section = s.sections.get(name)
            if section is not None:
                build(section)

    def _event_loop(self, f: _Families, section: Mapping[str, Any]) -> None:
        lag = f.histogram("nodedns_event_loop_lag_seconds", "How late each turn of the event loop ran (a timer "
                          "armed every 10 ms: the time other work held the loop past its due time), by process.",
                          ["process"])
        longest = f.gauge("nodedns_event_loop_longest_stall_seconds", "The longest event-loop lag in the last "
                          "minute, by process.", ["process"])
        stalls = f.counter(_strip_total("nodedns_event_loop_stalls_total"), "Event-loop turns later than 2 ms, by "
                           "process.", ["process"])
        procs = section.get("processes")
        for p in procs if isinstance(procs, list) else ():
            if not isinstance(p, Mapping):
                continue
            name = str(p.get("process", ""))
            h = p.get("lag")
            if isinstance(h, Histogram):
                lag.add_metric([name], h.cumulative(), h.sum)
            for key, fam in (("longest_last_minute_seconds", longest), ("stalls", stalls)):
                v = _num(p.get(key))
                if v is not None:
                    fam.add_metric([name], v)

    def _autopath(self, f: _Families, s: Scrape, section: Mapping[str, Any]) -> None:
        v = _num(section.get("success"))
        if v is not None:
            f.counter(_strip_total("coredns_autopath_success_total"), "Counter of requests that did autopath.",
                      ["server"]).add_metric([self._primary_server(s)], v)
        walks = section.get("walks")
        if isinstance(walks, Mapping):
            fam = f.counter(_strip_total("nodedns_autopath_walks_total"),
                            "Server-side search-list walks by result: as_asked (the name as asked exists), "
                            "searched (a later name of the search list answered), not_found, gave_up (an error on "
                            "the way: the plain answer).",
                            ["result"])
            for result, n in sorted(walks.items()):
                w = _num(n)
                if w is not None:
                    fam.add_metric([str(result)], w)
        v = _num(section.get("queries_saved"))
        if v is not None:
            f.counter(_strip_total("nodedns_autopath_queries_saved_total"),
                      "Queries the clients did not send because a walk answered for them.", []).add_metric([], v)

    def _shadow(self, f: _Families, section: Mapping[str, Any]) -> None:
        """`nodedns shadow`: its answers against the node's DNS, by result and by reason."""
        for key, name, label, doc in (
            ("answers", "nodedns_shadow_answers_total", "result", "Queries the shadow judged, by result: match, "
             "mismatch, known (a documented difference), unknown (not judged)."),
            ("mismatches", "nodedns_shadow_mismatches_total", "reason", "Answers of the node's DNS that differ "
             "from nodedns's, by reason."),
            ("known", "nodedns_shadow_known_differences_total", "reason", "Documented differences (a propagation "
             "race, CoreDNS quirks), by reason: not mismatches."),
            ("dropped", "nodedns_shadow_dropped_total", "reason", "Captured queries not judged, to stay within "
             "bounds, by reason: rate, pending, queue, kernel."),
        ):
            counts = section.get(key)
            fam = f.counter(_strip_total(name), doc, [label])
            if isinstance(counts, Mapping):
                for what, n in sorted(counts.items()):
                    v = _num(n)
                    if v is not None:
                        fam.add_metric([str(what)], v)
        v = _num(section.get("pending"))
        if v is not None:
            f.gauge("nodedns_shadow_pending", "Captured queries waiting for the node's DNS to answer.",
                    []).add_metric([], v)

    def _insight(self, f: _Families, section: Mapping[str, Any]) -> None:
        namespaces = section.get("namespaces")
        if not isinstance(namespaces, Mapping):
            return
        queries = f.counter(_strip_total("nodedns_namespace_queries_total"),
                            "Answers to the Pods of this node by namespace and rcode (per-Pod insight; the "
                            "host-network and unknown clients as \"(host-network)\" and \"(unknown)\").",
                            ["namespace", "rcode"])
        misses = f.counter(_strip_total("nodedns_namespace_search_misses_total"),
                           "NXDOMAIN answers that the same client then asked with another suffix of its search list "
                           "(the ndots:5 amplification), by namespace.", ["namespace"])
        for ns, figures in sorted(namespaces.items()):
            if not isinstance(figures, Mapping):
                continue
            by_rcode = figures.get("queries")
            if isinstance(by_rcode, Mapping):
                for rcode, n in sorted(by_rcode.items()):
                    v = _num(n)
                    if v is not None:
                        queries.add_metric([str(ns), str(rcode)], v)
            v = _num(figures.get("search_misses"))
            if v is not None:
                misses.add_metric([str(ns)], v)

    def _limits(self, f: _Families, section: Mapping[str, Any]) -> None:
        acl = section.get("allow_from")
        if isinstance(acl, Mapping):
            v = _num(acl.get("refused"))
            if v is not None:
                f.counter(_strip_total("nodedns_refused_by_acl_total"),
                          "Queries answered REFUSED because the client is outside the allow list (--allow-from).",
                          []).add_metric([], v)
            if isinstance(acl.get("mode"), str):
                f.gauge("nodedns_acl_open", "1 while the default allow list admits every client (the node's pod "
                        "CIDR is not known and no --allow-from is given).", []).add_metric(
                    [], float(acl.get("mode") == "open"))
        rl = section.get("rate_limit")
        if isinstance(rl, Mapping):
            fam = f.counter(_strip_total("nodedns_rate_limited_total"),
                            "UDP queries over a client's --rate-limit: dropped, or answered TC=1 (slip).", ["action"])
            for key, action in (("dropped", "drop"), ("slipped", "slip")):
                v = _num(rl.get(key))
                if v is not None:
                    fam.add_metric([action], v)
            f.scalars(rl, (
                ("clients", "gauge", "nodedns_rate_limit_clients", "Clients in the rate limiter's table this second."),
                ("table_full", "counter", "nodedns_rate_limit_table_full_total",
                 "Queries of new clients that found the rate limiter's table full (they share one budget)."),
            ))
        pending = section.get("pending")
        if isinstance(pending, Mapping):
            f.scalars(pending, (
                ("now", "gauge", "nodedns_pending_queries", "Client queries waiting on the network (upstreams)."),
                ("refused", "counter", "nodedns_pending_refused_total",
                 "Queries answered REFUSED because --max-pending queries were already waiting."),
            ))
        share = section.get("upstream_share")
        if isinstance(share, Mapping):
            f.scalars(share, (
                ("max", "gauge", "nodedns_upstream_share_max",
                 "New upstream queries one client may have in flight (an eighth of --max-concurrent, at least 16)."),
                ("refused", "counter", "nodedns_upstream_share_refused_total",
                 "Queries answered REFUSED because their client already held its share of the upstream queries "
                 "in flight."),
                ("clients", "gauge", "nodedns_upstream_share_clients",
                 "Clients with upstream queries in flight on their behalf."),
            ))

    def _http(self, f: _Families, section: Mapping[str, Any]) -> None:
        listeners = section.get("listeners")
        if isinstance(listeners, list):
            up = f.gauge("nodedns_http_listening", "1 while the HTTP listener (status, debug) serves.", ["listener"])
            open_ = f.gauge("nodedns_http_connections_open", "Open HTTP connections.", ["listener"])
            refused = f.counter(_strip_total("nodedns_http_connections_refused_total"),
                                "HTTP connections closed at once: over the listener's cap or the client's.",
                                ["listener"])
            requests = f.counter(_strip_total("nodedns_http_requests_total"), "HTTP requests received.", ["listener"])
            rejected = f.counter(_strip_total("nodedns_http_rejected_total"),
                                 "HTTP requests and replies cut short: busy (over the pace, 503), too_large (413), "
                                 "body_timeout (408), stalled (a reply not read, aborted), malformed (a request "
                                 "aiohttp cannot parse: 400, logged once a minute).", ["listener", "reason"])
            probes = f.counter(_strip_total("nodedns_http_probes_over_cap_total"),
                               "GET /healthz answered on a connection over the caps (liveness is never queued "
                               "behind the HTTP load).", ["listener"])
            for ls in listeners:
                if not isinstance(ls, Mapping):
                    continue
                name = str(ls.get("listener", ""))
                up.add_metric([name], float(bool(ls.get("listening"))))
                for fam, key in ((open_, "open"), (refused, "refused"), (requests, "requests")):
                    v = _num(ls.get(key))
                    if v is not None:
                        fam.add_metric([name], v)
                v = _num(ls.get("probes_over_cap"))
                if v is not None:
                    probes.add_metric([name], v)
                for key, reason in (("busy", "busy"), ("too_large", "too_large"), ("body_timeouts", "body_timeout"),
                                    ("stalled", "stalled"), ("malformed", "malformed")):
                    v = _num(ls.get(key))
                    if v is not None:
                        rejected.add_metric([name, reason], v)
        renders = section.get("renders")
        if isinstance(renders, Mapping):
            fam = f.counter(_strip_total("nodedns_http_renders_total"),
                            "Renderings of /metrics and /status (a flood shares one every 250 ms).", ["route"])
            for route, n in sorted(renders.items()):
                v = _num(n)
                if v is not None:
                    fam.add_metric([f"/{route}"], v)
        f.scalars(section, (
            ("explains_busy", "counter", "nodedns_explain_busy_total",
             "Explainer requests answered 503: others held every turn for too long."),
        ))

    def _sync(self, f: _Families, section: Mapping[str, Any]) -> None:
        v = _num(section.get("stale_seconds"))
        if v is not None:
            f.gauge("nodedns_sync_stale_seconds", "0 while every watch stream is open, else seconds since the "
                    "API server last answered for the resource out of touch longest.", []).add_metric([], v)
        resources = section.get("resources")
        if not isinstance(resources, Mapping):
            return
        specs = (
            ("synced", "gauge", "nodedns_sync_synced", "1 once the resource has been listed completely."),
            ("forbidden", "gauge", "nodedns_sync_resource_forbidden",
             "1 while the API server refuses (403) or does not serve (404) the resource; an optional one "
             "(this node's Node and Pods, ServiceImports) is synced without, a required one keeps the agent "
             "unready."),
            ("connected", "gauge", "nodedns_watch_connected", "1 while the resource's watch stream is open."),
            ("seconds_since_event", "gauge", "nodedns_sync_seconds_since_last_event",
             "Seconds since the last watch event (or bookmark) of the resource."),
            ("watch_restarts", "counter", "nodedns_watch_restarts_total", "Watch streams restarted."),
            ("relists", "counter", "nodedns_relists_total", "Full relists (e.g. after 410 Gone)."),
            ("events", "counter", "nodedns_watch_events_total", "Watch events applied."),
            ("errors", "counter", "nodedns_watch_errors_total", "Errors while listing or watching."),
        )
        for key, kind, name, doc in specs:
            fam: Any = (f.gauge(name, doc, ["resource"]) if kind == "gauge"
                        else f.counter(_strip_total(name), doc, ["resource"]))
            for resource, st in sorted(resources.items()):
                if isinstance(st, Mapping):
                    v = _num(st.get(key))
                    if v is not None:
                        fam.add_metric([str(resource)], v)

    def _upstream(self, f: _Families, section: Mapping[str, Any]) -> None:
        healthy = f.gauge("nodedns_upstream_healthy", "1 while the upstream passes its health checks.",
                          ["to", "zone"])
        dur = f.histogram("coredns_proxy_request_duration_seconds", "Histogram of the time each request took.",
                          ["proxy_name", "to", "rcode"])
        hc = f.counter(_strip_total("coredns_proxy_healthcheck_failures_total"),
                       "Counter of the number of failed healthchecks.", ["proxy_name", "to"])
        ch = f.counter(_strip_total("coredns_proxy_conn_cache_hits_total"),
                       "Counter of connection cache hits per upstream and protocol.", ["proxy_name", "to", "proto"])
        cm = f.counter(_strip_total("coredns_proxy_conn_cache_misses_total"),
                       "Counter of connection cache misses per upstream and protocol.",
                       ["proxy_name", "to", "proto"])
        ups = section.get("upstreams")
        loops = section.get("loops")
        if isinstance(loops, list):
            looping = {str(lp.get("zone")) for lp in loops if isinstance(lp, Mapping)}
            zones = {str(u.get("zone", ".")) for u in ups if isinstance(u, Mapping)} if isinstance(ups, list) else set()
            loop_fam = f.gauge("nodedns_forward_loop", "1 while our loop probe came back through the zone's upstreams: "
                          "names forwarded there get SERVFAIL.", ["zone"])
            for zone in sorted(zones | looping):
                loop_fam.add_metric([zone], 1.0 if zone in looping else 0.0)
        for u in ups if isinstance(ups, list) else []:
            if not isinstance(u, Mapping):
                continue
            to = str(u.get("to", ""))
            v = _num(u.get("healthy"))
            if v is not None:
                healthy.add_metric([to, str(u.get("zone", "."))], v)
            v = _num(u.get("healthcheck_failures"))
            if v is not None:
                hc.add_metric([PLUGIN_FORWARD, to], v)
            durations = u.get("duration")
            if isinstance(durations, Mapping):
                for rcode, h in sorted(durations.items()):
                    if isinstance(h, Histogram):
                        dur.add_metric([PLUGIN_FORWARD, to, str(rcode)], h.cumulative(), h.sum)
            conn = u.get("conn_cache")
            if isinstance(conn, Mapping):
                for proto, hm in sorted(conn.items()):
                    if isinstance(hm, Mapping):
                        for key, fam in (("hits", ch), ("misses", cm)):
                            v = _num(hm.get(key))
                            if v is not None:
                                fam.add_metric([PLUGIN_FORWARD, to, str(proto)], v)
        for key, name, doc in (
            ("healthcheck_broken", "coredns_forward_healthcheck_broken_total",
             "Counter of the number of complete failures of the healthchecks."),
            ("max_concurrent_rejects", "coredns_forward_max_concurrent_rejects_total",
             "Counter of the number of queries rejected because the concurrent queries were at maximum."),
        ):
            v = _num(section.get(key))
            if v is not None:
                f.counter(_strip_total(name), doc, []).add_metric([], v)

    def _node(self, f: _Families, section: Mapping[str, Any]) -> None:
        errs = section.get("setup_errors")
        if isinstance(errs, Mapping):
            fam = f.counter(_strip_total("nodedns_setup_errors_total"),
                            "Interface and firewall setup errors by type.", ["errortype"])
            for errortype, n in sorted(errs.items()):
                v = _num(n)
                if v is not None:
                    fam.add_metric([str(errortype)], v)
        iface = section.get("interface")
        if isinstance(iface, Mapping) and iface.get("ok") is not None:
            f.gauge("nodedns_interface_present", "1 while the interface carries every local IP.", []).add_metric(
                [], float(bool(iface.get("ok"))))
        f.scalars(section, (
            ("rules_installed", "gauge", "nodedns_rules_installed", "1 while every conntrack-bypass rule is in place."),
            ("added_back", "counter", "nodedns_node_added_back_total",
             "Addresses, links or rules found missing and put back by the reconcile loop."),
            ("reconciles", "counter", "nodedns_node_reconciles_total", "Rounds of the node reconcile loop."),
        ))


    def _workers(self, f: _Families, section: Mapping[str, Any]) -> None:
        v = _num(section.get("configured"))
        if v is not None:
            f.gauge("nodedns_workers", "Worker processes answering DNS (--workers).", []).add_metric([], v)
        specs = (
            ("up", "gauge", "nodedns_worker_up", "1 while the worker process runs."),
            ("serving", "gauge", "nodedns_worker_serving", "1 while the worker's listeners are bound and its index "
             "has synced."),
            ("cpu_seconds", "counter", "nodedns_worker_cpu_seconds_total", "CPU time (user + system) of the "
             "worker's current process."),
            ("rss_bytes", "gauge", "nodedns_worker_resident_memory_bytes", "Resident memory of the worker."),
        )
        workers = [w for w in section.get("workers") or () if isinstance(w, Mapping)]
        restarts = f.counter(_strip_total("nodedns_worker_restarts_total"), "Times the worker was started again: "
                             "after it died (reason died), after the supervisor killed it for a silent event loop "
                             "(reason silent) or for not taking its messages (reason stuck).", ["worker", "reason"])
        for w in workers:
            by_reason = w.get("restarts_by_reason")
            if isinstance(by_reason, Mapping):
                for reason, n in by_reason.items():
                    v = _num(n)
                    if v is not None:
                        restarts.add_metric([str(w.get("worker", "")), str(reason)], v)
            elif (total := _num(w.get("restarts"))) is not None:
                restarts.add_metric([str(w.get("worker", "")), "died"], total)
        for key, kind, name, doc in specs:
            fam: Any = f.gauge(name, doc, ["worker"]) if kind == "gauge" else f.counter(_strip_total(name), doc,
                                                                                        ["worker"])
            for w in workers:
                v = _num(w.get(key))
                if v is not None:
                    fam.add_metric([str(w.get("worker", ""))], v)


def registry(scrape: Callable[[], Scrape], *, process: bool = True) -> CollectorRegistry:
    """A private registry with our Collector (and the process collector: CPU, memory, fds)."""
    from prometheus_client.registry import CollectorRegistry

    reg = CollectorRegistry()
    reg.register(Collector(scrape))
    if process:
        from prometheus_client import ProcessCollector

        ProcessCollector(registry=reg)
    return reg


def render(reg: CollectorRegistry) -> bytes:
    """The Prometheus text exposition (format 0.0.4) of a registry."""
    from prometheus_client.exposition import generate_latest

    return generate_latest(reg)
