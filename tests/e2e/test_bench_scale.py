"""The scale benchmarks run: scripts/bench-churn, scripts/bench-ask, scripts/bench-dot, scripts/bench-warm and
scripts/bench-sync, each a tiny run with this interpreter, their figures parsed as numbers (the sizes that prove
the targets are run by hand: see each script's docstring)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.support.helpers import ROOT

NUMBER = r"(\d+(?:\.\d+)?)"


def run(script: str, *args: str, timeout: float = 300) -> str:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], capture_output=True, text=True,
                       timeout=timeout, cwd="/")
    assert r.returncode in (0, 1), r.stdout + r.stderr  # 1: a target missed at this tiny size, still a report
    return r.stdout


@pytest.mark.skipif(shutil.which("dnsperf") is None or shutil.which("taskset") is None
                    or (os.cpu_count() or 1) < 2, reason="needs dnsperf, taskset and 2 CPUs")
def test_bench_churn_reports_cpu_per_answer_for_every_rate_and_the_worst_case() -> None:
    out = run("bench-churn", "--services", "40", "--duration", "1", "--qps", "1000", "--rounds", "2")
    rows = re.findall(rf"^churn (\w+)\s+{NUMBER} updates/s\s+(\d+) answers\s+{NUMBER} us CPU per answer\s+"
                      rf"{NUMBER}x quiet  \(rounds {NUMBER}\.\.{NUMBER}x\)$", out, re.M)
    assert [r[0] for r in rows] == ["quiet", "unrelated", "unrelated", "worst"], out
    assert all(int(r[2]) > 0 and float(r[3]) > 0 for r in rows), out
    assert float(rows[0][4]) == 1.0 and float(rows[2][1]) > 50, out  # ~100 updates/s applied
    assert all(float(r[5]) <= float(r[6]) for r in rows), out  # the rounds' own ratios, lowest to highest


def test_bench_ask_reports_the_latency_of_a_cluster_miss_through_the_channel() -> None:
    out = run("bench-ask", "--queries", "100", timeout=120)
    one = re.search(rf"^misses  one process\s+100 queries  p50 {NUMBER} ms  p99 {NUMBER} ms$", out, re.M)
    two = re.search(rf"^misses  --workers 2\s+100 queries  p50 {NUMBER} ms  p99 {NUMBER} ms\s+([+-]\d+\.\d+) ms p99 "
                    r"through the channel", out, re.M)
    assert one is not None and two is not None, out
    assert float(two.group(1)) > 0 and float(one.group(1)) > 0
    search = re.search(rf"^search  --workers 2\s+100 queries  p50 {NUMBER} ms  p99 {NUMBER} ms\s+([+-]\d+\.\d+) ms p99 "
                       r"\((\d+) of 100 asked of the supervisor", out, re.M)
    assert search is not None, out
    assert int(search.group(4)) < 20, out  # the workers decide search-list misses alone (a few filter false positives)


@pytest.mark.skipif(shutil.which("unbound") is None or shutil.which("openssl") is None,
                    reason="needs unbound and openssl (Debian packages .ci/run installs)")
def test_bench_dot_prints_tls_beside_plain_udp_over_one_connection() -> None:
    out = run("bench-dot", "--queries", "100", timeout=120)
    udp = re.search(rf"^udp\s+100 queries  p50 {NUMBER} ms  p99 {NUMBER} ms$", out, re.M)
    tls = re.search(rf"^tls\s+100 queries  p50 {NUMBER} ms  p99 {NUMBER} ms\s+p50 {NUMBER}x plain UDP "
                    r"\(target <= 1.3x\); TLS connections opened: (\d+)$", out, re.M)
    assert udp is not None and tls is not None, out
    assert float(udp.group(1)) > 0 and float(tls.group(1)) > 0
    assert abs(float(tls.group(3)) - float(tls.group(1)) / float(udp.group(1))) < 0.02 + 0.01 * float(tls.group(3))
    assert int(tls.group(4)) == 1, out  # every miss over the one reused connection


def test_bench_warm_prints_the_cache_handed_over_beside_a_cold_restart() -> None:
    out = run("bench-warm", "--names", "200", timeout=180)
    warm = re.search(rf"^warm\s+(\d+) entries  written ([\d,]+) bytes in {NUMBER} ms, loaded in {NUMBER} ms: "
                     rf"{NUMBER} ms \(target <= 200 ms\); the successor waited (-?{NUMBER}) ms for it  "
                     rf"ready after {NUMBER} s$", out, re.M)
    cold = re.search(rf"^cold\s+0 entries  ready after {NUMBER} s$", out, re.M)
    again = re.search(r"^successor asked the upstream again for (\d+) of 200 names$", out, re.M)
    assert warm is not None and cold is not None and again is not None, out
    assert int(warm.group(1)) == 200 and int(warm.group(2).replace(",", "")) > 200 * 50, out
    assert float(warm.group(5)) == pytest.approx(float(warm.group(3)) + float(warm.group(4)), abs=0.11)
    assert int(again.group(1)) == 0, out  # every name answered from the cache handed over


def test_bench_sync_prints_one_two_and_four_workers_side_by_side() -> None:
    out = run("bench-sync", "--scale", "0.01", "--updates", "6", "--settle", "0.5", "--relist-wait", "1",
              timeout=400)
    assert len(re.findall(rf"^  steady RSS\s+{NUMBER} MB", out, re.M)) == 3, out  # the line as it always was
    rows = re.findall(rf"^  watchlist  workers (\d)  steady RSS\s+{NUMBER} MB \({NUMBER}x one process\)"
                      rf"  steady PSS\s+{NUMBER} MB"
                      rf"  ready {NUMBER} s  propagation p99 {NUMBER} ms", out, re.M)
    assert [r[0] for r in rows] == ["1", "2", "4"], out
    assert all(float(r[1]) > 10 and float(r[3]) > 10 for r in rows), out
    assert re.search(rf"per further worker \+{NUMBER} MB RSS, \+{NUMBER} MB PSS", out), out
