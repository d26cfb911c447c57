"""scripts/bench-cache parses, and (where dnsperf, dnsmasq and unbound are installed) completes a
short run that prints every server's row and nodedns's ratio."""

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
def test_a_short_run_reports_every_server_and_the_ratio() -> None:
    env = dict(os.environ, PYTHON=sys.executable,
               SERVERS="nodedns dnsmasq", ROUNDS="1", DURATION="1", P99_SECONDS="1", RATE="2000")
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=240, env=env, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {tuple(line.split()[:2]) for line in r.stdout.splitlines() if line.split()[:1] in (["nodedns"],
                                                                                              ["dnsmasq"])}
    assert {(server, mode) for server in ("nodedns", "dnsmasq") for mode in ("plain", "edns", "cluster")} <= rows
    assert "nodedns / dnsmasq  CPU per answer (plain):" in r.stdout
    cluster = [line.split() for line in r.stdout.splitlines() if line.split()[1:2] == ["cluster"]]
    assert cluster and all(float(row[3]) > 0 and float(row[-2]) > 0 for row in cluster), r.stdout  # CPU, p99 (ms)
    assert "nodedns / dnsmasq  CPU per answer (cluster):" in r.stdout


@pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS) or (os.cpu_count() or 1) < 2,
                    reason="needs dnsperf, dnsmasq, unbound, taskset and 2 CPUs")
def test_a_short_run_prints_the_rate_limit_on_against_off_for_both_hit_paths_and_against_unbound() -> None:
    servers = ("nodedns", "nodedns-rl", "nodedns-py", "nodedns-py-rl", "unbound")
    env = dict(os.environ, PYTHON=sys.executable, SERVERS=" ".join(servers), ROUNDS="1", DURATION="1",
               P99_SECONDS="1", RATE="2000", MODES="plain")
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=300, env=env, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {tuple(line.split()[:2]) for line in r.stdout.splitlines() if line.split()[:1] and
            line.split()[0] in servers}
    assert {(s, "plain") for s in servers} <= rows, r.stdout
    for off in ("nodedns", "nodedns-py"):
        m = re.search(rf"^{off} rate limit on / off CPU per answer \(plain\): (\d+\.\d+)x \(([+-]\d+\.\d)%\)$",
                      r.stdout, re.M)
        assert m is not None and float(m.group(1)) > 0, r.stdout
    assert re.search(r"^nodedns-rl / unbound  CPU per answer \(plain\): \d+\.\d\dx$", r.stdout, re.M), r.stdout


def test_the_base_tree_rows_need_a_base_tree() -> None:
    env = dict(os.environ, PYTHON=sys.executable, SERVERS="nodedns nodedns-base", BASE_TREE="")
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60, env=env, cwd="/")
    assert r.returncode == 2 and "need BASE_TREE=DIR" in r.stderr, r.stdout + r.stderr


@pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS) or (os.cpu_count() or 1) < 2,
                    reason="needs dnsperf, dnsmasq, unbound, taskset and 2 CPUs")
def test_a_short_run_prints_a_policed_pod_against_an_unpoliced_one_on_both_hit_paths_and_against_a_base_tree() -> None:
    servers = ("nodedns", "nodedns-pol", "nodedns-py", "nodedns-py-pol", "nodedns-base", "nodedns-base-pol")
    env = dict(os.environ, PYTHON=sys.executable, SERVERS=" ".join(servers), ROUNDS="1", DURATION="1",
               P99_SECONDS="1", RATE="2000", MODES="plain", BASE_TREE=str(ROOT))  # this tree as its own base
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=300, env=env, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {tuple(line.split()[:2]) for line in r.stdout.splitlines() if line.split()[:1] and
            line.split()[0] in servers}
    assert {(s, "plain") for s in servers} <= rows, r.stdout
    for line in ("nodedns policy (a Pod under it) / none", "nodedns-py policy (a Pod under it) / none",
                 "nodedns-base policy (a Pod under it) / none", "this tree / base (a Pod under no policy)",
                 "this tree / base (a Pod under a policy)"):
        m = re.search(rf"^{re.escape(line)} CPU per answer \(plain\): (\d+\.\d+)x \(([+-]\d+\.\d)%\)$", r.stdout, re.M)
        assert m is not None and float(m.group(1)) > 0, (line, r.stdout)
