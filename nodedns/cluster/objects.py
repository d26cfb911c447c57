"""Shrink raw Kubernetes objects (dicts from YAML or API JSON) into the slim frozen records DNS needs.

One module on purpose (over 800 lines): the slim record of each kind sits beside the function that
shrinks a raw object into it, the one concept both sources (manifests, the API watch) share.

Both the manifest loader and the API watch feed dicts through `slim(kind, obj)`. Nothing else of
an object is kept: no client model objects, no managedFields, no labels except the one that joins
an EndpointSlice to its Service. Strings repeated across objects (namespaces, node names, zones,
port names) are interned, and equal port lists are one shared tuple. An invalid object raises
`ObjectError` naming it and every problem found in it (not only the first: `_Problems`); the
caller skips it and logs why. Names that become DNS names are held to the API server's rules, so
an object it would reject never turns into a name that cannot answer: a Service's name is a
DNS-1035 label (`Checkout_Svc` is not), a Namespace's name, an endpoint's hostname and a Pod's
hostname and subdomain are DNS-1123 labels. An ExternalName's `spec.externalName` is held to what
the wire can carry (`names.name_problem`: labels of 1 to 63 octets, 253 characters in all, no empty
label): the API server checks it more loosely (no per-label length), and one bad value must not
take a Service's neighbours down. Such a Service is kept, with `external_name` empty and the reason
in `target_problem`: it answers as a Service with no usable target (nodedns.cluster.records).

Endpoints are most of the index (150,000 of them at 5,000 nodes), so an `EndpointSlice` keeps
them by column rather than as one object each: every address packed into one `bytes` (4 or 16
bytes each), node and zone names as tuples of interned strings, pod names and hostnames joined
into one string, and the rarely set parts (not ready, topology hints, several addresses) only when
some endpoint has them. `EndpointSlice.endpoints` builds the `Endpoint` tuples from the columns when
asked (on a cache miss), `endpoints_at(ip)` only those with one address (a reverse lookup);
`ip_keys()` gives the addresses as integers for the index's table of address blocks.

Multi-Cluster Services (KEP-1645, only with --multicluster-zone): a `multicluster.x-k8s.io`
ServiceImport becomes a `ServiceImport`; an EndpointSlice labelled
`multicluster.kubernetes.io/service-name` is, for the clusterset zone, an `ImportedSlice` (kind
`IMPORTED_SLICE`: the same object seen by the multicluster watch) that carries its
`multicluster.kubernetes.io/source-cluster` label. Such a slice without the cluster label
`kubernetes.io/service-name` is no part of the cluster zone (`slim(ENDPOINTSLICE, ...)` is None).
"""

from __future__ import annotations

import ipaddress
import json
import socket  # inet_aton, inet_pton, inet_ntoa only: address conversion, no sockets
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import FrozenInstanceError, dataclass
from functools import lru_cache
from itertools import repeat
from operator import attrgetter
from types import MappingProxyType
from typing import Any, NamedTuple

from nodedns.errors import ObjectError
from nodedns.names import (
    canonical_cidr,
    canonical_ip,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    name_problem,
    normalize_name,
)

Columns = tuple[bytes, list[bool], list[str], list[str], list[str], list[str]]
common_columns: Callable[[list[Any], bool], Columns | None] | None
try:  # the endpoint columns of a slice of the common shape in C (nodedns/cluster/_slim.c); optional
    from nodedns.cluster._slim import common_columns
except ImportError:  # built without a C compiler: the loop in _slice does it all
    common_columns = None

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

# Service kinds
CLUSTER_IP = 0
HEADLESS = 1
EXTERNAL_NAME = 2

NO_PORT = -1  # an EndpointSlice port without a number: "all ports"

_intern = sys.intern


@lru_cache(maxsize=4096)
def shared_ports(ports: tuple[Port, ...]) -> tuple[Port, ...]:
    """One tuple for equal port lists (most Services and slices repeat a few: http, metrics, dns)."""
    return ports


