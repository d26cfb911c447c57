"""A paced UDP DNS load for restart tests: many source ports (so SO_REUSEPORT spreads the flows),
one query ID per query, every answer matched to its query.

    with UdpLoad("127.0.0.1", port, qps=2000) as load:
        ...                         # restart the server meanwhile
    load.sent, load.answered, load.lost()

Runs in one thread with non-blocking sockets and a selector. A query counts as answered when a
response with its ID comes back to its socket before `stop()` plus `grace` seconds.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Sequence
from types import TracebackType

import dns.message
import dns.rdatatype


class UdpLoad:
    def __init__(self, host: str, port: int, *, qps: int, names: Sequence[str] = ("web.default.svc.cluster.local",),
                 sockets: int = 32, grace: float = 2.0) -> None:
        self.host = host
        self.port = port
        self.qps = qps
        self.grace = grace
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socks = []
        for _ in range(sockets):
            s = socket.socket(family, socket.SOCK_DGRAM)
            s.setblocking(False)
            s.bind((host if host.startswith("127.") or host == "::1" else "", 0))
            self.socks.append(s)
        # one wire query per name, the ID patched in per send
        self.wires = [dns.message.make_query(n, dns.rdatatype.A, use_edns=False).to_wire() for n in names]
        self.sent = 0
        self.answered = 0
        self.rcodes: dict[int, int] = {}
        self.outstanding: dict[tuple[int, int], float] = {}  # (socket index, ID) -> send time
        self.lost_at: list[float] = []  # send times of the queries never answered
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="udp-load", daemon=True)
        self.started = 0.0

    def __enter__(self) -> UdpLoad:
        self.start()
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.stop()

    def start(self) -> None:
        self.started = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.grace + 10)
        for s in self.socks:
            s.close()

    def lost(self) -> int:
        return len(self.lost_at)

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        for i, s in enumerate(self.socks):
            sel.register(s, selectors.EVENT_READ, i)
        interval = 1.0 / self.qps
        next_send = time.monotonic()
        qid = 0
        n = 0
        stop_at: float | None = None
        while True:
            now = time.monotonic()
            if stop_at is None and self._stop.is_set():
                stop_at = now + self.grace
            if stop_at is not None and (now >= stop_at or not self.outstanding):
                break
            while stop_at is None and now >= next_send:
                i = n % len(self.socks)
                qid = (qid + 1) & 0xFFFF
                if (i, qid) in self.outstanding:  # 65536 in flight on one socket: count the old one lost
                    self.lost_at.append(self.outstanding.pop((i, qid)) - self.started)
                wire = self.wires[n % len(self.wires)]
                try:
                    self.socks[i].sendto(qid.to_bytes(2, "big") + wire[2:], (self.host, self.port))
                    self.outstanding[(i, qid)] = now
                    self.sent += 1
                except BlockingIOError:
                    pass  # our own send buffer is full: not a query the server saw
                except ConnectionRefusedError:
                    # an ICMP port unreachable for an earlier query, reported on this send: retry it
                    continue
                n += 1
                next_send += interval
            timeout = max(0.0, min(next_send - time.monotonic(), 0.01))
            for key, _ in sel.select(timeout):
                i = key.data
                while True:
                    try:
                        data = self.socks[i].recv(4096)
                    except (BlockingIOError, InterruptedError):
                        break
                    except ConnectionRefusedError:
                        continue  # ICMP port unreachable: the query it answers stays outstanding
                    if len(data) < 12:
                        continue
                    if self.outstanding.pop((i, int.from_bytes(data[:2], "big")), None) is not None:
                        self.answered += 1
                        rcode = data[3] & 0x0F
                        self.rcodes[rcode] = self.rcodes.get(rcode, 0) + 1
        self.lost_at.extend(t - self.started for t in self.outstanding.values())
        self.outstanding.clear()
        sel.close()
