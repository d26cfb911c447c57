"""Shared fixtures: the example cluster served by an in-process agent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import EXAMPLE, RunningAgent, running_agent


@pytest.fixture(scope="module")
def example_agent() -> Iterator[RunningAgent]:
    """The bundled example cluster, served on 127.0.0.1 (module-scoped: start once per test file)."""
    with running_agent({"manifests": str(EXAMPLE)}) as agent:
        yield agent
