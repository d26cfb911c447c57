"""A hostile tenant and a good Pod, for the tests and scripts/lib/attack.py: TCP floods, a probe stream, RSS.

    probes = Prober(port); probes.start()             # the good Pod (127.0.0.1): a UDP query every 20 ms
    flood = Flood(port); flood.open(8, pipelined(BIG_NAME, "TXT", 2000))   # from 127.0.0.2, never reading
    sampler = RssSampler(agent_pid); sampler.start()  # the agent's whole process tree, every 50 ms
    ... sampler.peak() - sampler.base, probes.window(t0, t1), flood.alive()

The two "Pods" are two loopback addresses, so the agent's per-client limits tell them apart; both are
inside the default allow list (loopback). BIG_TXT is a 60 KB TXT answer (an attacker's domain: put it
in an UpstreamDouble with mode "truncate", so the agent fetches it over TCP and caches it).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import struct
import threading
import time
from collections.abc import Sequence

import dns.message

GOOD = "127.0.0.1"  # the good Pod
EVIL = "127.0.0.2"  # the attacker's Pod
PROBE_NAME = "web.default.svc.cluster.local"
PROBE_INTERVAL = 0.02
PROBE_TIMEOUT = 2.0
TCP_ESTABLISHED = 1  # TCP_INFO's tcpi_state
# 60 TXT records of four 250-byte strings: a 61 KB answer
BIG_TXT = [" ".join(f'"{n:03d}' + chr(97 + i) * 247 + '"' for i in range(4)) for n in range(60)]


def query(name: str, rdtype: str = "A", qid: int = 0, *, edns: bool = False) -> bytes:
    msg = dns.message.make_query(name, rdtype, use_edns=0 if edns else False)
    msg.id = qid
    data: bytes = msg.to_wire()
    return data


def pipelined(name: str, rdtype: str, count: int) -> bytes:
    """`count` framed queries for one name (IDs 0, 1, ...), to be written at once."""
    out = bytearray()
    for i in range(count):
        q = query(name, rdtype, qid=i & 0xFFFF)
        out += struct.pack("!H", len(q)) + q
    return bytes(out)


def tree(pid: int) -> list[int]:
    """pid and every process below it (a supervisor, its zygote, the workers)."""
    out = [pid]
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                for child in fh.read().split():
                    out.extend(tree(int(child)))
    return out


def rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/statm") as fh:
            total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return total


class RssSampler(threading.Thread):
    """The RSS of a process tree every 50 ms: `base` (at the last `reset()`), `now`, `peak()` since."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="rss", daemon=True)
        self.pid = pid
        self.now = self.base = self._peak = rss_bytes(tree(pid))
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.05):
            self.now = rss_bytes(tree(self.pid))
            self._peak = max(self._peak, self.now)

    def reset(self) -> int:
        self.now = self._peak = self.base = rss_bytes(tree(self.pid))
        return self.base

    def peak(self) -> int:
        return self._peak

    def stop(self) -> None:
        self._halt.set()