@lru_cache(maxsize=1024)
def _zones_of(for_zones: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple for equal topology hints."""
    return tuple(_intern(z) for z in for_zones)


@dataclass(frozen=True, slots=True)
class Port:
    name: str
    protocol: str  # lowercase: tcp, udp, sctp
    port: int


Labels = tuple[tuple[str, str], ...]  # sorted (key, value) pairs: what a label selector reads


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    # its labels but `kubernetes.io/metadata.name` (always the name: `namespace_labels` adds it back)
    labels: Labels = ()


def namespace_labels(name: str, labels: Labels) -> dict[str, str]:
    """A Namespace's labels as the API server shows them (the name label added back)."""
    return {**dict(labels), NAMESPACE_NAME_LABEL: name}


@dataclass(frozen=True, slots=True)
class Policy:
    """A `nodedns.io` DNSPolicy (`namespace` set) or ClusterDNSPolicy (`namespace` ""), its spec kept as
    canonical JSON text (hashable, compared as a whole); `nodedns.policy` reads it."""

    kind: str  # DNS_POLICY | CLUSTER_DNS_POLICY
    namespace: str
    name: str
    spec: str  # json.dumps(spec, sort_keys=True)
    # what the agent writes to its status subresource compares against (nodedns.policy.status): the object's
    # resourceVersion and generation, and its status.conditions as canonical JSON text
    resource_version: str = ""
    generation: int = 0
    conditions: str = "[]"


@dataclass(frozen=True, slots=True)
class ConfigMap:
    """A ConfigMap an RPZ feed is read from: its data (key -> text) and resourceVersion."""

    namespace: str
    name: str
    data: tuple[tuple[str, str], ...]
    resource_version: str = ""


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


class Endpoint(NamedTuple):
    """One endpoint of a slice, as `EndpointSlice.endpoints` builds it (not stored as such)."""

    addresses: tuple[str, ...]  # canonical text
    ready: bool
    hostname: str
    pod_name: str  # targetRef name when the target is a Pod
    node_name: str
    zone: str
    for_zones: tuple[str, ...]


V6_KEY = 1 << 128  # an IPv6 address's key is its integer plus this, so it never equals an IPv4 key
_SEP = "\n"  # joins a column of names (never part of a Kubernetes name)
_FAMILY = {"IPv4": (socket.AF_INET, 4), "IPv6": (socket.AF_INET6, 16)}
_ZERO_80 = bytes(10)


def packed_ip(ip: str) -> bytes | None:
    """An address in canonical text, packed (4 or 16 bytes); None when the text is not that."""
    if canonical_ip(ip) != ip or "%" in ip:
        return None
    return socket.inet_pton(socket.AF_INET6, ip) if ":" in ip else socket.inet_aton(ip)


def ip_key(ip: str) -> int | None:
    """The index key of an address in canonical text: its integer (IPv6 offset by `V6_KEY`); None if not one."""
    packed = packed_ip(ip)
    if packed is None:
        return None
    return int.from_bytes(packed) | (V6_KEY if len(packed) == 16 else 0)


def _pack(address_type: str, ip: str) -> bytes:
    """One canonical address of the slice's family, packed; ValueError when it is not one."""
    family = _FAMILY[address_type][0]
    if canonical_ip(ip) != ip or "%" in ip or (":" in ip) != (family == socket.AF_INET6):
        raise ValueError(f"{ip!r} is not an {address_type} address")
    try:
        return socket.inet_pton(family, ip)
    except OSError:
        raise ValueError(f"{ip!r} is not an {address_type} address") from None


def _v6_text(packed: bytes) -> str:
    """The canonical text of a packed IPv6 address (RFC 5952, as ipaddress and Go print it). inet_ntop (C, ~0.2 us)
    prints the same but for the IPv4-compatible and -mapped ranges (`::a.b.c.d`): those, whose first 80 bits are
    zero, go through ipaddress (~5 us)."""
    if packed[:10] != _ZERO_80:
        return socket.inet_ntop(socket.AF_INET6, packed)
    return str(ipaddress.IPv6Address(packed))


def _pack_v4(text: str) -> bytes | None:
    """A canonical IPv4 address packed; None when `text` is not one in canonical form (inet_aton takes `1.2`)."""
    try:
        packed = socket.inet_aton(text)
    except OSError:
        return None
    return packed if socket.inet_ntoa(packed) == text else None


def _pack_v6(text: str) -> bytes | None:
    """A canonical IPv6 address packed; None when `text` is not one in canonical form."""
    try:
        packed = socket.inet_pton(socket.AF_INET6, text)
    except OSError:
        return None
    return packed if _v6_text(packed) == text else None


def _join(names: Sequence[str]) -> str | tuple[str, ...] | None:
    """A column of names: None when all are empty, else one joined string (a tuple if one holds the separator)."""
    if not any(names):
        return None
    joined = _SEP.join(names)
    return tuple(names) if joined.count(_SEP) != len(names) - 1 else joined


def _split(column: str | tuple[str, ...] | None, size: int) -> Sequence[str]:
    if column is None:
        return ("",) * size
    return column.split(_SEP) if type(column) is str else column


class EndpointSlice:
    """One EndpointSlice: its identity, its ports, and its endpoints stored by column (frozen).

    `EndpointSlice(namespace, name, service, address_type, endpoints, ports)` packs a sequence of
    `Endpoint`s; the slimming path builds the columns directly (`from_columns`). Equality and
    hashing are by value.
    """

    __slots__ = ("namespace", "name", "service", "address_type", "ports", "size",
                 "_addrs", "_counts", "_ready", "_hostnames", "_pod_names", "_nodes", "_zones", "_for_zones")
    namespace: str
    name: str
    service: str
    address_type: str  # IPv4 | IPv6
    ports: tuple[Port, ...]
    size: int  # how many endpoints
    _addrs: bytes  # every address of every endpoint, packed, in order
    _counts: tuple[int, ...] | None  # addresses per endpoint; None when each has one
    _ready: bytes | None  # 1/0 per endpoint; None when all are ready
    _hostnames: str | tuple[str, ...] | None  # see _join
    _pod_names: str | tuple[str, ...] | None
    _nodes: tuple[str, ...]
    _zones: tuple[str, ...]
    _for_zones: tuple[tuple[str, ...], ...] | None  # None when no endpoint has hints

    def __init__(
        self, namespace: str, name: str, service: str, address_type: str,
        endpoints: Iterable[Endpoint], ports: tuple[Port, ...],
    ) -> None:
        eps = list(endpoints)
        self._fill(
            namespace, name, service, address_type, ports,
            b"".join(_pack(address_type, ip) for ep in eps for ip in ep.addresses),
            [len(ep.addresses) for ep in eps], [ep.ready for ep in eps],
            [ep.hostname for ep in eps], [ep.pod_name for ep in eps],
            [_intern(ep.node_name) for ep in eps], [_intern(ep.zone) for ep in eps], [ep.for_zones for ep in eps],
        )

    @classmethod
    def from_columns(
        cls, namespace: str, name: str, service: str, address_type: str, ports: tuple[Port, ...],
        addrs: bytes, counts: Sequence[int] | None, ready: Sequence[bool], hostnames: Sequence[str],
        pod_names: Sequence[str], nodes: Sequence[str], zones: Sequence[str],
        for_zones: Sequence[tuple[str, ...]] | None,
    ) -> EndpointSlice:
        """A slice from validated columns, one entry per endpoint (`counts` None: one address each;
        node and zone names interned)."""
        self = cls.__new__(cls)
        self._fill(namespace, name, service, address_type, ports, addrs,
                   counts if counts is not None else (1,) * len(nodes), ready,
                   hostnames, pod_names, nodes, zones, for_zones)
        return self

    def _fill(
        self, namespace: str, name: str, service: str, address_type: str, ports: tuple[Port, ...],
        addrs: bytes, counts: Sequence[int], ready: Sequence[bool], hostnames: Sequence[str],
        pod_names: Sequence[str], nodes: Sequence[str], zones: Sequence[str],
        for_zones: Sequence[tuple[str, ...]] | None,
    ) -> None:
        if address_type not in _FAMILY:
            raise ValueError(f"address type {address_type!r} is not IPv4 or IPv6")
        size = len(nodes)
        if not (len(counts) == len(ready) == len(hostnames) == len(pod_names) == len(zones) == size
                and len(addrs) == sum(counts) * _FAMILY[address_type][1]
                and (for_zones is None or len(for_zones) == size)):
            raise ValueError("endpoint columns of different lengths")
        values = (
            namespace, name, service, address_type, shared_ports(tuple(ports)), size, bytes(addrs),
            None if counts.count(1) == len(counts) else tuple(counts),
            None if all(ready) else bytes(bool(r) for r in ready),
            _join(hostnames), _join(pod_names),
            tuple(nodes), tuple(zones),  # interned by the callers
            tuple(_zones_of(z) for z in for_zones) if for_zones is not None and any(for_zones) else None,
        )
        for slot, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, slot, value)

    # -- reading -----------------------------------------------------------------------------

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        """The endpoints, built from the columns (in slice order)."""
        size = self.size
        family, width = _FAMILY[self.address_type]
        addrs = self._addrs
        ntoa = socket.inet_ntoa if family == socket.AF_INET else _v6_text
        texts = [ntoa(addrs[a:a + width]) for a in range(0, len(addrs), width)]
        if self._counts is None:
            addresses: list[tuple[str, ...]] = [(t,) for t in texts]
        else:
            addresses, at = [], 0
            for n in self._counts:
                addresses.append(tuple(texts[at:at + n]))
                at += n
        rows = zip(
            addresses, repeat(True, size) if self._ready is None else map(bool, self._ready),
            _split(self._hostnames, size), _split(self._pod_names, size), self._nodes, self._zones,
            repeat((), size) if self._for_zones is None else self._for_zones,
            strict=True,
        )
        new = tuple.__new__
        return tuple([new(Endpoint, row) for row in rows])  # Endpoint(*row) without its __new__'s frame

    def endpoints_at(self, ip: str) -> tuple[Endpoint, ...]:
        """The endpoints with the address `ip` (canonical text), built alone (a reverse lookup)."""
        hits = self._positions(packed_ip(ip))
        if hits and self._counts is not None:
            owner = [i for i, n in enumerate(self._counts) for _ in range(n)]
            hits = sorted({owner[h] for h in hits})
        return self._build(hits) if hits else ()

    def has_address(self, packed: bytes | None) -> bool:
        """True when some endpoint has the address (`packed_ip` of its canonical text)."""
        return bool(self._positions(packed))

    def _positions(self, packed: bytes | None) -> list[int]:
        """Where a packed address is among the slice's addresses (address positions, not endpoints)."""
        width = _FAMILY[self.address_type][1]
        if packed is None or len(packed) != width:
            return []
        addrs = self._addrs
        hits = []
        at = addrs.find(packed)
        while at >= 0:
            if at % width == 0:
                hits.append(at // width)
            at = addrs.find(packed, at + 1)
        return hits

    def _build(self, which: Sequence[int]) -> tuple[Endpoint, ...]:
        """The endpoints at positions `which` (ascending)."""
        size = self.size
        family, width = _FAMILY[self.address_type]
        addrs = self._addrs
        starts: Sequence[int] = range(size)
        counts: Sequence[int] = (1,) * size
        if self._counts is not None:
            counts = self._counts
            starts = [0] * size
            for i in range(1, size):
                starts[i] = starts[i - 1] + counts[i - 1]
        ntoa = socket.inet_ntoa if family == socket.AF_INET else _v6_text
        hostnames = _split(self._hostnames, size)
        pod_names = _split(self._pod_names, size)
        ready, nodes, zones, for_zones = self._ready, self._nodes, self._zones, self._for_zones
        new = tuple.__new__
        out = []
        for i in which:
            start = starts[i] * width
            row = (
                tuple([ntoa(addrs[a:a + width]) for a in range(start, start + counts[i] * width, width)]),
                ready is None or ready[i] != 0, hostnames[i], pod_names[i], nodes[i], zones[i],
                () if for_zones is None else for_zones[i],
            )
            out.append(new(Endpoint, row))  # Endpoint(*row) without the generated __new__'s frame
        return tuple(out)

    def same_addresses(self, other: EndpointSlice) -> bool:
        """True when `other` names the same addresses in the same order, of the same Service (the update
        changed readiness, names or ports only: the address tables stay as they are)."""
        return self._addrs == other._addrs and self.service == other.service and \
            self.address_type == other.address_type

    def changed_address_texts(self, old: EndpointSlice) -> list[str]:
        """With `old` naming the same addresses (`same_addresses`): the addresses, in canonical text, of the
        endpoints whose row (readiness, hostname, Pod name, node, zone, hints) is not the same in both — what
        an update that turned one endpoint ready touches, without converting the slice's every address."""
        size = self.size
        if size != old.size or self._counts != old._counts:
            return self.address_texts()  # the addresses regrouped into other endpoints: every one
        changed: set[int] = set()
        if self._ready != old._ready:
            now, before = self._ready or b"\x01" * size, old._ready or b"\x01" * size
            changed.update(i for i in range(size) if now[i] != before[i])
        for now_names, old_names in ((self._hostnames, old._hostnames), (self._pod_names, old._pod_names)):
            if now_names != old_names:
                x, y = _split(now_names, size), _split(old_names, size)
                changed.update(i for i in range(size) if x[i] != y[i])
        columns: tuple[tuple[Sequence[object], Sequence[object]], ...] = (
            (self._nodes, old._nodes), (self._zones, old._zones),
            (self._for_zones or ((),) * size, old._for_zones or ((),) * size))
        for a, b in columns:
            if a != b:
                changed.update(i for i in range(size) if a[i] != b[i])
        if not changed:
            return []
        positions: Iterable[int] = sorted(changed)
        if self._counts is not None:  # endpoints to the positions of their addresses
            owner = [i for i, n in enumerate(self._counts) for _ in range(n)]
            positions = [at for at, i in enumerate(owner) if i in changed]
        family, width = _FAMILY[self.address_type]
        ntoa = socket.inet_ntoa if family == socket.AF_INET else _v6_text
        addrs = self._addrs
        return [ntoa(addrs[at * width:(at + 1) * width]) for at in positions]

    def address_texts(self) -> list[str]:
        """Every address in canonical text, in order (repeats kept), without building the endpoints."""
        family, width = _FAMILY[self.address_type]
        addrs = self._addrs
        ntoa = socket.inet_ntoa if family == socket.AF_INET else _v6_text
        return [ntoa(addrs[a:a + width]) for a in range(0, len(addrs), width)]

    def ip_keys(self) -> list[int]:
        """Every address as its `ip_key`, in order; repeats kept."""
        width = _FAMILY[self.address_type][1]
        addrs = self._addrs
        flag = V6_KEY if width == 16 else 0
        return [int.from_bytes(addrs[i:i + width]) | flag for i in range(0, len(addrs), width)]

    # -- value semantics -----------------------------------------------------------------------

    def _state(self) -> tuple[Any, ...]:
        return _SLICE_STATE(self)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not EndpointSlice:
            return NotImplemented
        assert isinstance(other, EndpointSlice)
        return self._state() == other._state()

    def __hash__(self) -> int:
        return hash(self._state())

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return _restore_slice, self._state()

    def __repr__(self) -> str:
        return (f"EndpointSlice(namespace={self.namespace!r}, name={self.name!r}, service={self.service!r}, "
                f"address_type={self.address_type!r}, endpoints={self.endpoints!r}, ports={self.ports!r})")


_SLICE_STATE = attrgetter(*EndpointSlice.__slots__)  # every slot's value, one C call (equality, hash, pickle)


def _restore_slice(*state: Any) -> EndpointSlice:
    """Unpickle an EndpointSlice from its slots (the worker processes receive them pickled)."""
    self = EndpointSlice.__new__(EndpointSlice)
    for slot, value in zip(EndpointSlice.__slots__, state, strict=True):
        object.__setattr__(self, slot, value)
    return self


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
    uid: str = ""  # metadata.uid: a Pod recreated under the same name is another Pod ("" when not given)
    owner: tuple[str, str] | None = None  # (kind, name) of its controller: `pod_owner`
    done: bool = False  # phase Succeeded or Failed: its containers ended, its address is free again
    labels: Labels = ()  # metadata.labels (a DNS policy's podSelector reads them)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    zone: str  # topology.kubernetes.io/zone (or the beta label), "" when unlabelled
    region: str  # topology.kubernetes.io/region (or the beta label)
    pod_cidrs: tuple[str, ...] = ()  # spec.podCIDRs (else spec.podCIDR), canonical CIDR text
    addresses: tuple[str, ...] = ()  # status.addresses of type InternalIP and ExternalIP, canonical


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


Record = Namespace | Service | EndpointSlice | Pod | Node | ServiceImport | ImportedSlice | Policy | ConfigMap


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
            return Namespace(_intern(name), _labels(meta, NAMESPACE_NAME_LABEL))
        if kind == NODE:
            return _node(obj)
        if kind == SERVICE_IMPORT:
            return _service_import(obj)
        if kind == IMPORTED_SLICE:
            return _imported_slice(obj)
        if kind in POLICY_KINDS:
            return _policy(kind, obj)
        if kind == CONFIG_MAP:
            return _config_map(obj)
    except ObjectError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise ObjectError(ref(kind, obj), f"malformed: {exc}") from None
    raise ObjectError(ref(kind, obj), f"unsupported kind {kind!r}")


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
    labels = _mapping(meta.get("labels"))
    service = labels.get(SERVICE_NAME_LABEL)
    if not service and labels.get(MCS_SERVICE_NAME_LABEL):
        return None  # imported for a ServiceImport (Multi-Cluster Services): the clusterset zone's
    if not isinstance(service, str) or not service:
        bad.add(f"no {SERVICE_NAME_LABEL} label")
        service = ""
    v6 = address_type == "IPv6"
    raw_eps = obj.get("endpoints")
    if common_columns is not None and type(raw_eps) is list:
        columns = common_columns(raw_eps, v6)  # C: every endpoint of the common shape, or None
        if columns is not None:
            addrs_c, ready_c, hosts_c, pods_c, nodes_c, zones_c = columns
            ports = _ports(bad, obj.get("ports"), service=False)
            bad.check()
            return EndpointSlice.from_columns(ns, name, _intern(service), str(address_type), ports, addrs_c, None,
                                              ready_c, hosts_c, pods_c, nodes_c, zones_c, None)
    # the hot loop of a full sync (150,000 endpoints at 5,000 nodes): locals, dict fast paths,
    # straight into the slice's columns (no object per endpoint)
    pack = socket.inet_aton if not v6 else lambda ip: socket.inet_pton(socket.AF_INET6, ip)
    fast = _pack_v6 if v6 else _pack_v4  # canonical text packed in C, without the regex or ipaddress
    addrs: list[bytes] = []
    counts: list[int] = []
    ready_col: list[bool] = []
    hostnames: list[str] = []
    pod_names: list[str] = []
    nodes: list[str] = []
    zones: list[str] = []
    for_zones: list[tuple[str, ...]] = []
    add_addr, add_count, add_ready = addrs.append, counts.append, ready_col.append
    add_host, add_pod, add_node, add_zone, add_hints = (hostnames.append, pod_names.append, nodes.append,
                                                         zones.append, for_zones.append)
    intern = _intern
    for i, ep in enumerate(_list(obj.get("endpoints"))):
        if type(ep) is not dict and not isinstance(ep, Mapping):
            bad.add(f"endpoints[{i}] is not an object")
            continue
        get = ep.get
        raw_addrs = get("addresses")
        # one address in canonical text (nearly every endpoint): packed in C, no regex, no ipaddress
        packed = fast(raw_addrs[0]) if type(raw_addrs) is list and len(raw_addrs) == 1 \
            and type(raw_addrs[0]) is str else None
        if packed is not None:
            add_addr(packed)
            add_count(1)
        else:
            n = 0
            raw_addrs = _list(raw_addrs)
            for j, text in enumerate(raw_addrs):
                packed = fast(text) if type(text) is str else None
                if packed is not None:
                    add_addr(packed)
                    n += 1
                    continue
                ip = canonical_ip(text) if isinstance(text, str) else None
                if ip is None or (":" in ip) != v6 or "%" in ip:
                    bad.add(f"endpoints[{i}].addresses[{j}] {text!r} is not an {address_type}")
                    continue
                add_addr(pack(ip))
                n += 1
            if not raw_addrs:
                bad.add(f"endpoints[{i}] has no addresses")
            add_count(n)
        conditions = get("conditions")
        ready = (conditions if type(conditions) is dict else _mapping(conditions)).get("ready")
        add_ready(ready is None or bool(ready))
        hostname = get("hostname")
        if not hostname:
            add_host("")
        elif isinstance(hostname, str):
            add_host(_label(bad, f"endpoints[{i}].hostname", hostname.lower()).lower())
        else:
            add_host("")
        target = get("targetRef")
        if type(target) is not dict:
            target = _mapping(target)
        pod_name = target.get("name", "") if target.get("kind", "Pod") == "Pod" else ""
        add_pod(pod_name.lower() if isinstance(pod_name, str) else "")
        node = get("nodeName") or ""
        add_node(intern(node if type(node) is str else str(node)))
        zone = get("zone") or ""
        add_zone(intern(zone if type(zone) is str else str(zone)))
        hints = get("hints")
        add_hints(tuple(
            z["name"] for z in _list(_mapping(hints).get("forZones"))
            if isinstance(z, Mapping) and isinstance(z.get("name"), str)
        ) if hints else ())
    ports = _ports(bad, obj.get("ports"), service=False)
    bad.check()
    return EndpointSlice.from_columns(
        ns, name, _intern(service), str(address_type), ports, b"".join(addrs), counts, ready_col,
        hostnames, pod_names, nodes, zones, for_zones,
    )


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
        uid=str(meta.get("uid") or ""),
        owner=pod_owner(meta),
        done=phase in ("Succeeded", "Failed"),
        labels=_labels(meta),
    )


