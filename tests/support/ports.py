"""Free ports for the tests' listeners, each xdist worker from its own range.

A port found free (bound, then closed) is free only until someone else binds it. Asked of the kernel
(port 0), it comes from the ephemeral range, where every outgoing connection of every test also
takes its port, and two workers can be handed the same one between its check and its use. Under
xdist each worker takes its ports from a range of its own below the ephemeral range (20000 +
3000 x its number; 32768 and up is the kernel's), scanning on from a random start: no two workers
share a port, no outgoing connection lands on one, and a script a test runs (the same worker in its
environment) starts elsewhere in the range. Outside xdist the kernel picks.
"""

from __future__ import annotations

import os
import random
import socket

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
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as udp, socket.socket(family, socket.SOCK_STREAM) as tcp:
        for s in (udp, tcp):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the agent's listeners bind
        try:
            udp.bind((host, port))
            tcp.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port free for both UDP and TCP on host right now (this worker's own, under xdist)."""
    ports = worker_range()
    if ports is None:
        for _ in range(100):
            with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM) as udp:
                udp.bind((host, 0))
                port = int(udp.getsockname()[1])
            if _bindable(host, port):
                return port
        raise OSError(f"no port free for UDP and TCP on {host}")
    if not _cursor:
        _cursor.append(random.randrange(len(ports)))
    for _ in range(len(ports)):
        port = ports[_cursor[0] % len(ports)]
        _cursor[0] += 1
        if _bindable(host, port):
            return port
    raise OSError(f"no port free for UDP and TCP on {host} in {ports.start}-{ports.stop - 1}")
