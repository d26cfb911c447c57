"""Each mode's agent is the one Agent class holding the parts nodedns.workers.modes chose for it."""

from __future__ import annotations

import ast
import socket
from pathlib import Path
from typing import Any

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.app.parts import ONE_PROCESS, IndexOwner, LocalWarm, OwnSockets
from nodedns.workers import modes
from nodedns.workers.fleetstatus import FleetObserver
from nodedns.workers.messages import Start
from nodedns.workers.supervisor import SUPERVISOR_CACHE_BYTES, Fleet
from nodedns.workers.worker import IndexClient
from tests.support.helpers import EXAMPLE

PACKAGE = Path(__file__).resolve().parents[3] / "nodedns"


def settings(**extra: Any) -> cfgmod.Config:
    return cfgmod.build({"manifests": str(EXAMPLE), "upstream": "127.0.0.1:53", "listen": "127.0.0.1:0", **extra},
                        environ={})


def test_no_class_of_the_package_subclasses_the_agent() -> None:
    """A mode is parts given to the one Agent, never a subclass overriding its hooks."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                found += [f"{path.relative_to(PACKAGE.parent)}: class {node.name}({b})" for b in bases
                          if b.split(".")[-1] == "Agent"]
    assert found == []


def test_one_process_holds_its_own_sockets_index_and_cache() -> None:
    agent = modes.one_process(settings())
    assert type(agent) is Agent and agent.mode == ONE_PROCESS
    assert isinstance(agent.listeners, OwnSockets) and agent.listeners.server is agent.server
    assert isinstance(agent.source, IndexOwner) and isinstance(agent.warm, LocalWarm)
    assert agent.followers is None and agent.tally is not None and agent.insight is not None
    assert agent.changes.listeners[0] == agent.resolver.answers.index_changed
    assert agent.about()["dns"] == ["127.0.0.1:0"]


def test_the_supervisor_holds_its_workers_as_listeners_warm_state_and_followers() -> None:
    agent = modes.supervisor(settings(), count=2)
    fleet = agent.listeners
    assert type(agent) is Agent and isinstance(fleet, Fleet) and fleet.count == 2 and fleet.agent is agent
    assert agent.warm is fleet and agent.followers is fleet and isinstance(agent.observer, FleetObserver)
    assert isinstance(agent.source, IndexOwner)
    assert agent.changes.listeners[-1] == fleet.index_changed  # after the agent's own
    assert agent.tally is None and agent.insight is not None  # the workers count, the supervisor attributes
    # its share of --cache-max-bytes: a quarter for cluster answers, the rest for the forward cache
    assert agent.forward_cache is not None
    assert agent.forward_cache.counts()["max_bytes"] == SUPERVISOR_CACHE_BYTES * 3 // 4
    assert agent.cluster_answers.max_bytes == SUPERVISOR_CACHE_BYTES // 4
    assert agent.mode.process == "supervisor" and not agent.mode.trim_heap
    assert "workers" in agent.observer.providers and "cache" not in agent.observer.providers
    assert agent.about()["dns"] == ["127.0.0.1:0"] and agent.status()["listening"] == []


def test_a_worker_holds_its_own_sockets_and_the_supervisors_index() -> None:
    config = settings(**{"setup-interface": "nodelocaldns", "local-ip": "169.254.20.10",
                         "listen": "169.254.20.10:53"})
    mine, theirs = socket.socketpair()
    with mine, theirs:
        agent = modes.worker(config, Start(config, 1, True, 3 << 20), theirs)
        assert type(agent) is Agent and agent.config.setup_interface is None  # the supervisor manages the node
        assert agent.server.freebind  # its local IPs may come and go with the supervisor's interface
        assert isinstance(agent.listeners, OwnSockets) and agent.listeners.binds_after_sync([]) is True  # as told
        client = agent.source
        assert isinstance(client, IndexClient) and client.number == 1 and client.sock is theirs
        assert agent.resolver.answers.existence is client.existence and client.link.keep == agent.resolver.answers.keep
        assert agent.openers == [client.open] and agent.closers == [client.close]
        assert agent.on_hangup == client.hangup
        assert agent.mode.signals == () and agent.mode.process == "worker 1" and not agent.mode.decides_aaaa
        assert agent.insight is None and agent.tally is not None
        assert agent.forward_cache is not None and agent.forward_cache.counts()["max_bytes"] == (3 << 20) * 3 // 4
        assert agent.cluster_answers.max_bytes == (3 << 20) // 4