def _policy(kind: str, obj: Mapping[str, Any]) -> Policy:
    """A DNS policy kept as its spec's JSON text; what the spec says is `nodedns.policy`'s to read (a spec
    the agent cannot use is reported there, never dropped here)."""
    meta = _meta(kind, obj)
    name = _name(kind, obj, meta)
    ns = "" if kind == CLUSTER_DNS_POLICY else _namespace(kind, obj, meta)
    spec = obj.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise ObjectError(ref(kind, obj), "spec is not an object")
    status = _mapping(obj.get("status"))
    conditions = [c for c in _list(status.get("conditions")) if isinstance(c, Mapping)]
    generation = meta.get("generation")
    rv = meta.get("resourceVersion")
    return Policy(kind, ns, _intern(name), json.dumps(spec, sort_keys=True, separators=(",", ":")),
                  rv if isinstance(rv, str) else "", generation if isinstance(generation, int) else 0,
                  json.dumps(conditions, sort_keys=True, separators=(",", ":")))


def _config_map(obj: Mapping[str, Any]) -> ConfigMap:
    """A ConfigMap's text data (binaryData is not read)."""
    meta = _meta(CONFIG_MAP, obj)
    name = _name(CONFIG_MAP, obj, meta)
    ns = _namespace(CONFIG_MAP, obj, meta)
    data = _mapping(obj.get("data"))
    rv = meta.get("resourceVersion")
    texts = tuple(sorted((k, v) for k, v in data.items() if isinstance(k, str) and isinstance(v, str)))
    return ConfigMap(ns, name, texts, rv if isinstance(rv, str) else "")


