"""nodedns.cluster.manifests: what a manifest dump (`kubectl get ... -o yaml`) gives the index, and what it passes
over."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from nodedns.cluster import manifests
from nodedns.errors import ManifestError

DUMP = """\
apiVersion: v1
kind: ServiceList
items:
- metadata: {name: web, namespace: default}
  spec: {clusterIP: 10.96.0.10}
- metadata: {name: db, namespace: default}
  spec: {clusterIP: 10.96.0.11}
---
kind: Namespace
metadata: {name: default}
---
---
just a string
---
apiVersion: v2
kind: Service
metadata: {name: future, namespace: default}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
---
apiVersion: v1
kind: List
items:
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata:
    name: imported-a
    namespace: default
    labels: {multicluster.kubernetes.io/service-name: web}
  addressType: IPv4
  endpoints: []
- apiVersion: multicluster.x-k8s.io/v1alpha1
  kind: ServiceImport
  metadata: {name: web, namespace: default}
  spec: {type: ClusterSetIP}
"""


def read(tmp_path: Path, *, multicluster: bool = False) -> list[tuple[str, str]]:
    path = tmp_path / "dump.yaml"
    path.write_text(DUMP)
    return [(kind, obj["metadata"]["name"]) for kind, obj in manifests.read(str(path), multicluster=multicluster)]


def test_a_dump_gives_the_kinds_dns_uses_from_typed_and_plain_lists(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A ServiceList's items have no kind (kubectl writes them so): they are Services. A document
    without apiVersion is read as its kind's version; another version is skipped, with a warning naming
    the object; a Deployment is passed over; an empty document and a string are no objects."""
    with caplog.at_level(logging.WARNING, "nodedns.manifests"):
        got = read(tmp_path)
    assert got == [("Service", "web"), ("Service", "db"), ("Namespace", "default"), ("EndpointSlice", "imported-a")]
    assert "Service default/future has apiVersion v2; only v1 is supported, skipped" in caplog.text
    assert "document 4 is not an object; skipped" in caplog.text
    assert "Deployment" not in caplog.text and "document 3" not in caplog.text


def test_with_multicluster_imports_are_read_and_labelled_slices_are_imports_too(tmp_path: Path) -> None:
    got = read(tmp_path, multicluster=True)
    assert got == [("Service", "web"), ("Service", "db"), ("Namespace", "default"), ("EndpointSlice", "imported-a"),
                   ("ImportedEndpointSlice", "imported-a"), ("ServiceImport", "web")]


@pytest.mark.parametrize(("content", "says"), [
    (None, "cannot read"), ("key: [unclosed\n", "is not valid YAML"), (b"\xff\xfe kind: x", "is not UTF-8 text"),
], ids=["missing", "not-yaml", "not-utf8"])
def test_a_file_that_cannot_be_read_or_parsed_is_a_manifest_error(tmp_path: Path, content: str | bytes | None,
                                                                  says: str) -> None:
    path = tmp_path / "bad.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(ManifestError, match=says):
        list(manifests.read(str(path)))  # a stream: the error comes while iterating
