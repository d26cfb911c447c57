"""The metric families of the parts' provider sections (their `status()` mappings), one builder each.

The contract (which section holds which keys, and which metric each key becomes) is
nodedns.metrics.registry's docstring; the Collector there calls one builder here for each section a
scrape carries. A key missing or of the wrong type omits its metric, never the scrape.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from nodedns.metrics.counters import Histogram, Scrape
from nodedns.metrics.slots import PLUGIN_FORWARD

if TYPE_CHECKING:  # prometheus_client (~5 MB) is loaded by the process that renders /metrics, not by workers
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

_M = TypeVar("_M", "CounterMetricFamily", "GaugeMetricFamily", "HistogramMetricFamily")


def num(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


class Families:
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
            v = num(section.get(key))
            if v is not None:
                fam = self.gauge(name, doc, []) if kind == "gauge" else self.counter(strip_total(name), doc, [])
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


DNSTAP_SCALARS = (
    ("frames", "counter", "nodedns_dnstap_frames_total", "dnstap frames written to the collector (--dnstap)."),
    ("dropped", "counter", "nodedns_dnstap_dropped_total",
     "dnstap frames dropped because the collector was slow or absent (the queue full); no answer waits for it."),
    ("connected", "gauge", "nodedns_dnstap_connected", "1 while the dnstap collector is connected."),
    ("queued", "gauge", "nodedns_dnstap_queued_frames", "dnstap frames waiting for the collector."),
)


HOST_RESOLV_CONF_SCALARS = (
    ("changes", "counter", "nodedns_host_resolv_conf_changes_total",
     "Times the node's resolv.conf (--host-resolv-conf) changed and was taken up."),
    ("errors", "counter", "nodedns_host_resolv_conf_errors_total",
     "Problems with the node's resolv.conf, each once: unreadable (the last text is kept), or a text the kubelet "
     "cannot form Pod DNS from."),
)


def strip_total(name: str) -> str:
    # prometheus_client appends _total to counter samples itself
    return name[: -len("_total")] if name.endswith("_total") else name


def primary_server(s: Scrape) -> str:
    return s.listeners[0].server if s.listeners else ""


def cache_families(f: Families) -> dict[str, Any]:
    return {
        "entries": f.gauge("coredns_cache_entries", "The number of elements in the cache.",
                           ["server", "type", "zones", "view"]),
        "requests": f.counter(strip_total("coredns_cache_requests_total"), "The count of cache requests.",
                              ["server", "zones", "view"]),
        "hits": f.counter(strip_total("coredns_cache_hits_total"), "The count of cache hits.",
                          ["server", "type", "zones", "view"]),
        "misses": f.counter(strip_total("coredns_cache_misses_total"), "The count of cache misses. "
                            "Deprecated, derive misses from cache hits/requests counters.",
                            ["server", "zones", "view"]),
        "prefetch": f.counter(strip_total("coredns_cache_prefetch_total"),
                              "The number of times the cache has prefetched a cached item.",
                              ["server", "zones", "view"]),
        "served_stale": f.counter(strip_total("coredns_cache_served_stale_total"),
                                  "The number of requests served from stale cache entries.",
                                  ["server", "zones", "view"]),
        "evictions": f.counter(strip_total("coredns_cache_evictions_total"), "The count of cache evictions.",
                               ["server", "type", "zones", "view"]),
        "drops": f.counter(strip_total("coredns_cache_drops_total"),
                           "The number responses that are not cached, because the reply is malformed.",
                           ["server", "zones", "view"]),
    }


def forward_cache(f: Families, s: Scrape, section: Mapping[str, Any]) -> None:
    caches = section.get("caches")
    if not isinstance(caches, list):
        return
    fam = cache_families(f)
    server = primary_server(s)
    for c in caches:
        if not isinstance(c, Mapping):
            continue
        zones = str(c.get("zones", "."))
        for key in ("entries", "hits", "evictions"):
            by_type = c.get(key)
            if isinstance(by_type, Mapping):
                for t in ("success", "denial"):
                    v = num(by_type.get(t))
                    if v is not None:
                        fam[key].add_metric([server, t, zones, ""], v)
        for key in ("requests", "misses", "prefetch", "served_stale", "drops"):
            v = num(c.get(key))
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


def event_loop(f: Families, section: Mapping[str, Any]) -> None:
    lag = f.histogram("nodedns_event_loop_lag_seconds", "How late each turn of the event loop ran (a timer "
                      "armed every 10 ms: the time other work held the loop past its due time), by process.",
                      ["process"])
    longest = f.gauge("nodedns_event_loop_longest_stall_seconds", "The longest event-loop lag in the last "
                      "minute, by process.", ["process"])
    stalls = f.counter(strip_total("nodedns_event_loop_stalls_total"), "Event-loop turns later than 2 ms since "
                       "the process serves, by process.", ["process"])
    startup = f.gauge("nodedns_event_loop_startup_longest_stall_seconds", "The longest event-loop turn before the "
                      "process served (loading the index, binding), by process: not counted in the figures above.",
                      ["process"])
    procs = section.get("processes")
    for p in procs if isinstance(procs, list) else ():
        if not isinstance(p, Mapping):
            continue
        name = str(p.get("process", ""))
        h = p.get("lag")
        if isinstance(h, Histogram):
            lag.add_metric([name], h.cumulative(), h.sum)
        for key, fam in (("longest_last_minute_seconds", longest), ("stalls", stalls)):
            v = num(p.get(key))
            if v is not None:
                fam.add_metric([name], v)
        started = p.get("startup")
        v = num(started.get("longest_seconds")) if isinstance(started, Mapping) else None
        if v is not None:
            startup.add_metric([name], v)


def autopath(f: Families, s: Scrape, section: Mapping[str, Any]) -> None:
    v = num(section.get("success"))
    if v is not None:
        f.counter(strip_total("coredns_autopath_success_total"), "Counter of requests that did autopath.",
                  ["server"]).add_metric([primary_server(s)], v)
    walks = section.get("walks")
    if isinstance(walks, Mapping):
        fam = f.counter(strip_total("nodedns_autopath_walks_total"),
                        "Server-side search-list walks by result: as_asked (the name as asked exists), "
                        "searched (a later name of the search list answered), not_found, gave_up (an error on "
                        "the way: the plain answer).",
                        ["result"])
        for result, n in sorted(walks.items()):
            w = num(n)
            if w is not None:
                fam.add_metric([str(result)], w)
    v = num(section.get("queries_saved"))
    if v is not None:
        f.counter(strip_total("nodedns_autopath_queries_saved_total"),
                  "Queries the clients did not send because a walk answered for them.", []).add_metric([], v)


def shadow(f: Families, section: Mapping[str, Any]) -> None:
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
        fam = f.counter(strip_total(name), doc, [label])
        if isinstance(counts, Mapping):
            for what, n in sorted(counts.items()):
                v = num(n)
                if v is not None:
                    fam.add_metric([str(what)], v)
    v = num(section.get("pending"))
    if v is not None:
        f.gauge("nodedns_shadow_pending", "Captured queries waiting for the node's DNS to answer.",
                []).add_metric([], v)


def insight(f: Families, section: Mapping[str, Any]) -> None:
    namespaces = section.get("namespaces")
    if not isinstance(namespaces, Mapping):
        return
    queries = f.counter(strip_total("nodedns_namespace_queries_total"),
                        "Answers to the Pods of this node by namespace and rcode (per-Pod insight; the "
                        "host-network and unknown clients as \"(host-network)\" and \"(unknown)\").",
                        ["namespace", "rcode"])
    misses = f.counter(strip_total("nodedns_namespace_search_misses_total"),
                       "NXDOMAIN answers that the same client then asked with another suffix of its search list "
                       "(the ndots:5 amplification), by namespace.", ["namespace"])
    for ns, figures in sorted(namespaces.items()):
        if not isinstance(figures, Mapping):
            continue
        by_rcode = figures.get("queries")
        if isinstance(by_rcode, Mapping):
            for rcode, n in sorted(by_rcode.items()):
                v = num(n)
                if v is not None:
                    queries.add_metric([str(ns), str(rcode)], v)
        v = num(figures.get("search_misses"))
        if v is not None:
            misses.add_metric([str(ns)], v)


def limits(f: Families, section: Mapping[str, Any]) -> None:
    acl = section.get("allow_from")
    if isinstance(acl, Mapping):
        v = num(acl.get("refused"))
        if v is not None:
            f.counter(strip_total("nodedns_refused_by_acl_total"),
                      "Queries answered REFUSED because the client is outside the allow list (--allow-from).",
                      []).add_metric([], v)
        if isinstance(acl.get("mode"), str):
            f.gauge("nodedns_acl_open", "1 while the default allow list admits every client (the node's pod "
                    "CIDR is not known and no --allow-from is given).", []).add_metric(
                [], float(acl.get("mode") == "open"))
    rl = section.get("rate_limit")
    if isinstance(rl, Mapping):
        fam = f.counter(strip_total("nodedns_rate_limited_total"),
                        "UDP queries over a client's --rate-limit: dropped, or answered TC=1 (slip).", ["action"])
        for key, action in (("dropped", "drop"), ("slipped", "slip")):
            v = num(rl.get(key))
            if v is not None:
                fam.add_metric([action], v)
        f.scalars(rl, (
            ("clients", "gauge", "nodedns_rate_limit_clients", "Clients in the rate limiter's table this second."),
            ("table_full", "counter", "nodedns_rate_limit_table_full_total",
             "Queries of new clients that found the rate limiter's table full (they share one budget)."),
        ))
    ml = section.get("miss_limit")
    if isinstance(ml, Mapping):
        shed = ml.get("shed")
        if isinstance(shed, Mapping):
            fam = f.counter(strip_total("nodedns_misses_shed_total"),
                            "Misses (UDP and TCP) shed before the slow path: over their client's --miss-limit or "
                            "their namespace's --miss-limit-namespace.", ["budget"])
            for budget in ("client", "namespace"):
                v = num(shed.get(budget))
                if v is not None:
                    fam.add_metric([budget], v)
        fam = f.counter(strip_total("nodedns_misses_shed_replies_total"),
                        "What the shed misses got: over UDP TC=1 (slip) while the process had the capacity, else "
                        "dropped; over TCP REFUSED (refuse).", ["action"])
        for key, action in (("dropped", "drop"), ("slipped", "slip"), ("refused", "refuse")):
            v = num(ml.get(key))
            if v is not None:
                fam.add_metric([action], v)
    cap = section.get("shed_capacity")
    if isinstance(cap, Mapping):
        f.scalars(cap, (
            ("exhausted", "counter", "nodedns_shed_capacity_exhausted_total",
             "Queries over a budget dropped because this second's TC=1 replies were spent."),
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
            ("namespace_max", "gauge", "nodedns_upstream_namespace_share_max",
             "New upstream queries the Pods of one namespace on this node may have in flight together (a "
             "quarter of --max-concurrent, at least 16)."),
            ("namespace_refused", "counter", "nodedns_upstream_namespace_share_refused_total",
             "Queries answered REFUSED because their client's namespace already held its share of the upstream "
             "queries in flight."),
            ("namespaces", "gauge", "nodedns_upstream_share_namespaces",
             "Namespaces with upstream queries in flight on behalf of their Pods."),
        ))


def http(f: Families, section: Mapping[str, Any]) -> None:
    listeners = section.get("listeners")
    if isinstance(listeners, list):
        up = f.gauge("nodedns_http_listening", "1 while the HTTP listener (status, debug) serves.", ["listener"])
        open_ = f.gauge("nodedns_http_connections_open", "Open HTTP connections.", ["listener"])
        refused = f.counter(strip_total("nodedns_http_connections_refused_total"),
                            "HTTP connections closed at once: over the listener's cap or the client's.",
                            ["listener"])
        requests = f.counter(strip_total("nodedns_http_requests_total"), "HTTP requests received.", ["listener"])
        rejected = f.counter(strip_total("nodedns_http_rejected_total"),
                             "HTTP requests and replies cut short: busy (over the pace, 503), too_large (413), "
                             "body_timeout (408), stalled (a reply not read, aborted), malformed (a request "
                             "aiohttp cannot parse: 400, logged once a minute).", ["listener", "reason"])
        probes = f.counter(strip_total("nodedns_http_probes_over_cap_total"),
                           "GET /healthz answered on a connection over the caps (liveness is never queued "
                           "behind the HTTP load).", ["listener"])
        for ls in listeners:
            if not isinstance(ls, Mapping):
                continue
            name = str(ls.get("listener", ""))
            up.add_metric([name], float(bool(ls.get("listening"))))
            for fam, key in ((open_, "open"), (refused, "refused"), (requests, "requests")):
                v = num(ls.get(key))
                if v is not None:
                    fam.add_metric([name], v)
            v = num(ls.get("probes_over_cap"))
            if v is not None:
                probes.add_metric([name], v)
            for key, reason in (("busy", "busy"), ("too_large", "too_large"), ("body_timeouts", "body_timeout"),
                                ("stalled", "stalled"), ("malformed", "malformed")):
                v = num(ls.get(key))
                if v is not None:
                    rejected.add_metric([name, reason], v)
    renders = section.get("renders")
    if isinstance(renders, Mapping):
        fam = f.counter(strip_total("nodedns_http_renders_total"),
                        "Renderings of /metrics and /status (a flood shares one every 250 ms).", ["route"])
        for route, n in sorted(renders.items()):
            v = num(n)
            if v is not None:
                fam.add_metric([f"/{route}"], v)
    f.scalars(section, (
        ("explains_busy", "counter", "nodedns_explain_busy_total",
         "Explainer requests answered 503: others held every turn for too long."),
    ))


def sync(f: Families, section: Mapping[str, Any]) -> None:
    v = num(section.get("stale_seconds"))
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
                    else f.counter(strip_total(name), doc, ["resource"]))
        for resource, st in sorted(resources.items()):
            if isinstance(st, Mapping):
                v = num(st.get(key))
                if v is not None:
                    fam.add_metric([str(resource)], v)


def upstream(f: Families, section: Mapping[str, Any]) -> None:
    healthy = f.gauge("nodedns_upstream_healthy", "1 while the upstream passes its health checks.",
                      ["to", "zone"])
    dur = f.histogram("coredns_proxy_request_duration_seconds", "Histogram of the time each request took.",
                      ["proxy_name", "to", "rcode"])
    hc = f.counter(strip_total("coredns_proxy_healthcheck_failures_total"),
                   "Counter of the number of failed healthchecks.", ["proxy_name", "to"])
    ch = f.counter(strip_total("coredns_proxy_conn_cache_hits_total"),
                   "Counter of connection cache hits per upstream and protocol.", ["proxy_name", "to", "proto"])
    cm = f.counter(strip_total("coredns_proxy_conn_cache_misses_total"),
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
        v = num(u.get("healthy"))
        if v is not None:
            healthy.add_metric([to, str(u.get("zone", "."))], v)
        v = num(u.get("healthcheck_failures"))
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
                        v = num(hm.get(key))
                        if v is not None:
                            fam.add_metric([PLUGIN_FORWARD, to, str(proto)], v)
    zone_rows = section.get("zones")
    if isinstance(zone_rows, list):
        up_fam = f.gauge("nodedns_zone_up", "Per forwarded zone: 1 while some upstream of it is up, 0 while every one "
                         "is down (its names fail at once: stale or SERVFAIL).", ["zone"])
        state_fam = f.gauge("nodedns_zone_state", "Per forwarded zone: 1 for its state (up, degraded, down, loop).",
                            ["zone", "state"])
        infl = f.gauge("nodedns_zone_inflight", "Per forwarded zone: its upstream queries in flight.", ["zone"])
        cap = f.gauge("nodedns_zone_max_concurrent", "Per forwarded zone: its bound on upstream queries in flight.",
                      ["zone"])
        busy = f.counter(strip_total("nodedns_zone_max_concurrent_rejects_total"),
                         "Per forwarded zone: queries refused at its max-concurrent.", ["zone"])
        ff = f.counter(strip_total("nodedns_zone_failfast_total"),
                       "Per forwarded zone: queries failed at once because every upstream of it was down.", ["zone"])
        worst = ("up", "degraded", "down", "loop")  # --workers: the rows of one zone as one, its worst state
        merged: dict[str, dict[str, Any]] = {}
        for row in zone_rows:  # one row per configured zone: the labels are bounded by the config (256 zones)
            if not isinstance(row, Mapping):
                continue
            zone, state = str(row.get("zone", ".")), str(row.get("state", ""))
            m = merged.setdefault(zone, {"state": "up"})
            if state in worst and worst.index(state) > worst.index(m["state"]):
                m["state"] = state
            for key in ("inflight", "max_concurrent", "busy", "failfast"):
                v = num(row.get(key))
                if v is not None:
                    m[key] = m.get(key, 0.0) + v
        per_zone: tuple[tuple[str, Any], ...] = (("inflight", infl), ("max_concurrent", cap), ("busy", busy),
                                                  ("failfast", ff))
        for zone, m in merged.items():
            up_fam.add_metric([zone], 0.0 if m["state"] == "down" else 1.0)
            for st in worst:
                state_fam.add_metric([zone, st], 1.0 if st == m["state"] else 0.0)
            for key, zfam in per_zone:
                if key in m:
                    zfam.add_metric([zone], m[key])
    for key, name, doc in (
        ("healthcheck_broken", "coredns_forward_healthcheck_broken_total",
         "Counter of the number of complete failures of the healthchecks."),
        ("max_concurrent_rejects", "coredns_forward_max_concurrent_rejects_total",
         "Counter of the number of queries rejected because the concurrent queries were at maximum."),
    ):
        v = num(section.get(key))
        if v is not None:
            f.counter(strip_total(name), doc, []).add_metric([], v)


def node(f: Families, section: Mapping[str, Any]) -> None:
    errs = section.get("setup_errors")
    if isinstance(errs, Mapping):
        fam = f.counter(strip_total("nodedns_setup_errors_total"),
                        "Interface and firewall setup errors by type.", ["errortype"])
        for errortype, n in sorted(errs.items()):
            v = num(n)
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


def workers(f: Families, section: Mapping[str, Any]) -> None:
    v = num(section.get("configured"))
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
    restarts = f.counter(strip_total("nodedns_worker_restarts_total"), "Times the worker was started again: "
                         "after it died (reason died), after the supervisor killed it for a silent event loop "
                         "(reason silent) or for not taking its messages (reason stuck).", ["worker", "reason"])
    for w in workers:
        by_reason = w.get("restarts_by_reason")
        if isinstance(by_reason, Mapping):
            for reason, n in by_reason.items():
                v = num(n)
                if v is not None:
                    restarts.add_metric([str(w.get("worker", "")), str(reason)], v)
        elif (total := num(w.get("restarts"))) is not None:
            restarts.add_metric([str(w.get("worker", "")), "died"], total)
    for key, kind, name, doc in specs:
        fam: Any = f.gauge(name, doc, ["worker"]) if kind == "gauge" else f.counter(strip_total(name), doc,
                                                                                    ["worker"])
        for w in workers:
            v = num(w.get(key))
            if v is not None:
                fam.add_metric([str(w.get("worker", ""))], v)


def policy(f: Families, section: Mapping[str, Any]) -> None:
    """DNS policies: the decisions by action and deciding policy, the problems of each policy, the clients
    under one."""
    fam = f.counter(strip_total("nodedns_policy_decisions_total"), "Questions of Pods under a DNS policy, by the "
                    "action taken (allow, deny, local: answered from an RPZ feed's local data; audit: an audit "
                    "policy would have denied) and the policy that decided.",
                    ["action", "policy"])
    for d in section.get("decisions") or []:
        count = num(d.get("count"))
        if count is not None:
            fam.add_metric([str(d.get("action", "")), str(d.get("policy", ""))], count)
    problems = f.gauge("nodedns_policy_problems", "Parts of a DNS policy the agent cannot use (left out, the rest "
                       "applies; the log and /status say which).", ["policy"])
    for p in section.get("policies") or []:
        problems.add_metric([str(p.get("policy", ""))], float(len(p.get("problems") or [])))
    clients = num(section.get("clients"))
    if clients is not None:
        f.gauge("nodedns_policy_clients", "Client addresses of this node under a DNS policy.", []).add_metric(
            [], clients)
