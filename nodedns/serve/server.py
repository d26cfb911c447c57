"""The DNS listeners on every configured address: binds UDP and TCP, makes their listeners, counts the slow path.

Each listen address gets a UDP socket read by a `udp.UDPListener` (the hit path, C or Python, a batch
per wake-up: nodedns.serve.udp, nodedns.serve.hitpath, nodedns/serve/_hitpath.c) and a TCP listener
whose connections are `tcp.TCPConnection`s, owned by one `tcp.TCPPool` (nodedns.serve.tcp). Neither
decides an rcode: the resolver does. `c_hit_path` picks the C hit path when it was built (an optional C extension;
`NODEDNS_HIT_PATH=python` turns it off).

What all TCP connections of a process hold unsent is bounded, as unbound's stream-wait-size bounds
it: past TCP_PROCESS_OWED_MAX, the connection holding the most is reset (`TCPPool.shed_owed`).
Caps: open connections (--tcp-max-connections) and per client address
(--tcp-max-connections-per-client), per process (`TCPPool.make_room` evicts from the largest holder).

Leaving without dropping a query (`DNSServer.retire`, when a successor shares the addresses through
SO_REUSEPORT): each UDP socket is connected to its own address, which takes it out of the group's
hash selection while its queue stays readable (nodedns.node.handover has the kernel details); the reader
keeps draining it and the slow path finishes what is in flight; TCP listeners close (with
net.ipv4.tcp_migrate_req=1 their accept queues move to the successor) and open connections are
closed once answered and idle. Then the sockets close.

Counting (read by `metrics.registry.Collector` at scrape time, see metrics.py): each listen address has a
`ListenerStats`. The hit path adds one list increment per answer, `counts[w[0]] += 1` (the stored
template's first byte is its label slot); the slow path classifies what it sends and times it
(`account`), and with the query log on logs the sampled ones.

Insight (`--insight on`, the default; nodedns.serve.tally): every answer is also counted by client
address. A hit adds one to `tally.hits[address][w]` (`tally.count_hit`, the same steps in C), a
slow-path answer goes through `Tally.answered` with its label slot and, when an upstream made it,
the time it took. With `--insight off` there is no tally and the hit path does not look.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import os
import random
import socket
import time
from collections.abc import Coroutine
from typing import Any, Protocol

from nodedns.dns.wire import QT, question_of
from nodedns.errors import ListenError
from nodedns.metrics.counters import ListenerStats, Sampler
from nodedns.metrics.slots import Slots
from nodedns.runtime.logutil import log_query
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.limits import MissBudget, RateLimiter
from nodedns.serve.reply import errors, log
from nodedns.serve.resolver import Resolver
from nodedns.serve.tally import Tally, went_upstream
from nodedns.serve.tcp import TCPMisses, TCPPool
from nodedns.serve.udp import BatchServe, UDPListener, UDPSocket


class ClientTap(Protocol):
    """Where a sampled client query and its answer go as dnstap frames (nodedns.runtime.dnstap.Dnstap)."""

    def client(self, query: bytes, response: bytes, addr: Any, proto: str, elapsed: float, zone: str) -> None:
        ...

HostPort = tuple[str, int]
# the kernel's buffers of each connection (set on the listener, inherited by every accepted socket; the kernel
# doubles them): without them the send buffer grows to net.ipv4.tcp_wmem's 4 MB for a client that does not read
TCP_SNDBUF = 16 * 1024
TCP_RCVBUF = 8 * 1024
UDP_RCVBUF = 8 * 1024 * 1024
HIT_PATH_ENV = "NODEDNS_HIT_PATH"  # "python": never the C hit path (tests of both, benchmarks A/B)


def c_hit_path() -> BatchServe | None:
    """The C hit path (nodedns/serve/_hitpath.c: recvmmsg, the same lookups, sendmmsg), when it was built
    and not turned off with NODEDNS_HIT_PATH=python; else None (the Python one, nodedns.serve.hitpath)."""
    if os.environ.get(HIT_PATH_ENV, "").lower() == "python":
        return None
    try:
        module = importlib.import_module("nodedns.serve._hitpath")
    except ImportError:
        return None
    serve: BatchServe = module.serve
    return serve


def bind_pair(host: str, port: int, *, reuse_port: bool = True, freebind: bool = False) -> tuple[socket.socket,
                                                                                                   socket.socket]:
    """A bound UDP socket and a listening TCP socket on the same address and port.

    With port 0 the kernel picks the UDP port and TCP takes the same one (retried if taken).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    attempts = 50 if port == 0 else 1
    last: OSError | None = None
    for _ in range(attempts):
        udp = socket.socket(family, socket.SOCK_DGRAM)
        tcp = socket.socket(family, socket.SOCK_STREAM)
        try:
            for s in (udp, tcp):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if reuse_port:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                if family == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                if freebind:
                    s.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND: the address may come later
                s.setblocking(False)
            _grow_rcvbuf(udp)
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, TCP_SNDBUF)
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, TCP_RCVBUF)
            udp.bind((host, port))
            real_port = udp.getsockname()[1]
            tcp.bind((host, real_port))
            tcp.listen(1024)
            return udp, tcp
        except OSError as exc:
            udp.close()
            tcp.close()
            last = exc
            if port != 0:
                break
    assert last is not None
    raise last


