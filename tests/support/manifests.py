"""Small builders for Kubernetes objects in tests (the shapes `kubectl get -o yaml` writes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def service(
    name: str,
    ns: str = "default",
    *,
    cluster_ips: list[str] | None = None,
    headless: bool = False,
    ports: list[dict[str, Any]] | None = None,
    external_name: str | None = None,
    traffic_distribution: str | None = None,
    publish_not_ready: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": ports or []}
    if external_name is not None:
        spec.update(type="ExternalName", externalName=external_name)
    elif headless:
        spec.update(clusterIP="None", clusterIPs=["None"])
    else:
        ips = cluster_ips or ["10.96.0.100"]
        spec.update(clusterIP=ips[0], clusterIPs=ips)
    if traffic_distribution:
        spec["trafficDistribution"] = traffic_distribution
    if publish_not_ready:
        spec["publishNotReadyAddresses"] = True
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def endpoint(
    ip: str,
    *,
    node: str = "",
    zone: str = "",
    ready: bool | None = True,
    hostname: str | None = None,
    pod: str | None = None,
    for_zones: list[str] | None = None,
) -> dict[str, Any]:
    ep: dict[str, Any] = {"addresses": [ip]}
    if ready is not None:
        ep["conditions"] = {"ready": ready}
    if hostname:
        ep["hostname"] = hostname
    if node:
        ep["nodeName"] = node
    if zone:
        ep["zone"] = zone
    if pod:
        ep["targetRef"] = {"kind": "Pod", "name": pod, "namespace": "default"}
    if for_zones is not None:
        ep["hints"] = {"forZones": [{"name": z} for z in for_zones]}
    return ep


def endpoint_slice(
    name: str,
    service_name: str,
    endpoints: list[dict[str, Any]],
    ns: str = "default",
    *,
    address_type: str = "IPv4",
    ports: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": ns, "labels": {"kubernetes.io/service-name": service_name}},
        "addressType": address_type,
        "endpoints": endpoints,
        "ports": ports if ports is not None else [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


def node(name: str, *, zone: str = "", region: str = "", pod_cidrs: list[str] | None = None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if zone:
        labels["topology.kubernetes.io/zone"] = zone
    if region:
        labels["topology.kubernetes.io/region"] = region
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    if pod_cidrs:
        obj["spec"] = {"podCIDR": pod_cidrs[0], "podCIDRs": pod_cidrs}
    return obj


def pod(
    name: str,
    ns: str = "default",
    *,
    ip: str,
    node_name: str = "",
    dns_policy: str | None = None,
    dns_config: dict[str, Any] | None = None,
    host_network: bool = False,
    uid: str | None = None,
    owner: tuple[str, str] | None = None,
    labels: dict[str, str] | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    """A Pod; `owner` (kind, name) becomes its controller ownerReference (a ReplicaSet named
    `<deployment>-<hash>` gets the `pod-template-hash: <hash>` label, as a Deployment's Pods have)."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}], "nodeName": node_name}
    if dns_policy:
        spec["dnsPolicy"] = dns_policy
    if dns_config is not None:
        spec["dnsConfig"] = dns_config
    if host_network:
        spec["hostNetwork"] = True
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if uid:
        meta["uid"] = uid
    all_labels = dict(labels or {})
    if owner is not None:
        kind, owner_name = owner
        meta["ownerReferences"] = [{"apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind,
                                    "name": owner_name, "uid": f"uid-{owner_name}", "controller": True}]
        if kind == "ReplicaSet" and "-" in owner_name:
            all_labels.setdefault("pod-template-hash", owner_name.rsplit("-", 1)[1])
    if all_labels:
        meta["labels"] = all_labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase, "podIP": ip, "podIPs": [{"ip": ip}]},
    }


def write(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path
