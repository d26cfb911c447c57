"""The Config read into each part's settings: the zones, the node's interface and rules, the roster, the slots.

Also the upstream sources (`route_sources`) and the agent's own addresses (`own_addresses`).
"""

from __future__ import annotations

import ipaddress
import os
from typing import TYPE_CHECKING

from nodedns.cluster.records import ZoneSettings, ns_addresses
from nodedns.config import Config
from nodedns.forward.routes import RouteSources
from nodedns.forward.zones import CachePolicy, Zone
from nodedns.metrics.slots import Slots
from nodedns.node import handover

if TYPE_CHECKING:  # imported where used: --workers processes never load pyroute2
    from nodedns.node.netif import NodeNetwork


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

