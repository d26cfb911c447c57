"""`nodedns serve`'s entry: one process for --workers 1, a supervisor for more, and one port every worker binds;
a worker's entry: the --hosts table socket it is handed is non-blocking."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import Any

import pytest

from nodedns import config as cfgmod
from nodedns.workers import launch, modes
from nodedns.workers.channel import Channel
from nodedns.workers.messages import Start
from nodedns.workers.supervisor import Fleet
from tests.support.helpers import EXAMPLE, subprocess_env


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


# A worker process's entry (worker_main, as the zygote runs it) with the real worker agent (modes.worker), run
# no further than built: its channel gets a Hosts message whose table was never passed (nothing queued on the
# table socket), and it prints what it saw.
_WORKER = """
import json, logging, sys, time
from nodedns.workers import modes, worker
from nodedns.workers.messages import Hosts
seen = {}
class Said(logging.Handler):
    def emit(self, record):
        seen.setdefault("said", []).append(record.getMessage())
def run(config, factory, report):
    agent = factory(config)
    client = agent.source
    logging.getLogger().addHandler(Said())
    seen["blocking"] = client.tables.getblocking()
    started = time.monotonic()
    client._on_hosts(Hosts(size=4096, reloads=1))
    seen["took"] = time.monotonic() - started
    return 0
worker.run_agent = run
worker.worker_main(int(sys.argv[1]), int(sys.argv[2]), make=modes.worker)
print(json.dumps(seen))
"""


def test_a_workers_table_socket_is_non_blocking_so_a_table_not_queued_is_an_error_at_once() -> None:
    """`socket.recv_fds` ignores its flags (Python 3.11), so `receive_table`'s MSG_DONTWAIT does nothing: what
    keeps a worker's event loop from blocking in recvmsg, when a Hosts message comes and its table is not
    queued (the supervisor's send failed), is that the worker's table socket is non-blocking. Then the read
    returns at once: the worker says it cannot map the table, and keeps the one in use."""
    channel, theirs = socket.socketpair()
    tables, their_tables = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with channel, theirs, tables, their_tables:
        config = settings(workers=2, hosts="/etc/hosts")
        channel.sendall(Channel.encode(Start(config, 1, False, 1 << 20)))
        fds = (theirs.fileno(), their_tables.fileno())
        try:
            run = subprocess.run([sys.executable, "-c", _WORKER, *map(str, fds)], pass_fds=fds, env=subprocess_env(),
                                 capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail("the worker blocked reading its table socket with nothing queued")
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen["blocking"] is False and seen["took"] < 1.0
    assert any("cannot map the supervisor's --hosts table" in s and "not passed" in s for s in seen["said"]), seen
