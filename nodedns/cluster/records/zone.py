"""What the zones share: their settings, the `Answer`, the index read through accessors that record the
answer's dependency tags (`ZoneReader`), the SOA and the negative answers, the names of Services and
imports and of their endpoints.

The SOA serial is the time of the index's last change (as CoreDNS's). Only an answer that *is* the
SOA (the apex's, a reverse zone's) depends on it (`z`); a negative answer keeps the serial it was
built with until one of its own tags changes: RFC 2308 negative caching reads only the SOA's TTL
and MINIMUM, and no zone transfer exists for a serial to order.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from nodedns.cluster.index import Index, endpoint_is_ready
from nodedns.cluster.objects import Endpoint, EndpointSlice, ImportedSlice, Node, Pod, Service, ServiceImport
from nodedns.cluster.records.tags import SERIAL
from nodedns.dns.pack import RR
from nodedns.dns.wire import QT, RCODE
from nodedns.names import (
    V4_REVERSE,
    V6_REVERSE,
    IPNetwork,
    canonical_ip,
    dashed_ip,
    is_dns1123_label,
    is_subdomain,
)

DNS_SCHEMA_VERSION = "1.1.0"
MCS_SCHEMA_VERSION = "1.0.0"  # the Multi-Cluster Services DNS specification (KEP-1645)
DNS_VERSION_TTL = 28800
SOA_REFRESH, SOA_RETRY, SOA_EXPIRE = 7200, 1800, 86400
MAX_CHAIN = 10
MAX_NAME = 253  # characters of a name as text (255 octets on the wire): longer targets are left out

ADDRESS_TYPES = (QT.A, QT.AAAA)


@dataclass(frozen=True, slots=True)
class ZoneSettings:
    zone: str = "cluster.local"
    ttl: int = 5
    pods: str = "insecure"  # disabled | insecure | verified
    endpoint_pod_names: bool = False
    authoritative_reverse: tuple[IPNetwork, ...] = ()
    ns_addresses: tuple[str, ...] = ()  # addresses of ns.dns.<zone>: this agent
    node_name: str = ""  # this node: topology order and federation CNAMEs use its Node record
    federations: tuple[tuple[str, str], ...] = ()  # kube-dns federations: (name, domain)
    multicluster_zone: str = ""  # the clusterset zone (Multi-Cluster Services), "" when off


@dataclass(slots=True)
class Answer:
    rcode: int
    answer: list[RR] = field(default_factory=list)
    authority: list[RR] = field(default_factory=list)
    additional: list[RR] = field(default_factory=list)
    aa: bool = True
    chase: str | None = None  # CNAME target outside our zones, to be resolved upstream
    source: str = "cluster"  # for the lookup explainer: cluster | clusterset | reverse
    deps: frozenset[str] = frozenset()  # what it was built from (nodedns.cluster.records.tags)


def claims(qname: str, zone: str) -> bool:
    """The name may be ours: the cluster zone, or a reverse zone (the index decides which PTRs)."""
    return is_subdomain(qname, zone) or qname.endswith(V4_REVERSE) or qname.endswith(V6_REVERSE)


def _reverse_zones(nets: Sequence[IPNetwork]) -> tuple[str, ...]:
    """The reverse zone names that cover the CIDRs, split on octet/nibble boundaries."""
    zones: list[str] = []
    for net in nets:
        v4 = isinstance(net, ipaddress.IPv4Network)
        unit = 8 if v4 else 4
        step = (net.prefixlen + unit - 1) // unit * unit
        for sub in [net] if step == net.prefixlen else net.subnets(new_prefix=step):
            if v4:
                labels = str(sub.network_address).split(".")[: step // 8]
            else:
                labels = list(sub.network_address.exploded.replace(":", ""))[: step // 4]
            zones.append(".".join([*reversed(labels), V4_REVERSE if v4 else V6_REVERSE]))
    # longest first so the most specific zone wins
    return tuple(sorted(set(zones), key=len, reverse=True))


class Existence(Protocol):
    """What `ClusterRecords.absent` needs to know (nodedns.cluster.existence.Existence)."""

    federated: bool  # kube-dns federations are configured

    def has_namespace(self, namespace: str) -> bool: ...

    def may_have_service(self, namespace: str, name: str) -> bool:
        """False only when there is no such Service."""
        ...


def ns_addresses(addresses: Sequence[str]) -> tuple[str, ...]:
    """Canonical, de-duplicated addresses for ns.dns.<zone>, skipping wildcard binds."""
    out: dict[str, None] = {}
    for text in addresses:
        ip = canonical_ip(text)
        if ip is not None and ip not in ("0.0.0.0", "::"):
            out[ip] = None
    return tuple(out)


class ZoneReader:
    """The index and the settings every zone reads, through accessors that record what an answer depends on."""

    def __init__(self, index: Index, settings: ZoneSettings) -> None:
        self.index = index
        self.s = settings
        self.zone = settings.zone
        self.ttl = settings.ttl
        self.reverse_zones = _reverse_zones(settings.authoritative_reverse)
        self.federations = dict(settings.federations)
        self.multicluster_zone = settings.multicluster_zone
        self._deps: set[str] = set()  # tags read by the lookup under way

    # -- the index, read through accessors that record what an answer depends on -------------

    def _has_namespace(self, ns: str) -> bool:
        self._deps.add(f"n:{ns}")
        return self.index.has_namespace(ns)

    def _service_of(self, ns: str, name: str) -> Service | None:
        self._deps.add(f"s:{ns}/{name}")
        return self.index.service(ns, name)

    def _slices_of(self, ns: str, name: str) -> list[EndpointSlice]:
        self._deps.add(f"s:{ns}/{name}")
        return self.index.slices_of(ns, name)

    def _node(self, name: str) -> Node | None:
        self._deps.add(f"o:{name}")
        return self.index.node(name)

    def _pods_with_ip(self, ip: str) -> list[Pod]:
        self._deps.add(f"p:{ip}")
        return self.index.pods_with_ip(ip)

    def _services_with_ip(self, ip: str) -> list[Service]:
        self._deps.add(f"i:{ip}")
        return self.index.services_with_cluster_ip(ip)

    def _slices_with_ip(self, ip: str) -> list[EndpointSlice]:
        self._deps.add(f"i:{ip}")
        return self.index.slices_with_ip(ip)

    def _service_import_of(self, ns: str, name: str) -> ServiceImport | None:
        self._deps.add(f"m:{ns}/{name}")
        return self.index.service_import(ns, name)

    def _imported_slices_of(self, ns: str, name: str) -> list[ImportedSlice]:
        self._deps.add(f"m:{ns}/{name}")
        return self.index.imported_slices_of(ns, name)

    def _imports_with_ip(self, ip: str) -> list[ServiceImport]:
        self._deps.add(f"i:{ip}")
        return self.index.service_imports_with_ip(ip)

    def _imported_slices_with_ip(self, ip: str) -> list[ImportedSlice]:
        self._deps.add(f"i:{ip}")
        return self.index.imported_slices_with_ip(ip)

    def set_federations(self, federations: Sequence[tuple[str, str]]) -> bool:
        """Take a new federation map (a reloaded kube-dns ConfigMap); True when it changed (the caller
        drops the stored answers)."""
        new = dict(federations)
        if new == self.federations:
            return False
        self.federations = new
        return True

    # -- which zone -------------------------------------------------------------------------

    def in_zone(self, qname: str) -> bool:
        return is_subdomain(qname, self.zone)

    def in_clusterset(self, qname: str) -> bool:
        """The name is in the clusterset zone (never, without --multicluster-zone)."""
        return bool(self.multicluster_zone) and is_subdomain(qname, self.multicluster_zone)

    # -- negative answers ------------------------------------------------------------------

    def soa(self, zone: str | None = None, *, serial: float | None = None) -> RR:
        """The zone's SOA record (in an authority section: its serial may lag; see the docstring), with
        the serial of the index's last change (or of `serial`: a worker's, pushed by the owner)."""
        zone = self.zone if zone is None else zone
        serial = int(self.index.last_change if serial is None else serial) & 0xFFFFFFFF
        return RR(
            zone,
            QT.SOA,
            min(self.ttl, 300),
            (f"ns.dns.{zone}", f"hostmaster.{zone}", serial, SOA_REFRESH, SOA_RETRY, SOA_EXPIRE, self.ttl),
        )

    def _nodata(self, zone: str | None = None) -> Answer:
        return Answer(RCODE.NOERROR, authority=[self.soa(zone)])

    def _nxdomain(self, zone: str | None = None) -> Answer:
        return Answer(RCODE.NXDOMAIN, authority=[self.soa(zone)])

    def _records(self, rrs: list[RR], additional: list[RR] | None = None, zone: str | None = None) -> Answer:
        if not rrs:
            return self._nodata(zone)
        return Answer(RCODE.NOERROR, answer=rrs, additional=additional or [])

    def _apex(self, qname: str, qtype: int, zone: str | None = None) -> Answer:
        zone = self.zone if zone is None else zone
        if qtype == QT.SOA:
            self._deps.add(SERIAL)
            return Answer(RCODE.NOERROR, answer=[self.soa(zone)])
        if qtype in (QT.NS, QT.ANY):
            ns_name = f"ns.dns.{zone}"
            extra = self._address_rrs(ns_name, QT.ANY, self.s.ns_addresses)
            rrs = [RR(qname, QT.NS, self.ttl, ns_name)]
            if qtype == QT.ANY:
                self._deps.add(SERIAL)
                rrs.insert(0, self.soa(zone))
            return Answer(RCODE.NOERROR, answer=rrs, additional=extra)
        return self._nodata(zone)

    def _address_rrs(self, owner: str, qtype: int, addresses: Sequence[str]) -> list[RR]:
        out: list[RR] = []
        seen: set[str] = set()
        for ip in addresses:
            if ip in seen:
                continue
            seen.add(ip)
            v6 = ":" in ip
            if (qtype == QT.A and not v6) or (qtype == QT.AAAA and v6) or qtype == QT.ANY:
                out.append(RR(owner, QT.AAAA if v6 else QT.A, self.ttl, ip))
        return out

    def _service_fqdn(self, svc: Service) -> str:
        return f"{svc.name}.{svc.namespace}.svc.{self.zone}"

    def _ready(self, svc: Service) -> list[tuple[EndpointSlice, Endpoint]]:
        """Ready endpoints of every slice of the service, in slice-name order."""
        return [
            (sl, ep)
            for sl in self._slices_of(svc.namespace, svc.name)
            for ep in sl.endpoints
            if endpoint_is_ready(ep, svc)
        ]

    def _endpoint_names(self, ep: Endpoint) -> list[tuple[str, str]]:
        """(endpoint name, address) for each address: hostname, else pod name (option), else dashed IP."""
        if ep.hostname:
            return [(ep.hostname, ip) for ip in ep.addresses]
        if self.s.endpoint_pod_names and ep.pod_name and is_dns1123_label(ep.pod_name):
            # a pod name that is no DNS label (over 63 characters, or dotted) names no endpoint
            return [(ep.pod_name, ip) for ip in ep.addresses]
        return [(dashed_ip(ip), ip) for ip in ep.addresses]

    def _import_fqdn(self, imported: ServiceImport) -> str:
        return f"{imported.name}.{imported.namespace}.svc.{self.multicluster_zone}"
