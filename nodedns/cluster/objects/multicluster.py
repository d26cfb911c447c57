"""Multi-Cluster Services (KEP-1645, only with --multicluster-zone): a `multicluster.x-k8s.io` ServiceImport
becomes a `ServiceImport`; an EndpointSlice labelled `multicluster.kubernetes.io/service-name` is, for the
clusterset zone, an `ImportedSlice` (kind `IMPORTED_SLICE`: the same object seen by the multicluster watch)
that carries its `multicluster.kubernetes.io/source-cluster` label. Such a slice without the cluster label
`kubernetes.io/service-name` is no part of the cluster zone (`slim(ENDPOINTSLICE, ...)` is None)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodedns.cluster.objects.common import (
    ENDPOINTSLICE,
    MCS_SERVICE_NAME_LABEL,
    MCS_SOURCE_CLUSTER_LABEL,
    SERVICE_IMPORT,
    SERVICE_NAME_LABEL,
    Port,
    _intern,
    _ips,
    _label,
    _mapping,
    _meta,
    _name,
    _namespace,
    _ports,
    _Problems,
    ref,
)
from nodedns.cluster.objects.endpointslice import EndpointSlice, _slice
from nodedns.errors import ObjectError
from nodedns.names import is_dns1123_subdomain


@dataclass(frozen=True, slots=True)
class ServiceImport:
    """A `multicluster.x-k8s.io` ServiceImport: a service of the clusterset, imported here."""

    namespace: str
    name: str
    headless: bool  # spec.type Headless; else ClusterSetIP
    ips: tuple[str, ...]  # spec.ips (the clusterset IPs), canonical; () for Headless
    ports: tuple[Port, ...]


@dataclass(frozen=True, slots=True)
class ImportedSlice:
    """An EndpointSlice imported for a ServiceImport: its endpoints (`slice.service` is the
    ServiceImport's name) and the cluster they come from ("" when the label is missing or unusable)."""

    cluster: str
    slice: EndpointSlice

    @property
    def namespace(self) -> str:
        return self.slice.namespace

    @property
    def name(self) -> str:
        return self.slice.name

    @property
    def service(self) -> str:
        return self.slice.service


SERVICE_IMPORT_TYPES = {"ClusterSetIP": False, "Headless": True, "": False}


def _service_import(obj: Mapping[str, Any]) -> ServiceImport:
    meta = _meta(SERVICE_IMPORT, obj)
    bad = _Problems(SERVICE_IMPORT, obj)
    # named after the exported Services, so a DNS-1035 label like theirs
    name = _label(bad, "metadata.name", _name(SERVICE_IMPORT, obj, meta), dns1035=True)
    ns = _namespace(SERVICE_IMPORT, obj, meta, bad)
    spec = _mapping(obj.get("spec"))
    stype = spec.get("type") or ""
    headless = SERVICE_IMPORT_TYPES.get(stype) if isinstance(stype, str) else None
    if headless is None:
        bad.add(f"spec.type {stype!r} is not ClusterSetIP or Headless")
    ports = _ports(bad, spec.get("ports"), service=True)
    ips: tuple[str, ...] = ()
    if not headless:
        raw_ips = spec.get("ips") or []
        if not isinstance(raw_ips, list):
            bad.add("spec.ips is not a list")
            raw_ips = []
        ips = _ips(bad, "spec.ips", raw_ips)
    bad.check()
    return ServiceImport(ns, _intern(name), bool(headless), ips, ports)


def _imported_slice(obj: Mapping[str, Any]) -> ImportedSlice | None:
    """An EndpointSlice labelled for a ServiceImport, as the clusterset zone reads it (None: FQDN)."""
    meta = _meta(ENDPOINTSLICE, obj)
    labels = _mapping(meta.get("labels"))
    service = labels.get(MCS_SERVICE_NAME_LABEL)
    if not isinstance(service, str) or not service:
        raise ObjectError(ref(ENDPOINTSLICE, obj), f"no {MCS_SERVICE_NAME_LABEL} label")
    cluster = labels.get(MCS_SOURCE_CLUSTER_LABEL)
    # a cluster id names endpoints (<hostname>.<clusterid>.<svc>...): one or more DNS labels (KEP-1645
    # allows "<cluster>.<registry>"); anything else names none, its addresses still count
    cluster = cluster.lower() if isinstance(cluster, str) and is_dns1123_subdomain(cluster.lower()) else ""
    # the slice's endpoints and ports are read exactly as the cluster zone reads them
    as_cluster_slice = {**obj, "metadata": {**meta, "labels": {SERVICE_NAME_LABEL: service}}}
    sl = _slice(as_cluster_slice)
    return None if sl is None else ImportedSlice(_intern(cluster), sl)
