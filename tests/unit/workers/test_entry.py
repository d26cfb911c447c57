"""`nodedns serve`'s entry: one process for --workers 1, a supervisor for more, and one port every worker binds."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from nodedns import config as cfgmod
from nodedns.workers import launch, modes
from nodedns.workers.supervisor import Fleet
from tests.support.helpers import EXAMPLE


def settings(**extra: Any) -> cfgmod.Config:
    return cfgmod.build({"manifests": str(EXAMPLE), "upstream": "none", **extra}, environ={})


@pytest.mark.parametrize(("workers", "supervised"), [(1, False), (2, True)], ids=["one-process", "supervisor"])
def test_one_worker_runs_one_agent_and_more_run_a_supervisor_of_that_many(
        workers: int, supervised: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[Any] = []
    monkeypatch.setattr(launch, "run_agent", lambda config, factory=None: ran.append((config, factory)) or 0)
    assert launch.serve(settings(workers=workers, listen="127.0.0.1:0")) == 0
    [(config, factory)] = ran
    if not supervised:
        assert factory is modes.one_process and config.listen_addresses == (("127.0.0.1", 0),)
        return
    built = factory(config)
    assert isinstance(built.listeners, Fleet) and built.listeners.count == workers
    assert config.listen_addresses[0][1] != 0  # the workers must agree on one port


def test_port_zero_becomes_one_port_free_for_udp_and_tcp_and_a_given_port_stays() -> None:
    config = launch.concrete_ports(settings(listen="127.0.0.1:0,127.0.0.1:5399"))
    [(host, port), given] = config.listen_addresses
    assert host == "127.0.0.1" and port != 0 and given == ("127.0.0.1", 5399)
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):  # both are free: every worker binds them with SO_REUSEPORT
        with socket.socket(socket.AF_INET, kind) as s:
            s.bind((host, port))
    same = settings(listen="127.0.0.1:5399")
    assert launch.concrete_ports(same) is same
