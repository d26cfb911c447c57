"""The shadow's agent is the one Agent holding a packet capture as its listeners (nodedns.shadow.agent)."""

from __future__ import annotations

import signal
from typing import Any

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.shadow.agent import Capture, shadow
from tests.support.helpers import EXAMPLE


def settings(**extra: Any) -> cfgmod.Config:
    return cfgmod.build({"manifests": str(EXAMPLE), "upstream": "127.0.0.1:53", "listen": "127.0.0.1:0", **extra},
                        environ={})


def test_a_shadow_holds_the_capture_and_sends_nothing() -> None:
    agent = shadow(settings(**{"setup-interface": "nodelocaldns", "local-ip": "169.254.20.10"}),
                   interface="lo", port=53)
    capture = agent.listeners
    assert type(agent) is Agent and isinstance(capture, Capture) and capture.agent is agent
    assert agent.node is None and agent.config.local_ip == ()  # it touches no node
    assert agent.changes.listeners[-1] == capture.shadow.record_changed
    assert not agent.mode.forwards and not agent.mode.refuse_duplicates
    assert agent.mode.signals == (signal.SIGTERM, signal.SIGINT)
    assert "shadow" in agent.observer.providers
    assert agent.about()["dns"] == [] and agent.about()["shadow"] == "lo port 53"
    assert agent.status()["listening"] == []

