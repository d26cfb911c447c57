"""Cluster-zone, clusterset and reverse answers from the index (pure), one module per zone.

`ClusterRecords.lookup(qname, qtype)` returns an `Answer` (rcode, sections, and a CNAME target to
chase outside the zone) for names in the cluster zone (`cluster`, with kube-dns federations:
`federation`), the clusterset zone (`clusterset`) and the reverse zones (`reverse`), or None when the
name is not ours (the resolver forwards it). Names are lowercase without the trailing dot; the wire
layer echoes the client's spelling. The zones share `zone` (settings, the accessors that record each
answer's dependency tags, the SOA); `tags` names the tags an index change touches.
"""

from __future__ import annotations

from nodedns.cluster.records.cluster import ClusterZone
from nodedns.cluster.records.clusterset import ClustersetZone
from nodedns.cluster.records.federation import FederationZone
from nodedns.cluster.records.reverse import ReverseZone
from nodedns.cluster.records.tags import SERIAL, change_tags
from nodedns.cluster.records.zone import (
    DNS_SCHEMA_VERSION,
    MCS_SCHEMA_VERSION,
    Answer,
    Existence,
    ZoneSettings,
    claims,
    ns_addresses,
)
from nodedns.dns.wire import QT
from nodedns.names import V4_REVERSE, V6_REVERSE, relative_labels

__all__ = ["DNS_SCHEMA_VERSION", "MCS_SCHEMA_VERSION", "SERIAL", "Answer", "ClusterRecords", "Existence",
           "ZoneSettings", "change_tags", "claims", "ns_addresses"]


class ClusterRecords(ClusterZone, FederationZone, ClustersetZone, ReverseZone):
    """Answers for the cluster zone, the clusterset zone and the reverse zones, built from an Index (each
    zone's names in its module; no zone overrides another's method)."""

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
