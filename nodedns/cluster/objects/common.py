"""What every kind's slimming shares: the kind names, the labels read, ports, and the reading of a raw
object's metadata with every problem found in it named (`_Problems`: one `ObjectError` naming them all).

Strings repeated across objects (namespaces, node names, zones, port names) are interned, and equal
port lists are one shared tuple (`shared_ports`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from nodedns.errors import ObjectError
from nodedns.names import canonical_ip, is_dns1035_label, is_dns1123_label

NAMESPACE = "Namespace"
SERVICE = "Service"
ENDPOINTSLICE = "EndpointSlice"
POD = "Pod"
NODE = "Node"
KINDS = (NAMESPACE, SERVICE, ENDPOINTSLICE, POD, NODE)
SERVICE_IMPORT = "ServiceImport"
IMPORTED_SLICE = "ImportedEndpointSlice"  # an EndpointSlice labelled for a ServiceImport (the MCS watch)
MULTICLUSTER_KINDS = (SERVICE_IMPORT, IMPORTED_SLICE)
DNS_POLICY = "DNSPolicy"  # nodedns.io/v1alpha1 (daemonset/policy-crds.yaml): namespaced
CLUSTER_DNS_POLICY = "ClusterDNSPolicy"  # cluster-scoped
POLICY_KINDS = (DNS_POLICY, CLUSTER_DNS_POLICY)
CONFIG_MAP = "ConfigMap"  # only those a ClusterDNSPolicy names as its RPZ feed (nodedns.policy.feeds), not indexed
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every Namespace: not kept

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MCS_SERVICE_NAME_LABEL = "multicluster.kubernetes.io/service-name"
MCS_SOURCE_CLUSTER_LABEL = "multicluster.kubernetes.io/source-cluster"
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")

NO_PORT = -1  # an EndpointSlice port without a number: "all ports"

_intern = sys.intern


@lru_cache(maxsize=4096)
def shared_ports(ports: tuple[Port, ...]) -> tuple[Port, ...]:
    """One tuple for equal port lists (most Services and slices repeat a few: http, metrics, dns)."""
    return ports



@dataclass(frozen=True, slots=True)
class Port:
    name: str
    protocol: str  # lowercase: tcp, udp, sctp
    port: int


Labels = tuple[tuple[str, str], ...]  # sorted (key, value) pairs: what a label selector reads


def _labels(meta: Mapping[str, Any], drop: str = "") -> Labels:
    """metadata.labels as sorted interned pairs (values that are not strings skipped), `drop` left out."""
    raw = meta.get("labels")
    if not raw or not isinstance(raw, Mapping):
        return ()
    return tuple(sorted((_intern(k), _intern(v)) for k, v in raw.items()
                        if isinstance(k, str) and isinstance(v, str) and k != drop))


def ref(kind: str, obj: Mapping[str, Any]) -> str:
    """`Service default/web` style reference for logs and errors; never raises."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return f"{kind} <no metadata>"
    name = meta.get("name", "<no name>")
    ns = meta.get("namespace")
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def key_of(kind: str, obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of a raw object, for deletes; raises ObjectError."""
    meta = _meta(kind, obj)
    name = _name(kind, obj, meta)
    ns = "" if kind in (NAMESPACE, NODE, CLUSTER_DNS_POLICY) else _namespace(kind, obj, meta)
    return ns, name


class _Problems:
    """Every problem found in one object, so that one ObjectError reports them all."""

    __slots__ = ("kind", "obj", "reasons")

    def __init__(self, kind: str, obj: Mapping[str, Any]) -> None:
        self.kind = kind
        self.obj = obj
        self.reasons: list[str] = []

    def add(self, reason: str) -> None:
        self.reasons.append(reason)

    def check(self) -> None:
        """Raise ObjectError naming the object and every reason, when there is any."""
        if self.reasons:
            raise ObjectError(ref(self.kind, self.obj), "; ".join(self.reasons))


def _label(bad: _Problems, what: str, value: str, *, dns1035: bool = False) -> str:
    """`value` when it is a DNS label (DNS-1035 with `dns1035`: starts with a letter), else a problem."""
    if (is_dns1035_label if dns1035 else is_dns1123_label)(value):
        return value
    rule = "DNS-1035 label (a-z, 0-9, '-', starting with a letter)" if dns1035 else \
        "DNS-1123 label (a-z, 0-9, '-')"
    bad.add(f"{what} {value!r} is not a {rule}, so it cannot be a DNS name")
    return value



def _meta(kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if type(meta) is not dict and not isinstance(meta, Mapping):
        raise ObjectError(ref(kind, obj), "metadata missing")
    return meta


def _name(kind: str, obj: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError(ref(kind, obj), "metadata.name missing")
    return name


def _namespace(kind: str, obj: Mapping[str, Any], meta: Mapping[str, Any], bad: _Problems | None = None) -> str:
    ns = meta.get("namespace", "default")
    if not isinstance(ns, str) or not is_dns1123_label(ns):
        reason = f"metadata.namespace {ns!r} is not a DNS label"
        if bad is None:
            raise ObjectError(ref(kind, obj), reason)
        bad.add(reason)
        return ""
    return _intern(ns)


_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _mapping(value: Any) -> Mapping[str, Any]:
    if type(value) is dict:  # JSON objects: skip the (slow) ABC check
        return value
    return value if isinstance(value, Mapping) else _EMPTY


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _ips(bad: _Problems, field: str, raw: list[Any]) -> tuple[str, ...]:
    """The list at `field` as canonical IP addresses; an entry that is none is a problem (and left out)."""
    ips = []
    for i, text in enumerate(raw):
        ip = canonical_ip(text) if isinstance(text, str) else None
        if ip is None:
            bad.add(f"{field}[{i}] {text!r} is not an IP address")
            continue
        ips.append(ip)
    return tuple(ips)


def _ports(bad: _Problems, raw: Any, *, service: bool) -> tuple[Port, ...]:
    ports = []
    for i, p in enumerate(_list(raw)):
        if type(p) is not dict and not isinstance(p, Mapping):
            bad.add(f"ports[{i}] is not an object")
            continue
        name = p.get("name") or ""
        proto = p.get("protocol") or "TCP"
        number = p.get("port")
        if number is None:
            if service:
                bad.add(f"spec.ports[{i}].port missing")
            number = NO_PORT
        elif isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= 65535:
            bad.add(f"ports[{i}].port {number!r} is not a port number")
        if not isinstance(name, str) or not isinstance(proto, str):
            bad.add(f"ports[{i}] name/protocol must be strings")
            continue
        ports.append(Port(_intern(name.lower()), _intern(proto.lower()), number))
    return shared_ports(tuple(ports))
