"""Shared fixtures (the example cluster's agent, the hit path under test), the tiers (tests/support/tiers.py)
and the skip list printed at the end."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import Phase, settings

from tests.support import tiers
from tests.support.apiserver import FakeApiServer
from tests.support.helpers import EXAMPLE, IN_CI, RunningAgent, running_agent

# A mutation run (scripts/mutate, scripts/mutate-changed) wants to know that a test fails, not the smallest
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
def pytest_cmdline_main(config: pytest.Config) -> None:
    """A run that names no test (`pytest`, `pytest -m e2e`) runs a tier: the fast one unless -m says, and the
    fast and e2e tiers on every core (`-n auto --dist loadscope`, unless -n is given or xdist is off); a
    run that names tests runs them all, whatever their tier, in this process unless -n says."""
    if config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return
    if not config.option.markexpr:
        config.option.markexpr = tiers.DEFAULT  # on the xdist workers too: they parse the same arguments
    if (not hasattr(config, "workerinput") and config.pluginmanager.has_plugin("xdist")
            and config.option.numprocesses is None and tiers.parallel(config.option.markexpr)):
        config.option.numprocesses = "auto"
        if config.option.dist == "no":
            config.option.dist = "loadscope"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test gets the mark of its tier (tests/support/tiers.py), which -m selects; a tier is given there
    only, never by a mark in a test module."""
    for item in items:
        own = [name for name in tiers.TIERS if item.get_closest_marker(name) is not None]
        if own:
            raise pytest.UsageError(f"{item.nodeid} is marked {own[0]}: tiers are given in tests/support/tiers.py")
        item.add_marker(tiers.tier_of(item.nodeid))


@pytest.hookimpl(optionalhook=True)  # -p no:xdist: no such hook, and no error for it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: three workers for every two cores (tests/support/tiers.py, workers_for), unless
    PYTEST_XDIST_AUTO_NUM_WORKERS says (then xdist's own hook reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return tiers.workers_for(len(os.sched_getaffinity(0)))


@pytest.fixture(scope="module", autouse=True)
def no_errors_of_earlier_modules() -> None:
    """Errors an earlier module's agents counted and had not summarised yet are dropped: a running agent
    writes the pending summary of every reporter of the process (`logutil.flush_due`), and a module
    that asserts its agent logged no error would read the earlier module's deliberate ones."""
    from nodedns.runtime import logutil

    for reporter in list(logutil._ALL):
        reporter.suppressed = 0
