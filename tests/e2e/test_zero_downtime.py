"""Zero-downtime upgrades are the default: daemonset/ rolls out with a surge, valid for Kubernetes and consistent
with what the agent does (hand-over roster on the node, readiness file, grace period); daemonset-no-surge/ is
the overlay for clusters older than 1.25."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from nodedns import config as cfgmod
from nodedns.node.handover import DEFAULT_LOCK_DIR, SUCCESSOR_WAIT
from tests.support.daemonset import K8S_VERSIONS, agent_config, docs, one
from tests.support.helpers import EXAMPLE, ROOT, running_agent

OVERLAY = ROOT / "daemonset-no-surge"


def apply_json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 add / remove / replace (what the overlay uses), as kustomize applies them."""
    out = copy.deepcopy(doc)
    for op in ops:
        *parents, last = op["path"].lstrip("/").split("/")
        node: Any = out
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if op["op"] == "remove":
            del node[int(last) if isinstance(node, list) else last]
        elif op["op"] == "add" and isinstance(node, list):
            node.insert(len(node) if last == "-" else int(last), copy.deepcopy(op["value"]))
        elif op["op"] in ("add", "replace"):
            if op["op"] == "replace":
                assert (int(last) if isinstance(node, list) else last) in (range(len(node)) if isinstance(node, list)
                                                                          else node), op["path"]
            node[int(last) if isinstance(node, list) else last] = copy.deepcopy(op["value"])
        else:
            raise AssertionError(f"unsupported op {op}")
    return out


def surge_daemonset() -> dict[str, Any]:
    """The DaemonSet as shipped: daemonset/ surges."""
    return one("DaemonSet")


def no_surge_daemonset() -> dict[str, Any]:
    ops = yaml.safe_load((OVERLAY / "no-surge.yaml").read_text())
    return apply_json_patch(one("DaemonSet"), ops)


def int_or_percent(value: Any) -> int:
    return int(str(value).rstrip("%"))


def daemonset_rollout_errors(ds: dict[str, Any]) -> list[str]:
    """kubernetes pkg/apis/apps/validation ValidateRollingUpdateDaemonSet, after v1 defaulting (maxUnavailable 1,
    maxSurge 0): both within 0..100%, exactly one of them non-zero. JSON schemas cannot say this."""
    ru = ds["spec"]["updateStrategy"].get("rollingUpdate") or {}
    unavailable = int_or_percent(ru.get("maxUnavailable", 1))
    surge = int_or_percent(ru.get("maxSurge", 0))
    errors = [f"{k} over 100%" for k in ("maxUnavailable", "maxSurge")
              if str(ru.get(k, "")).endswith("%") and int_or_percent(ru[k]) > 100]
    if unavailable and surge:
        errors.append("maxSurge: may not be set when maxUnavailable is non-zero")
    if not unavailable and not surge:
        errors.append("maxUnavailable: cannot be 0 when maxSurge is 0")
    return errors


def test_the_overlay_uses_the_base_and_only_patches_the_daemonset() -> None:
    k = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    assert k["resources"] == ["../daemonset"]
    assert k["patches"] == [{"path": "no-surge.yaml", "target": {"group": "apps", "version": "v1", "kind": "DaemonSet",
                                                             "name": one("DaemonSet")["metadata"]["name"]}}]


@pytest.mark.parametrize("version", K8S_VERSIONS, ids=lambda v: f"k8s-{v}")
def test_the_no_surge_daemonset_is_valid_for_kubernetes(version: str) -> None:
    kubernetes_validate.validate(no_surge_daemonset(), version, strict=True)


@pytest.mark.parametrize(("name", "ds", "surges"), [
    ("base", surge_daemonset, True),
    ("no-surge", no_surge_daemonset, False),
], ids=["base-surges", "overlay-for-older-clusters"])
def test_each_rollout_passes_the_daemonset_rules_and_only_the_base_surges(name: str, ds: Any, surges: bool) -> None:
    d = ds()
    assert daemonset_rollout_errors(d) == []
    rolling = d["spec"]["updateStrategy"]["rollingUpdate"]
    assert (int_or_percent(rolling.get("maxSurge", 0)) > 0) is surges
    assert ("maxSurge" in rolling) is surges  # absent, not 0, where the API server may not know the field
    if surges:
        assert rolling["maxUnavailable"] == 0  # never a node without its agent


@pytest.mark.parametrize(("rolling", "errors"), [
    ({"maxSurge": "10%"}, ["maxSurge: may not be set when maxUnavailable is non-zero"]),
    ({"maxSurge": 0, "maxUnavailable": 0}, ["maxUnavailable: cannot be 0 when maxSurge is 0"]),
    ({"maxSurge": 1, "maxUnavailable": 0}, []),
], ids=["surge-without-maxunavailable-0", "both-zero", "surge-one"])
def test_the_rollout_rules_catch_what_the_api_server_rejects(rolling: dict[str, Any], errors: list[str]) -> None:
    d = one("DaemonSet")
    d["spec"]["updateStrategy"]["rollingUpdate"] = rolling
    assert daemonset_rollout_errors(d) == errors


