"""`nodedns serve`: one agent (the default), or a --workers supervisor and its N processes that answer DNS.

The entry, and what it decides before anything starts: how many processes answer (`workers_for`:
--workers, 0 for one per CPU the process may run on) and the ports they all bind (`concrete_ports`:
port 0 replaced by one free for UDP and TCP, since every worker must bind the same). The supervisor
is nodedns.workers.supervisor (the picture of the processes), a worker nodedns.workers.worker, the
messages between them nodedns.workers.messages over nodedns.workers.channel.
"""

from __future__ import annotations

import dataclasses
import os

from nodedns.app.run import run_agent
from nodedns.config import Config
from nodedns.serve.server import bind_pair
from nodedns.workers import modes


def cpu_count() -> int:
    """CPUs this process may run on (its affinity: taskset, cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_for(config: Config) -> int:
    """The processes that answer: --workers (default 1: one process, no supervisor; 0: one per CPU)."""
    return config.workers or cpu_count()


def serve(config: Config) -> int:
    """`nodedns serve`: one agent (the default), or a supervisor and its --workers processes."""
    count = workers_for(config)
    if count <= 1:
        return run_agent(config, modes.one_process)
    config = concrete_ports(config)
    return run_agent(config, lambda c: modes.supervisor(c, count=count))


def concrete_ports(config: Config) -> Config:
    """Listen addresses with port 0 replaced by a port free for UDP and TCP (workers must agree)."""
    if all(port for _, port in config.listen_addresses):
        return config
    out = []
    for host, port in config.listen_addresses:
        if port == 0:
            udp, tcp = bind_pair(host, 0, reuse_port=False)
            port = udp.getsockname()[1]
            udp.close()
            tcp.close()
        out.append((host, port))
    return dataclasses.replace(config, listen=tuple(out))