class Prober(threading.Thread):
    """The good Pod: a UDP query every PROBE_INTERVAL, each from a fresh socket (so SO_REUSEPORT spreads
    them over the workers), noted answered (NOERROR, within PROBE_TIMEOUT) or lost. A TC=1 reply is asked
    again over TCP, as glibc does (`truncated` counts them): answered when that is."""

    def __init__(self, port: int, *, host: str = "127.0.0.1", source: str = GOOD, name: str = PROBE_NAME) -> None:
        super().__init__(name="prober", daemon=True)
        self.target = (host, port)
        self.source = source
        self.question = query(name)[12:]
        self.name = name
        self.truncated = 0  # replies with TC=1, asked again over TCP
        self.results: list[tuple[float, bool]] = []  # (sent at, answered)
        self._halt = threading.Event()

    def run(self) -> None:
        sel = selectors.DefaultSelector()
        pending: dict[socket.socket, tuple[float, int]] = {}
        qid = 0
        next_send = time.monotonic()

        def done(s: socket.socket, ok: bool) -> None:
            sent, _ = pending.pop(s)
            sel.unregister(s)
            s.close()
            self.results.append((sent, ok))

        while not self._halt.is_set() or pending:
            now = time.monotonic()
            if not self._halt.is_set() and now >= next_send:
                qid = (qid + 1) & 0xFFFF
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.setblocking(False)
                s.bind((self.source, 0))
                s.connect(self.target)
                pending[s] = (now, qid)
                sel.register(s, selectors.EVENT_READ)
                try:
                    s.send(struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + self.question)
                except OSError:
                    done(s, False)
                next_send = max(next_send + PROBE_INTERVAL, now)
            for key, _ in sel.select(timeout=0.005):
                s = key.fileobj  # type: ignore[assignment]
                try:
                    data = s.recv(4096)
                except OSError:
                    done(s, False)
                    continue
                if len(data) >= 12 and struct.unpack("!H", data[:2])[0] == pending[s][1] and data[3] & 15 == 0:
                    if data[2] & 0x02:  # TC=1: over TCP, where the source address is proven
                        self.truncated += 1
                        done(s, tcp_ask(self.target[1], self.name, host=self.target[0], source=self.source)
                             is not None)
                    else:
                        done(s, True)
            now = time.monotonic()
            for s, (sent, _) in list(pending.items()):
                if now - sent > PROBE_TIMEOUT:
                    done(s, False)

    def window(self, start: float, end: float = float("inf")) -> list[tuple[float, bool]]:
        """The probes sent in [start, end), once each is decided."""
        return [r for r in list(self.results) if start <= r[0] < end]

    def lost(self, start: float, end: float = float("inf")) -> list[float]:
        return [t for t, ok in self.window(start, end) if not ok]

    def stop(self) -> None:
        self._halt.set()
        self.join(PROBE_TIMEOUT + 2)


class Flood:
    """The attacker's TCP connections (from `source`): opened, written once, never read."""

    def __init__(self, port: int, *, host: str = "127.0.0.1", source: str = EVIL,
                 sources: Sequence[str] | None = None) -> None:
        self.target = (host, port)
        self.sources = list(sources) if sources else [source]  # several: one tenant's several Pods, in turn
        self.socks: list[socket.socket] = []
        self.failed = 0  # connections that could not even be opened

    def open(self, count: int, payload: bytes) -> None:
        for i in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # it never reads: keep its side small
            s.bind((self.sources[i % len(self.sources)], 0))
            s.settimeout(2.0)
            try:
                s.connect(self.target)
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    s.send(payload)  # one write: what the kernel takes now
            except OSError:
                self.failed += 1
                s.close()
                continue
            self.socks.append(s)

    def alive(self) -> int:
        """Connections the agent has neither closed nor reset (TCP_INFO's state still ESTABLISHED)."""
        n = 0
        for s in self.socks:
            with contextlib.suppress(OSError):
                n += s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_ESTABLISHED
        return n

    def close(self) -> None:
        for s in self.socks:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset: no lingering
                s.close()
        self.socks.clear()


def tcp_ask(port: int, name: str, rdtype: str = "A", *, host: str = "127.0.0.1", source: str = GOOD,
            timeout: float = 2.0) -> bytes | None:
    """One query over a new TCP connection; the answer (None: refused, reset or not in time)."""
    try:
        with socket.create_connection((host, port), timeout=timeout, source_address=(source, 0)) as s:
            q = query(name, rdtype, qid=4242)
            s.sendall(struct.pack("!H", len(q)) + q)
            data = b""
            while len(data) < 2 or len(data) < 2 + struct.unpack("!H", data[:2])[0]:
                chunk = s.recv(65536)
                if not chunk:
                    return None
                data += chunk
            return data[2:]
    except OSError:
        return None


def udp_drops(port: int) -> int:
    """Datagrams the kernel dropped at the UDP sockets bound to local `port` (their receive queues full):
    the "drops" column of /proc/net/udp and udp6, summed (0 where they cannot be read)."""
    total = 0
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        with contextlib.suppress(OSError), open(table) as fh:
            for row in fh.readlines()[1:]:
                cols = row.split()
                if len(cols) >= 13 and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    total += int(cols[-1])
    return total
