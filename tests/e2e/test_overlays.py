"""Deployment without a fork: an overlay kept outside the repository takes any shipped directory as its resource
and sets the image (`images:`) and the kube-dns ClusterIP (a configMapGenerator merge of `local-ip`) the same
way for each; examples/overlay/ is such an overlay, worked out, rendering as it is; the deploy docs start from
it; and what it renders validates offline against the Kubernetes schemas, as "Deploy it" shows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from nodedns.cli import build_parser
from nodedns.cli import guard as guard_cli
from tests.support.daemonset import K8S_VERSIONS
from tests.support.helpers import IN_CI, ROOT, subprocess_env

# every directory a user may name as the resource of their overlay
SHIPPED = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name.startswith("daemonset")
                 and (p / "kustomization.yaml").is_file())
EXAMPLE = ROOT / "examples" / "overlay"
IMAGE = "registry.example.com/team/nodedns:9.9.9"
CLUSTER_IP = "172.20.0.10"  # EKS's kube-dns ClusterIP: not the shipped 10.96.0.10
LOCAL_IP = f"169.254.20.10,{CLUSTER_IP}"


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        assert not IN_CI, ".ci/run installs kubectl"
        pytest.skip("kubectl is not installed (.ci/run installs it)")
    return found


def render(directory: Path) -> list[dict[str, Any]]:
    r = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def out_of_tree(tmp_path: Path, resource: str) -> Path:
    """An overlay in a folder of the user's, outside the repository, as examples/overlay/ shows one."""
    folder = tmp_path / "my-cluster" / "nodedns"
    folder.mkdir(parents=True)
    assert not folder.resolve().is_relative_to(ROOT.resolve())
    (folder / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(ROOT / resource, folder)],
        "images": [{"name": "localhost/nodedns", "newName": IMAGE.rsplit(":", 1)[0], "newTag": IMAGE.rsplit(":")[1]}],
        "configMapGenerator": [{"name": "nodedns", "namespace": "kube-system", "behavior": "merge",
                                "literals": [f"local-ip={LOCAL_IP}"]}],
    }))
    return folder


def containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    [ds] = [o for o in objects if o["kind"] == "DaemonSet"]
    found: list[dict[str, Any]] = ds["spec"]["template"]["spec"]["containers"]
    return found


def local_ip_of(container: dict[str, Any], configmap: dict[str, Any]) -> str | None:
    """What $(NODEDNS_LOCAL_IP) is in this container, as the kubelet resolves it (None: not set)."""
    for env in container.get("env", []):
        ref = env.get("valueFrom", {}).get("configMapKeyRef")
        if env["name"] == "NODEDNS_LOCAL_IP" and ref is not None:
            assert ref["name"] == configmap["metadata"]["name"]  # the merged ConfigMap keeps its name
            value: str = configmap["data"][ref["key"]]
            return value
    return None


def test_the_shipped_directories_are_the_ones_the_docs_name() -> None:
    assert SHIPPED == ["daemonset", "daemonset-migration", "daemonset-multicluster", "daemonset-no-surge",
                       "daemonset-shadow"]


