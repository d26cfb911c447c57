"""What the agent's limits and answers show in /status and /metrics: `Limits`, the forward cache, the filters.

`Limits` holds the allow list and the rate limit and counts every cap; `CacheReport` the forward cache,
`HostsReport` --hosts, `FilterReport` --filter-aaaa; `KubeDnsReport` whether the local IPs that are not
link-local are the kube-dns Service's ClusterIP. `register_sections` shows the agent's parts, in their order.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from nodedns.app.build import own_addresses
from nodedns.cluster.index import Index
from nodedns.config import Config
from nodedns.forward.routes import ConfigWatcher
from nodedns.forward.store import ForwardCache
from nodedns.forward.upstream import Forwarder
from nodedns.metrics.slots import PLUGIN_CACHE, PLUGIN_FILTER, Slots
from nodedns.observe.looplag import LoopLag
from nodedns.observe.observer import Provider
from nodedns.podconf.noderesolv import HostFile
from nodedns.podconf.searchpath import Autopath
from nodedns.policy.book import PolicyBook
from nodedns.runtime.dnstap import Dnstap
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.hostswatch import HostsFiles
from nodedns.serve.limits import AllowList, Capacity, MissBudget, Namespaces, RateLimiter
from nodedns.serve.resolver import Resolver
from nodedns.serve.server import DNSServer

if TYPE_CHECKING:  # a --workers process holds no Insight
    from nodedns.observe.insight import Insight


class Limits:
    """Who may query and how much (docs/hardening.md): the allow list, the UDP rate limit, and, in
    `status()`, every limit's count for /status and /metrics (the "limits" section)."""

    def __init__(self, config: Config, index: Index, *, allow: AllowList | None = None) -> None:
        self.config = config
        # the default list (ours, not pushed) follows this node's Node record: its pod CIDRs and addresses
        # (Agent._wire_changes adds its refresh to the watch path)
        self.refreshes_allow = allow is None and config.allow_from is None
        # the misses budget per namespace: whose Pod a client is, from the index (a --workers worker, given
        # its allow list, has no index: the supervisor pushes it, nodedns.workers.worker)
        self.namespaces = Namespaces(index if allow is None else None, config.node_name)
        if allow is None:
            allow = AllowList(explicit=config.allow_from, own_addresses=own_addresses(config), index=index,
                              node_name=config.node_name)
        self.allow = allow
        # TC=1 replies for queries over a budget, while this process has the capacity (then dropped)
        self.capacity = Capacity()
        self.rate = RateLimiter(config.rate_limit, capacity=self.capacity) if config.rate_limit > 0 else None
        # the misses budget (--miss-limit, --miss-limit-namespace)
        self.misses = MissBudget(config.miss_limit, config.miss_limit_namespace, capacity=self.capacity,
                                 namespace_of=self.namespaces) \
            if config.miss_limit or config.miss_limit_namespace else None
        self.server: DNSServer | None = None

    def status(self) -> Mapping[str, Any]:
        out: dict[str, Any] = {"allow_from": self.allow.status()}
        if self.rate is not None:
            out["rate_limit"] = self.rate.status()
        if self.misses is not None:
            out["miss_limit"] = self.misses.status()
        if self.rate is not None or self.misses is not None:
            out["shed_capacity"] = {"tc_per_second": self.capacity.rate, "exhausted": self.capacity.exhausted}
        if self.server is not None:
            resolver = self.server.resolver
            out["pending"] = {"now": resolver.pending, "max": self.config.max_pending,
                              "refused": resolver.stats["refused_pending"]}
            if resolver.forwarding.forwarder is not None:
                out["upstream_share"] = resolver.forwarding.share_status()
            server = self.server
            out["tcp"] = {"max_connections": self.config.tcp_max_connections,
                          "max_connections_per_client": self.config.tcp_max_connections_per_client,
                          "open": len(server.tcp.clients),
                          "refused": server.tcp.refused, "refused_per_client": server.tcp.refused_client,
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
            # this process's share of --cache-max-bytes: the forward cache's budget and the cluster answers'
            "budget": counts["max_bytes"] + self.cluster_answers.max_bytes,
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


KUBE_DNS = ("kube-system", "kube-dns")  # the Service whose ClusterIP Pods have as their nameserver


def cluster_dns_ips(local_ips: Sequence[str]) -> tuple[str, ...]:
    """The local IPs meant to be the kube-dns Service's ClusterIP: those that are not link-local (node-cache's
    arrangement: 169.254.20.10 and the ClusterIP; in kube-proxy's IPVS mode the link-local address alone)."""
    return tuple(ip for ip in local_ips if not ipaddress.ip_address(ip).is_link_local)


class KubeDnsReport:
    """The "kube_dns" section of /status: a local IP that is not link-local must be the ClusterIP of the
    kube-dns Service in the API, or the Pods that ask the ClusterIP never reach this agent (and this agent
    takes an address of something else on its node). Not a reason to be unready: a `warnings` entry
    (/readyz still 200, with the warning), and a warning in the log once the index has synced."""

    def __init__(self, *, index: Index, local_ips: Sequence[str], service: tuple[str, str] = KUBE_DNS) -> None:
        self.index = index
        self.local_ips = tuple(local_ips)
        self.expected = cluster_dns_ips(local_ips)
        self.service = service

    def warnings(self) -> list[str]:
        """Why the local IPs are not the kube-dns Service's ClusterIP (empty: they are, or not synced yet)."""
        if not self.expected or not self.index.synced:
            return []
        namespace, name = self.service
        svc = self.index.service(namespace, name)
        if svc is None:
            return [f"local IP {', '.join(self.expected)} is not link-local, and the API has no Service "
                    f"{namespace}/{name} to check it against: Pods ask the ClusterIP of the cluster DNS Service "
                    "(kubelet --cluster-dns); make local-ip that address"]
        wrong = [ip for ip in self.expected if ip not in svc.cluster_ips]
        if not wrong:
            return []
        keep = [ip for ip in self.local_ips if ip not in wrong]
        suggested = ",".join(dict.fromkeys([*keep, *svc.cluster_ips]))
        theirs = ", ".join(svc.cluster_ips) or "none: the Service is headless"
        return [f"local IP {', '.join(wrong)} is not the ClusterIP of the Service {namespace}/{name} ({theirs} in "
                f"the API): Pods that ask the cluster DNS do not reach this agent; set local-ip to {suggested} "
                "(kubectl -n kube-system get svc kube-dns -o jsonpath='{.spec.clusterIP}')"]

    def status(self) -> Mapping[str, Any]:
        namespace, name = self.service
        svc = self.index.service(namespace, name) if self.index.synced else None
        return {"service": f"{namespace}/{name}", "local_ips": list(self.expected),
                "cluster_ips": list(svc.cluster_ips) if svc is not None else None,
                "warnings": self.warnings()}


class WatchesHostFile(Protocol):
    """Of the agent's mode: whether this process watches the node's resolv.conf (nodedns.app.parts.Mode)."""

    @property
    def watches_host_file(self) -> bool: ...


class Host(Protocol):
    """The agent's parts shown in /status and /metrics (each None when not configured)."""

    @property
    def mode(self) -> WatchesHostFile: ...

    forwarder: Forwarder | None
    forward_cache: ForwardCache | None
    config_watcher: ConfigWatcher | None
    slots: Slots
    cluster_answers: ClusterAnswers
    server: DNSServer
    resolver: Resolver
    policy: PolicyBook
    dnstap: Dnstap | None
    autopath: Autopath | None
    hosts_files: HostsFiles | None
    host_file: HostFile | None
    limits: Limits
    looplag: LoopLag
    insight: Insight | None

    def add_provider(self, section: str, provider: Provider) -> None: ...


def register_sections(agent: Host) -> None:
    """Show each configured part in /status and /metrics, in this order (the sections' order there); the
    "kube_dns" section is added at start, once the index is known to come from the API."""
    if agent.forwarder is not None:
        assert agent.forward_cache is not None  # built with the forwarder
        agent.add_provider("upstream", agent.forwarder)
        agent.add_provider("cache", CacheReport(cache=agent.forward_cache, slots=agent.slots,
                                                cluster_answers=agent.cluster_answers, server=agent.server,
                                                resolver=agent.resolver))
        if agent.resolver.aaaa is not None:
            agent.add_provider("filter_aaaa", FilterReport(resolver=agent.resolver, slots=agent.slots,
                                                           server=agent.server))
    if agent.config_watcher is not None:
        agent.add_provider("upstream_config", agent.config_watcher)
    agent.add_provider("policy", agent.policy)
    if agent.dnstap is not None:
        agent.add_provider("dnstap", agent.dnstap)
    if agent.autopath is not None:
        agent.add_provider("autopath", agent.autopath)
    if agent.hosts_files is not None:
        agent.add_provider("hosts", HostsReport(files=agent.hosts_files, resolver=agent.resolver))
    if agent.host_file is not None and agent.mode.watches_host_file:
        agent.add_provider("host_resolv_conf", agent.host_file)
    agent.add_provider("limits", agent.limits)
    agent.add_provider("event_loop", agent.looplag)  # every serving process (docs/status.md)
    if agent.insight is not None:
        agent.add_provider("insight", agent.insight)
