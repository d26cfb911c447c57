"""An EndpointSlice slimmed: its endpoints stored by column.

Endpoints are most of the index (150,000 of them at 5,000 nodes), so an `EndpointSlice` keeps
them by column rather than as one object each: every address packed into one `bytes` (4 or 16
bytes each), node and zone names as tuples of interned strings, pod names and hostnames joined
into one string, and the rarely set parts (not ready, topology hints, several addresses) only when
some endpoint has them. `EndpointSlice.endpoints` builds the `Endpoint` tuples from the columns when
asked (on a cache miss), `endpoints_at(ip)` only those with one address (a reverse lookup);
`ip_keys()` gives the addresses as integers for the index's table of address blocks. A slice of the
common shape has its columns read in C (nodedns/cluster/_slim.c, optional); any other in Python.
"""

from __future__ import annotations

import ipaddress
import socket  # inet_aton, inet_pton, inet_ntoa only: address conversion, no sockets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import FrozenInstanceError
from functools import lru_cache
from itertools import repeat
from operator import attrgetter
from typing import Any, NamedTuple

from nodedns.cluster.objects.common import (
    ENDPOINTSLICE,
    MCS_SERVICE_NAME_LABEL,
    SERVICE_NAME_LABEL,
    Port,
    _intern,
    _label,
    _list,
    _mapping,
    _meta,
    _name,
    _namespace,
    _ports,
    _Problems,
    shared_ports,
)
from nodedns.names import canonical_ip

Columns = tuple[bytes, list[bool], list[str], list[str], list[str], list[str]]
common_columns: Callable[[list[Any], bool], Columns | None] | None
try:  # the endpoint columns of a slice of the common shape in C (nodedns/cluster/_slim.c); optional
    from nodedns.cluster._slim import common_columns
except ImportError:  # built without a C compiler: the loop in _slice does it all
    common_columns = None


@lru_cache(maxsize=1024)
def _zones_of(for_zones: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple for equal topology hints."""
    return tuple(_intern(z) for z in for_zones)



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
