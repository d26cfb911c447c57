"""Raw Kubernetes objects (dicts from YAML or API JSON) shrunk into the slim frozen records DNS needs, one
module per kind (`namespace`, `service`, `endpointslice`, `pod`, `node`, `multicluster`, `policy`) over the
helpers they share (`common`).

Both the manifest loader and the API watch feed dicts through `slim(kind, obj)`. Nothing else of
an object is kept: no client model objects, no managedFields, no labels except those a kind's module
names. An invalid object raises `ObjectError` naming it and every problem found in it; the caller skips
it and logs why. Names that become DNS names are held to the API server's rules, so an object it would
reject never turns into a name that cannot answer: a Service's name is a DNS-1035 label, a Namespace's
name, an endpoint's hostname and a Pod's hostname and subdomain are DNS-1123 labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodedns.cluster.objects.common import (
    CLUSTER_DNS_POLICY,
    CONFIG_MAP,
    DNS_POLICY,
    ENDPOINTSLICE,
    IMPORTED_SLICE,
    KINDS,
    MCS_SERVICE_NAME_LABEL,
    MCS_SOURCE_CLUSTER_LABEL,
    MULTICLUSTER_KINDS,
    NAMESPACE,
    NAMESPACE_NAME_LABEL,
    NO_PORT,
    NODE,
    POD,
    POLICY_KINDS,
    REGION_LABELS,
    SERVICE,
    SERVICE_IMPORT,
    SERVICE_NAME_LABEL,
    ZONE_LABELS,
    Labels,
    Port,
    key_of,
    ref,
    shared_ports,
)
from nodedns.cluster.objects.endpointslice import V6_KEY, Endpoint, EndpointSlice, _slice, ip_key, packed_ip
from nodedns.cluster.objects.multicluster import (
    SERVICE_IMPORT_TYPES,
    ImportedSlice,
    ServiceImport,
    _imported_slice,
    _service_import,
)
from nodedns.cluster.objects.namespace import Namespace, _namespace_record, namespace_labels
from nodedns.cluster.objects.node import Node, _node
from nodedns.cluster.objects.pod import Pod, _pod, pod_owner
from nodedns.cluster.objects.policy import ConfigMap, Policy, _config_map, _policy
from nodedns.cluster.objects.service import CLUSTER_IP, EXTERNAL_NAME, HEADLESS, Service, _service
from nodedns.errors import ObjectError

__all__ = [
    "CLUSTER_DNS_POLICY", "CLUSTER_IP", "CONFIG_MAP", "DNS_POLICY", "ENDPOINTSLICE", "EXTERNAL_NAME", "HEADLESS",
    "IMPORTED_SLICE", "KINDS", "MCS_SERVICE_NAME_LABEL", "MCS_SOURCE_CLUSTER_LABEL", "MULTICLUSTER_KINDS",
    "NAMESPACE", "NAMESPACE_NAME_LABEL", "NODE", "NO_PORT", "POD", "POLICY_KINDS", "REGION_LABELS", "SERVICE",
    "SERVICE_IMPORT", "SERVICE_IMPORT_TYPES", "SERVICE_NAME_LABEL", "V6_KEY", "ZONE_LABELS",
    "ConfigMap", "Endpoint", "EndpointSlice", "ImportedSlice", "Labels", "Namespace", "Node", "Pod", "Policy", "Port",
    "Record", "Service", "ServiceImport",
    "ip_key", "key_of", "namespace_labels", "packed_ip", "pod_owner", "ref", "shared_ports", "slim",
]

Record = Namespace | Service | EndpointSlice | Pod | Node | ServiceImport | ImportedSlice | Policy | ConfigMap


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
            return _namespace_record(obj)
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
