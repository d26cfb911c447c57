"""Stand-ins for the netlink link and the firewall that record what the node loop asks of them, and on which thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.errors import NetifError
from nodedns.node.netif import NodeNetwork

IPS = ("169.254.20.10", "fd00:10:96::a")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def note(self, what: str) -> None:
        self.calls.append((what, threading.get_ident()))


class FakeLink:
    name = "nodelocaldns"
    ips = IPS
    kind = "dummy"

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    def ensure(self) -> tuple[list[str], list[NetifError]]:
        self.rec.note("link.ensure")
        return [], []

    def remove(self) -> tuple[list[str], list[NetifError]]:
        self.rec.note("link.remove")
        return ["deleted interface nodelocaldns"], []

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "exists": True}

    def missing(self) -> list[str]:
        return []

    def elsewhere(self) -> list[tuple[str, str]]:
        return []


class FakeFirewall:
    kind = "iptables"

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    def ensure(self) -> tuple[list[str], list[NetifError]]:
        self.rec.note("firewall.ensure")
        return ["a rule"], []

    def remove(self, *, retry: bool = True) -> tuple[list[str], list[NetifError]]:
        self.rec.note(f"firewall.remove retry={retry}")
        return [], []

    def installed(self) -> int:
        return 1


def agent_with_fake_node(rec: Recorder, sync_interval: float = 0.05) -> Callable[[cfgmod.Config], Agent]:
    """An agent factory (for RunningAgent) whose node side is the fake link and firewall."""

    def make(config: cfgmod.Config) -> Agent:
        agent = Agent(config)
        agent.node = NodeNetwork(link=FakeLink(rec), firewall=FakeFirewall(rec),  # type: ignore[arg-type]
                                 sync_interval=sync_interval)
        agent.changes.add(lambda _: agent.node.poke())  # as the agent wires the node it builds itself
        return agent

    return make
