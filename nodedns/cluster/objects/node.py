"""A Node slimmed: its zone and region (topology, federation), its pod CIDRs and addresses (the allow list)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodedns.cluster.objects.common import NODE, REGION_LABELS, ZONE_LABELS, _intern, _list, _mapping, _meta, _name
from nodedns.names import canonical_cidr, canonical_ip


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    zone: str  # topology.kubernetes.io/zone (or the beta label), "" when unlabelled
    region: str  # topology.kubernetes.io/region (or the beta label)
    pod_cidrs: tuple[str, ...] = ()  # spec.podCIDRs (else spec.podCIDR), canonical CIDR text
    addresses: tuple[str, ...] = ()  # status.addresses of type InternalIP and ExternalIP, canonical


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
