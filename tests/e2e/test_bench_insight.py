"""scripts/bench-cache measures what per-Pod insight costs per cached answer: nodedns with insight on and
off side by side in one run, both hit paths, and the ratio printed (the figures: docs/measured.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.support.helpers import ROOT

SCRIPT = ROOT / "scripts" / "bench-cache"
TOOLS = ("dnsperf", "dnsmasq", "unbound", "taskset")


@pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS) or (os.cpu_count() or 1) < 2,
                    reason="needs dnsperf, dnsmasq, unbound, taskset and 2 CPUs")
def test_a_short_run_prints_insight_on_against_off_for_both_hit_paths() -> None:
    env = dict(os.environ, PYTHON=sys.executable, SERVERS="nodedns nodedns-off nodedns-py nodedns-py-off",
               ROUNDS="1", DURATION="1", P99_SECONDS="1", RATE="2000", MODES="plain")
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=300, env=env, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {tuple(line.split()[:2]) for line in r.stdout.splitlines() if line.split()[:1] and
            line.split()[0] in ("nodedns", "nodedns-off", "nodedns-py", "nodedns-py-off")}
    assert {(s, "plain") for s in ("nodedns", "nodedns-off", "nodedns-py", "nodedns-py-off")} <= rows, r.stdout
    for on in ("nodedns", "nodedns-py"):
        m = re.search(rf"^{on} insight on / off CPU per answer \(plain\): (\d+\.\d+)x \(([+-]\d+\.\d)%\)$", r.stdout,
                      re.M)
        assert m is not None and float(m.group(1)) > 0, r.stdout
