"""Shared fixtures (the example cluster's agent, the hit path under test) and the skip list printed at the end."""

from __future__ import annotations

import fcntl
import functools
import importlib
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings

from tests.support.apiserver import FakeApiServer
from tests.support.helpers import EXAMPLE, IN_CI, RunningAgent, running_agent
from tests.support.scheduling import QuietLock, group_of, lock_file, rank, under_xdist, workers_for

# A mutation run (scripts/mutate.py, scripts/mutate-changed) wants to know that a test fails, not the smallest
# example that fails it: the "mutation" profile skips hypothesis's shrinking, which can take minutes on a
# state machine. HYPOTHESIS_PROFILE=mutation selects it; a test's own settings still say how many examples.
settings.register_profile("mutation", phases=(Phase.explicit, Phase.reuse, Phase.generate))
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])

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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test of a module named in XDIST_GROUPS gets that group's xdist_group mark; the slow modules
    move to the front and the modules with quiet tests to the end (stable: a module's tests keep their
    order)."""
    quiet = {item.path for item in items if item.get_closest_marker("quiet") is not None}
    for item in items:
        group = group_of(item.path.stem)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: rank(item.path.stem, item.path in quiet))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: three workers for every two cores (tests/support/scheduling.py, workers_for), unless
    PYTEST_XDIST_AUTO_NUM_WORKERS says (then xdist's own hook reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return workers_for(len(os.sched_getaffinity(0)))


@functools.cache
def _quiet_lock() -> QuietLock:
    """This worker's QuietLock, opened at its first test and held for the run."""
    return QuietLock()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Under xdist a quiet test (marked `quiet`) runs with no test beside it on the other workers, and
    every other test shares the machine with the rest (scheduling.QuietLock): its setup, call and
    teardown, module fixtures included, are inside the lock."""
    if not under_xdist():
        return (yield)
    with _quiet_lock().held(exclusive=item.get_closest_marker("quiet") is not None):
        return (yield)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `--dist loadscope`: a module is one unit of work, as xdist does, except that the modules of an
    XDIST_GROUPS group are one unit together (they run one after another on one worker instead of one
    worker waiting on the other's lock), and units go out in the order collected (SLOW_FIRST), not by
    their number of tests."""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupedScopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            group = group_of(Path(nodeid.split("::", 1)[0]).stem)
            return f"group:{group}" if group is not None else super()._split_scope(nodeid)

    config.option.loadscopereorder = False
    return GroupedScopes(config, log)


@pytest.fixture(scope="module", autouse=True)
def no_errors_of_earlier_modules() -> None:
    """Errors an earlier module's agents counted and had not summarised yet are dropped: a running agent
    writes the pending summary of every reporter of the process (`logutil.flush_due`), and a module
    that asserts its agent logged no error would read the earlier module's deliberate ones."""
    from nodedns.runtime import logutil

    for reporter in list(logutil._ALL):
        reporter.suppressed = 0


@pytest.fixture(scope="module", autouse=True)
def exclusive_group(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module of an XDIST_GROUPS group holds that group's lock file while its tests run on this worker
    (its module fixtures set up after it): the grouping holds even where --dist loadgroup does not (pytest
    9.2 drops xdist's group suffix: pytest-xdist issue 1386), and between two runs on one machine."""
    group = group_of(request.path.stem)
    if group is None:
        yield
        return
    lock = lock_file(Path(f"/tmp/nodedns-tests-{group}.lock"))
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    finally:
        os.close(lock)
