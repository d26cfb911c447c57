"""A Service slimmed: ClusterIP, headless or ExternalName, its ports, and why an ExternalName has no usable target.

A Service's name is a DNS-1035 label (`Checkout_Svc` is not). An ExternalName's `spec.externalName` is
held to what the wire can carry (`names.name_problem`: labels of 1 to 63 octets, 253 characters in all,
no empty label): the API server checks it more loosely (no per-label length), and one bad value must not
take a Service's neighbours down. Such a Service is kept, with `external_name` empty and the reason in
`target_problem`: it answers as a Service with no usable target (nodedns.cluster.records).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodedns.cluster.objects.common import (
    SERVICE,
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
)
from nodedns.names import name_problem, normalize_name

# Service kinds
CLUSTER_IP = 0
HEADLESS = 1
EXTERNAL_NAME = 2


@dataclass(frozen=True, slots=True)
class Service:
    namespace: str
    name: str
    kind: int
    cluster_ips: tuple[str, ...]
    ports: tuple[Port, ...]
    external_name: str  # normalized target for EXTERNAL_NAME, else "" (also when unusable: `target_problem`)
    publish_not_ready: bool
    traffic_distribution: str  # "" | PreferClose | PreferSameZone | PreferSameNode
    # EXTERNAL_NAME whose spec.externalName cannot be a DNS name (names.name_problem): why, naming the
    # value; the Service is kept and answers as one with no usable target
    target_problem: str = ""

    @property
    def headless(self) -> bool:
        return self.kind == HEADLESS


def _service(obj: Mapping[str, Any]) -> Service:
    meta = _meta(SERVICE, obj)
    bad = _Problems(SERVICE, obj)
    name = _label(bad, "metadata.name", _name(SERVICE, obj, meta), dns1035=True)
    ns = _namespace(SERVICE, obj, meta, bad)
    spec = _mapping(obj.get("spec"))
    stype = spec.get("type") or "ClusterIP"
    ports = _ports(bad, spec.get("ports"), service=True)
    publish = bool(spec.get("publishNotReadyAddresses", False))
    td = spec.get("trafficDistribution") or ""
    if not isinstance(td, str):
        td = ""
    if stype == "ExternalName":
        target = spec.get("externalName")
        if not isinstance(target, str) or not target.strip():
            bad.add("type ExternalName without spec.externalName")
        bad.check()
        assert isinstance(target, str)
        normalized = normalize_name(target)
        problem = name_problem(normalized)
        if problem is not None:
            shown = normalized if len(normalized) <= 80 else normalized[:77] + "..."
            return Service(ns, _intern(name), EXTERNAL_NAME, (), ports, "", publish, td,
                           target_problem=f"spec.externalName {shown!r} cannot be a DNS name: {problem}")
        return Service(ns, _intern(name), EXTERNAL_NAME, (), ports, normalized, publish, td)
    raw_ips = spec.get("clusterIPs")
    if not raw_ips:
        single = spec.get("clusterIP")
        raw_ips = [single] if single else []
    if not isinstance(raw_ips, list):
        bad.add("spec.clusterIPs is not a list")
        raw_ips = []
    if raw_ips and raw_ips[0] == "None":
        bad.check()
        return Service(ns, _intern(name), HEADLESS, (), ports, "", publish, td)
    ips = _ips(bad, "spec.clusterIPs", raw_ips)
    bad.check()
    return Service(ns, _intern(name), CLUSTER_IP, ips, ports, "", publish, td)