@pytest.mark.parametrize("resource", SHIPPED)
def test_an_overlay_outside_the_repository_sets_image_and_cluster_ip_of_each_shipped_directory(
        tmp_path: Path, resource: str) -> None:
    objects = render(out_of_tree(tmp_path, resource))
    shipped = render(ROOT / resource)
    assert sorted(o["kind"] for o in objects) == sorted(o["kind"] for o in shipped)  # nothing added or lost
    [cm] = [o for o in objects if o["kind"] == "ConfigMap"]
    [shipped_cm] = [o for o in shipped if o["kind"] == "ConfigMap"]
    assert cm["metadata"]["name"] == "nodedns" and cm["data"]["local-ip"] == LOCAL_IP
    assert cm["data"]["config.yaml"] == shipped_cm["data"]["config.yaml"]  # the rest of the ConfigMap as shipped
    for c in containers(objects):
        assert c["image"] == IMAGE, (resource, c["name"], c["image"])
        if c["name"] == "guard" or "$(NODEDNS_LOCAL_IP)" in c.get("args", []):
            assert local_ip_of(c, cm) == LOCAL_IP, (resource, c["name"])
    for doc in objects:
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("resource", [r for r in SHIPPED if r != "daemonset-shadow"])
def test_the_agent_and_its_guard_take_the_new_cluster_ip_and_the_same_interface(tmp_path: Path,
                                                                               resource: str) -> None:
    objects = render(out_of_tree(tmp_path, resource))
    [cm] = [o for o in objects if o["kind"] == "ConfigMap"]
    config = tmp_path / "config.yaml"
    config.write_text(cm["data"]["config.yaml"])
    by_name = {c["name"]: c for c in containers(objects)}
    guard_args = [a.replace("$(NODEDNS_LOCAL_IP)", LOCAL_IP).replace("/etc/nodedns/config.yaml", str(config))
                  for a in by_name["guard"]["args"]]
    s = guard_cli.settings(build_parser().parse_args(guard_args))
    assert s.local_ips == LOCAL_IP.split(",") and s.interface == "nodelocaldns"
    agent_args = [a.replace("$(NODEDNS_LOCAL_IP)", LOCAL_IP) for a in by_name["nodedns"]["args"]]
    assert agent_args[agent_args.index("--local-ip") + 1] == LOCAL_IP


def test_the_worked_example_renders_as_it_is_with_a_registry_image_and_another_cluster_ip() -> None:
    kustomization = yaml.safe_load((EXAMPLE / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../../daemonset-shadow"]  # shadow first
    objects = render(EXAMPLE)
    [cm] = [o for o in objects if o["kind"] == "ConfigMap"]
    [shipped_cm] = [o for o in render(ROOT / "daemonset") if o["kind"] == "ConfigMap"]
    link_local, cluster_ip = cm["data"]["local-ip"].split(",")
    assert link_local == "169.254.20.10" and cluster_ip != shipped_cm["data"]["local-ip"].split(",")[1]
    for c in containers(objects):
        assert not c["image"].startswith(("localhost/", "nodedns:")), c["image"]
        assert c["image"] == "{newName}:{newTag}".format(**kustomization["images"][0])
    generator = kustomization["configMapGenerator"][0]
    assert (generator["name"], generator["behavior"]) == ("nodedns", "merge")


def test_the_deploy_docs_start_from_the_example_overlay() -> None:
    readme = (ROOT / "README.md").read_text()
    deploy = readme[readme.index("\n## Deploy it\n"):readme.index("\n## ", readme.index("\n## Deploy it\n") + 1)]
    node = (ROOT / "docs" / "node.md").read_text()
    node_deploy = node[node.index("\n## Deploy\n"):node.index("\n## ", node.index("\n## Deploy\n") + 1)]
    for text in (deploy, node_deploy):
        first = re.search(r"kubectl (?:kustomize|apply -k) ([^\s`]+)", text)
        assert first is not None and first.group(1) == "examples/overlay/", text[:300]
        assert "daemonset-registry" not in text and "$EDITOR daemonset/configmap.yaml" not in text


def test_offline_validation_as_deploy_it_shows_it_passes_and_catches_a_wrong_field(tmp_path: Path) -> None:
    """`kubectl kustomize DIR | kubernetes-validate --strict -`: no cluster needed; exit 1 on an invalid object."""
    validate = Path(sys.executable).parent / "kubernetes-validate"
    command = shutil.which("kubernetes-validate") if not validate.is_file() else str(validate)
    assert command is not None, "kubernetes-validate comes with the test extras"
    rendered = subprocess.run([kubectl(), "kustomize", str(EXAMPLE)], capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    for version in K8S_VERSIONS:
        ok = subprocess.run([command, "--strict", "-k", version, "-"], input=rendered.stdout, capture_output=True,
                            text=True, timeout=120, env=subprocess_env())
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert ok.stdout.count("passed for resource") == len([d for d in yaml.safe_load_all(rendered.stdout) if d])
    broken = rendered.stdout.replace("hostNetwork: true", "hostNetwrk: true")
    assert broken != rendered.stdout
    bad = subprocess.run([command, "--strict", "-"], input=broken, capture_output=True, text=True, timeout=120,
                         env=subprocess_env())
    assert bad.returncode == 1 and "'hostNetwrk' was unexpected" in bad.stdout + bad.stderr
