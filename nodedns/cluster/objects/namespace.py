"""A Namespace slimmed: its name (a DNS-1123 label) and its labels but the one the API server sets to the name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodedns.cluster.objects.common import (
    NAMESPACE,
    NAMESPACE_NAME_LABEL,
    Labels,
    _intern,
    _label,
    _labels,
    _meta,
    _name,
    _Problems,
)


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    # its labels but `kubernetes.io/metadata.name` (always the name: `namespace_labels` adds it back)
    labels: Labels = ()


def namespace_labels(name: str, labels: Labels) -> dict[str, str]:
    """A Namespace's labels as the API server shows them (the name label added back)."""
    return {**dict(labels), NAMESPACE_NAME_LABEL: name}


def _namespace_record(obj: Mapping[str, Any]) -> Namespace:
    kind = NAMESPACE
    meta = _meta(kind, obj)
    bad = _Problems(kind, obj)
    name = _label(bad, "metadata.name", _name(kind, obj, meta))
    bad.check()
    return Namespace(_intern(name), _labels(meta, NAMESPACE_NAME_LABEL))
