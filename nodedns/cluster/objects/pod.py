"""A Pod slimmed: its addresses, its node, its DNS settings, and the workload it belongs to (`pod_owner`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodedns.cluster.objects.common import (
    POD,
    Labels,
    _intern,
    _label,
    _labels,
    _list,
    _mapping,
    _meta,
    _name,
    _namespace,
    _Problems,
)
from nodedns.names import canonical_ip


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
