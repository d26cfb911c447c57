"""The reverse zones: PTR records of the cluster's addresses, and of the clusterset's.

A ClusterIP names its Service (the first), an endpoint address its ready endpoints' names. The
clusterset zone's PTRs answer only for an address the cluster zone has no PTR for (the Multi-Cluster
Services specification's Limitations: one PTR per address, the cluster-local one wins):
    a clusterset IP of a ClusterSetIP import    PTR <svc>.<ns>.svc.<clusterset-zone>  (spec 2.3.3)
    a ready endpoint of a headless import       PTR <hostname>.<clusterid>.<svc>.<ns>.svc.<clusterset-zone>
      (from a slice with a source cluster)          (spec 2.4.3; <hostname> as for its A record)
The import's namespace must exist here, as for its forward names. Names in `authoritative_reverse`
that have no PTR are NXDOMAIN with the reverse zone's SOA; others are not ours (forwarded).
"""

from __future__ import annotations

from nodedns.cluster.index import endpoint_is_ready
from nodedns.cluster.records.tags import SERIAL
from nodedns.cluster.records.zone import MAX_NAME, Answer, ZoneReader
from nodedns.dns.pack import RR
from nodedns.dns.wire import QT, RCODE
from nodedns.names import V4_REVERSE, V6_REVERSE, is_subdomain, reverse_to_ip


class ReverseZone(ZoneReader):
    """The PTR names of the reverse zones."""

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
