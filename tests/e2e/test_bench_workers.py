"""scripts/bench-workers parses, and (with dnsperf and taskset, on 2 CPUs) a short run prints every
set-up's row and the 2-worker / 1-worker ratio."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.support.helpers import ROOT

SCRIPT = ROOT / "scripts" / "bench-workers"



@pytest.mark.skipif(any(shutil.which(t) is None for t in ("dnsperf", "taskset", "/usr/bin/time"))
                    or (os.cpu_count() or 1) < 2, reason="needs dnsperf, taskset, /usr/bin/time and 2 CPUs")
def test_a_short_run_reports_every_setup_and_the_ratio() -> None:
    env = dict(os.environ, PYTHON=sys.executable, ROUNDS="1", DURATION="1")
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=360, env=env, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {(m.group(1), m.group(2)): int(m.group(3))
            for m in re.finditer(r"^(hits|misses|asks)\s+(\dw-\dcpu)\s+(\d+)\s+\d+\.\d+", r.stdout, re.M)}
    assert set(rows) == {(w, s) for w in ("hits", "misses", "asks") for s in ("1w-1cpu", "1w-2cpu", "2w-2cpu")}, \
        r.stdout
    assert all(q > 0 for q in rows.values()), r.stdout
    for workload in ("hits", "misses", "asks"):
        assert re.search(rf"{workload}: 2 workers / 1 worker on the same two shared cores: \d+\.\d+x QPS", r.stdout)
