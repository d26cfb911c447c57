"""The clusterset zone (`multicluster_zone`, usually clusterset.local), per the Multi-Cluster Services DNS
specification 1.0.0 (KEP-1645), from ServiceImports and their imported EndpointSlices:
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
Its PTR records are the reverse zones' (nodedns.cluster.records.reverse).
"""

from __future__ import annotations

from collections.abc import Sequence

from nodedns.cluster import objects as k8s
from nodedns.cluster.objects import Endpoint, ImportedSlice, ServiceImport
from nodedns.cluster.records.zone import (
    ADDRESS_TYPES,
    DNS_VERSION_TTL,
    MAX_NAME,
    MCS_SCHEMA_VERSION,
    Answer,
    ZoneReader,
)
from nodedns.dns.pack import RR
from nodedns.dns.wire import QT
from nodedns.names import relative_labels


class ClustersetZone(ZoneReader):
    """The names of the clusterset zone (none without --multicluster-zone)."""

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
