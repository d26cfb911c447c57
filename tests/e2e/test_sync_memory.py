"""The agent's memory at 5,000 nodes, held at the full size on every way the API server can hand over the
initial state: scripts/bench-sync (1,000 Namespaces, 10,000 Services, 150,000 endpoints, 150,000 Pods over
the API double) with `MALLOC_ARENA_MAX=1` as the DaemonSet runs it, one process and `--workers 2` (the
ConfigMap's), through start, 1,000 updates and a forced relist of everything, for a WatchList stream, a
`resourceVersion=0` list answered in one body (a watch cache ignoring `limit`) and paged lists.

Memory is counted in bytes, not timed: the bounds hold on a busy machine as on a quiet one. They are the
sizing the DaemonSet is built on (docs/node.md "Resources"): steady RSS <= 120 MB for one process and
<= 160 MB summed over the supervisor, the zygote and two workers; the peak (VmHWM) through start and
through the relist under 1.5x steady and under half the container's memory limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.support.helpers import ROOT, subprocess_env

PATHS = ("watchlist", "one-body", "paged")
WORKERS = (1, 2)
STEADY_MB = {1: 120.0, 2: 160.0}


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, int], dict[str, Any]]:
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench-sync"), "--workers", ",".join(map(str, WORKERS)),
         "--list-path", ",".join(PATHS), "--updates", "1000", "--json", "--json-brief"],
        capture_output=True, text=True, timeout=1800, cwd="/", env=subprocess_env(MALLOC_ARENA_MAX="1"))
    figures = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{") and '"list_path"' in line]
    by_run = {(f["list_path"], f["workers"]): f for f in figures}
    assert set(by_run) == {(p, w) for p in PATHS for w in WORKERS}, r.stdout + r.stderr
    by_run[("", 0)] = {"output": r.stdout}
    return by_run


@pytest.mark.parametrize("workers", WORKERS, ids=lambda w: f"workers-{w}")
@pytest.mark.parametrize("path", PATHS)
def test_memory_at_5000_nodes_stays_within_the_sizing(
        runs: dict[tuple[str, int], dict[str, Any]], path: str, workers: int) -> None:
    f = runs[(path, workers)]
    said = f"{path}, --workers {workers}: {json.dumps(f)}\n{runs[('', 0)]['output']}"
    steady = f["steady_rss_mb"]
    assert steady <= STEADY_MB[workers], said
    assert f["peak_rss_mb"] <= 1.5 * steady, said
    assert f["relists"] == 3, said  # Namespaces, Services and EndpointSlices each listed again
    assert f["relist_peak_rss_mb"] <= 1.5 * steady, said
    assert f["relist_peak_rss_mb"] <= f["limit_mb"] / 2, said
    assert f["after_relist_rss_mb"] <= 1.1 * steady, said  # what the relist took is given back
    assert f["still_right"] and f["lost"] == 0, said
