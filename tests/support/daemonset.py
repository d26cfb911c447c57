"""Shared by several test modules (carried out of tests/e2e/test_daemonset.py): K8S_VERSIONS, agent_config, docs,
one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from nodedns import config as cfgmod
from nodedns.cli import build_parser
from tests.support.helpers import ROOT

DIR = ROOT / "daemonset"


MANIFESTS = sorted(p for p in DIR.glob("*.yaml") if p.name != "kustomization.yaml")


# A current release and the oldest one still commonly run; both must accept every manifest.
K8S_VERSIONS = (kubernetes_validate.latest_version(), "1.31.0")


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def all_docs() -> list[dict[str, Any]]:
    return [d for p in MANIFESTS for d in docs(p)]


def one(kind: str) -> dict[str, Any]:
    found = [d for d in all_docs() if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind}s"
    return found[0]


def container(name: str = "nodedns") -> dict[str, Any]:
    c: dict[str, Any] = next(c for c in one("DaemonSet")["spec"]["template"]["spec"]["containers"]
                             if c["name"] == name)
    return c


def env_of(c: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet resolves it (NODE_NAME "node-a", ConfigMap keys)."""
    out = {}
    for e in c.get("env", []):
        source = e.get("valueFrom", {})
        if "fieldRef" in source:
            assert source["fieldRef"] == {"fieldPath": "spec.nodeName"}
            out[e["name"]] = "node-a"
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            assert ref["name"] == one("ConfigMap")["metadata"]["name"]
            out[e["name"]] = one("ConfigMap")["data"][ref["key"]]
        else:
            out[e["name"]] = e["value"]
    return out


def args_of(c: dict[str, Any]) -> list[str]:
    """The container's args with $(VAR) expanded from its environment, as the kubelet does."""
    env = env_of(c)
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in c["args"]]


def agent_config(tmp_path: Path) -> cfgmod.Config:
    """The Config `nodedns serve` builds from the DaemonSet's args and the ConfigMap, parsed by the real CLI."""
    cfg_file = tmp_path / "config.yaml"
    cfg_file.write_text(one("ConfigMap")["data"]["config.yaml"])
    args = [a.replace("/etc/nodedns/config.yaml", str(cfg_file)) for a in args_of(container())]
    ns = build_parser().parse_args(args)  # unknown flags exit here
    flags = {k: v for k, v in vars(ns).items() if k not in ("run", "command")}
    return cfgmod.from_sources(flags, environ={"NODE_NAME": "node-a"})