def _grow_rcvbuf(sock: socket.socket) -> None:
    force = getattr(socket, "SO_RCVBUFFORCE", 33)
    try:
        sock.setsockopt(socket.SOL_SOCKET, force, UDP_RCVBUF)
    except OSError:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RCVBUF)


class DNSServer:
    """The DNS listeners on every configured address, UDP and TCP."""

    def __init__(
        self,
        *,
        resolver: Resolver,
        cluster_answers: ClusterAnswers,
        addresses: tuple[HostPort, ...],
        max_udp_size: int = 1232,
        tcp_idle_timeout: float = 10.0,
        tcp_max_connections: int = 1000,
        tcp_max_per_client: int = 100,
        reuse_port: bool = True,
        freebind: bool = False,
        slots: Slots | None = None,
        query_log: Sampler | None = None,
        rate_limiter: RateLimiter | None = None,
        tally: Tally | None = None,
        miss_budget: MissBudget | None = None,
        log_rate: float | None = None,
        tap: ClientTap | None = None,
        tap_rate: float = 1.0,
    ) -> None:
        self.resolver = resolver
        self.cluster_answers = cluster_answers
        self.addresses = addresses
        self.max_udp_size = max_udp_size
        self.reuse_port = reuse_port
        self.freebind = freebind
        self.bound: list[HostPort] = []
        self.udp: list[tuple[UDPSocket, UDPListener]] = []
        self.tcp_servers: list[asyncio.Server] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.slots = slots if slots is not None else Slots()
        self.query_log = query_log if query_log is not None and query_log.rate > 0 else None
        # the sampler's rate is the largest share anything samples (the query log of any zone, dnstap): each
        # sampled query is logged with the chance its zone's `query-log` leaves of that rate, and sent as
        # dnstap frames with the chance its zone's `dnstap` leaves (`observe`); names no zone forwards: these
        rate = self.query_log.rate if self.query_log is not None else 0.0
        self.log_rate = rate if log_rate is None else log_rate  # --query-log (`.`'s)
        self.tap = tap  # --dnstap: CLIENT_QUERY and CLIENT_RESPONSE of the sampled queries
        self.tap_rate = tap_rate  # --dnstap-sample (`.`'s)
        self._pick = random.random
        self.rate_limiter = rate_limiter
        self.miss_budget = miss_budget  # misses per client and namespace (--miss-limit): shed before the slow path
        self.tally = tally  # insight's counts by client address (None: --insight off)
        self.batch_serve = c_hit_path()  # None: the Python hit path (not built, or NODEDNS_HIT_PATH=python)
        self.stats: list[ListenerStats] = []
        self.panics = 0
        misses = None if miss_budget is None else TCPMisses(
            miss_budget, allow=resolver.allow, hot=cluster_answers.hot, rehit=resolver.forwarding.rehit,
            max_udp_size=max_udp_size)
        # the TCP connections of every listen address: their caps, what they hold unsent, their query log sampling
        self.tcp = TCPPool(self, handle=resolver.handle, idle_timeout=tcp_idle_timeout,
                           max_connections=tcp_max_connections, max_per_client=tcp_max_per_client, misses=misses,
                           query_log=self.query_log)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            for host, port in self.addresses:
                try:
                    udp_sock, tcp_sock = bind_pair(host, port, reuse_port=self.reuse_port, freebind=self.freebind)
                except OSError as exc:
                    raise ListenError("--listen", f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
                                      exc) from None
                real_port = udp_sock.getsockname()[1]
                stats = ListenerStats(ListenerStats.label(host, real_port), "2" if ":" in host else "1")
                handle = UDPSocket(loop, udp_sock)
                listener = UDPListener(self, stats, handle)
                self.udp.append((handle, listener))
                listener.start()
                server = await loop.create_server(functools.partial(self.tcp.connection, stats), sock=tcp_sock)
                self.tcp_servers.append(server)
                self.stats.append(stats)
                self.bound.append((host, real_port))
                log.info("listening on %s port %d (udp, tcp; %s hit path)", host, self.bound[-1][1],
                         "C" if listener.batch is not None else "Python")
        except BaseException:
            self.close()
            raise

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def hits(self) -> int:
        """Answers sent by the UDP hit path."""
        return sum(sum(s.udp_hit) for s in self.stats)

    # -- accounting (slow path only) -------------------------------------------------------

    def account(self, stats: ListenerStats, counts: list[int], query: bytes, out: bytes, addr: Any, proto: str,
                t0: float, logged: bool) -> None:
        """Count and time one answer made on the slow path; log it when it was sampled."""
        slot = self.slots.classify(out)
        counts[slot] += 1
        elapsed = time.perf_counter() - t0
        labels = self.slots.labels[slot]
        stats.observe(labels.zone, elapsed)
        if self.tally is not None:
            self.tally.answered(str(addr[0]), query, slot, elapsed if went_upstream(labels) else None)
        if logged:
            self.log_query(query, out, slot, addr, proto, elapsed)

    def dropped(self, counts: list[int]) -> None:
        counts[self.slots.dropped()] += 1

    def panic(self, exc: BaseException) -> None:
        """An unexpected exception while answering (coredns_panics_total)."""
        self.panics += 1
        errors.report(exc)

    def log_query(self, query: bytes, out: bytes, slot: int, addr: Any, proto: str, elapsed: float) -> None:
        """A sampled query: logged, and sent as dnstap frames, each by its zone's share (see __init__)."""
        q = question_of(query)
        rate = self.query_log.rate if self.query_log is not None else 1.0
        zone = self.resolver.forwarding.zone(q[0].rstrip(".")) if q is not None else None
        log_rate = zone.query_log if zone is not None else self.log_rate
        if self.tap is not None:
            tap_rate = zone.dnstap if zone is not None else self.tap_rate
            if tap_rate >= rate or self._pick() * rate < tap_rate:
                self.tap.client(query, out, addr, proto, elapsed, zone.label if zone is not None else ".")
        if log_rate < rate and self._pick() * rate >= log_rate:
            return
        labels = self.slots.labels[slot] if slot < len(self.slots.labels) else self.slots.labels[0]
        log_query(
            client=str(addr[0]),
            name=q[0] if q else "?",
            qtype=QT.name(q[1]) if q else "?",
            rcode=labels.rcode,
            duration=elapsed,
            path=labels.path,
            proto=proto,
        )

    def alive(self) -> bool:
        """Every listener is still open."""
        if not self.udp:
            return False
        return all(not t.is_closing() for t, _ in self.udp) and all(s.is_serving() for s in self.tcp_servers)

    def close(self) -> None:
        for transport, _ in self.udp:
            transport.close()
        for server in self.tcp_servers:
            server.close()
        self.tcp.close()

    async def retire(self, *, drain: float = 2.0, quiet: float = 0.05) -> None:
        """Leave the addresses without dropping a query, then close (bounded by `drain` seconds).

        UDP sockets leave the SO_REUSEPORT selection and are read until their queues stay empty for
        `quiet` seconds with nothing in flight; TCP listeners close (accept queues move to a
        successor with net.ipv4.tcp_migrate_req=1); TCP clients are closed once answered and idle
        for `quiet` seconds (one that has not sent its first query yet gets until the deadline).
        """
        loop = asyncio.get_running_loop()
        for handle, _ in self.udp:
            handle.detach()
        for server in self.tcp_servers:
            server.close()
        self.tcp.retire(quiet)
        deadline = loop.time() + drain
        still_since: float | None = None
        while loop.time() < deadline:
            busy = bool(self._tasks or self.tcp.clients) or any(h.queued() or u.deferred for h, u in self.udp)
            now = loop.time()
            if busy:
                still_since = None
            elif still_since is None:
                still_since = now
            elif now - still_since >= quiet:
                break
            await asyncio.sleep(0.005)
        self.close()
        await self.wait_closed()

    async def wait_closed(self) -> None:
        for server in self.tcp_servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2.0)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
