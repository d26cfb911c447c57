"""What the agent's limits and answers show in /status and /metrics: `Limits`, the forward cache, the filters.

`Limits` holds the allow list and the rate limit and counts every cap; `CacheReport` the forward cache,
`HostsReport` --hosts, `FilterReport` --filter-aaaa.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodedns.app.build import own_addresses
from nodedns.cluster.index import Index
from nodedns.config import Config
from nodedns.forward.store import ForwardCache
from nodedns.metrics.slots import PLUGIN_CACHE, PLUGIN_FILTER, Slots
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.hostswatch import HostsFiles
from nodedns.serve.limits import AllowList, RateLimiter
from nodedns.serve.resolver import Resolver
from nodedns.serve.server import DNSServer


class Limits:
    """Who may query and how much (docs/hardening.md): the allow list, the UDP rate limit, and, in
    `status()`, every limit's count for /status and /metrics (the "limits" section)."""

    def __init__(self, config: Config, index: Index, *, allow: AllowList | None = None) -> None:
        self.config = config
        # the default list (ours, not pushed) follows this node's Node record: its pod CIDRs and addresses
        # (Agent._wire_changes adds its refresh to the watch path)
        self.refreshes_allow = allow is None and config.allow_from is None
        if allow is None:
            allow = AllowList(explicit=config.allow_from, own_addresses=own_addresses(config), index=index,
                              node_name=config.node_name)
        self.allow = allow
        self.rate = RateLimiter(config.rate_limit) if config.rate_limit > 0 else None
        self.server: DNSServer | None = None

    def status(self) -> Mapping[str, Any]:
        out: dict[str, Any] = {"allow_from": self.allow.status()}
        if self.rate is not None:
            out["rate_limit"] = self.rate.status()
        if self.server is not None:
            resolver = self.server.resolver
            out["pending"] = {"now": resolver.pending, "max": self.config.max_pending,
                              "refused": resolver.stats["refused_pending"]}
            if resolver.forwarder is not None:
                out["upstream_share"] = resolver.share_status()
            server = self.server
            out["tcp"] = {"max_connections": self.config.tcp_max_connections,
                          "max_connections_per_client": self.config.tcp_max_connections_per_client,
                          "open": len(server.tcp_clients),
                          "refused": server.tcp_refused, "refused_per_client": server.tcp_refused_client,
                          "aborted_not_reading": sum(ls.tcp_aborted_unread for ls in server.stats),
                          "aborted_owed": sum(ls.tcp_aborted_owed for ls in server.stats),
                          "aborted_evicted": sum(ls.tcp_aborted_evicted for ls in server.stats)}
        return out


class CacheReport:
    """The forward cache as the "cache" section of /status and /metrics (contract in nodedns.metrics.registry).

    Hits are the answers counted under the "cache" plugin's slots: by the UDP hit path (per
    listener) and by the resolver's reads of the hot dict (TCP, and what the hit path passed over).
    """

    def __init__(self, *, cache: ForwardCache, slots: Slots, cluster_answers: ClusterAnswers, server: DNSServer,
                 resolver: Resolver) -> None:
        self.cache = cache
        self.slots = slots
        self.cluster_answers = cluster_answers
        self.server = server
        self.resolver = resolver

    def status(self) -> Mapping[str, Any]:
        cache = self.cache
        hits = {"success": 0, "denial": 0}
        for slot, labels in enumerate(self.slots.labels):
            if labels.plugin == PLUGIN_CACHE:
                n = self.cluster_answers.hits[slot] + sum(ls.udp_hit[slot] for ls in self.server.stats)
                hits["denial" if labels.denial else "success"] += n
        counts = cache.counts()
        stats = self.resolver.stats
        return {"caches": [{
            "zones": ".",
            "entries": {"success": counts["success"], "denial": counts["denial"]},
            "hits": hits,
            "misses": stats["forwarded"],
            "requests": hits["success"] + hits["denial"] + stats["forwarded"],
            "prefetch": stats["prefetch"],
            "prefetch_deferred": stats["prefetch_deferred"],  # over the refreshes a loop turn may start
            "served_stale": stats["stale"],
            "stale_nxdomain_served": stats["stale_nxdomain"],
            "evictions": cache.evictions(),
            # the byte budget (--cache-max-bytes, this process's share): stored answers, stale ones included
            "bytes": counts["bytes"],
            "max_bytes": counts["max_bytes"],
            "too_large": counts["too_large"],
        }]}


class HostsReport:
    """--hosts as the "hosts" section of /status and /metrics: the files, the entries in use, the last
    reload, the errors (nodedns.serve.hostswatch) and the answers this process made from them. A --workers
    worker reads no file (`files` None: it maps its supervisor's table): its answers only."""

    def __init__(self, *, files: HostsFiles | None, resolver: Resolver) -> None:
        self.files = files
        self.resolver = resolver

    def status(self) -> Mapping[str, Any]:
        return {**(self.files.status() if self.files is not None else {}), "answers": self.resolver.stats["hosts"]}


class FilterReport:
    """--filter-aaaa as the "filter_aaaa" section of /status and /metrics: the mode, whether it filters now
    and why, and the answers it made (counted under the "filter" plugin's slots, by every path)."""

    def __init__(self, *, resolver: Resolver, slots: Slots, server: DNSServer) -> None:
        self.resolver = resolver
        self.slots = slots
        self.server = server

    def status(self) -> Mapping[str, Any]:
        aaaa = self.resolver.aaaa
        assert aaaa is not None
        filtered = 0
        for slot, labels in enumerate(self.slots.labels):
            if labels.plugin == PLUGIN_FILTER:
                filtered += sum(counts[slot] for ls in self.server.stats for _, counts in ls.by_proto())
        return {**aaaa.status(), "filtered": filtered}
