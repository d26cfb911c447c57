"""DNS latency while a client floods the HTTP listeners (scripts/bench-http-flood): the flood p99 stays
within 1.5x of the quiet p99, as the DaemonSet runs (the ConfigMap's workers and allow list)."""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

from tests.support.helpers import ROOT, load_script

SCRIPT = ROOT / "scripts" / "bench-http-flood"


def _load() -> ModuleType:
    return load_script(SCRIPT.name)


bench = _load()
FLOOD_SLACK = 0.25e-3  # seconds the flood's p99 may add in any case: scheduling on a shared machine (below)


def test_the_script_prints_its_usage() -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "--connections" in r.stdout


def test_dns_p99_under_an_http_flood_stays_within_one_and_a_half_times_the_quiet_p99() -> None:
    """Quiet and flood rounds interleaved (the machine's own noise falls on both), medians compared. As
    root (CI) the agent and the prober run at nice -10, and no other test runs beside it (the timing
    tier, tests/support/tiers.py): the suite's other tests are not what is measured (beside them at one priority
    the ratio was 2.8 once in CI).

    The quiet p99 here is 0.1-0.3 ms, where 1.5x is 50-150 us: one wake-up of a worker delayed by
    another process on its core. Beside the suite's other worker (before it ran alone) the flood's median p99 came out
    0.09-0.19 ms above the quiet one (1.6x and 2.5x, in two of five runs), while a flood that holds
    the loop (what this guards against: one explain request once blocked DNS for 5.4 s) costs
    milliseconds. So the flood passes within 1.5x, or within FLOOD_SLACK of the quiet p99."""
    res = bench.measure(workers=bench.configmap_workers(), rounds=7, seconds=2.0, qps=1000, connections=16,
                        nice=-10)
    answered = {code: n for code, n in res["http"].items() if code in ("200", "503")}
    assert answered.get("200", 0) >= 50, res["http"]  # the flood was served, and paced
    assert all(r["lost"] == 0 for r in res["rounds"]), res["rounds"]
    figures = f"quiet p99 {res['quiet_p99'] * 1e3:.3f} ms, flood p99 {res['flood_p99'] * 1e3:.3f} ms"
    assert res["ratio"] <= 1.5 or res["flood_p99"] - res["quiet_p99"] <= FLOOD_SLACK, (figures, res["rounds"])
