"""The cluster zone per the Kubernetes DNS spec 1.1.0.

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
    <svc>.<ns>.<federation>.svc     kube-dns federation (nodedns.cluster.records.federation)
    anything else                   NXDOMAIN
SOA below the apex is NODATA for every name, existing or not (CoreDNS's handler answers SOA only at
the apex). Every negative answer is authoritative and carries the zone's SOA (RFC 2308).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nodedns.cluster import objects as k8s
from nodedns.cluster import topology
from nodedns.cluster.objects import Endpoint, EndpointSlice, Service
from nodedns.cluster.records.zone import (
    ADDRESS_TYPES,
    DNS_SCHEMA_VERSION,
    DNS_VERSION_TTL,
    MAX_CHAIN,
    MAX_NAME,
    Answer,
    ZoneReader,
)
from nodedns.dns.pack import RR
from nodedns.dns.wire import QT, RCODE
from nodedns.names import is_subdomain, parse_ip, pod_label_to_ip, relative_labels


class ClusterZone(ZoneReader):
    """The names of the cluster zone."""

    if TYPE_CHECKING:  # nodedns.cluster.records.federation, beside it in ClusterRecords
        def _federation(self, qname: str, qtype: int, labels: list[str], depth: int) -> Answer | None: ...

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

    def _ordered(self, svc: Service, eps: list[tuple[EndpointSlice, Endpoint]]) -> list[tuple[EndpointSlice, Endpoint]]:
        """The endpoints in topology order for this node (traffic distribution may narrow them)."""
        if not eps:
            return eps
        node_name = self.s.node_name
        return topology.order(svc, eps, node_name, self._node(node_name) if node_name else None)

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
