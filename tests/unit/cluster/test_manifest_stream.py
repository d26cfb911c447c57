"""Manifests read as a stream (nodedns.cluster.manifests): kubectl's one `kind: List` document yields its items one
at a time, each shrunk before the next is built, so a big dump never holds the cluster's raw objects at
once; typed lists, multi-document files, anchors and JSON read as before."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodedns.cluster import manifests
from nodedns.cluster.index import Index
from nodedns.errors import ManifestError, ObjectError
from tests.support import manifests as m


def _slices(n: int, per: int = 100) -> list[dict[str, Any]]:
    out = []
    for s in range(n):
        eps = [{"addresses": [f"10.{s >> 8 & 255}.{s & 255}.{e}"], "conditions": {"ready": True},
                "nodeName": f"node-{e % 7}",
                "targetRef": {"kind": "Pod", "name": f"web-{s}-{e}", "namespace": "default"}}
               for e in range(per)]
        out.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
                    "metadata": {"name": f"web-{s}-x", "namespace": "default",
                                 "labels": {"kubernetes.io/service-name": f"web-{s}"},
                                 "annotations": {"note": "x" * 200}},
                    "endpoints": eps, "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]})
    return out


def test_the_items_of_a_list_are_given_before_the_rest_of_the_file_is_parsed(tmp_path: Path) -> None:
    path = m.write(tmp_path / "cluster.yaml", [m.namespace("default"), m.service("web", cluster_ips=["10.96.0.1"])])
    path.write_text(path.read_text() + "---\n{ broken: [\n")  # a second document that does not parse
    stream = manifests.read(str(path))
    assert [k for k, _ in (next(stream), next(stream))] == ["Namespace", "Service"]
    with pytest.raises(ManifestError, match="not valid YAML"):
        next(stream)


@pytest.mark.parametrize("layout", ["kubectl-list", "typed-list-kind-last", "typed-list-kind-first", "documents",
                                    "json", "nested-list"])
def test_every_layout_yields_the_same_objects_in_file_order(tmp_path: Path, layout: str) -> None:
    services = [m.service(f"s{i}", cluster_ips=[f"10.96.0.{i + 1}"]) for i in range(3)]
    path = tmp_path / "cluster.yaml"
    bare = [{k: v for k, v in s.items() if k != "kind"} for s in services]
    if layout == "kubectl-list":
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "items": services, "kind": "List"}, sort_keys=True))
    elif layout == "typed-list-kind-last":  # items without a kind, the list's kind after them: held until read
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "items": bare, "kind": "ServiceList"}, sort_keys=True))
    elif layout == "typed-list-kind-first":
        path.write_text(json.dumps({"kind": "ServiceList", "apiVersion": "v1", "items": bare}))
    elif layout == "documents":
        path.write_text(yaml.safe_dump_all(services))
    elif layout == "json":
        path.write_text(json.dumps({"kind": "List", "items": services}))
    else:
        path.write_text(yaml.safe_dump({"kind": "List", "items": [{"kind": "List", "items": services[:2]},
                                                                   services[2]]}))
    got = [(kind, obj["metadata"]["name"]) for kind, obj in manifests.read(str(path))]
    assert got == [("Service", "s0"), ("Service", "s1"), ("Service", "s2")]


def test_anchors_and_aliases_work_across_the_items_of_a_list(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("kind: List\nitems:\n"
                    "- {kind: Service, apiVersion: v1, metadata: {name: a, namespace: default},\n"
                    "   spec: &spec {clusterIP: 10.96.0.9, clusterIPs: [10.96.0.9], ports: []}}\n"
                    "- {kind: Service, apiVersion: v1, metadata: {name: b, namespace: default}, spec: *spec}\n")
    got = {obj["metadata"]["name"]: obj["spec"]["clusterIP"] for _, obj in manifests.read(str(path))}
    assert got == {"a": "10.96.0.9", "b": "10.96.0.9"}


def test_changes_shrink_each_object_and_keep_the_invalid_ones_as_errors(tmp_path: Path) -> None:
    bad = m.service("Bad_Name", cluster_ips=["10.96.0.2"])
    path = m.write(tmp_path / "cluster.yaml", [m.namespace("default"), m.service("web", cluster_ips=["10.96.0.1"]),
                                               bad])
    items = manifests.changes(str(path))
    assert [type(i).__name__ for i in items] == ["SlimChange", "SlimChange", "ObjectError"]
    index = Index()
    assert index.load_changes(items) == 2 and index.skipped == 1
    assert isinstance(items[2], ObjectError) and "Bad_Name" in str(items[2])
    assert index.services[("default", "web")].cluster_ips == ("10.96.0.1",)


def test_reading_a_big_list_holds_one_item_at_a_time_not_the_file(tmp_path: Path) -> None:
    """tracemalloc's peak while the stream is read and shrunk, against the same file parsed whole: the
    stream's peak is the index it builds plus one raw item; a whole-file parse holds every raw object."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": _slices(20)}))

    def peak(fn: Any) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            kept = fn()
            return tracemalloc.get_traced_memory()[1] if kept is not None else 0
        finally:
            tracemalloc.stop()

    streamed = peak(lambda: manifests.changes(str(path)))
    whole = peak(lambda: yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    assert streamed * 4 < whole, (streamed, whole)
