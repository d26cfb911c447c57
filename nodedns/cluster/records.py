"""Cluster-zone and reverse answers from the index, per the Kubernetes DNS spec 1.1.0 (pure).

One module on purpose (over 800 lines): the answers of the zones the agent owns (cluster, clusterset,
reverse) and the dependency tags of each answer are one concept: `change_tags` must name exactly the
tags `lookup` puts on an answer, so they are written side by side.

`ClusterRecords.lookup(qname, qtype)` returns an `Answer` (rcode, sections, and a CNAME target to
chase outside the zone) for names in the cluster zone and in the reverse zones, or None when the
name is not ours (the resolver forwards it). Names are lowercase without the trailing dot; the
wire layer echoes the client's spelling.

Name shapes below `<zone>` (parsed right to left, like CoreDNS's parseRequest):
    ""                              apex: SOA, NS
    dns-version                     TXT "1.1.0"
    ns.dns                          A/AAAA of this agent
    svc | pod                       NODATA
    <ns>.svc | <ns>.pod             NODATA if the namespace exists, else NXDOMAIN
    <svc>.<ns>.svc                  ClusterIP A/AAAA+SRV, headless per-endpoint records, ExternalName CNAME
    <ep>.<svc>.<ns>.svc             one endpoint's A/AAAA
    [_]<port>.[_]<proto>.<svc>.<ns>.svc   SRV of one named port (A/AAAA give the addresses)
    <a-b-c-d>.<ns>.pod              pod A/AAAA (--pods insecure|verified)
    anything else                   NXDOMAIN
SOA below the apex is NODATA for every name, existing or not (CoreDNS's handler answers SOA only at
the apex).
Every negative answer is authoritative and carries the zone's SOA (RFC 2308).

The clusterset zone (`multicluster_zone`, usually clusterset.local), per the Multi-Cluster Services
DNS specification 1.0.0 (KEP-1645), from ServiceImports and their imported EndpointSlices:
    ""                              apex: SOA, NS
    dns-version                     TXT "1.0.0"
    ns.dns                          A/AAAA of this agent
    svc                             NODATA
    <ns>.svc                        NODATA if the namespace exists, else NXDOMAIN
    <svc>.<ns>.svc                  ClusterSetIP: A/AAAA of spec.ips, SRV per port; Headless: the
                                    ready endpoints of every imported slice (none: NXDOMAIN), SRV
                                    per ready endpoint x port of its slice
    <hostname>.<clusterid>.<svc>.<ns>.svc
                                    Headless: one endpoint of that source cluster (<hostname>: its
                                    hostname, else pod name with endpoint_pod_names, else dashed IP;
                                    <clusterid> may span labels, `<cluster>.<registry>`)
    _<port>._<proto>.<svc>.<ns>.svc SRV of one named port (an underscore on either label; without
                                    any, the two labels are <hostname>.<clusterid>)
    <clusterid>.<svc>.<ns>.svc      NXDOMAIN: reserved, MUST NOT exist (spec 2.3.4, 2.4.4)
    anything else                   NXDOMAIN (no pod records)
ClusterSetIP imports have no per-cluster or per-endpoint names (KEP-1645: only the pods of a
headless service may be addressed one by one). Negative answers carry the clusterset zone's SOA.
Its PTR records live in the reverse zones, only for an address the cluster zone has no PTR for (the
specification's Limitations: one PTR per address, the cluster-local one wins):
    a clusterset IP of a ClusterSetIP import    PTR <svc>.<ns>.svc.<clusterset-zone>  (spec 2.3.3)
    a ready endpoint of a headless import       PTR <hostname>.<clusterid>.<svc>.<ns>.svc.<clusterset-zone>
      (from a slice with a source cluster)          (spec 2.4.3; <hostname> as for its A record)
The import's namespace must exist here, as for its forward names.

Dependencies. Every answer says what it was built from (`Answer.deps`, and the second value of
`resolve`): a tag per thing of the index it read, recorded by the accessors below as the lookup
goes, so no path can forget one. `change_tags(kind, old, new)` names the tags an index change
touches, from the old and the new record; an answer stays valid until one of its tags is named.

    n:<ns>            namespace <ns> exists                    a Namespace
    s:<ns>/<name>     Service <ns>/<name> and its slices       that Service; a slice of it (old or new)
    i:<ip>            what has <ip>: ClusterIPs, endpoints,    a Service or slice with <ip> (old or new);
                      clusterset IPs, imported endpoints       a ServiceImport or imported slice with it
    p:<ip>            the Pods with <ip> (--pods verified)     a Pod with <ip> (old or new)
    o:<node>          Node <node> (topology, federation)       that Node
    m:<ns>/<name>     ServiceImport <ns>/<name> and the        that ServiceImport; a slice imported
                      slices imported for it                   for it (old or new)
    z                 the SOA serial                           every change
    a:<ns>            (the resolver's) autopath may walk here  a Pod in <ns> (old or new)

The SOA serial is the time of the index's last change (as CoreDNS's). Only an answer that *is* the
SOA (the apex's, a reverse zone's) depends on it (`z`); a negative answer keeps the serial it was
built with until one of its own tags changes: RFC 2308 negative caching reads only the SOA's TTL
and MINIMUM, and no zone transfer exists for a serial to order.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nodedns.cluster import objects as k8s
from nodedns.cluster import topology
from nodedns.cluster.index import Index, endpoint_is_ready
from nodedns.cluster.objects import Endpoint, EndpointSlice, ImportedSlice, Node, Pod, Service, ServiceImport
from nodedns.dns.pack import RR
from nodedns.dns.wire import QT, RCODE
from nodedns.names import (
    V4_REVERSE,
    V6_REVERSE,
    IPNetwork,
    canonical_ip,
    dashed_ip,
    is_dns1035_label,
    is_dns1123_label,
    is_subdomain,
    name_problem,
    parse_ip,
    pod_label_to_ip,
    relative_labels,
    reverse_to_ip,
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
    deps: frozenset[str] = frozenset()  # what it was built from (module docstring: Dependencies)


SERIAL = "z"


def change_tags(kind: str, old: Any, new: Any) -> frozenset[str] | None:
    """The dependency tags an index change touches (from its old and new record); None: everything
    (the first sync, an unknown kind)."""
    if kind in k8s.POLICY_KINDS:
        return frozenset()  # no record of any zone: a policy decides before the stored answers (nodedns.policy)
    tags = {SERIAL}
    if kind == k8s.ENDPOINTSLICE and old is not None and new is not None and old.same_addresses(new):
        # the same addresses of the same Service (readiness, names or ports changed): the Service's answers,
        # and the reverse answers of the addresses whose endpoint changed — not of every address of the slice
        tags.add(f"s:{new.namespace}/{new.service}")
        tags.update(f"i:{ip}" for ip in new.changed_address_texts(old))
        return frozenset(tags)
    for record in (old, new):
        if record is None:
            continue
        if kind == k8s.SERVICE:
            tags.add(f"s:{record.namespace}/{record.name}")
            tags.update(f"i:{ip}" for ip in record.cluster_ips)
        elif kind == k8s.ENDPOINTSLICE:
            tags.add(f"s:{record.namespace}/{record.service}")
            tags.update(f"i:{ip}" for ip in record.address_texts())
        elif kind == k8s.POD:
            tags.update(f"p:{ip}" for ip in record.ips)
            tags.add(f"a:{record.namespace}")
        elif kind == k8s.NAMESPACE:
            tags.add(f"n:{record.name}")
        elif kind == k8s.NODE:
            tags.add(f"o:{record.name}")
        elif kind == k8s.SERVICE_IMPORT:
            tags.add(f"m:{record.namespace}/{record.name}")
            tags.update(f"i:{ip}" for ip in record.ips)
        elif kind == k8s.IMPORTED_SLICE:
            tags.add(f"m:{record.namespace}/{record.service}")
            tags.update(f"i:{ip}" for ep in record.slice.endpoints for ip in ep.addresses)
        else:
            return None
    if kind == "":
        return None
    return frozenset(tags)


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


class ClusterRecords:
    """Answers for the cluster zone and the reverse zones, built from an Index."""

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

    # -- entry -----------------------------------------------------------------------------

    def in_zone(self, qname: str) -> bool:
        return is_subdomain(qname, self.zone)

    def in_clusterset(self, qname: str) -> bool:
        """The name is in the clusterset zone (never, without --multicluster-zone)."""
        return bool(self.multicluster_zone) and is_subdomain(qname, self.multicluster_zone)

    def claims(self, qname: str) -> bool:
        """The name may be ours: the cluster zone, the clusterset zone, or a reverse zone."""
        return claims(qname, self.zone) or self.in_clusterset(qname)

    def lookup(self, qname: str, qtype: int) -> Answer | None:
        """The answer for a name in our zones (its `deps` set), or None when the name is not ours."""
        return self.resolve(qname, qtype)[0]

    def resolve(self, qname: str, qtype: int) -> tuple[Answer | None, frozenset[str]]:
        """(the answer or None when the name is not ours, the tags that decided it)."""
        self._deps = deps = set[str]()
        found: Answer | None = None
        if self.in_clusterset(qname):
            found = self._clusterset(qname, qtype)
        elif self.in_zone(qname):
            found = self._cluster(qname, qtype, 0)
        elif qname.endswith(V4_REVERSE) or qname.endswith(V6_REVERSE):
            found = self._reverse(qname, qtype)
        tags = frozenset(deps)
        if found is not None:
            found.deps = tags
        return found, tags

    def absent(self, qname: str, qtype: int, exists: Existence) -> frozenset[str] | None:
        """The tags of the NXDOMAIN `resolve` gives for this name when existence alone decides it (a
        namespace or a Service that is not there, a shape no name of the zone has), else None: the
        index must decide. The same walk as `_cluster` and `_svc`, for a --workers process that holds
        no index but what the owner pushed (`exists`: nodedns.cluster.existence)."""
        if self.in_clusterset(qname) or not self.in_zone(qname):
            return None
        labels = relative_labels(qname, self.zone)
        if not labels or qtype == QT.SOA:
            return None
        last = labels[-1]
        if last == "svc":
            rest = labels[:-1]
            if not rest or (exists.federated and len(labels) == 4):
                return None  # svc.<zone>: NODATA; a federation name: the index decides
            ns = rest[-1]
            if not exists.has_namespace(ns):
                return frozenset((f"n:{ns}",))
            if len(rest) == 1:
                return None  # <ns>.svc.<zone>: NODATA
            if len(rest) > 4:
                return frozenset((f"n:{ns}",))
            if exists.may_have_service(ns, rest[-2]):
                return None
            return frozenset((f"n:{ns}", f"s:{ns}/{rest[-2]}"))
        if last == "pod" or labels in (["dns-version"], ["dns"], ["ns", "dns"]):
            return None
        return frozenset()

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

    # -- the cluster zone ------------------------------------------------------------------

    def _cluster(self, qname: str, qtype: int, depth: int) -> Answer:
        labels = relative_labels(qname, self.zone)
        if not labels:
            return self._apex(qname, qtype)
        if qtype == QT.SOA:
            return self._nodata()  # SOA only at the apex; below it NODATA, even for names that do not exist
        last = labels[-1]
        if last == "svc":
            found = self._svc(qname, qtype, labels[:-1], depth)
            if found.rcode == RCODE.NXDOMAIN and self.federations and len(labels) == 4:
                return self._federation(qname, qtype, labels, depth) or found
            return found
        if last == "pod":
            return self._pod(qname, qtype, labels[:-1])
        if labels == ["dns-version"]:
            if qtype in (QT.TXT, QT.ANY):
                return self._records([RR(qname, QT.TXT, DNS_VERSION_TTL, (DNS_SCHEMA_VERSION,))])
            return self._nodata()
        if labels == ["dns"]:
            return self._nodata()
        if labels == ["ns", "dns"]:
            return self._records(self._address_rrs(qname, qtype, self.s.ns_addresses))
        return self._nxdomain()

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

    def _svc(self, qname: str, qtype: int, rest: list[str], depth: int) -> Answer:
        if not rest:
            return self._nodata()  # svc.<zone>
        ns = rest[-1]
        if not self._has_namespace(ns):
            return self._nxdomain()
        if len(rest) == 1:
            return self._nodata()  # <ns>.svc.<zone>
        if len(rest) > 4:
            return self._nxdomain()
        svc = self._service_of(ns, rest[-2])
        if svc is None:
            return self._nxdomain()
        if len(rest) == 2:
            return self._service(qname, qtype, svc, depth)
        if len(rest) == 3:
            return self._endpoint(qname, qtype, svc, rest[0])
        return self._port(qname, qtype, svc, rest[0], rest[1])

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

    def _ordered(self, svc: Service, eps: list[tuple[EndpointSlice, Endpoint]]) -> list[tuple[EndpointSlice, Endpoint]]:
        """The endpoints in topology order for this node (traffic distribution may narrow them)."""
        if not eps:
            return eps
        node_name = self.s.node_name
        return topology.order(svc, eps, node_name, self._node(node_name) if node_name else None)

    def _endpoint_names(self, ep: Endpoint) -> list[tuple[str, str]]:
        """(endpoint name, address) for each address: hostname, else pod name (option), else dashed IP."""
        if ep.hostname:
            return [(ep.hostname, ip) for ip in ep.addresses]
        if self.s.endpoint_pod_names and ep.pod_name and is_dns1123_label(ep.pod_name):
            # a pod name that is no DNS label (over 63 characters, or dotted) names no endpoint
            return [(ep.pod_name, ip) for ip in ep.addresses]
        return [(dashed_ip(ip), ip) for ip in ep.addresses]

    def _service(self, qname: str, qtype: int, svc: Service, depth: int) -> Answer:
        if svc.kind == k8s.EXTERNAL_NAME:
            return self._external_name(qname, qtype, svc, depth)
        if svc.kind == k8s.CLUSTER_IP:
            if qtype in ADDRESS_TYPES or qtype == QT.ANY:
                return self._records(self._address_rrs(qname, qtype, svc.cluster_ips))
            if qtype == QT.SRV:
                return self._cluster_ip_srv(qname, svc, svc.ports)
            return self._nodata()
        # headless
        ready = self._ordered(svc, self._ready(svc))
        if not ready:
            return self._nxdomain()
        if qtype in ADDRESS_TYPES or qtype == QT.ANY:
            return self._records(self._address_rrs(qname, qtype, [ip for _, ep in ready for ip in ep.addresses]))
        if qtype == QT.SRV:
            return self._headless_srv(qname, svc, ready, None)
        return self._nodata()

    def _cluster_ip_srv(self, qname: str, svc: Service, ports: Sequence[k8s.Port]) -> Answer:
        target = self._service_fqdn(svc)
        uniq = list(dict.fromkeys(p.port for p in ports))
        if not uniq:
            return self._nodata()
        weight = 100 // len(uniq)
        rrs = [RR(qname, QT.SRV, self.ttl, (0, weight, port, target)) for port in uniq]
        return self._records(rrs, self._address_rrs(target, QT.ANY, svc.cluster_ips))

    def _headless_srv(
        self,
        qname: str,
        svc: Service,
        ready: list[tuple[EndpointSlice, Endpoint]],
        want: tuple[str, str] | None,
    ) -> Answer:
        """SRV per ready endpoint x port of its slice; `want` = (port name, protocol) or all ports."""
        base = self._service_fqdn(svc)
        targets: dict[tuple[str, int], None] = {}
        addresses: dict[str, list[str]] = {}
        for sl, ep in ready:
            ports = [p for p in sl.ports if p.port != k8s.NO_PORT and (want is None or (p.name, p.protocol) == want)]
            if not ports:
                continue
            for name, ip in self._endpoint_names(ep):
                target = f"{name}.{base}"
                if len(target) > MAX_NAME:
                    continue  # a long zone: a name the wire cannot carry is left out
                addresses.setdefault(target, []).append(ip)
                for p in ports:
                    targets[(target, p.port)] = None
        if not targets:
            return self._nodata()
        weight = 100 // len(targets)
        rrs = [RR(qname, QT.SRV, self.ttl, (0, weight, port, target)) for target, port in targets]
        extra = [rr for target, ips in addresses.items() for rr in self._address_rrs(target, QT.ANY, ips)]
        return self._records(rrs, extra)

    def _endpoint(self, qname: str, qtype: int, svc: Service, label: str) -> Answer:
        if svc.kind == k8s.EXTERNAL_NAME:
            return self._nxdomain()
        ips = [ip for _, ep in self._ready(svc) for name, ip in self._endpoint_names(ep) if name == label]
        if not ips:
            return self._nxdomain()
        if qtype in ADDRESS_TYPES or qtype == QT.ANY:
            return self._records(self._address_rrs(qname, qtype, ips))
        return self._nodata()

    def _port(self, qname: str, qtype: int, svc: Service, port_label: str, proto_label: str) -> Answer:
        if svc.kind == k8s.EXTERNAL_NAME:
            return self._nxdomain()
        pname = port_label[1:] if port_label.startswith("_") else port_label
        proto = proto_label[1:] if proto_label.startswith("_") else proto_label
        if not pname:
            return self._nxdomain()
        if svc.kind == k8s.CLUSTER_IP:
            ports = [p for p in svc.ports if p.name == pname and p.protocol == proto]
            if not ports:
                return self._nxdomain()
            if qtype == QT.SRV:
                return self._cluster_ip_srv(qname, svc, ports)
            if qtype in ADDRESS_TYPES or qtype == QT.ANY:
                return self._records(self._address_rrs(qname, qtype, svc.cluster_ips))
            return self._nodata()
        ready = self._ordered(svc, self._ready(svc))
        matching = [
            (sl, ep) for sl, ep in ready
            if any(p.name == pname and p.protocol == proto and p.port != k8s.NO_PORT for p in sl.ports)
        ]
        if not matching:
            return self._nxdomain()
        if qtype == QT.SRV:
            return self._headless_srv(qname, svc, matching, (pname, proto))
        if qtype in ADDRESS_TYPES or qtype == QT.ANY:
            return self._records(self._address_rrs(qname, qtype, [ip for _, ep in matching for ip in ep.addresses]))
        return self._nodata()

    def _external_name(self, qname: str, qtype: int, svc: Service, depth: int) -> Answer:
        target = svc.external_name
        if not target or parse_ip(target) is not None:
            # No usable target: a value that is not a DNS name (objects: `target_problem`, logged by the
            # index) or an IP (CoreDNS: not a valid externalName target). Like CoreDNS for an IP, and like
            # a headless Service without ready endpoints: the Service has no record, NXDOMAIN.
            return self._nxdomain()
        if qtype in (QT.TXT, QT.SRV):
            return self._nodata()
        cname = RR(qname, QT.CNAME, self.ttl, target)
        if qtype == QT.CNAME:
            return Answer(RCODE.NOERROR, answer=[cname])
        if is_subdomain(target, qname):
            return self._nodata()  # x CNAME x (or below x) is a direct loop: skipped, like CoreDNS
        if self.in_zone(target):
            # Chased locally. Like CoreDNS (backend_lookup.go A/AAAA) the CNAME is kept only when the
            # target has records of the type; otherwise (no such type, no such name, chain too long
            # or looping) the answer is NODATA: rcode NOERROR regardless (reference b16).
            if depth >= MAX_CHAIN:
                return self._nodata()
            inner = self._cluster(target, qtype, depth + 1)
            if not inner.answer:
                return self._nodata()
            return Answer(RCODE.NOERROR, answer=[cname, *inner.answer], additional=inner.additional,
                          chase=inner.chase)
        return Answer(RCODE.NOERROR, answer=[cname], chase=target)

    # -- federation (kube-dns) -------------------------------------------------------------

    def _federation(self, qname: str, qtype: int, labels: list[str], depth: int) -> Answer | None:
        """kube-dns federation: `<svc>.<ns>.<federation>.svc.<zone>` when nothing local has that name.

        The shape must be exactly kube-dns's: a DNS-1035 service label, DNS-1123 namespace and
        federation labels, `svc`, the zone; the federation must be configured. A local service with
        a record gets a CNAME to its local name (resolved here): kube-dns's rule, a ClusterIP
        service with endpoints or a headless one (which has records only while it has ready
        endpoints; a headless service without them is not served locally, so the query fails over
        to the federation like in kube-dns). Otherwise the CNAME points at
        `<svc>.<ns>.<federation>.svc.<node zone>.<node region>.<domain>` from this node's own
        topology labels, resolved upstream. Without those labels: SERVFAIL.
        """
        svc_label, ns, fed, _ = labels
        domain = self.federations.get(fed)
        if domain is None or not (is_dns1035_label(svc_label) and is_dns1123_label(ns) and is_dns1123_label(fed)):
            return None
        local = self._service_of(ns, svc_label)
        if local is not None and local.kind != k8s.EXTERNAL_NAME and self._ready(local):
            target = self._service_fqdn(local)
            inner = self._cluster(target, qtype, depth + 1) if qtype != QT.CNAME else Answer(RCODE.NOERROR)
            return Answer(
                inner.rcode,
                answer=[RR(qname, QT.CNAME, self.ttl, target), *inner.answer],
                authority=inner.authority,
                additional=inner.additional,
            )
        node = self._node(self.s.node_name) if self.s.node_name else None
        if node is None or not node.zone or not node.region:
            return Answer(RCODE.SERVFAIL, aa=False)
        target = f"{svc_label}.{ns}.{fed}.svc.{node.zone.lower()}.{node.region.lower()}.{domain}"
        if name_problem(target) is not None:
            # the Node's zone or region label is no DNS label (a label value may hold `_`, `.` and
            # reach 63 characters) or the name grew too long: as without the labels
            return Answer(RCODE.SERVFAIL, aa=False)
        cname = RR(qname, QT.CNAME, self.ttl, target)
        return Answer(RCODE.NOERROR, answer=[cname], chase=None if qtype == QT.CNAME else target)

    # -- the clusterset zone (Multi-Cluster Services, KEP-1645 DNS specification 1.0.0) -------------

    def _clusterset(self, qname: str, qtype: int) -> Answer:
        found = self._clusterset_name(qname, qtype, self.multicluster_zone)
        found.source = "clusterset"
        return found

    def _clusterset_name(self, qname: str, qtype: int, zone: str) -> Answer:
        labels = relative_labels(qname, zone)
        if not labels:
            return self._apex(qname, qtype, zone)
        if qtype == QT.SOA:
            return self._nodata(zone)  # SOA only at the apex, as in the cluster zone
        if labels == ["dns-version"]:
            if qtype in (QT.TXT, QT.ANY):
                return self._records([RR(qname, QT.TXT, DNS_VERSION_TTL, (MCS_SCHEMA_VERSION,))], zone=zone)
            return self._nodata(zone)
        if labels == ["dns"]:
            return self._nodata(zone)
        if labels == ["ns", "dns"]:
            return self._records(self._address_rrs(qname, qtype, self.s.ns_addresses), zone=zone)
        if labels[-1] != "svc":
            return self._nxdomain(zone)  # no pod records in the clusterset zone
        rest = labels[:-1]
        if not rest:
            return self._nodata(zone)  # svc.<clusterset-zone>
        ns = rest[-1]
        if not self._has_namespace(ns):
            return self._nxdomain(zone)  # imports exist only where their namespace does (KEP-1645)
        if len(rest) == 1:
            return self._nodata(zone)  # <ns>.svc.<clusterset-zone>
        imported = self._service_import_of(ns, rest[-2])
        if imported is None:
            return self._nxdomain(zone)
        if len(rest) == 2:
            return self._import(qname, qtype, imported, zone)
        below = rest[:-2]
        if len(below) == 1:
            # <clusterid>.<svc>: reserved, MUST NOT exist (spec 2.3.4, 2.4.4); a bare hostname names
            # no endpoint either: every endpoint name carries its cluster
            return self._nxdomain(zone)
        if below[0].startswith("_") or below[1].startswith("_"):
            if len(below) != 2:
                return self._nxdomain(zone)
            return self._import_port(qname, qtype, imported, below[0], below[1], zone)
        return self._import_endpoint(qname, qtype, imported, below[0], ".".join(below[1:]), zone)

    def _import_fqdn(self, imported: ServiceImport) -> str:
        return f"{imported.name}.{imported.namespace}.svc.{self.multicluster_zone}"

    def _imported_ready(self, imported: ServiceImport) -> list[tuple[ImportedSlice, Endpoint]]:
        """Ready endpoints (`conditions.ready`, absent = ready) of every slice imported for it, from
        every source cluster, in slice-name order."""
        return [
            (im, ep)
            for im in self._imported_slices_of(imported.namespace, imported.name)
            for ep in im.slice.endpoints
            if ep.ready
        ]

    def _import(self, qname: str, qtype: int, imported: ServiceImport, zone: str) -> Answer:
        if not imported.headless:
            if qtype in ADDRESS_TYPES or qtype == QT.ANY:
                return self._records(self._address_rrs(qname, qtype, imported.ips), zone=zone)
            if qtype == QT.SRV:
                return self._clusterset_ip_srv(qname, imported, imported.ports, zone)
            return self._nodata(zone)
        ready = self._imported_ready(imported)
        if not ready:
            return self._nxdomain(zone)  # spec 2.4.1: no ready endpoints, NXDOMAIN
        if qtype in ADDRESS_TYPES or qtype == QT.ANY:
            return self._records(
                self._address_rrs(qname, qtype, [ip for _, ep in ready for ip in ep.addresses]), zone=zone)
        if qtype == QT.SRV:
            return self._imported_srv(qname, imported, ready, None, zone)
        return self._nodata(zone)

    def _clusterset_ip_srv(self, qname: str, imported: ServiceImport, ports: Sequence[k8s.Port],
                           zone: str) -> Answer:
        """SRV per port number, target the service's own name (spec 2.3.2), its addresses as additional."""
        target = self._import_fqdn(imported)
        uniq = list(dict.fromkeys(p.port for p in ports))
        if not uniq:
            return self._nodata(zone)
        weight = 100 // len(uniq)
        rrs = [RR(qname, QT.SRV, self.ttl, (0, weight, port, target)) for port in uniq]
        return self._records(rrs, self._address_rrs(target, QT.ANY, imported.ips), zone=zone)

    def _imported_srv(self, qname: str, imported: ServiceImport, ready: list[tuple[ImportedSlice, Endpoint]],
                      want: tuple[str, str] | None, zone: str) -> Answer:
        """SRV per ready endpoint x port of its slice (spec 2.4.2), target
        `<hostname>.<clusterid>.<svc>...`; `want` = (port name, protocol) or every port."""
        base = self._import_fqdn(imported)
        targets: dict[tuple[str, int], None] = {}
        addresses: dict[str, list[str]] = {}
        for im, ep in ready:
            if not im.cluster:
                continue  # no source cluster: no name to point at
            ports = [p for p in im.slice.ports
                     if p.port != k8s.NO_PORT and (want is None or (p.name, p.protocol) == want)]
            if not ports:
                continue
            for name, ip in self._endpoint_names(ep):
                target = f"{name}.{im.cluster}.{base}"
                if len(target) > MAX_NAME:
                    continue  # a cluster id of several labels can make it longer than the wire carries
                addresses.setdefault(target, []).append(ip)
                for p in ports:
                    targets[(target, p.port)] = None
        if not targets:
            return self._nodata(zone)
        weight = 100 // len(targets)
        rrs = [RR(qname, QT.SRV, self.ttl, (0, weight, port, target)) for target, port in targets]
        extra = [rr for target, ips in addresses.items() for rr in self._address_rrs(target, QT.ANY, ips)]
        return self._records(rrs, extra, zone=zone)

    def _import_port(self, qname: str, qtype: int, imported: ServiceImport, port_label: str, proto_label: str,
                     zone: str) -> Answer:
        pname = port_label.removeprefix("_")
        proto = proto_label.removeprefix("_")
        if not pname:
            return self._nxdomain(zone)
        if not imported.headless:
            ports = [p for p in imported.ports if p.name == pname and p.protocol == proto]
            if not ports:
                return self._nxdomain(zone)  # unnamed ports have no SRV record (spec 2.3.2)
            if qtype == QT.SRV:
                return self._clusterset_ip_srv(qname, imported, ports, zone)
            if qtype in ADDRESS_TYPES or qtype == QT.ANY:
                return self._records(self._address_rrs(qname, qtype, imported.ips), zone=zone)
            return self._nodata(zone)
        matching = [
            (im, ep) for im, ep in self._imported_ready(imported)
            if any(p.name == pname and p.protocol == proto and p.port != k8s.NO_PORT for p in im.slice.ports)
        ]
        if not matching:
            return self._nxdomain(zone)
        if qtype == QT.SRV:
            return self._imported_srv(qname, imported, matching, (pname, proto), zone)
        if qtype in ADDRESS_TYPES or qtype == QT.ANY:
            return self._records(
                self._address_rrs(qname, qtype, [ip for _, ep in matching for ip in ep.addresses]), zone=zone)
        return self._nodata(zone)

    def _import_endpoint(self, qname: str, qtype: int, imported: ServiceImport, label: str, cluster: str,
                         zone: str) -> Answer:
        """`<hostname>.<clusterid>.<svc>...`: a headless import's ready endpoint from that cluster."""
        if not imported.headless:
            return self._nxdomain(zone)  # a ClusterSetIP import is reached through its clusterset IP only
        ips = [
            ip for im, ep in self._imported_ready(imported) if im.cluster == cluster
            for name, ip in self._endpoint_names(ep) if name == label
        ]
        if not ips:
            return self._nxdomain(zone)
        if qtype in ADDRESS_TYPES or qtype == QT.ANY:
            return self._records(self._address_rrs(qname, qtype, ips), zone=zone)
        return self._nodata(zone)

    # -- pods ------------------------------------------------------------------------------

    def _pod(self, qname: str, qtype: int, rest: list[str]) -> Answer:
        if not rest:
            return self._nodata()  # pod.<zone>
        if self.s.pods == "disabled":
            return self._nxdomain()
        ns = rest[-1]
        if not self._has_namespace(ns):
            return self._nxdomain()
        if len(rest) == 1:
            return self._nodata()
        if len(rest) != 2:
            return self._nxdomain()
        ip = pod_label_to_ip(rest[0])
        if ip is None:
            return self._nxdomain()
        if self.s.pods == "verified" and not any(
            p.namespace == ns and p.ip == ip and not p.terminating for p in self._pods_with_ip(ip)
        ):
            return self._nxdomain()
        if qtype in ADDRESS_TYPES or qtype == QT.ANY:
            return self._records(self._address_rrs(qname, qtype, [ip]))
        return self._nodata()

    # -- reverse ---------------------------------------------------------------------------

    def _authoritative_zone(self, qname: str) -> str | None:
        for zone in self.reverse_zones:
            if is_subdomain(qname, zone):
                return zone
        return None

    def ptr_targets(self, ip: str) -> list[str]:
        """PTR targets of an IP: its Service (ClusterIP wins, first service only), else its endpoints."""
        services = self._services_with_ip(ip)
        if services:
            return [self._service_fqdn(services[0])]
        targets: dict[str, None] = {}
        for sl in self._slices_with_ip(ip):
            svc = self._service_of(sl.namespace, sl.service)
            if svc is None:
                continue
            for ep in sl.endpoints_at(ip):
                if endpoint_is_ready(ep, svc):
                    for name, addr in self._endpoint_names(ep):
                        target = f"{name}.{self._service_fqdn(svc)}"
                        if addr == ip and len(target) <= MAX_NAME:
                            targets[target] = None
        return list(targets)

    def clusterset_ptr_targets(self, ip: str) -> list[str]:
        """PTR targets of an IP in the clusterset zone (spec 2.3.3, 2.4.3): the ClusterSetIP import
        with that clusterset IP (the first by namespace and name), else every name of a ready endpoint
        of a headless import there. [] without --multicluster-zone; the caller asks only when the
        cluster zone has no PTR for the address."""
        if not self.multicluster_zone:
            return []
        for imported in self._imports_with_ip(ip):
            if not imported.headless and self._has_namespace(imported.namespace):
                return [self._import_fqdn(imported)]
        targets: dict[str, None] = {}
        for im in self._imported_slices_with_ip(ip):
            if not im.cluster:
                continue  # no source cluster: no endpoint name to point at
            owner = self._service_import_of(im.namespace, im.service)
            if owner is None or not owner.headless or not self._has_namespace(im.namespace):
                continue  # a ClusterSetIP import's endpoints have no names (KEP-1645)
            base = f"{im.cluster}.{self._import_fqdn(owner)}"
            for ep in im.slice.endpoints_at(ip):
                if ep.ready:
                    for name, addr in self._endpoint_names(ep):
                        if addr == ip:
                            targets[f"{name}.{base}"] = None
        return list(targets)

    def _reverse(self, qname: str, qtype: int) -> Answer | None:
        zone = self._authoritative_zone(qname)
        ip = reverse_to_ip(qname)
        targets = self.ptr_targets(ip) if ip is not None else []
        if not targets and ip is not None:
            targets = self.clusterset_ptr_targets(ip)  # the cluster-local PTR wins (spec: Limitations)
        soa_zone = zone or (V4_REVERSE if qname.endswith(V4_REVERSE) else V6_REVERSE)
        if targets:
            if qtype in (QT.PTR, QT.ANY):
                return Answer(
                    RCODE.NOERROR, answer=[RR(qname, QT.PTR, self.ttl, t) for t in targets], source="reverse"
                )
            return Answer(RCODE.NOERROR, authority=[self.soa(soa_zone)], source="reverse")
        if zone is None:
            return None
        if qname == zone:
            if qtype == QT.SOA:
                self._deps.add(SERIAL)
                return Answer(RCODE.NOERROR, answer=[self.soa(zone)], source="reverse")
            return Answer(RCODE.NOERROR, authority=[self.soa(zone)], source="reverse")
        if qtype == QT.SOA:
            return Answer(RCODE.NOERROR, authority=[self.soa(zone)], source="reverse")  # as in the cluster zone
        return Answer(RCODE.NXDOMAIN, authority=[self.soa(zone)], source="reverse")


def ns_addresses(addresses: Sequence[str]) -> tuple[str, ...]:
    """Canonical, de-duplicated addresses for ns.dns.<zone>, skipping wildcard binds."""
    out: dict[str, None] = {}
    for text in addresses:
        ip = canonical_ip(text)
        if ip is not None and ip not in ("0.0.0.0", "::"):
            out[ip] = None
    return tuple(out)
