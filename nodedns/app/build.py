"""The Config read into each part's settings: the zones, the node's interface and rules, the roster, the slots.

Also the upstream sources (`route_sources`), the forwarding they make (`build_forwarding`: the forwarder,
the forward cache, the watcher of the upstream files), the AAAA filter (`aaaa_filter`), the agent's own
addresses (`own_addresses`), and the parts built from the Config alone: the before-sync fallback, dnstap,
the policy book, the watched files, the resolver, the DNS listeners and the explainer.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import socket
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from nodedns import __version__
from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords, ZoneSettings, ns_addresses
from nodedns.config import DEFAULT_UPSTREAM_RESOLV_CONF, Config
from nodedns.dns.hot import HotTable
from nodedns.dns.identity import node_identity
from nodedns.errors import ConfigError
from nodedns.forward.fallback import Fallback
from nodedns.forward.routes import ConfigWatcher, RouteSources, describe_routes
from nodedns.forward.store import ForwardCache
from nodedns.forward.upstream import Forwarder
from nodedns.forward.zones import CachePolicy, Zone, ZoneTable
from nodedns.metrics.counters import Sampler
from nodedns.metrics.slots import PLUGIN_CACHE, Slots
from nodedns.node import handover
from nodedns.observe.explain import Explainer
from nodedns.podconf.noderesolv import HostFile
from nodedns.podconf.searchpath import Autopath
from nodedns.policy.book import PolicyBook
from nodedns.runtime.dnstap import Dnstap
from nodedns.serve.answers import ClusterReplies, Remote
from nodedns.serve.cache import ClusterAnswers, filter_soa
from nodedns.serve.chase import Chaser
from nodedns.serve.forwarding import AaaaFilter, ForwardPath, client_share, namespace_share
from nodedns.serve.hosts import HostsTable
from nodedns.serve.hostswatch import HostsFiles
from nodedns.serve.limits import AllowList, MissBudget, RateLimiter
from nodedns.serve.resolver import BeforeSync, Resolver
from nodedns.serve.server import DNSServer
from nodedns.serve.tally import Tally

if TYPE_CHECKING:  # imported where used: --workers processes never load pyroute2 (and hold no Insight)
    from nodedns.node.netif import NodeNetwork
    from nodedns.observe.insight import Insight

log = logging.getLogger("nodedns.app")  # the name every log line of the agent has had


def zone_settings(config: Config) -> ZoneSettings:
    own = config.local_ip or tuple(host for host, _ in config.listen_addresses)
    return ZoneSettings(
        zone=config.cluster_domain,
        ttl=int(config.ttl),
        pods=config.pods,
        endpoint_pod_names=config.endpoint_pod_names,
        authoritative_reverse=config.authoritative_reverse,
        ns_addresses=ns_addresses(own),
        node_name=config.node_name,
        federations=config.federation,
        multicluster_zone=config.multicluster_zone,
    )


def node_network(config: Config) -> NodeNetwork | None:
    """The interface and firewall parts --setup-interface and --firewall ask for (None: neither)."""
    if config.setup_interface is None and config.firewall == "none":
        return None
    from nodedns.node import firewall
    from nodedns.node.netif import Link, NodeNetwork

    link = Link(config.setup_interface, config.local_ip) if config.setup_interface is not None else None
    health_port = config.status_listen[1] if config.status_listen is not None else None
    fw = firewall.make(config.firewall, config.local_ip, health_port=health_port)
    if link is None and fw is None:
        return None
    return NodeNetwork(link=link, firewall=fw, sync_interval=config.sync_interval,
                       skip_teardown=config.skip_teardown, probe_targets=probe_targets(config),
                       probe_name=f"dns-version.{config.cluster_domain}")


def probe_targets(config: Config) -> list[tuple[str, int]]:
    """Where the node loop asks the agent for an answer before it captures: the listen addresses (a wildcard
    one as the local IPs), the link-local and loopback ones only when there are any. A kube-dns ClusterIP
    among the local IPs is not asked: before our rules are in, kube-proxy sends that query to the cluster
    DNS, which says nothing about us (and, being down, must not keep us from capturing)."""
    out: list[tuple[str, int]] = []
    for host, port in config.listen_addresses:
        if host in ("0.0.0.0", "::"):
            out.extend((ip, port) for ip in config.local_ip if (":" in ip) == (host == "::"))
        else:
            out.append((host, port))
    local = [(h, p) for h, p in out if ipaddress.ip_address(h).is_link_local or ipaddress.ip_address(h).is_loopback]
    return local or out


def handover_for(config: Config) -> handover.Handover | None:
    """The hand-over roster entry: with --lock-dir, or by default when the agent manages the node."""
    directory = config.lock_dir
    if directory is None and (config.setup_interface is not None or config.firewall != "none"):
        directory = handover.DEFAULT_LOCK_DIR
    if directory is None:
        return None
    key = handover.roster_key(interface=config.setup_interface, firewall=config.firewall,
                              listen=config.listen_addresses)
    # a host sysctl is changed only by an agent that manages a node interface (the DaemonSet's), never by
    # one run on a developer's machine, however privileged
    return handover.Handover(handover.Roster(os.path.join(directory, key)),
                             set_sysctl=config.setup_interface is not None,
                             warm_bytes=handover.warm_limit(config.cache_max_bytes))


def metric_slots(config: Config) -> Slots:
    """The zones answers are counted under (CoreDNS's zone label), as node-cache's server blocks."""
    own = (config.cluster_domain, *((config.multicluster_zone,) if config.multicluster_zone else ()),
           "in-addr.arpa", "ip6.arpa")
    return Slots(
        (*own, *(d for d, *_ in config.stub_domain)),
        authoritative=own,
        stub=(d for d, *_ in config.stub_domain),
    )


def zone_defaults(config: Config) -> Zone:
    """The flags' forwarding settings: what `zones:` `.` leaves unset (and through it every other zone)."""
    return Zone(
        name="",
        policy=config.upstream_policy,
        force_tcp=config.upstream_force_tcp,
        max_concurrent=config.max_concurrent,
        cache=CachePolicy(
            success_ttl=int(config.cache_success_ttl),
            min_ttl=int(config.cache_min_ttl),
            denial_ttl=int(config.cache_denial_ttl),
            servfail_ttl=int(config.cache_servfail_ttl),
            serve_stale=config.serve_stale,
            stale_mode=config.serve_stale_mode,
            stale_nxdomain=config.stale_nxdomain,
        ),
        filter_aaaa=None,
        query_log=config.query_log,
        dnstap=config.dnstap_sample,
    )


def sample_rate(config: Config) -> float:
    """The share of queries the listeners sample: the largest `query-log` of any zone (the flag's for `.`),
    and with --dnstap the largest `dnstap` share. Each sampled query is then logged, and tapped, by its
    zone's share of it (nodedns.serve.server.DNSServer.log_query); a reload cannot sample more than this."""
    rates = [config.query_log, *(z.query_log for z in config.zones if z.query_log is not None)]
    if config.dnstap is not None:
        rates += [config.dnstap_sample, *(z.dnstap for z in config.zones if z.dnstap is not None)]
    return max(rates)


def route_sources(config: Config) -> RouteSources:
    return RouteSources(
        upstream=config.upstream,
        force_tcp=config.upstream_force_tcp,
        resolv_conf=config.upstream_resolv_conf,
        stub_domains=config.stub_domain,
        kube_dns_dir=config.kube_dns_config_dir,
        federation=config.federation,
        defaults=zone_defaults(config),
        zones=config.zones,
        config_file=config.config if config.zones else None,
        own_domains=(config.cluster_domain, config.multicluster_zone),
    )


def own_addresses(config: Config) -> tuple[str, ...]:
    """The agent's own addresses: the allow list admits them (a host process asking a local IP)."""
    return (*config.local_ip, *(host for host, _ in config.listen_addresses))



class Forwarding(NamedTuple):
    """What the upstream sources make (all None when no upstream source is configured)."""

    forwarder: Forwarder | None
    cache: ForwardCache | None
    watcher: ConfigWatcher | None  # re-reads the upstream files (None: nothing to re-read)
    zones: ZoneTable  # the zones' settings in use (a reload compares against it)


def build_forwarding(config: Config, *, hot: HotTable, max_bytes: int, slots: Slots,
                     clock: Callable[[], float], warn: bool,
                     on_federations: Callable[[tuple[tuple[str, str], ...]], None], on_reload: Callable[[], None],
                     on_zones: Callable[[ZoneTable, set[str]], None]) -> Forwarding:
    """Forwarder, forward cache (`max_bytes` of this process's share, writing the `hot` table) and config
    watcher, when any upstream source is configured; `warn`: say a missing --kube-dns-config-dir (once for
    the agent, not once more per worker). The federations are given to `on_federations` as they are read."""
    sources = route_sources(config)
    if not sources.any():
        return Forwarding(None, None, None, ZoneTable({}))
    missing = sources.missing_dir()
    if missing is not None and warn:
        log.warning("%s", missing)
    try:
        snapshot = sources.snapshot()
        routes = sources.build(snapshot)
    except ConfigError as exc:
        if config.upstream or config.upstream_resolv_conf != DEFAULT_UPSTREAM_RESOLV_CONF:
            raise
        raise ConfigError("upstream", "the default upstreams are the nameservers of "
                          f"{DEFAULT_UPSTREAM_RESOLV_CONF}, which cannot be used ({exc}); give --upstream ADDR, "
                          "or --upstream none to refuse names outside the cluster") from None
    on_federations(sources.federations(snapshot))
    zones = ZoneTable(routes.zones)
    log.info("upstreams: %s", describe_routes(routes))
    forwarder = Forwarder(
        routes=routes,
        policy=config.upstream_policy,
        timeout=config.upstream_timeout,
        max_concurrent=config.max_concurrent,
        health_check=config.health_check,
        udp_size=config.max_udp_size,
        tls_servername=config.upstream_tls_servername,
        tls_ca=config.upstream_tls_ca,
        clock=clock,
    )
    cache = ForwardCache(
        hot=hot,
        success_size=config.cache_success,
        success_ttl=config.cache_success_ttl,
        denial_size=config.cache_denial,
        denial_ttl=config.cache_denial_ttl,
        servfail_ttl=config.cache_servfail_ttl,
        serve_stale=config.serve_stale,
        min_ttl=config.cache_min_ttl,
        stale_nxdomain=config.stale_nxdomain,
        prefetch=config.prefetch,
        udp_size=config.max_udp_size,
        max_bytes=max_bytes,
        clock=clock,
        stamp=functools.partial(slots.stamp, plugin=PLUGIN_CACHE),
    )
    watcher = None
    if config.kube_dns_config_dir or config.upstream_resolv_conf or sources.config_file:
        watcher = ConfigWatcher(sources, forwarder, period=config.kube_dns_config_period, snapshot=snapshot,
                                on_reload=on_reload, on_federations=on_federations, on_zones=on_zones)
    return Forwarding(forwarder, cache, watcher, zones)


def fallback_for(config: Config) -> Fallback | None:
    """--fallback-upstream: where a would-be NXDOMAIN is asked before the first sync (None: SERVFAIL)."""
    if config.fallback_upstream is None:
        return None
    return Fallback(config.fallback_upstream, timeout=config.upstream_timeout)


def dnstap_for(config: Config) -> Dnstap | None:
    """--dnstap: the frames of client and upstream queries, sent to the collector by a task of its own."""
    if config.dnstap is None:
        return None
    return Dnstap(config.dnstap, identity=config.node_name or socket.gethostname(), version=f"nodedns {__version__}")


def policy_book_for(config: Config, *, owner: bool) -> PolicyBook:
    """The DNS policies (nodedns.io) of this node's clients: the index owner builds the book from its index
    (`owner`); a worker's book is what the owner pushes (nodedns.workers.messages)."""
    book = PolicyBook(node_name=config.node_name,
                      zones=(config.cluster_domain.strip("."), config.multicluster_zone.strip(".")))
    book.owner = owner
    return book


def hosts_files_for(config: Config, *, excluded: Callable[[str], bool],
                    on_change: Callable[[HostsTable], None]) -> HostsFiles | None:
    """--hosts, re-read every --kube-dns-config-period (None: no file); `excluded(name)`: a name a hosts
    line cannot take."""
    if not config.hosts:
        return None
    return HostsFiles(config.hosts, excluded=excluded, on_change=on_change, period=config.kube_dns_config_period)


def host_file_for(config: Config, *, on_change: Callable[[str | None], None]) -> HostFile | None:
    """--host-resolv-conf, the node's resolv.conf, re-read as it changes (None: none)."""
    if not config.host_resolv_conf:
        return None
    return HostFile(config.host_resolv_conf, on_change=on_change, period=config.kube_dns_config_period)


def aaaa_filter(config: Config, slots: Slots) -> tuple[AaaaFilter | None, bytes]:
    """--filter-aaaa's filter (None: off) and the authority of its NODATA (a zone's `filter-aaaa: on` too,
    which is how the counters tell our NODATA)."""
    zone_soa = filter_soa(config.cluster_domain)
    if config.filter_aaaa != "off" or any(z.filter_aaaa for z in config.zones):
        slots.filtered = zone_soa  # how the counters tell our NODATA
    return (AaaaFilter(config.filter_aaaa, zone_soa) if config.filter_aaaa != "off" else None), zone_soa


def resolver_for(config: Config, *, policy: PolicyBook, records: ClusterRecords, index: Index,
                 cluster_answers: ClusterAnswers, forward_cache: ForwardCache | None, forwarder: Forwarder | None,
                 on_loop: Callable[[str, int], None], before_sync: BeforeSync | None, autopath: Autopath | None,
                 allow: AllowList, namespace_of: Callable[[str], str | None], remote: Remote | None,
                 aaaa_filter: AaaaFilter | None, filter_soa: bytes) -> Resolver:
    """The resolver over the agent's parts, with the Config's limits and answers."""
    # the resolver's parts, built here and given to it: the forward path, the chases and walks, the cluster replies
    forwarding = ForwardPath(
        records=records, cluster_answers=cluster_answers, forward_cache=forward_cache,
        forwarder=forwarder, max_udp_size=config.max_udp_size, stale_recheck=config.cache_servfail_ttl,
        on_loop=on_loop, client_share=client_share(config.max_concurrent),
        # ... and each namespace's: its Pods on this node together (whose Pod a client is: Limits.namespaces)
        namespace_share=namespace_share(config.max_concurrent), namespace_of=namespace_of,
        aaaa_filter=aaaa_filter, hosts_ttl=int(config.ttl), filter_soa=filter_soa, stale_mode=config.serve_stale_mode)
    chaser = Chaser(records=records, cluster_answers=cluster_answers, forwarding=forwarding,
                    autopath=autopath, max_udp_size=config.max_udp_size)
    answers = ClusterReplies(
        records=records, index=index, cluster_answers=cluster_answers, autopath=autopath,
        before_sync=before_sync is not None, recursion_available=forwarding.recursion_available,
        max_udp_size=config.max_udp_size, can_forward=forwarding.can_forward, chaser=chaser)
    return Resolver(
        policy=policy,
        records=records,
        index=index,
        cluster_answers=cluster_answers,
        answers=answers,
        forwarding=forwarding,
        chaser=chaser,
        max_udp_size=config.max_udp_size,
        before_sync=before_sync,
        autopath=autopath,
        allow=allow,
        max_pending=config.max_pending,
        remote=remote,
        identity=node_identity(config.node_name, socket.gethostname(), config.version_reply),
    )


def dns_server_for(config: Config, *, resolver: Resolver, cluster_answers: ClusterAnswers, slots: Slots,
                   tap: Dnstap | None, rate_limiter: RateLimiter | None, miss_budget: MissBudget | None,
                   tally: Tally | None) -> DNSServer:
    """The DNS listeners (UDP and TCP) on --listen, with the Config's sizes, timeouts and sampling."""
    return DNSServer(
        resolver=resolver,
        cluster_answers=cluster_answers,
        addresses=config.listen_addresses,
        max_udp_size=config.max_udp_size,
        tcp_idle_timeout=config.tcp_idle_timeout,
        tcp_max_connections=config.tcp_max_connections,
        tcp_max_per_client=config.tcp_max_connections_per_client,
        # the local IPs may be missing for a moment (interface being re-created): bind anyway
        freebind=config.setup_interface is not None,
        slots=slots,
        query_log=Sampler(sample_rate(config)) if sample_rate(config) > 0 else None,
        log_rate=config.query_log,
        tap=tap,
        tap_rate=config.dnstap_sample,
        rate_limiter=rate_limiter,
        tally=tally,
        miss_budget=miss_budget,
    )


def explainer_for(config: Config, *, resolver: Resolver, index: Index, slots: Slots, autopath: Autopath | None,
                  insight: Insight | None, about: Callable[[], Mapping[str, Any]]) -> Explainer:
    """The explainer over the live resolver and index (`nodedns explain`, /debug/explain), with what insight
    saw of a Pod when this process holds insight; `about` names the agent that answers."""
    explainer = Explainer(
        resolver=resolver, index=index, slots=slots, zone=config.cluster_domain,
        timeout=2 * config.upstream_timeout + 1, autopath=autopath, node_name=config.node_name,
        multicluster_zone=config.multicluster_zone,
    )
    explainer.about = about
    if insight is not None:
        explainer.insight = insight.pod
    return explainer
