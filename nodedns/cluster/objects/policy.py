"""The nodedns.io DNS policies slimmed (their spec kept as JSON text, read by nodedns.policy), and the
ConfigMaps a ClusterDNSPolicy names as its RPZ feed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodedns.cluster.objects.common import (
    CLUSTER_DNS_POLICY,
    CONFIG_MAP,
    _intern,
    _list,
    _mapping,
    _meta,
    _name,
    _namespace,
    ref,
)
from nodedns.errors import ObjectError


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
