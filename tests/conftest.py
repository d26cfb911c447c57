"""Shared fixtures (the example cluster's agent, the hit path under test) and the skip list printed at the end."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

from tests.helpers import EXAMPLE, IN_CI, RunningAgent, running_agent

HIT_PATH_ENV = "NODEDNS_HIT_PATH"  # nodedns.server.HIT_PATH_ENV: "python" turns the C hit path off
HIT_PATHS = ("c", "python")


@pytest.fixture(scope="module", params=HIT_PATHS, ids=[f"{p}-hit-path" for p in HIT_PATHS])
def hit_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """The UDP hit path the agents of this module run: the C one (nodedns/_hitpath.c, as CI builds and the
    image ships it) or the Python one (NODEDNS_HIT_PATH=python, as an install without a C compiler runs).
    Module-scoped, so a module-scoped agent that asks for it is started once per hit path; the environment
    variable reaches in-process agents (read when their DNS server is made) and subprocesses alike.
    Opt a module in with `pytestmark = pytest.mark.usefixtures("hit_path")`."""
    choice = str(request.param)
    if choice == "c":
        try:
            importlib.import_module("nodedns._hitpath")
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
