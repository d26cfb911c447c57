"""kube-dns federations in the cluster zone: `<svc>.<ns>.<federation>.svc.<zone>`, when nothing local has that name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodedns.cluster import objects as k8s
from nodedns.cluster.records.zone import Answer, ZoneReader
from nodedns.dns.pack import RR
from nodedns.dns.wire import QT, RCODE
from nodedns.names import is_dns1035_label, is_dns1123_label, name_problem


class FederationZone(ZoneReader):
    """The federation names (`ZoneSettings.federations`, a reloaded kube-dns ConfigMap's: `set_federations`)."""

    if TYPE_CHECKING:  # nodedns.cluster.records.cluster, beside it in ClusterRecords
        def _cluster(self, qname: str, qtype: int, depth: int) -> Answer: ...

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
