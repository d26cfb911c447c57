"""Read a manifest dump (`kubectl get svc,endpointslices,pods,ns -A -o yaml`) into (kind, object) pairs.

Accepts multi-document YAML or JSON, `kind: List` and typed lists (`ServiceList`), nested lists.
Kinds DNS does not use (Deployments, ConfigMaps, v1 Endpoints, ...) are passed over; a known kind
with an unsupported apiVersion is skipped with a warning naming the object. A file that cannot be
read or parsed at all raises ManifestError.

With `multicluster` (--multicluster-zone), ServiceImports (`multicluster.x-k8s.io/v1alpha1`) are
read too, and an EndpointSlice labelled `multicluster.kubernetes.io/service-name` is also yielded
as an `ImportedEndpointSlice` (what the API watch's multicluster list gives); without it both are
passed over like any kind DNS does not use.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from nodedns import objects as k8s
from nodedns.errors import ManifestError

log = logging.getLogger(__name__)

API_VERSIONS: dict[str, tuple[str, ...]] = {
    k8s.NAMESPACE: ("v1",),
    k8s.SERVICE: ("v1",),
    k8s.ENDPOINTSLICE: ("discovery.k8s.io/v1",),
    k8s.POD: ("v1",),
    k8s.NODE: ("v1",),
}
MULTICLUSTER_API_VERSIONS: dict[str, tuple[str, ...]] = {
    k8s.SERVICE_IMPORT: ("multicluster.x-k8s.io/v1alpha1",),
}


def read(path: str, *, multicluster: bool = False) -> list[tuple[str, Mapping[str, Any]]]:
    """Every supported object in the file, in file order (`multicluster`: the MCS objects too)."""
    import yaml  # noqa: PLC0415 - only manifest mode needs YAML

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with open(path, encoding="utf-8") as fh:
            docs = list(yaml.load_all(fh, Loader=loader))
    except OSError as exc:
        raise ManifestError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path} is not valid YAML: {exc}") from None
    except UnicodeDecodeError:
        raise ManifestError(f"{path} is not UTF-8 text") from None
    return list(objects(docs, source=path, multicluster=multicluster))


def objects(docs: list[Any], *, source: str = "<manifests>",
            multicluster: bool = False) -> Iterator[tuple[str, Mapping[str, Any]]]:
    versions = {**API_VERSIONS, **MULTICLUSTER_API_VERSIONS} if multicluster else API_VERSIONS
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            log.warning("%s: document %d is not an object; skipped", source, i + 1)
            continue
        for kind, obj in _walk(doc, None, source, versions):
            yield kind, obj
            if multicluster and kind == k8s.ENDPOINTSLICE and _imported(obj):
                yield k8s.IMPORTED_SLICE, obj


def _imported(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return isinstance(labels, Mapping) and bool(labels.get(k8s.MCS_SERVICE_NAME_LABEL))


def _walk(obj: Mapping[str, Any], implied_kind: str | None, source: str,
          api_versions: Mapping[str, tuple[str, ...]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    kind = obj.get("kind") or implied_kind
    if not isinstance(kind, str):
        log.warning("%s: object without kind skipped (%s)", source, k8s.ref("?", obj))
        return
    if kind == "List" or (kind.endswith("List") and isinstance(obj.get("items"), list)):
        inner = kind[:-4] if kind != "List" else None
        for item in obj.get("items") or []:
            if isinstance(item, Mapping):
                yield from _walk(item, inner, source, api_versions)
        return
    versions = api_versions.get(kind)
    if versions is None:
        log.debug("%s: %s is not used for DNS", source, k8s.ref(kind, obj))
        return
    api = obj.get("apiVersion") or versions[0]
    if api not in versions:
        log.warning("%s: %s has apiVersion %s; only %s is supported, skipped", source, k8s.ref(kind, obj), api,
                    " or ".join(versions))
        return
    yield kind, obj
