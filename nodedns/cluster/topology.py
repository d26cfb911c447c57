"""Topology-aware order of headless answers: this node's endpoints first, then this zone's, then the rest.

Pure: it gets the node's name and its Node record (zone from `topology.kubernetes.io/zone`) and the
ready (slice, endpoint) pairs of a service in stable order, and returns them in answer order.

Groups, in order:
    0  on this node          endpoint.nodeName == our node
    1  in this zone          hints.forZones names our zone when the endpoint has hints,
                             else endpoint.zone == our zone
    2  everything else
The order within a group is the input order (stable). Every ready endpoint is still returned,
unless the Service asks for a traffic distribution:
    PreferSameNode              this node's endpoints if any, else this zone's if any, else all
    PreferSameZone, PreferClose this zone's endpoints (this node's included) if any, else all; all
                                when this node's zone is unknown (no label, no Node object), like
                                kube-proxy, which ignores zone hints then
Without a known node (no NODE_NAME, no Node object) the input order is kept.
"""

from __future__ import annotations

from nodedns.cluster.objects import Endpoint, EndpointSlice, Node, Service

Pair = tuple[EndpointSlice, Endpoint]

SAME_NODE = 0
SAME_ZONE = 1
ELSEWHERE = 2

PREFER_SAME_NODE = "PreferSameNode"
PREFER_SAME_ZONE = ("PreferSameZone", "PreferClose")


def group(ep: Endpoint, node_name: str, zone: str) -> int:
    """The topology group of one endpoint as seen from (node_name, zone)."""
    if node_name and ep.node_name == node_name:
        return SAME_NODE
    if zone:
        if ep.for_zones:
            if zone in ep.for_zones:
                return SAME_ZONE
        elif ep.zone == zone:
            return SAME_ZONE
    return ELSEWHERE


def order(svc: Service, eps: list[Pair], node_name: str, node: Node | None) -> list[Pair]:
    """The ready endpoints of `svc` in answer order for a client on `node_name`."""
    zone = node.zone if node is not None else ""
    if not node_name and not zone:
        return eps
    groups = [group(ep, node_name, zone) for _, ep in eps]
    if svc.traffic_distribution == PREFER_SAME_NODE:
        for limit in (SAME_NODE, SAME_ZONE):
            kept = [pair for pair, g in zip(eps, groups, strict=True) if g <= limit]
            if kept:
                return _sorted(kept, node_name, zone)
        return _sorted(eps, node_name, zone)
    if svc.traffic_distribution in PREFER_SAME_ZONE and zone:  # an unknown zone prefers nothing
        kept = [pair for pair, g in zip(eps, groups, strict=True) if g <= SAME_ZONE]
        if kept:
            return _sorted(kept, node_name, zone)
    return [pair for _, pair in sorted(zip(groups, eps, strict=True), key=lambda t: t[0])]


def _sorted(eps: list[Pair], node_name: str, zone: str) -> list[Pair]:
    return sorted(eps, key=lambda pair: group(pair[1], node_name, zone))
