"""The scripts without a test of their own run: a tiny run of each, with the interpreter under test, prints figures
that are numbers and moved (bench-hit-path, bench-manifest, bench-node, bench-outage, fuzz, mutate,
attack).

attack (with lib/attack.py) runs here too, in its --quick mode.

The other scripts have theirs: bench-sync, bench-churn and bench-ask in test_bench_scale.py, bench-index in
test_bench_index.py, bench-cache in test_bench_cache.py, bench-tail (with lib/bench_upstream.py, which bench-cache
runs too) in test_bench_tail.py, bench-cluster and lib/bench_cluster.py in
test_bench_cluster.py, bench-workers in test_bench_workers.py, bench-http-flood in test_http_flood.py,
bench-shadow in test_shadow_e2e.py, lib/failover.py and failover in test_failover.py, restart-under-load in
test_restart_under_load.py, soak (with lib/soak_feeder.py) in test_soak.py, build-image in test_image.py,
install-venv and lock-requirements in test_quickstart.py, run-tests in test_tiers.py; lib/load.sh is sourced by
the shell benchmarks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.helpers import IN_CI, load_script
from tests.support.memcg import available as memcg_missing
from tests.support.netns import requires_netns

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
NUMBER = r"(\d[\d,]*(?:\.\d+)?)"


def run(script: str, *args: str, timeout: float = 300) -> str:
    """Run a script of scripts/ with this interpreter; it must exit 0. Its stdout and stderr together."""
    r = subprocess.run([sys.executable, str(SCRIPTS / script), *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout)
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"{script} exited {r.returncode}:\n{out[-3000:]}"
    return out


def num(text: str) -> float:
    return float(text.replace(",", ""))


needs_dnsperf = pytest.mark.skipif(shutil.which("dnsperf") is None and not IN_CI,
                                   reason="dnsperf is not installed (apt-get install dnsperf)")


@needs_dnsperf
def test_bench_hit_path_prints_cpu_per_answer_and_qps_of_both_trees() -> None:
    out = run("bench-hit-path", "--baseline", "HEAD", "--seconds", "1", "--rounds", "1", "--clients", "2",
              "--query-log", "")
    rows = {m[1].strip(): (num(m[2]), num(m[3])) for m in re.finditer(
        rf"^(baseline \(HEAD\)|this tree)\s+{NUMBER}\s+[+-]\d+\.\d%\s+{NUMBER}$", out, re.M)}
    assert set(rows) == {"baseline (HEAD)", "this tree"}, out
    for name, (us, qps) in rows.items():
        assert 0 < us < 10_000, f"{name}: {us} us of CPU per answer"
        assert qps > 100, f"{name}: {qps} answers a second"


def test_bench_hit_path_micro_prints_nanoseconds_per_call_of_both_trees() -> None:
    out = run("bench-hit-path", "--micro", "--baseline", "HEAD", "--rounds", "1", "--query-log", "")
    rows = {m[1]: (num(m[2]), num(m[3])) for m in re.finditer(
        rf"^(baseline \(HEAD\)|this tree)\s+{NUMBER}\s+{NUMBER}\s+[+-]\d+\.\d%$", out, re.M)}
    assert set(rows) == {"baseline (HEAD)", "this tree"}, out
    for name, (low, median) in rows.items():
        assert 0 < low <= median < 1_000_000, f"{name}: {low} ns (min), {median} ns (median)"


def test_bench_manifest_prints_the_peak_memory_of_the_peer_and_of_both_trees() -> None:
    out = run("bench-manifest", "--endpoints", "2000", "--baseline", "HEAD")
    assert re.search(r"manifest: [\d,]+ Services, [\d,]+ EndpointSlices, 2,000 endpoints", out), out
    peer = re.search(rf"^peer: yaml\.load_all \(C loader\)\s+{NUMBER}\s+1\.00x$", out, re.M)
    assert peer is not None and num(peer[1]) > 10, out
    rows = {m[1].strip(): [num(m[i]) for i in (2, 3, 4, 5)] for m in re.finditer(
        rf"^(baseline \(HEAD\)|this tree)\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}x$", out, re.M)}
    assert set(rows) == {"baseline (HEAD)", "this tree"}, out
    for name, (peak, rss, ready, ratio) in rows.items():
        assert 10 < rss <= peak < 4096 and 0 < ready < 300 and ratio > 0, (name, out)


@requires_netns
def test_bench_node_prints_the_four_times_for_both_firewalls() -> None:
    out = run("bench-node", "--rounds", "2")
    rows = {m[1]: [num(m[i]) for i in range(2, 6)] for m in re.finditer(
        rf"^(iptables|nftables)\s+prepare\s+{NUMBER} ms\s+first install\s+{NUMBER} ms\s+"
        rf"steady reconcile\s+{NUMBER} ms\s+teardown\s+{NUMBER} ms", out, re.M)}
    assert set(rows) == {"iptables", "nftables"}, out
    for kind, (prepare, first, steady, down) in rows.items():
        # milliseconds rounded: a step that runs commands takes at least one; none takes a minute
        assert all(0 <= t < 60_000 for t in (prepare, first, steady, down)), (kind, out)
        assert first >= 1 and down >= 1, f"{kind}: the rules were installed and removed in no time?\n{out}"


def test_fuzz_sends_every_packet_and_every_owed_reply_comes() -> None:
    out = run("fuzz", "--packets", "2000", "--round", "1000", "--seed", "7")
    total = re.search(rf"^total: sent {NUMBER}, owed {NUMBER} replies \({NUMBER} well-formed queries\), "
                      rf"answered {NUMBER}, missing {NUMBER}, unexpected {NUMBER}", out, re.M)
    assert total, out
    sent, owed, valid, answered, missing, unexpected = (num(g) for g in total.groups())
    assert sent == 2000 and 0 < valid < owed <= sent, out
    assert answered > 0 and missing == 0 and unexpected == 0, out
    rss = [num(m) for m in re.findall(rf"RSS {NUMBER} KiB", out)]
    assert len(rss) == 3 and all(r > 1000 for r in rss), out  # at the start and after each of the 2 rounds
    assert "agent alive: True, log lines with errors: 0" in out


def load_mutate() -> ModuleType:
    return load_script("mutate")


def test_mutate_applies_every_mutation_to_todays_tree_and_the_table_is_whole() -> None:
    """--check: every mutation's text is in its file once, every module of the package has its own tests named
    (a table file: what scripts/mutate-changed selects), and each mutation names its module's own tests (the
    test files its table file lists). No number of mutations is required of a module."""
    out = run("mutate", "--check")
    mutate = load_mutate()
    assert not re.search(r"^(stale|table) ", out, re.M), out  # (mutation names may hold "stale")
    assert len(re.findall(r"^applies ", out, re.M)) == len(mutate.table()) >= 100


def test_mutate_coverage_lists_every_module_of_the_package() -> None:
    mutate = load_mutate()
    out = run("mutate", "--coverage")
    counts = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s*(\d+) (\S+)", out, re.M)}
    package = ROOT / "nodedns"
    modules = sorted(str(p.relative_to(ROOT)) for p in (*package.rglob("*.py"), *package.rglob("*.c"))
                     if "__pycache__" not in p.parts and not mutate._docstring_only(p))  # a subpackage's face
    assert sorted(counts) == modules, out


def test_mutate_check_reports_a_stale_mutation_and_a_module_left_uncovered(tmp_path: Path) -> None:
    mutate = load_mutate()
    moved = mutate.Mutation("moved-away", "nodedns/no_such_module.py", "x", "y", ("tests/unit/dns/test_wire.py",),
                            "gone")
    assert mutate.applies(moved) is False  # its file is gone: stale, never an exception
    table = tmp_path / "mutations"
    table.mkdir()
    (table / "wire.py").write_text("from mutate import Mutation\nTESTS = ('tests/unit/dns/test_wire.py',)\n"
                                   "MUTATIONS = (Mutation('a', 'nodedns/dns/wire.py', 'x', 'y', ('tests/unit/serve/"
                                   "test_cache.py',), "
                                   "'w'),)\n")
    problems = mutate.problems(mutate.load_modules(table))
    assert any("a: tests/unit/serve/test_cache.py is not among the own tests of nodedns/dns/wire.py" in p for p in
               problems)
    assert "nodedns/runtime/tasks.py" not in {m.file for m in mutate.MUTATIONS}  # the first mutations are in every
    # table
    assert any(p.startswith("nodedns/runtime/tasks.py: no table file") for p in problems)


EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree: every line of the package is a change
HEAP_DUE_TEST = "tests/unit/runtime/test_heap.py::test_a_trim_is_due_only_once_the_heap_shrank_under_rss_that_stayed"


def test_mutate_changed_finds_the_functions_a_diff_touches_and_their_tests() -> None:
    out = run("mutate-changed", EMPTY_TREE, "--module", "nodedns/runtime/heap.py", "--list")
    assert "nodedns/runtime/heap.py: " in out and "HeapTrimmer.due" in out and "trim_heap" in out, out
    assert "tests/unit/runtime/test_heap.py" in out  # its table's own tests
    assert "no function of nodedns/ changed" in run("mutate-changed", "HEAD", "--module", "nodedns/no_such.py")


def test_mutate_changed_runs_mutmut_on_one_function_and_reports_each_survivor_with_its_diff() -> None:
    """One function (HeapTrimmer.due) mutated by mutmut, its tests run against each mutant: the counts, and
    every mutant the tests let through shown as a diff (exit 1 when there is one)."""
    r = subprocess.run([sys.executable, str(SCRIPTS / "mutate-changed"), EMPTY_TREE, "--module",
                        "nodedns/runtime/heap.py", "--function", "HeapTrimmer.due", "--no-own-tests", "--tests",
                        HEAP_DUE_TEST],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    counts = re.search(r"^(.*) \(of (\d+) mutants\)$", out, re.M)
    assert counts is not None and int(counts.group(2)) >= 5, out[-3000:]
    killed = re.search(r"(\d+) killed", counts.group(1))
    assert killed is not None and int(killed.group(1)) >= 1, out[-3000:]
    survivors = re.findall(r"^survived: (nodedns\.runtime\.heap\.\S+)$", out, re.M)
    assert r.returncode == (1 if survivors else 0), out[-3000:]
    assert all(f"# {name}: survived" in out for name in survivors), out[-3000:]
    assert "--- nodedns/runtime/heap.py" in out or not survivors


@pytest.mark.parametrize("name", ["nodedns/serve/cache.py", "cache", "nodedns.serve.cache", "cache.py"])
def test_mutate_module_picks_the_mutations_of_one_module_however_it_is_named(name: str) -> None:
    mutate = load_mutate()
    picked = mutate.of_module(name, mutate.table())
    assert picked and {m.file for m in picked} == {"nodedns/serve/cache.py"}
    assert {m.file for m in mutate.of_module("cli/guard", mutate.table())} == {"nodedns/cli/guard.py"}
    assert {m.file for m in mutate.of_module("guard", mutate.table())} == {"nodedns/node/guard.py"}
    assert {m.file for m in mutate.of_module("_hitpath", mutate.table())} == {"nodedns/serve/_hitpath.c"}
    moved = [mutate.Mutation("m", "nodedns/dns/cache.py", "x", "y", (), "")]  # once modules move into subpackages
    assert mutate.of_module("cache", moved) == moved


def test_mutate_kills_two_mutations_with_their_tests() -> None:
    out = run("mutate", "explainer-asks-as-an-empty-client", "dns-key-ignores-do")
    assert re.search(r"^killed\s+explainer-asks-as-an-empty-client\s+\d+s\s+.*\d+ failed", out, re.M), out
    assert re.search(r"^killed\s+dns-key-ignores-do\s+\d+s\s+.*\d+ failed", out, re.M), out
    assert "total: 2 killed of 2" in out


def test_mutate_runs_the_mutations_of_one_module() -> None:
    n = sum(m.file == "nodedns/dns/identity.py" for m in load_mutate().table())
    assert n >= 2
    out = run("mutate", "--module", "identity")
    assert len(re.findall(r"^killed\s+\S+", out, re.M)) == n and f"total: {n} killed of {n}" in out, out


def test_mutate_says_survived_when_the_named_tests_pass_with_the_mutation() -> None:
    mutate = load_mutate()
    harmless = mutate.Mutation("a-comment-changed", "nodedns/dns/wire.py", '"""', '"""  ',
                               ("tests/unit/dns/test_wire_key.py",),
                               "nothing a test could see")
    assert mutate.applies(harmless) is False  # '"""' is in the file more than once: the table says stale
    harmless = mutate.Mutation("a-comment-changed", "tests/unit/dns/test_wire_key.py",
                               "from __future__ import annotations",
                               "from __future__ import annotations  # mutated", ("tests/unit/dns/test_wire_key.py",),
                               "nothing a test could see")
    outcome = mutate.run(harmless, keep=False, timeout=300, verbose=False, baseline={})
    assert outcome.verdict == "survived" and re.search(r"\d+ passed", outcome.detail), outcome


