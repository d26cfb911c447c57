"""Free ports for the tests' listeners, each xdist worker from its own range.

A port found free (bound, then closed) is free only until someone else binds it. Asked of the kernel
(port 0), it comes from the ephemeral range, where every outgoing connection of every test also
takes its port, and two workers can be handed the same one between its check and its use. Under
xdist each worker takes its ports from a range of its own below the ephemeral range (an equal share
of 20000-31999; 32768 and up is the kernel's), scanning on from a random start: no two workers
share a port, no outgoing connection lands on one, and a script a test runs (the same worker in its
environment) starts elsewhere in the range. Outside xdist the kernel picks.
"""

from __future__ import annotations

import os
import random

from nodedns.serve.server import bind_pair

BASE, PORTS = 20000, 12000  # 20000-31999: below the ephemeral range (32768-60999)
_cursor: list[int] = []


def worker_range(worker: str | None = None, workers: int | None = None) -> range | None:
    """This xdist worker's ports (PYTEST_XDIST_WORKER gw0, gw1 ... of PYTEST_XDIST_WORKER_COUNT: an
    equal share of the 12,000 each), or None outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "") if worker is None else worker
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    if workers is None:
        count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
        workers = int(count) if count.isdigit() else 4
    number = int(worker[2:])
    span = PORTS // max(workers, number + 1, 1)
    lo = BASE + number * span
    return range(lo, lo + span)


def _bindable(host: str, port: int) -> bool:
    """Whether the agent's listeners could bind `port` on `host` now (nodedns.serve.server.bind_pair)."""
    try:
        udp, tcp = bind_pair(host, port, reuse_port=False)
    except OSError:
        return False
    udp.close()
    tcp.close()
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port free for both UDP and TCP on host right now (this worker's own, under xdist)."""
    ports = worker_range()
    if ports is None:  # the kernel picks (bind_pair with port 0)
        udp, tcp = bind_pair(host, 0, reuse_port=False)
        port = int(udp.getsockname()[1])
        udp.close()
        tcp.close()
        return port
    if not _cursor:
        _cursor.append(random.randrange(len(ports)))
    for _ in range(len(ports)):
        port = ports[_cursor[0] % len(ports)]
        _cursor[0] += 1
        if _bindable(host, port):
            return port
    raise OSError(f"no port free for UDP and TCP on {host} in {ports.start}-{ports.stop - 1}")