def test_the_surge_pod_declares_no_port_the_scheduler_would_see_as_taken() -> None:
    spec = surge_daemonset()["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True
    assert all("ports" not in c for c in spec["containers"])  # hostNetwork containerPorts become hostPorts
    svc = one("Service")
    assert all(isinstance(p["targetPort"], int) for p in svc["spec"]["ports"])  # needs no named container port


def test_old_and_new_pods_share_the_roster_on_the_node() -> None:
    ds = surge_daemonset()
    spec = ds["spec"]["template"]["spec"]
    vol = next(v for v in spec["volumes"] if v["name"] == "handover")
    assert vol["hostPath"] == {"path": DEFAULT_LOCK_DIR, "type": "DirectoryOrCreate"}
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "handover")
    assert mount["mountPath"] == DEFAULT_LOCK_DIR  # where the agent looks by default (it manages the node)


def overlay_config(tmp_path: Path) -> tuple[cfgmod.Config, dict[str, Any]]:
    c = surge_daemonset()["spec"]["template"]["spec"]["containers"][0]
    return agent_config(tmp_path), c


def test_the_readiness_probe_reads_the_file_the_agent_keeps_in_the_pods_own_volume(tmp_path: Path) -> None:
    cfg, c = overlay_config(tmp_path)
    assert cfg.ready_file == "/run/nodedns-pod/ready"
    spec = surge_daemonset()["spec"]["template"]["spec"]
    mount = next(m for m in c["volumeMounts"] if cfg.ready_file.startswith(m["mountPath"] + "/"))
    vol = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert "emptyDir" in vol  # per pod: the old pod's file is never the new pod's
    command = c["readinessProbe"]["exec"]["command"]
    assert cfg.ready_file in command[-1]


@pytest.mark.parametrize(("age", "ready"), [(None, False), (0.0, True), (10.0, False)],
                         ids=["missing", "fresh", "stale"])
def test_the_readiness_command_passes_only_on_a_fresh_file(tmp_path: Path, age: float | None, ready: bool) -> None:
    c = surge_daemonset()["spec"]["template"]["spec"]["containers"][0]
    command = [part.replace("/run/nodedns-pod/ready", str(tmp_path / "ready")) for part in c["readinessProbe"]["exec"][
        "command"]]
    if age is not None:
        (tmp_path / "ready").write_text("")
        os.utime(tmp_path / "ready", (time.time() - age, time.time() - age))
    assert (subprocess.run(command, timeout=10).returncode == 0) is ready


def test_the_grace_period_covers_lameduck_successor_wait_and_drain(tmp_path: Path) -> None:
    cfg, _ = overlay_config(tmp_path)
    grace = surge_daemonset()["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    drain = max(1.0, 2 * cfg.upstream_timeout + 0.5)
    assert grace >= cfg.lameduck + SUCCESSOR_WAIT + drain + 5


def test_an_agent_keeps_the_ready_file_fresh_while_ready_and_removes_it_when_it_stops(tmp_path: Path) -> None:
    path = tmp_path / "ready"
    path.write_text("")  # a crashed predecessor's, in the same pod: removed at start
    os.utime(path, (0, 0))
    with running_agent({"manifests": str(EXAMPLE), "ready-file": str(path)}):
        deadline = time.monotonic() + 10
        while not (path.exists() and time.time() - path.stat().st_mtime < 2):
            assert time.monotonic() < deadline, "no fresh ready file"
            time.sleep(0.05)
    assert not path.exists()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed (the offline checks still run)")
def test_kubectl_kustomize_builds_the_overlay_as_the_tests_patch_it() -> None:
    r = subprocess.run(["kubectl", "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    built = [d for d in yaml.safe_load_all(r.stdout) if d]
    ds = next(d for d in built if d["kind"] == "DaemonSet")
    # kustomize names the image as daemonset/kustomization.yaml's `images` says; the rest is the patch's
    (image,) = yaml.safe_load((ROOT / "daemonset" / "kustomization.yaml").read_text())["images"]
    for c in ds["spec"]["template"]["spec"]["containers"]:
        if c["image"] == f"{image['newName']}:{image['newTag']}":
            c["image"] = f"{image['name']}:{image['newTag']}"
    assert ds == no_surge_daemonset() | {"metadata": ds["metadata"]}
    assert sorted(d["kind"] for d in built) == sorted(d["kind"] for d in docs_of_base())


def docs_of_base() -> list[dict[str, Any]]:
    return [d for p in sorted((ROOT / "daemonset").glob("*.yaml")) if p.name != "kustomization.yaml" for d in docs(p)]
