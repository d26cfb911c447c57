"""The scrape-time Collector and the provider contract: one Scrape as metric families, and their Prometheus text.

Nothing on the DNS path calls prometheus_client. The transports and the parts keep plain counters
(nodedns.metrics.counters; answers counted by label slot, nodedns.metrics.slots); at scrape time
`Collector.collect()` asks the Agent for one `Scrape` snapshot and turns it into metric families with
CoreDNS's names and labels where CoreDNS measures the same thing, and `nodedns_*` names for what is
ours: the DNS traffic, the caches and the index here, each provider section through its builder in
nodedns.metrics.sections. `render(registry(scrape_fn))` gives the Prometheus text.

The provider contract (how a part shows up in /metrics and /status). A part registers with
`Agent.add_provider(section, part)`; `part.status()` returns a JSON-able mapping, read on the event
loop at scrape time (cheap: no I/O, no locks). Every key is optional; a missing one omits its metric.
`status()` may also hold an `unready` list of reasons, which makes /readyz answer 503.

    section "sync" (API watch: `apisync.KubeSync.status()`):
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
    section "policy" (DNS policies: `nodedns.policy.book.PolicyBook.status()`):
      {"policies": [{"policy": str, "kind": str, "mode": str, "rules": int, "pods": int, "problems": [str],
                     "rpz": {"configMap": str, "key": str, "state": str, ...} (a ClusterDNSPolicy with a feed)}],
       "clients": int, "decisions": [{"action": "allow" | "deny" | "local" | "audit", "policy": str, "count": int}],
       "denied": [{"pod": str, "policy": str, "rule": str, "count": int}] (/status only)}
      -> nodedns_policy_decisions_total{action,policy} (policy: the deciding policy's name, never a name
         asked), nodedns_policy_problems{policy}, nodedns_policy_clients
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
                      "gc_ms": {"genN": float}, "stack": [str]}],
                      "startup": {"ready": bool, "seconds": float, "longest_seconds": float, "stalls": int}}]}
      (every figure but `startup` counts from when the process serves)
      -> nodedns_event_loop_lag_seconds (histogram), nodedns_event_loop_longest_stall_seconds,
         nodedns_event_loop_stalls_total, nodedns_event_loop_startup_longest_stall_seconds {process}
    section "shadow" (`nodedns shadow` only: `shadow.agent.ShadowReport`, docs/shadow.md):
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

`Histogram` (CoreDNS's time buckets, nodedns.metrics.counters) is the type to keep latencies in; /status shows
it as count/sum/mean.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from nodedns.metrics import sections
from nodedns.metrics.counters import Scrape
from nodedns.metrics.sections import (
    HOST_RESOLV_CONF_SCALARS,
    UPSTREAM_CONFIG_SCALARS,
    Families,
    cache_families,
    num,
    primary_server,
    strip_total,
)
from nodedns.metrics.slots import UNCLASSIFIED_LABELS

if TYPE_CHECKING:  # prometheus_client (~5 MB) is loaded by the process that renders /metrics, not by workers
    from prometheus_client.core import Metric
    from prometheus_client.registry import CollectorRegistry

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Collector:
    """A prometheus_client collector that reads one `Scrape` per collection."""

    def __init__(self, scrape: Callable[[], Scrape]) -> None:
        self.scrape = scrape

    def collect(self) -> Iterator[Metric]:
        s = self.scrape()
        f = Families()
        self._build(f, s)
        self._dns(f, s)
        self._cluster_cache(f, s)
        self._filter_aaaa(f, s)
        self._hosts(f, s)
        self._index(f, s)
        self._sections(f, s)
        yield from f.out.values()

    # -- process ---------------------------------------------------------------------------

    def _build(self, f: Families, s: Scrape) -> None:
        f.gauge("coredns_build_info", "A metric with a constant '1' value labeled by version, revision, and "
                "goversion from which CoreDNS was built (nodedns: goversion holds the Python version).",
                ["version", "revision", "goversion"]).add_metric(
            [s.version, "", f"python{platform.python_version()}"], 1.0)
        f.counter(strip_total("coredns_panics_total"), "A metrics that counts the number of panics "
                  "(nodedns: unexpected exceptions while answering a query).", []).add_metric([], s.panics)
        f.gauge("nodedns_ready", "1 when /readyz answers 200.", []).add_metric([], float(s.ready))
        f.gauge("nodedns_listeners_alive", "1 when every DNS listener is open.", []).add_metric([], float(s.alive))
        errs = f.counter(strip_total("nodedns_errors_total"), "Errors by kind (logged consolidated, at most "
                         "two lines a minute per kind).", ["kind"])
        for kind, n in sorted(s.errors.items()):
            errs.add_metric([kind], n)
        f.counter(strip_total("nodedns_metric_slots_overflow_total"), "Answers counted as unclassified "
                  "because all 255 label slots were taken.", []).add_metric([], s.slots.overflow)

    # -- DNS traffic -----------------------------------------------------------------------

    def _dns(self, f: Families, s: Scrape) -> None:
        req = f.counter(strip_total("coredns_dns_requests_total"),
                        "Counter of DNS requests made per zone, protocol and family.",
                        ["server", "zone", "view", "proto", "family", "type"])
        resp = f.counter(strip_total("coredns_dns_responses_total"), "Counter of response status codes.",
                         ["server", "zone", "view", "rcode", "plugin"])
        do = f.counter(strip_total("coredns_dns_do_requests_total"),
                       "Counter of DNS requests with DO bit set per zone.", ["server", "zone", "view"])
        dur = f.histogram("coredns_dns_request_duration_seconds",
                          "Histogram of the time (in seconds) each request took per zone (nodedns: answers "
                          "made on the slow path; hit-path answers are counted, not timed).",
                          ["server", "zone", "view"])
        hits = f.counter(strip_total("nodedns_hit_path_answers_total"),
                         "Answers sent by the UDP hit path (stored answer, no parsing).", ["server"])
        tcp_open = f.gauge("nodedns_tcp_connections_open", "Open TCP client connections.", ["server"])
        tcp_acc = f.counter(strip_total("nodedns_tcp_connections_total"), "TCP client connections accepted.",
                            ["server"])
        tcp_ref = f.counter(strip_total("nodedns_tcp_refused_total"),
                            "TCP client connections refused: at --tcp-max-connections (reason max_connections) or "
                            "at --tcp-max-connections-per-client (reason per_client).", ["server", "reason"])
        tcp_abort = f.counter(strip_total("nodedns_tcp_aborted_total"),
                              "TCP client connections reset: answers not taken by the idle timeout (reason "
                              "not_reading), the largest holder of answers unsent when the process holds more "
                              "than 8 MiB of them (reason owed), or at --tcp-max-connections to make room for a client "
                              "holding fewer (reason evicted).",
                              ["server", "reason"])
        deferred = f.counter(strip_total("nodedns_udp_misses_deferred_total"),
                             "UDP misses that waited for a later event-loop turn (each turn spends a bounded time "
                             "on the slow path, so cached answers are not held behind a burst of misses), and "
                             "those dropped with 4096 already waiting (outcome dropped).", ["server", "outcome"])
        labels = s.slots.labels
        for ls in s.listeners:
            requests: dict[tuple[str, ...], int] = {}
            responses: dict[tuple[str, ...], int] = {}
            dos: dict[str, int] = {}
            for proto, counts in ls.by_proto():
                for slot, n in enumerate(counts):
                    if not n:
                        continue
                    lab = labels[slot] if slot < len(labels) else UNCLASSIFIED_LABELS
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
            deferred.add_metric([ls.server, "deferred"], ls.udp_deferred)
            deferred.add_metric([ls.server, "dropped"], ls.udp_deferred_dropped)

    # -- caches ----------------------------------------------------------------------------

    def _cluster_cache(self, f: Families, s: Scrape) -> None:
        c = s.cluster_cache
        if c is None:
            return
        fam = cache_families(f)
        server = primary_server(s)
        fam["entries"].add_metric([server, "success", c.zones, ""], c.entries_success)
        fam["entries"].add_metric([server, "denial", c.zones, ""], c.entries_denial)
        fam["hits"].add_metric([server, "success", c.zones, ""], c.hits_success)
        fam["hits"].add_metric([server, "denial", c.zones, ""], c.hits_denial)
        fam["misses"].add_metric([server, c.zones, ""], c.misses)
        fam["requests"].add_metric([server, c.zones, ""], c.hits_success + c.hits_denial + c.misses)
        fam["evictions"].add_metric([server, "success", c.zones, ""], c.evictions)
        f.counter(strip_total("nodedns_cluster_answers_clears_total"),
                  "Times the stored cluster answers were dropped because the index changed.", []).add_metric(
            [], c.clears)
        f.gauge("nodedns_cluster_answers_bytes", "Bytes the stored cluster answers are charged (summed over the "
                "processes that answer).", []).add_metric([], c.bytes)
        f.gauge("nodedns_cluster_answers_max_bytes", "The stored cluster answers' byte budget (the cluster share of "
                "--cache-max-bytes; summed over the processes that answer).", []).add_metric([], c.max_bytes)
        f.counter(strip_total("nodedns_cluster_answers_too_large_total"), "Cluster answers built but not stored for "
                  "their size (built again for each query).", []).add_metric([], c.too_large)

    def _filter_aaaa(self, f: Families, s: Scrape) -> None:
        """--filter-aaaa: the NODATAs made for forwarded AAAA questions (0 with the filter off), and
        whether it filters now."""
        section = s.sections.get("filter_aaaa") or {}
        f.counter(strip_total("nodedns_filtered_aaaa_total"), "Forwarded AAAA questions answered NODATA here "
                  "without asking upstream (--filter-aaaa).", []).add_metric([], num(section.get("filtered")) or 0.0)
        f.gauge("nodedns_filter_aaaa_active", "1 while --filter-aaaa filters (on, or auto finding no IPv6).",
                []).add_metric([], 1.0 if section.get("filtering") else 0.0)

    def _hosts(self, f: Families, s: Scrape) -> None:
        """--hosts: the answers made from the files (0 without --hosts), and the (address, name) entries in use."""
        section = s.sections.get("hosts") or {}
        f.counter(strip_total("nodedns_hosts_answers_total"), "Queries answered from the --hosts files.",
                  []).add_metric([], num(section.get("answers")) or 0.0)
        f.gauge("nodedns_hosts_entries", "Address and name pairs in use from the --hosts files.",
                []).add_metric([], num(section.get("entries")) or 0.0)

    # -- index and the parts ---------------------------------------------------------------

    def _index(self, f: Families, s: Scrape) -> None:
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
            v = num(ix.get(key))
            if v is not None:
                f.gauge(name, doc, []).add_metric([], v)
        v = num(ix.get("skipped"))
        if v is not None:
            f.counter(strip_total("nodedns_index_skipped_objects_total"),
                      "Invalid Kubernetes objects skipped.", []).add_metric([], v)
        unusable = ix.get("unusable_names")
        if isinstance(unusable, Mapping):
            fam = f.gauge("nodedns_index_unusable_names", "Objects kept whose name field cannot be a DNS name (a "
                          "Service's spec.externalName): they answer as if the field were empty (NXDOMAIN).",
                          ["field"])
            for field_name, n in sorted(unusable.items()):
                v = num(n)
                if v is not None:
                    fam.add_metric([str(field_name)], v)

    def _sections(self, f: Families, s: Scrape) -> None:
        """Each provider section the scrape carries, through its family builder."""
        builders: tuple[tuple[str, Callable[[Mapping[str, Any]], None]], ...] = (
            ("sync", lambda section: sections.sync(f, section)),
            ("cache", lambda section: sections.forward_cache(f, s, section)),
            ("upstream", lambda section: sections.upstream(f, section)),
            ("upstream_config", lambda section: f.scalars(section, UPSTREAM_CONFIG_SCALARS)),
            ("dnstap", lambda section: f.scalars(section, sections.DNSTAP_SCALARS)),
            ("host_resolv_conf", lambda section: f.scalars(section, HOST_RESOLV_CONF_SCALARS)),
            ("node", lambda section: sections.node(f, section)),
            ("workers", lambda section: sections.workers(f, section)),
            ("autopath", lambda section: sections.autopath(f, s, section)),
            ("limits", lambda section: sections.limits(f, section)),
            ("http", lambda section: sections.http(f, section)),
            ("insight", lambda section: sections.insight(f, section)),
            ("event_loop", lambda section: sections.event_loop(f, section)),
            ("shadow", lambda section: sections.shadow(f, section)),
            ("policy", lambda section: sections.policy(f, section)),
        )
        for name, build in builders:
            section = s.sections.get(name)
            if section is not None:
                build(section)


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