def pod_owner(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    """The workload a Pod belongs to, as `kubectl` names it: its controller's (kind, name) from
    `metadata.ownerReferences` (the one with `controller: true`, else the first), with a ReplicaSet
    made by a Deployment (its name is `<deployment>-<pod-template-hash>`) named as that Deployment.
    None for a bare Pod."""
    refs = [r for r in _list(meta.get("ownerReferences")) if isinstance(r, Mapping)
            and isinstance(r.get("kind"), str) and isinstance(r.get("name"), str) and r.get("kind") and r.get("name")]
    if not refs:
        return None
    ref_ = next((r for r in refs if r.get("controller") is True), refs[0])
    kind, name = str(ref_["kind"]), str(ref_["name"])
    template_hash = _mapping(meta.get("labels")).get("pod-template-hash")
    if kind == "ReplicaSet" and isinstance(template_hash, str) and template_hash \
            and name.endswith("-" + template_hash) and len(name) > len(template_hash) + 1:
        kind, name = "Deployment", name[: -len(template_hash) - 1]
    return _intern(kind), _intern(name)


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


# -- Multi-Cluster Services (KEP-1645) ------------------------------------------------------------

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
    ips: list[str] = []
    if not headless:
        raw_ips = spec.get("ips") or []
        if not isinstance(raw_ips, list):
            bad.add("spec.ips is not a list")
            raw_ips = []
        for i, text in enumerate(raw_ips):
            ip = canonical_ip(text) if isinstance(text, str) else None
            if ip is None:
                bad.add(f"spec.ips[{i}] {text!r} is not an IP address")
                continue
            ips.append(ip)
    bad.check()
    return ServiceImport(ns, _intern(name), bool(headless), tuple(ips), ports)


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
