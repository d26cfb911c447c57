"""Shrink raw Kubernetes objects (dicts from YAML or API JSON) into the slim frozen records DNS needs.

Both the manifest loader and the API watch feed dicts through `slim(kind, obj)`. Nothing else of
an object is kept: no client model objects, no managedFields, no labels except the one that joins
an EndpointSlice to its Service. Strings repeated across objects (namespaces, node names, zones,
port names) are interned. An invalid object raises `ObjectError` naming it and every problem found
in it (not only the first: `_Problems`); the caller skips it and logs why. Names that become DNS
names are held to the API server's rules, so an object it would reject never turns into a name
that cannot answer: a Service's name is a DNS-1035 label (`Checkout_Svc` is not), a Namespace's
name, an endpoint's hostname and a Pod's hostname and subdomain are DNS-1123 labels.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from nodedns.errors import ObjectError
from nodedns.names import canonical_cidr, canonical_ip, is_dns1035_label, is_dns1123_label, normalize_name

NAMESPACE = "Namespace"
SERVICE = "Service"
ENDPOINTSLICE = "EndpointSlice"
POD = "Pod"
NODE = "Node"
KINDS = (NAMESPACE, SERVICE, ENDPOINTSLICE, POD, NODE)

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")

# Service kinds
CLUSTER_IP = 0
HEADLESS = 1
EXTERNAL_NAME = 2

NO_PORT = -1  # an EndpointSlice port without a number: "all ports"

_intern = sys.intern


@dataclass(frozen=True, slots=True)
class Port:
    name: str
    protocol: str  # lowercase: tcp, udp, sctp
    port: int


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str


@dataclass(frozen=True, slots=True)
class Service:
    namespace: str
    name: str
    kind: int
    cluster_ips: tuple[str, ...]
    ports: tuple[Port, ...]
    external_name: str  # normalized target for EXTERNAL_NAME, else ""
    publish_not_ready: bool
    traffic_distribution: str  # "" | PreferClose | PreferSameZone | PreferSameNode

    @property
    def headless(self) -> bool:
        return self.kind == HEADLESS


@dataclass(frozen=True, slots=True)
class Endpoint:
    addresses: tuple[str, ...]
    ready: bool
    hostname: str
    pod_name: str  # targetRef name when the target is a Pod
    node_name: str
    zone: str
    for_zones: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EndpointSlice:
    namespace: str
    name: str
    service: str
    address_type: str  # IPv4 | IPv6
    endpoints: tuple[Endpoint, ...]
    ports: tuple[Port, ...]


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    ip: str  # status.podIP, canonical, "" when not assigned
    ips: tuple[str, ...]  # status.podIPs
    node_name: str
    host_network: bool
    terminating: bool
    hostname: str
    subdomain: str
    dns_policy: str
    dns_config: Mapping[str, Any] | None  # kept raw, only when set (rare; autopath needs it)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    zone: str  # topology.kubernetes.io/zone (or the beta label), "" when unlabelled
    region: str  # topology.kubernetes.io/region (or the beta label)
    pod_cidrs: tuple[str, ...] = ()  # spec.podCIDRs (else spec.podCIDR), canonical CIDR text
    addresses: tuple[str, ...] = ()  # status.addresses of type InternalIP and ExternalIP, canonical


Record = Namespace | Service | EndpointSlice | Pod | Node


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
    ns = "" if kind in (NAMESPACE, NODE) else _namespace(kind, obj, meta)
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


def slim(kind: str, obj: Mapping[str, Any]) -> Record | None:
    """The slim record of a raw object, None when DNS ignores it (FQDN slices), or ObjectError."""
    if not isinstance(obj, Mapping):
        raise ObjectError(f"{kind} <not an object>", "not a mapping")
    try:
        if kind == SERVICE:
            return _service(obj)
        if kind == ENDPOINTSLICE:
            return _slice(obj)
        if kind == POD:
            return _pod(obj)
        if kind == NAMESPACE:
            meta = _meta(kind, obj)
            bad = _Problems(kind, obj)
            name = _label(bad, "metadata.name", _name(kind, obj, meta))
            bad.check()
            return Namespace(_intern(name))
        if kind == NODE:
            return _node(obj)
    except ObjectError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise ObjectError(ref(kind, obj), f"malformed: {exc}") from None
    raise ObjectError(ref(kind, obj), f"unsupported kind {kind!r}")


def _meta(kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
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


def _ports(bad: _Problems, raw: Any, *, service: bool) -> tuple[Port, ...]:
    ports = []
    for i, p in enumerate(_list(raw)):
        if not isinstance(p, Mapping):
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
    return tuple(ports)


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
        return Service(ns, _intern(name), EXTERNAL_NAME, (), ports, normalize_name(target), publish, td)
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
    ips = []
    for i, text in enumerate(raw_ips):
        ip = canonical_ip(text) if isinstance(text, str) else None
        if ip is None:
            bad.add(f"spec.clusterIPs[{i}] {text!r} is not an IP address")
            continue
        ips.append(ip)
    bad.check()
    return Service(ns, _intern(name), CLUSTER_IP, tuple(ips), ports, "", publish, td)


def _slice(obj: Mapping[str, Any]) -> EndpointSlice | None:
    meta = _meta(ENDPOINTSLICE, obj)
    name = _name(ENDPOINTSLICE, obj, meta)
    bad = _Problems(ENDPOINTSLICE, obj)
    ns = _namespace(ENDPOINTSLICE, obj, meta, bad)
    address_type = obj.get("addressType")
    if address_type == "FQDN":
        return None  # not used for DNS, like CoreDNS
    if address_type not in ("IPv4", "IPv6"):
        bad.add(f"addressType {address_type!r} is not IPv4, IPv6 or FQDN")
    service = _mapping(meta.get("labels")).get(SERVICE_NAME_LABEL)
    if not isinstance(service, str) or not service:
        bad.add(f"no {SERVICE_NAME_LABEL} label")
        service = ""
    endpoints = []
    v6 = address_type == "IPv6"
    # the hot loop of a full sync (150,000 endpoints at 5,000 nodes): locals, dict fast paths
    for i, ep in enumerate(_list(obj.get("endpoints"))):
        if type(ep) is not dict and not isinstance(ep, Mapping):
            bad.add(f"endpoints[{i}] is not an object")
            continue
        addrs = []
        raw_addrs = _list(ep.get("addresses"))
        for j, text in enumerate(raw_addrs):
            ip = canonical_ip(text) if isinstance(text, str) else None
            if ip is None or (":" in ip) != v6:
                bad.add(f"endpoints[{i}].addresses[{j}] {text!r} is not an {address_type}")
                continue
            addrs.append(ip)
        if not raw_addrs:
            bad.add(f"endpoints[{i}] has no addresses")
        ready = _mapping(ep.get("conditions")).get("ready")
        hostname = ep.get("hostname") or ""
        if hostname and isinstance(hostname, str):
            hostname = _label(bad, f"endpoints[{i}].hostname", hostname.lower())
        target = _mapping(ep.get("targetRef"))
        pod_name = target.get("name", "") if target.get("kind", "Pod") == "Pod" else ""
        hints = ep.get("hints")
        zones = tuple(
            _intern(z["name"]) for z in _list(_mapping(hints).get("forZones"))
            if isinstance(z, Mapping) and isinstance(z.get("name"), str)
        ) if hints else ()
        endpoints.append(
            Endpoint(
                tuple(addrs),
                ready is None or bool(ready),
                hostname.lower() if isinstance(hostname, str) else "",
                pod_name.lower() if isinstance(pod_name, str) else "",
                _intern(str(ep.get("nodeName") or "")),
                _intern(str(ep.get("zone") or "")),
                zones,
            )
        )
    ports = _ports(bad, obj.get("ports"), service=False)
    bad.check()
    return EndpointSlice(ns, name, _intern(service), str(address_type), tuple(endpoints), ports)


def _pod(obj: Mapping[str, Any]) -> Pod:
    meta = _meta(POD, obj)
    name = _name(POD, obj, meta)
    bad = _Problems(POD, obj)
    ns = _namespace(POD, obj, meta, bad)
    spec = _mapping(obj.get("spec"))
    status = _mapping(obj.get("status"))
    ip = ""
    raw_ip = status.get("podIP")
    if raw_ip:
        ip = canonical_ip(str(raw_ip)) or ""
        if not ip:
            bad.add(f"status.podIP {raw_ip!r} is not an IP address")
    ips = []
    for entry in _list(status.get("podIPs")):
        text = entry.get("ip") if isinstance(entry, Mapping) else None
        c = canonical_ip(text) if isinstance(text, str) else None
        if c is None:
            bad.add(f"status.podIPs entry {entry!r} is not an IP address")
            continue
        ips.append(c)
    if ip and ip not in ips:
        ips.insert(0, ip)
    phase = status.get("phase") or ""
    dns_config = spec.get("dnsConfig")
    hostname = str(spec.get("hostname") or "").lower()
    subdomain = str(spec.get("subdomain") or "").lower()
    for field_name, value in (("spec.hostname", hostname), ("spec.subdomain", subdomain)):
        if value:
            _label(bad, field_name, value)
    bad.check()
    return Pod(
        namespace=ns,
        name=name,
        ip=ip,
        ips=tuple(ips),
        node_name=_intern(str(spec.get("nodeName") or "")),
        host_network=bool(spec.get("hostNetwork", False)),
        terminating=meta.get("deletionTimestamp") is not None or phase in ("Succeeded", "Failed"),
        hostname=hostname,
        subdomain=subdomain,
        dns_policy=_intern(str(spec.get("dnsPolicy") or "ClusterFirst")),
        dns_config=dns_config if isinstance(dns_config, Mapping) else None,
    )


def _node(obj: Mapping[str, Any]) -> Node:
    meta = _meta(NODE, obj)
    name = _name(NODE, obj, meta)
    labels = _mapping(meta.get("labels"))
    zone = next((str(labels[k]) for k in ZONE_LABELS if labels.get(k)), "")
    region = next((str(labels[k]) for k in REGION_LABELS if labels.get(k)), "")
    spec = _mapping(obj.get("spec"))
    raw_cidrs = _list(spec.get("podCIDRs")) or ([spec["podCIDR"]] if spec.get("podCIDR") else [])
    # Malformed entries are left out, not fatal: the node's zone and region still count.
    cidrs = [c for c in (canonical_cidr(t) for t in raw_cidrs if isinstance(t, str)) if c is not None]
    addresses = []
    for entry in _list(_mapping(obj.get("status")).get("addresses")):
        if isinstance(entry, Mapping) and entry.get("type") in ("InternalIP", "ExternalIP"):
            ip = canonical_ip(entry["address"]) if isinstance(entry.get("address"), str) else None
            if ip is not None:
                addresses.append(ip)
    return Node(name, _intern(zone), _intern(region), tuple(cidrs), tuple(addresses))
