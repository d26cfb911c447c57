"""daemonset-migration/: the DaemonSet of daemonset/, kept to nodes labelled for nodedns, as the guide
docs/migrate-from-nodelocaldns.md uses it (label a node: node-cache leaves it, nodedns starts)."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.support.helpers import ROOT

LABEL = "nodedns.io/node-dns"


def built(path: str) -> list[dict[str, Any]]:
    r = subprocess.run(["kubectl", "kustomize", str(ROOT / path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl kustomize renders the overlay")
def test_the_migration_overlay_is_the_base_with_nodedns_kept_to_labelled_nodes() -> None:
    base, overlay = built("daemonset"), built("daemonset-migration")
    ds = next(d for d in overlay if d["kind"] == "DaemonSet")
    affinity = ds["spec"]["template"]["spec"].pop("affinity")
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": LABEL, "operator": "In", "values": ["nodedns"]}]}]
    assert overlay == base  # nothing else differs


def test_the_guide_uses_the_label_the_overlay_selects() -> None:
    guide = (ROOT / "docs" / "migrate-from-nodelocaldns.md").read_text()
    assert f"kubectl label node \"$NODE\" {LABEL}=nodedns" in guide
    assert f"kubectl label node \"$NODE\" {LABEL}-" in guide
    assert f'"key":"{LABEL}","operator":"NotIn","values":["nodedns"]' in guide
    assert "../../daemonset-migration" in guide  # your overlay's resource (examples/overlay/ shows one)
