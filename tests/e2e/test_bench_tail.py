"""scripts/bench-tail runs small (every duration and size from the environment) and prints, side by side,
each server's rounds (p99, p99.9, max), its worst round, nodedns's own loop stalls and the ratios, for the
forwarded names and the cluster names under Service updates."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.support.helpers import ROOT

SCRIPT = ROOT / "scripts" / "bench-tail"
TOOLS = ("dnsperf", "unbound", "taskset")


@pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS) or (os.cpu_count() or 1) < 2,
                    reason="needs dnsperf, unbound, taskset and 2 CPUs")
def test_a_small_run_prints_every_round_the_worst_and_the_ratios_for_both_parts() -> None:
    env = dict(os.environ, ROUNDS="2", ROUND_SECONDS="1", GAP_SECONDS="0.5", RATE="2000", TTL_CAP="3",
               SERVICES="50", UPDATES="20")
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300, env=env, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "2 rounds of 1 s" in out and "TTL cap 3 s" in out
    for part in ("forward", "cluster"):
        for server in ("nodedns", "unbound"):
            rounds = re.findall(rf"^{part} {server} +round (\d): p99 +([\d.]+) ms  p99\.9 +([\d.]+) ms  max +([\d.]+) "
                                r"ms  answered +(\d+)  lost (\d+)(.*)$", out, re.M)
            assert [k for k, *_ in rounds] == ["1", "2"], out
            for _, p99, p999, top, answered, _lost, rest in rounds:
                assert 0 < float(p99) <= float(p999) <= float(top), out
                assert int(answered) > 1000, out  # 2,000 offered in the second
                assert ("loop:" in rest) == (server == "nodedns"), out  # nodedns's own view of the round
            assert re.search(rf"^{part} {server} +worst round: p99 [\d.]+ ms  p99\.9 [\d.]+ ms  max [\d.]+ ms", out,
                             re.M), out
        m = re.search(rf"^{part} nodedns / unbound worst-round p99\.9: ([\d.]+)x \(target <= 1\.5x\)  "
                      r"max: ([\d.]+)x \(target <= 2x\)$", out, re.M)
        assert m is not None and float(m.group(1)) > 0 and float(m.group(2)) > 0, out
    m = re.search(r"^cluster: ([\d.]+) Service updates/s applied", out, re.M)
    assert m is not None and float(m.group(1)) > 5, out
