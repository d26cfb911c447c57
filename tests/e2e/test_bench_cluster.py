"""The pieces of scripts/bench-cluster work (dnsperf itself is not run here)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from nodedns.cluster import manifests
from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords, ZoneSettings
from nodedns.dns.wire import QT, RCODE
from tests.support.helpers import ROOT, running_agent

SCRIPT = ROOT / "scripts" / "bench-cluster"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_cluster", ROOT / "scripts" / "lib" / "bench_cluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load()

DNSPERF_REPORT = """\
Statistics:

  Queries sent:         212567
  Queries completed:    212500 (99.97%)
  Queries lost:         67 (0.03%)

  Response codes:       NOERROR 201875 (95.00%), NXDOMAIN 10625 (5.00%)
  Run time (s):         10.000123
  Queries per second:   21249.738651

  Average Latency (s):  0.000412 (min 0.000031, max 0.012006)
"""


def test_generated_cluster_loads_cleanly_and_every_query_gets_the_intended_answer(tmp_path: Path) -> None:
    out = tmp_path / "cluster.yaml"
    assert bench.main(["manifest", str(out), "--services", "60"]) == 0
    index = Index()
    index.load(manifests.read(str(out)))
    index.mark_synced()
    assert index.skipped == 0 and index.counts()["services"] == 60
    records = ClusterRecords(index, ZoneSettings())
    qfile = tmp_path / "queries.txt"
    assert bench.main(["queries", str(qfile), "--services", "60", "--lines", "400"]) == 0
    lines = qfile.read_text().splitlines()
    assert len(lines) == 400
    rcodes = []
    types = set()
    for line in lines:
        name, qtype = line.split()
        types.add(qtype)
        found = records.lookup(name, QT.from_text(qtype))
        assert found is not None
        assert (found.rcode == RCODE.NXDOMAIN) == name.startswith("missing-"), line
        if found.rcode == RCODE.NOERROR:
            assert found.answer, line  # a real answer, not NODATA
        rcodes.append(found.rcode)
    assert types == {"A", "AAAA", "SRV"}
    assert 0.02 < rcodes.count(RCODE.NXDOMAIN) / len(rcodes) < 0.1


def test_the_same_size_gives_the_same_cluster() -> None:
    assert bench.cluster(30) == bench.cluster(30)
    assert bench.queries(30, 50) == bench.queries(30, 50)


def test_cputime_counts_this_process() -> None:
    before = bench.cputime_us(os.getpid())
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    assert bench.cputime_us(os.getpid()) > before


def test_dnsperf_report_and_latency_lines_are_read() -> None:
    assert bench.dnsperf_summary(DNSPERF_REPORT) == (212500, pytest.approx(21249.738651))
    lines = "\n".join(f"> NOERROR web.default.svc.cluster.local A {i / 100000:.6f}" for i in range(1, 201))
    assert bench.p99_ms("[Status] x\n" + lines + "\nStatistics:\n") == pytest.approx(1.99)
    with pytest.raises(ValueError):
        bench.dnsperf_summary("garbage")
    with pytest.raises(ValueError):
        bench.p99_ms(DNSPERF_REPORT)


def test_wait_ready_sees_a_loaded_server(tmp_path: Path) -> None:
    out = tmp_path / "cluster.yaml"
    out.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": bench.cluster(10)}))
    with running_agent({"manifests": str(out)}) as agent:
        assert bench.wait_ready(agent.port, 5.0)
    port = bench.free_port()
    assert not bench.wait_ready(port, 0.3)  # nothing listens there


def test_the_helper_runs_as_a_script(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "lib" / "bench_cluster.py"), "free-port"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and 0 < int(r.stdout) < 65536
