"""Shared by several test modules (carried out of tests/e2e/test_insight_e2e.py): shipped_config."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.helpers import ROOT

LOCAL_IP = "169.254.20.10"


SHIPPED_CONFIG = ROOT / "daemonset" / "configmap.yaml"


def shipped_config(tmp: Path) -> tuple[Path, str]:
    """The DaemonSet's config.yaml, byte for byte as the ConfigMap ships it, and its `local-ip` key (the
    DaemonSet passes it as --local-ip)."""
    docs = [d for d in yaml.safe_load_all(SHIPPED_CONFIG.read_text()) if d]
    (cm,) = [d for d in docs if d.get("kind") == "ConfigMap"]
    path = tmp / "config.yaml"
    path.write_text(cm["data"]["config.yaml"], encoding="utf-8")
    local_ip = str(cm["data"]["local-ip"])
    assert LOCAL_IP in local_ip.split(","), local_ip
    return path, local_ip
