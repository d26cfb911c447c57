"""daemonset-shadow/: the DaemonSet of daemonset/ as a shadow: `nodedns shadow` with the same ConfigMap, no local IP,
no guard, no firewall, NET_RAW only, probes on its own status port; everything else as the base."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
import yaml

from nodedns import config as cfgmod
from nodedns.cli import parse_args
from nodedns.shadow.agent import shadow_config
from nodedns.shadow.command import config_flags
from tests.support.helpers import ROOT

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl kustomize renders the overlay")


def built(path: str) -> list[dict[str, Any]]:
    r = subprocess.run(["kubectl", "kustomize", str(ROOT / path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def daemonset(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    return ds


def test_the_shadow_overlay_runs_nodedns_shadow_with_net_raw_only_and_no_guard() -> None:
    ds = daemonset(built("daemonset-shadow"))
    spec = ds["spec"]["template"]["spec"]
    (container,) = spec["containers"]  # no guard: there are no local IPs to give back
    assert container["name"] == "nodedns"
    args = container["args"]
    assert args[0] == "shadow" and "--interface" in args and "--local-ip" not in args
    caps = container["securityContext"]["capabilities"]
    assert caps == {"drop": ["ALL"], "add": ["NET_RAW"]}
    assert container["securityContext"]["privileged"] is False
    assert "NODEDNS_LOCAL_IP" not in {e["name"] for e in container["env"]}
    # no xtables lock, no hand-over roster; the kube-dns ConfigMap as the agent reads it (which names it would forward)
    assert {v["name"] for v in spec["volumes"]} == {"config", "kube-dns-config"}
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/etc/nodedns", "/etc/kube-dns"}
    assert spec["hostNetwork"] is True  # the node's own DNS traffic is what it watches
    resources = container["resources"]  # its own, stated (one process, bounded buffers), not the agent's
    assert resources["limits"] == {"memory": "256Mi"} and resources["requests"]["memory"] == "128Mi"


def test_the_shadow_overlay_arguments_parse_and_set_the_node_settings_aside() -> None:
    ds = daemonset(built("daemonset-shadow"))
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    (cm,) = [d for d in built("daemonset-shadow") if d["kind"] == "ConfigMap"]
    ns = parse_args(container["args"])
    assert ns.command == "shadow" and ns.port == 53
    raw = yaml.safe_load(cm["data"]["config.yaml"])
    assert raw["setup-interface"] and raw["firewall"] != "none"  # the ConfigMap's, which the shadow sets aside
    flags = {k.replace("_", "-"): v for k, v in config_flags(ns).items() if k != "config"}
    config = shadow_config(cfgmod.build({**raw, **flags}))
    assert config.setup_interface is None and config.firewall == "none" and config.local_ip == ()
    assert config.workers == 1
    status_port = config.status_listen[1] if config.status_listen else None
    assert status_port != 9253  # node-cache's metrics port on the node
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == status_port, probe
    assert ds["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == str(status_port)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NODEDNS_DEBUG"] == f"http://{config.debug_listen[0]}:{config.debug_listen[1]}"  # type: ignore[index]


def test_the_shadow_overlay_updates_without_a_surge_pod() -> None:
    ds = daemonset(built("daemonset-shadow"))
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] == 0


def test_everything_but_the_daemonset_is_the_base_the_same_configmap_included() -> None:
    base, overlay = built("daemonset"), built("daemonset-shadow")
    assert [d for d in overlay if d["kind"] != "DaemonSet"] == [d for d in base if d["kind"] != "DaemonSet"]
    # the same name: kubectl apply -k daemonset/ replaces the shadow by the agent
    assert daemonset(overlay)["metadata"]["name"] == daemonset(base)["metadata"]["name"]
