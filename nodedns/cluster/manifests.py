"""Read a manifest dump (`kubectl get svc,endpointslices,pods,ns -A -o yaml`) into (kind, object) pairs, one at a time.

Accepts multi-document YAML or JSON, `kind: List` and typed lists (`ServiceList`), nested lists.
Kinds DNS does not use (Deployments, ConfigMaps, v1 Endpoints, ...) are passed over; a known kind
with an unsupported apiVersion is skipped with a warning naming the object. A file that cannot be
read or parsed at all raises ManifestError (as the pairs are read: the ones before it were given).

`read` is a stream: it walks PyYAML's parser events and builds each item of a top-level `items` list on its
own, hands it on and lets it go (the caller shrinks it before the next is built), so a dump of the whole
cluster in one `kind: List` is never held whole (docs/sync.md "Manifest files"). An item without a `kind`
takes the list's (`ServiceList` -> Service); anchors and aliases work across the items of a document.

With `multicluster` (--multicluster-zone), ServiceImports (`multicluster.x-k8s.io/v1alpha1`) are
read too, and an EndpointSlice labelled `multicluster.kubernetes.io/service-name` is also yielded
as an `ImportedEndpointSlice` (what the API watch's multicluster list gives); without it both are
passed over like any kind DNS does not use.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from nodedns.cluster import objects as k8s
from nodedns.cluster.index import ADDED, SlimChange, change_of
from nodedns.errors import ManifestError, ObjectError
from nodedns.runtime.heap import release_free_heap

log = logging.getLogger("nodedns.manifests")

API_VERSIONS: dict[str, tuple[str, ...]] = {
    k8s.NAMESPACE: ("v1",),
    k8s.SERVICE: ("v1",),
    k8s.ENDPOINTSLICE: ("discovery.k8s.io/v1",),
    k8s.POD: ("v1",),
    k8s.NODE: ("v1",),
    k8s.DNS_POLICY: ("nodedns.io/v1alpha1",),
    k8s.CLUSTER_DNS_POLICY: ("nodedns.io/v1alpha1",),
}
MULTICLUSTER_API_VERSIONS: dict[str, tuple[str, ...]] = {
    k8s.SERVICE_IMPORT: ("multicluster.x-k8s.io/v1alpha1",),
}

Pair = tuple[str, Mapping[str, Any]]


def read(path: str, *, multicluster: bool = False) -> Iterator[Pair]:
    """Every supported object in the file, in file order, one at a time (`multicluster`: the MCS objects
    too). Raises ManifestError (while iterating) for a file that cannot be read or parsed."""
    import yaml  # noqa: PLC0415 - only manifest mode needs YAML

    versions = {**API_VERSIONS, **MULTICLUSTER_API_VERSIONS} if multicluster else API_VERSIONS
    try:
        fh = open(path, encoding="utf-8")  # noqa: SIM115 - closed below, after the last pair
    except OSError as exc:
        raise ManifestError(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(fh)
        try:
            yield from _Stream(loader, path, versions, multicluster).pairs()
        except OSError as exc:
            raise ManifestError(f"cannot read {path}: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise ManifestError(f"{path} is not valid YAML: {exc}") from None
        except UnicodeDecodeError:
            raise ManifestError(f"{path} is not UTF-8 text") from None
        except RecursionError:
            raise ManifestError(f"{path} is nested too deeply to be a manifest") from None
        finally:
            loader.dispose()


def changes(path: str, *, multicluster: bool = False) -> list[SlimChange | ObjectError]:
    """Every object of the file shrunk as it is read (`index.change_of`: the raw object is gone before the
    next is built), an ObjectError in its place for an invalid one; then the C heap's free pages go back
    to the system (the parser's garbage). Blocking: run it in a thread. Raises ManifestError."""
    out: list[SlimChange | ObjectError] = []
    for kind, obj in read(path, multicluster=multicluster):
        try:
            out.append(change_of(kind, ADDED, obj))
        except ObjectError as exc:
            out.append(exc)
    release_free_heap()
    return out



def objects(docs: Iterable[Any], *, source: str = "<manifests>", multicluster: bool = False) -> Iterator[Pair]:
    """The supported objects of already parsed documents (the same rules as `read`)."""
    versions = {**API_VERSIONS, **MULTICLUSTER_API_VERSIONS} if multicluster else API_VERSIONS
    for i, doc in enumerate(docs):
        yield from _document(doc, i + 1, source, versions, multicluster)


def _document(doc: Any, number: int, source: str, versions: Mapping[str, tuple[str, ...]],
              multicluster: bool) -> Iterator[Pair]:
    if doc is None:
        return
    if not isinstance(doc, Mapping):
        log.warning("%s: document %d is not an object; skipped", source, number)
        return
    yield from _with_imports(_walk(doc, None, source, versions), multicluster)


def _with_imports(pairs: Iterable[Pair], multicluster: bool) -> Iterator[Pair]:
    for kind, obj in pairs:
        yield kind, obj
        if multicluster and kind == k8s.ENDPOINTSLICE and _imported(obj):
            yield k8s.IMPORTED_SLICE, obj


def _imported(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return isinstance(labels, Mapping) and bool(labels.get(k8s.MCS_SERVICE_NAME_LABEL))


def _list_kind(kind: Any, items: Any) -> tuple[bool, str | None]:
    """(whether `kind` is a list's, the kind its items get: None for their own)."""
    if kind == "List":
        return True, None
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        return True, kind[:-4]
    return False, None


def _walk(obj: Mapping[str, Any], implied_kind: str | None, source: str,
          api_versions: Mapping[str, tuple[str, ...]]) -> Iterator[Pair]:
    kind = obj.get("kind") or implied_kind
    if not isinstance(kind, str):
        log.warning("%s: object without kind skipped (%s)", source, k8s.ref("?", obj))
        return
    is_list, inner = _list_kind(kind, obj.get("items"))
    if is_list:
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


class _Stream:
    """The pairs of one YAML stream, built from the parser's events an item at a time (module docstring)."""

    def __init__(self, loader: Any, source: str, versions: Mapping[str, tuple[str, ...]], multicluster: bool) -> None:
        import yaml  # noqa: PLC0415

        self.yaml = yaml
        self.loader = loader
        self.source = source
        self.versions = versions
        self.multicluster = multicluster
        self.anchors: dict[str, Any] = {}

    def pairs(self) -> Iterator[Pair]:
        y, loader = self.yaml, self.loader
        loader.get_event()  # StreamStart
        number = 0
        while not loader.check_event(y.StreamEndEvent):
            loader.get_event()  # DocumentStart
            number += 1
            self.anchors = {}
            if loader.check_event(y.MappingStartEvent):
                yield from self._mapping_document(number)
            else:
                doc = self._construct(self._compose())
                yield from _document(doc, number, self.source, self.versions, self.multicluster)
            loader.get_event()  # DocumentEnd
        loader.get_event()  # StreamEnd

    def _mapping_document(self, number: int) -> Iterator[Pair]:
        """A document that is a mapping: its `items` sequence streamed item by item, the rest built whole."""
        y, loader = self.yaml, self.loader
        start = loader.get_event()
        pairs: list[tuple[Any, Any]] = []
        kind: Any = None
        streamed = False
        held: list[Mapping[str, Any]] = []  # items without a kind, before the list's kind was read
        while not loader.check_event(y.MappingEndEvent):
            key_node = self._compose()
            key = self._construct(key_node) if isinstance(key_node, y.ScalarNode) else None
            if key == "items" and loader.check_event(y.SequenceStartEvent) and not streamed:
                streamed = True
                yield from self._items(kind, held)
                continue
            value_node = self._compose()
            pairs.append((key_node, value_node))
            if key == "kind" and isinstance(value_node, y.ScalarNode):
                kind = self._construct(value_node)
                if streamed and held:
                    yield from self._held(kind, held)
        end = loader.get_event()
        if streamed:
            if held:
                log.warning("%s: document %d: %d list items without a kind skipped (the list's kind is %r)",
                            self.source, number, len(held), kind)
            return
        tag = start.tag if start.tag not in (None, "!") else loader.resolve(y.MappingNode, None, start.implicit)
        node = y.MappingNode(tag, pairs, start.start_mark, end.end_mark, flow_style=start.flow_style)
        if start.anchor is not None:
            self.anchors[start.anchor] = node
        yield from _document(self._construct(node), number, self.source, self.versions, self.multicluster)

    def _items(self, kind: Any, held: list[Mapping[str, Any]]) -> Iterator[Pair]:
        y, loader = self.yaml, self.loader
        loader.get_event()  # SequenceStart
        while not loader.check_event(y.SequenceEndEvent):
            item = self._construct(self._compose())
            if not isinstance(item, Mapping):
                continue
            if kind is None and not item.get("kind"):
                held.append(item)  # its kind is the list's, not read yet
                continue
            is_list, inner = _list_kind(kind, []) if kind is not None else (True, None)
            if not is_list:
                continue  # a document with a list of items that is no Kubernetes list
            yield from _with_imports(_walk(item, inner, self.source, self.versions), self.multicluster)
        loader.get_event()  # SequenceEnd

    def _held(self, kind: Any, held: list[Mapping[str, Any]]) -> Iterator[Pair]:
        is_list, inner = _list_kind(kind, [])
        items, held[:] = list(held), []
        if not is_list:
            return
        for item in items:
            yield from _with_imports(_walk(item, inner, self.source, self.versions), self.multicluster)

    def _construct(self, node: Any) -> Any:
        return self.loader.construct_document(node)

    def _compose(self) -> Any:
        """One node from the parser's events (what PyYAML's composer does; the C parser has no such call)."""
        y, loader = self.yaml, self.loader
        event = loader.get_event()
        if isinstance(event, y.AliasEvent):
            node = self.anchors.get(event.anchor)
            if node is None:
                raise y.composer.ComposerError(None, None, f"found undefined alias {event.anchor!r}",
                                               event.start_mark)
            return node
        anchor = event.anchor
        if isinstance(event, y.ScalarEvent):
            tag = event.tag if event.tag not in (None, "!") else loader.resolve(y.ScalarNode, event.value,
                                                                                event.implicit)
            node = y.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
        elif isinstance(event, y.SequenceStartEvent):
            tag = event.tag if event.tag not in (None, "!") else loader.resolve(y.SequenceNode, None, event.implicit)
            node = y.SequenceNode(tag, [], event.start_mark, None, flow_style=event.flow_style)
            if anchor is not None:
                self.anchors[anchor] = node
            while not loader.check_event(y.SequenceEndEvent):
                node.value.append(self._compose())
            node.end_mark = loader.get_event().end_mark
            return node
        elif isinstance(event, y.MappingStartEvent):
            tag = event.tag if event.tag not in (None, "!") else loader.resolve(y.MappingNode, None, event.implicit)
            node = y.MappingNode(tag, [], event.start_mark, None, flow_style=event.flow_style)
            if anchor is not None:
                self.anchors[anchor] = node
            while not loader.check_event(y.MappingEndEvent):
                key = self._compose()
                node.value.append((key, self._compose()))
            node.end_mark = loader.get_event().end_mark
            return node
        else:
            raise y.composer.ComposerError(None, None, f"unexpected {event.__class__.__name__}", event.start_mark)
        if anchor is not None:
            self.anchors[anchor] = node
        return node
