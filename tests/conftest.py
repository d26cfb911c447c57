"""Shared fixtures (the example cluster's agent, the hit path under test) and the skip list printed at the end."""

from __future__ import annotations

import fcntl
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.apiserver import FakeApiServer
from tests.support.helpers import EXAMPLE, IN_CI, RunningAgent, running_agent

HIT_PATH_ENV = "NODEDNS_HIT_PATH"  # nodedns.serve.server.HIT_PATH_ENV: "python" turns the C hit path off
HIT_PATHS = ("c", "python")


@pytest.fixture(scope="module", params=HIT_PATHS, ids=[f"{p}-hit-path" for p in HIT_PATHS])
def hit_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """The UDP hit path the agents of this module run: the C one (nodedns/serve/_hitpath.c, as CI builds and the
    image ships it) or the Python one (NODEDNS_HIT_PATH=python, as an install without a C compiler runs).
    Module-scoped, so a module-scoped agent that asks for it is started once per hit path; the environment
    variable reaches in-process agents (read when their DNS server is made) and subprocesses alike.
    Opt a module in with `pytestmark = pytest.mark.usefixtures("hit_path")`."""
    choice = str(request.param)
    if choice == "c":
        try:
            importlib.import_module("nodedns.serve._hitpath")
        except ImportError:
            if IN_CI:
                pytest.fail("the C hit path is not built: CI installs gcc and must test it")
            pytest.skip("the C hit path is not built here (no C compiler at install time)")
    with pytest.MonkeyPatch.context() as mp:
        if choice == "python":
            mp.setenv(HIT_PATH_ENV, "python")
        else:
            mp.delenv(HIT_PATH_ENV, raising=False)
        yield choice


@pytest.fixture(scope="module")
def example_agent() -> Iterator[RunningAgent]:
    """The bundled example cluster, served on 127.0.0.1 (module-scoped: start once per test file)."""
    with running_agent({"manifests": str(EXAMPLE)}) as agent:
        yield agent


@pytest.fixture
def kubeconfig(api: FakeApiServer, tmp_path: Path) -> str:
    """A kubeconfig for the module's `api` (each module that syncs from the fake API server defines `api`:
    what it serves)."""
    return api.write_kubeconfig(tmp_path / "kubeconfig")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    """At the end of the run: every skipped test with its reason. In CI (CI=true) a skip is a test that did
    not run where everything it needs is installed by .ci/run, so each must have a reason CI cannot meet."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped and not IN_CI:
        return
    where = "in CI" if IN_CI else "here (outside CI; CI installs what these need and runs them)"
    terminalreporter.section(f"{len(skipped)} test(s) skipped {where}", sep="-")
    for report in skipped:
        reason = ""
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            reason = str(longrepr[2]).removeprefix("Skipped: ")
        terminalreporter.write_line(f"SKIPPED {report.nodeid}: {reason}")


# xdist groups (relayout): the modules whose tests share a fixed resource run on one worker, in turn
# (`--dist loadgroup`): fixed ports 5353/9253/9254 on the host, the benchmark lock /tmp/nodedns-bench.lock.
XDIST_GROUPS = {
    "fixed-ports": frozenset({
        'test_doc_commands',
        'test_quickstart',
        'test_duplicates',
    }),
    "bench-lock": frozenset({
        'test_firewall',
        'test_handover',
        'test_bench_cache',
        'test_bench_cluster',
        'test_bench_index',
        'test_bench_insight',
        'test_bench_scale',
        'test_bench_workers',
        'test_scripts_smoke',
        'test_http_flood',
        'test_soak',
        'test_restart_under_load',
        'test_failover',
    }),
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test of a module named in XDIST_GROUPS gets that group's xdist_group mark."""
    for item in items:
        stem = item.path.stem
        for group, stems in XDIST_GROUPS.items():
            if stem in stems:
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="module", autouse=True)
def exclusive_group(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module of an XDIST_GROUPS group holds that group's lock file while its tests run on this worker
    (its module fixtures set up after it): the grouping holds even where --dist loadgroup does not (pytest
    9.2 drops xdist's group suffix: pytest-xdist issue 1386), and between two runs on one machine."""
    stem = request.path.stem
    group = next((g for g, stems in XDIST_GROUPS.items() if stem in stems), None)
    if group is None:
        yield
        return
    with open(f"/tmp/nodedns-tests-{group}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
