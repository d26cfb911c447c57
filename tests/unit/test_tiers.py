"""The suite's tiers (tests/support/tiers.py): every test is in exactly one, `pytest` alone runs the fast one,
and every module and test the tiers name is one of the suite."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import tiers
from tests.support.helpers import ROOT

# a test in no tier, or in two
NOT_EXACTLY_ONE = " or ".join(["not (" + " or ".join(tiers.TIERS) + ")"]
                              + [f"({a} and {b})" for i, a in enumerate(tiers.TIERS) for b in tiers.TIERS[i + 1:]])


def collect(*args: str) -> tuple[list[str], str]:
    """The test ids `pytest --collect-only ARGS` lists in one process, and its last line."""
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    lines = r.stdout.splitlines()
    assert r.returncode in (0, 5), r.stdout[-3000:] + r.stderr[-3000:]
    return [line for line in lines if "::" in line], lines[-1] if lines else ""


def test_every_test_of_the_suite_is_in_exactly_one_tier() -> None:
    ids, last = collect("-n", "0", "-m", NOT_EXACTLY_ONE, "tests")
    assert ids == [], ids[:20]
    deselected = re.search(r"(\d+) deselected", last)
    assert deselected and int(deselected.group(1)) > 1000, last  # the whole suite was there to be selected


def test_pytest_alone_runs_the_fast_tier_and_nothing_else() -> None:
    ids, last = collect()
    assert ids, last
    assert {tiers.tier_of(i) for i in ids} == {"fast"}, last
    assert "deselected" in last  # the other tiers were collected and left out


@pytest.mark.parametrize(("nodeid", "tier"), [
    ("tests/unit/test_config.py::test_x", "fast"),
    ("tests/unit/serve/test_invalidation.py::test_answers_served_through_the_table_equal_answers_computed_fresh",
     "slow"),
    ("tests/unit/serve/test_invalidation.py::test_something_else", "fast"),
    ("tests/e2e/test_fleet.py::test_x[a-b]", "e2e"),
    ("tests/e2e/test_image.py::test_x", "slow"),
    ("tests/e2e/test_failover.py::test_x[iptables]", "timing"),
    ("tests/e2e/test_http_flood.py::test_dns_p99_under_an_http_flood_stays_within_one_and_a_half_times_the_quiet_p99",
     "timing"),
    ("tests/e2e/test_http_flood.py::test_the_script_prints_its_usage", "e2e"),
])
def test_a_tests_tier_is_its_own_entry_else_its_modules_else_its_directorys(nodeid: str, tier: str) -> None:
    assert tiers.tier_of(nodeid) == tier


def test_every_module_and_test_the_tiers_name_is_in_the_suite() -> None:
    modules = {p.stem: p for p in (ROOT / "tests").rglob("test_*.py")}
    for name in sorted(tiers.SLOW | tiers.TIMING):
        stem, _, test = name.partition("::")
        assert stem in modules, f"{name}: no module {stem}.py in tests/"
        if test:
            assert re.search(rf"^(async )?def {test}\(|^class {test}\b|^{test} = ", modules[stem].read_text(),
                             re.M), f"{name}: no test {test} in {modules[stem].relative_to(ROOT)}"


def test_only_the_fast_and_e2e_tiers_run_on_every_core_by_default() -> None:
    assert [t for t in tiers.TIERS if tiers.parallel(t)] == ["fast", "e2e"]
    assert tiers.parallel("")  # pytest alone: the fast tier
    assert not tiers.parallel("e2e or slow")


def test_auto_starts_three_workers_for_every_two_cores() -> None:
    assert [tiers.workers_for(n) for n in (1, 2, 3, 4, 8)] == [1, 3, 4, 6, 12]


def run_tests(tmp_path: Path, *args: str, failing: str = "") -> tuple[int, list[str], str]:
    """scripts/run-tests ARGS with a python that records its arguments (and fails the tier `failing`)."""
    calls = tmp_path / "calls"
    calls.unlink(missing_ok=True)
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\n"
                    f"case \"$*\" in *\"-m {failing} \"*|*\"-m {failing}\") exit 1;; esac\n" if failing else
                    f"#!/bin/sh\necho \"$*\" >> {calls}\n")
    fake.chmod(0o755)
    r = subprocess.run([str(ROOT / "scripts" / "run-tests"), *args], env={"PATH": "/usr/bin:/bin", "PYTHON": str(fake)},
                       capture_output=True, text=True, timeout=60)
    return r.returncode, calls.read_text().splitlines() if calls.exists() else [], r.stderr


def test_the_readmes_test_command_runs_every_tier_as_its_own_step(tmp_path: Path) -> None:
    code, calls, _ = run_tests(tmp_path)
    assert code == 0
    assert calls == ["-m pytest", "-m pytest -m e2e", "-m pytest -m slow", "-m pytest -m timing"]
    assert [c.split("-m ")[-1] if c.count("-m") > 1 else "fast" for c in calls] == list(tiers.TIERS)


def test_a_failed_tier_fails_the_run_and_the_later_tiers_still_run(tmp_path: Path) -> None:
    code, calls, err = run_tests(tmp_path, "--", "-x", failing="e2e")
    assert code == 1 and "failed: e2e" in err
    assert calls == ["-m pytest -x", "-m pytest -m e2e -x", "-m pytest -m slow -x", "-m pytest -m timing -x"]


def test_run_tests_runs_the_tiers_it_is_given_and_refuses_others(tmp_path: Path) -> None:
    code, calls, _ = run_tests(tmp_path, "timing", "fast")
    assert code == 0 and calls == ["-m pytest -m timing", "-m pytest"]
    code, calls, err = run_tests(tmp_path, "quiet")
    assert code == 2 and calls == [] and "no tier 'quiet'" in err