def test_mutate_docs_list_every_mutation_as_the_table_says() -> None:
    """docs/testing.md holds `scripts/mutate --markdown` between its markers, as it is now."""
    testing = (ROOT / "docs" / "testing.md").read_text()
    begin, end = "<!-- mutations: scripts/mutate --markdown -->\n", "<!-- end of mutations -->"
    assert begin in testing and end in testing
    listed = testing.split(begin, 1)[1].split(end, 1)[0]
    assert listed == run("mutate", "--markdown")
    for m in load_mutate().table():
        assert f"`{m.name}`" in listed


def test_bench_outage_prints_the_time_of_each_step_while_the_upstream_is_down() -> None:
    out = run("bench-outage", "--fast-only")
    rows = {m[1].strip(): num(m[2]) for m in re.finditer(rf"^([a-z].*?)\s+{NUMBER} ms$", out, re.M)}
    cached, new, down, again, stale, back = (rows[step] for step in (
        "a cached name", "an uncached name, failure new", "an uncached name, upstream marked down",
        "the same name again", "an expired name (served stale)", "the upstream returns: healthy again after"))
    # --upstream-timeout 500ms: two tries, then none (every upstream down: fail fast); answers from memory
    # far quicker than a try
    assert 900 <= new <= 3000, out
    assert 0 < cached < 450 and 0 < down < 450 and 0 < again < 450 and 0 < stale < 450, out
    assert 0 < back <= 3000, out


MEMCG_MISSING = memcg_missing()  # None where a memory cgroup can be made (root)
requires_memcg = pytest.mark.skipif(MEMCG_MISSING is not None and not IN_CI,
                                    reason=f"a memory cgroup cannot be made here: {MEMCG_MISSING}")

ATTACK_ROW = re.compile(rf"^(?P<name>[a-z0-9-]+)\s+(?P<growth>-?{NUMBER})\s+(?P<settled>-?{NUMBER})\s+"
                        rf"(?P<probes>{NUMBER})\s+(?P<lost>{NUMBER}(?:/{NUMBER})?)\s+(?P<restarts>{NUMBER})\s+"
                        r"(?P<result>PASS|FAIL)\b", re.M)


def test_attack_quick_holds_the_tcp_floods_and_restarts_a_stopped_worker() -> None:
    """scripts/attack --quick, as CI runs it: a row of figures per flood; the TCP floods, the stopped
    worker, the tenant's floods (large cluster answers, a spray of misses over UDP and TCP, many Pods of one namespace,
    queries in the good Pod's name), the --hosts files (a 2 MiB blocklist, junk, a FIFO) and the shadow under
    padded TCP queries within the targets (the ExternalName and forwarded-answer floods are printed, not
    judged here). Where a memory cgroup can be made (root: CI), the agent runs in one of the DaemonSet's limit
    (512 MiB, `--memory-limit 512`), as its Pod does, and no flood may get a process of it killed."""
    in_cgroup = MEMCG_MISSING is None
    limit = ["--memory-limit", "512"] if in_cgroup else []
    r = subprocess.run(["bash", str(SCRIPTS / "attack"), "--quick", *limit], cwd=ROOT, capture_output=True,
                       text=True, timeout=600, env={**os.environ, "PYTHON": sys.executable})
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    rows = {m["name"]: m for m in ATTACK_ROW.finditer(r.stdout)}
    assert set(rows) == {"pipeline-60k", "pipeline-srv", "never-read", "stop-worker", "externalname", "forward-60k",
                         "srv-64k", "spray", "spray-tcp", "namespace-share", "spoof", "hosts-blocklist", "hosts-junk",
                         "hosts-fifo", "shadow-padded"}, out[-3000:]
    for name in ("pipeline-60k", "pipeline-srv", "never-read", "stop-worker", "srv-64k", "spray", "spray-tcp",
                 "namespace-share", "spoof", "hosts-blocklist", "hosts-junk", "hosts-fifo", "shadow-padded"):
        row = rows[name]
        assert row["result"] == "PASS", out[-3000:]
        assert num(row["growth"]) <= 64 and num(row["probes"]) > 0, row.group(0)
    assert num(rows["stop-worker"]["restarts"]) >= 1
    result = json.loads(next(x for x in r.stdout.splitlines() if x.startswith("RESULT ")).removeprefix("RESULT "))
    assert [o["name"] for o in result] == list(rows)
    if in_cgroup:
        for o in result:
            assert o["oom_kills"] == 0 and 0 < o["cgroup_peak_mb"] < 512, o


@requires_memcg
def test_attack_in_a_memory_cgroup_too_small_for_the_agent_says_it_was_killed() -> None:
    """--memory-limit is the kernel's limit, not a figure compared after the fact: under 70 MB the shipped agent
    (two workers and their supervisor) is killed at start, and the flood's row says so, with the OOM kill."""
    command = ["bash", str(SCRIPTS / "attack"), "--quick", "--attacks", "externalname", "--memory-limit", "70"]
    r = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHON": sys.executable})
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    row = next(m for m in ATTACK_ROW.finditer(r.stdout) if m["name"] == "externalname")
    assert row["result"] == "FAIL"
    assert re.search(r"\(([1-9]\d*) OOM kills in its memory cgroup\)", row.group(0) + r.stdout), r.stdout[-2000:]
    assert "Traceback" not in r.stdout
