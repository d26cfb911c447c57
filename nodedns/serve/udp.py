"""The UDP listener: drains its socket a batch per wake-up through the hit path (C or Python), takes what comes back.

Each wake-up calls the hit path once (`UDPListener.readable`): the C one (nodedns/serve/_hitpath.c,
recvmmsg and sendmmsg) when it was built and not turned off with NODEDNS_HIT_PATH=python, else the
Python one (nodedns.serve.hitpath.serve); with the query log on, always the Python one (it samples).
Both decide alike (nodedns.serve.hitpath has the steps): the rate limit counted, the allow list's
memo (or, for a client under a DNS policy, its group's memo of the answers it may be given), the hot
dict, the cut for the client's UDP size, insight's count, the hit's reply with the query's ID.
What comes back is answered here, one datagram at a time:

- misses (`general`): a client not in the allow list's memo goes to the resolver, which admits and
  remembers it or refuses it (a client under a DNS policy is first answered by the canonical key what
  its group's memo holds: `policed_hit`); any other query takes `keys.fast_key` (hand-parsed header and question,
  canonical key, the query's question case copied in) and one more lookup; a forwarded answer that
  left the hot dict at the turn of a second is re-rendered from its key (`ForwardPath.rehit`); a stored
  answer larger than the client's UDP size is cut (`truncate.truncate`); `Tally.hit` counts it (and sets
  a full piece aside). Everything else goes to `Resolver.handle` (the slow path: `slow`);
- datagrams over the rate limit (`over_budget`): `RateLimiter.take` counts and decides: pass (then
  as a miss), drop, or a TC=1 reply;
- with a miss budget (`--miss-limit`, `--miss-limit-namespace`), a miss of an admitted client, after
  the canonical-key lookup and before the slow path (`within_miss_budget`): `MissBudget.take` counts
  it by client and namespace and decides: on to the slow path, or shed (a TC=1 reply while the process
  has the capacity, else dropped; for a plain query made from fast_key's question end, `plain_tc_reply`).
  Its hits are never counted against it. Shed here, not in C: whether a datagram C did not find is a
  miss takes the canonical key and the re-render, and the budget the namespace and the capacity, all
  Python state (docs/hardening.md "Misses apart from hits");
- queries the query log sampled (`general(..., logged=True)`): the same steps, timed, and logged.

The slow path's work is bounded per loop turn (`later`): a wake-up spends at most SLOW_TURN_SECONDS on
misses and queues the rest, which later turns take SLOW_TURN_SECONDS at a time (`_drain`), each turn
after the loop has polled the sockets again. So when many misses come at once (a burst of names expiring
together, a spray within its budget) the cached answers of the next wake-ups are not held behind them;
the misses wait their turn (they wait on an upstream anyway). At most MAX_DEFERRED wait: beyond, a
miss is dropped (counted; its client asks again).

Leaving (`UDPSocket.detach`, `DNSServer.retire`): the socket is connected to its own address, out
of the SO_REUSEPORT group's selection, and drained until quiet.
"""

from __future__ import annotations

import array
import asyncio
import collections
import fcntl
import socket
import termios
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from nodedns.dns.keys import fast_key
from nodedns.dns.message import plain_tc_reply
from nodedns.dns.truncate import truncate
from nodedns.metrics.counters import ListenerStats, Sampler
from nodedns.serve import hitpath
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.limits import MissBudget, RateLimiter
from nodedns.serve.reply import Accounting, client_udp_limit, errors, fit, log, servfail
from nodedns.serve.resolver import Resolver
from nodedns.serve.tally import Tally

UDP_BATCH = 64  # datagrams per reader wake-up before other callbacks get their turn
SLOW_TURN_SECONDS = 0.0005  # slow-path work per loop turn before the rest of the misses wait for the next
MAX_DEFERRED = 4096  # misses waiting for a later turn at most (a quarter of a second of slow path or so)
Datagrams = list[tuple[bytes, Any]]
# a hit path: (fd or socket, table, allowed, counts, max_udp, tally hits, limit, on_full, policed)
#   -> (read, misses, not sent)
BatchServe = Callable[..., tuple[int, Datagrams | None, int]]


class Serving(Accounting, Protocol):
    """What a UDP listener reads of the server that makes it (`nodedns.serve.server.DNSServer`), once, and
    what it tells it (`Accounting`)."""

    resolver: Resolver
    cluster_answers: ClusterAnswers  # its hot table's dict is what the hit path reads
    max_udp_size: int
    tally: Tally | None
    rate_limiter: RateLimiter | None
    miss_budget: MissBudget | None
    query_log: Sampler | None
    batch_serve: BatchServe | None


class UDPSocket:
    """The UDP socket of a listener and its reader registration (what a transport is to a protocol)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self.loop = loop
        self.sock = sock
        self.closing = False
        self.send_errors = 0

    def sendto(self, out: bytes, addr: Any) -> None:
        try:
            self.sock.sendto(out, addr)
        except BlockingIOError:
            self.send_errors += 1  # send buffer full: the client asks again
        except OSError as exc:
            self.send_errors += 1
            if not self.closing:
                errors.report(exc)

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            if not self.loop.is_closed():
                self.loop.remove_reader(self.sock.fileno())
            self.sock.close()

    def is_closing(self) -> bool:
        return self.closing

    def detach(self) -> None:
        """Leave the SO_REUSEPORT group's hash selection; what is queued stays readable.

        Connects the socket to its own address: no client sends from there, so the kernel delivers
        nothing new to it, and replies still go out with sendto to any address.
        """
        if self.closing:
            return
        host, port = self.sock.getsockname()[:2]
        loopback = "::1" if self.sock.family == socket.AF_INET6 else "127.0.0.1"
        why: OSError | None = None
        for peer in (host, loopback):  # our own address is gone when the interface was just torn down
            if peer in ("0.0.0.0", "::"):
                continue
            try:
                self.sock.connect((peer, port))
                return
            except OSError as exc:
                why = exc
        log.debug("UDP socket on %s port %d stays in the SO_REUSEPORT selection (%s)", host, port, why)

    def queued(self) -> int:
        """Bytes of the next datagram waiting in the socket (0: the queue is empty)."""
        if self.closing:
            return 0
        buf = array.array("i", [0])
        try:
            fcntl.ioctl(self.sock.fileno(), termios.FIONREAD, buf, True)
        except OSError:
            return 0
        return buf[0]


class UDPListener:
    """One UDP listener: `readable` serves a batch through the hit path, the rest as the module docstring says."""

    def __init__(self, server: Serving, stats: ListenerStats, sock: UDPSocket) -> None:
        self.server = server
        self.stats = stats
        self.sock = sock
        self.get = server.cluster_answers.hot.get  # a stored answer as sent now (a template's TTLs set)
        self.second = server.cluster_answers.hot.second  # the second the hit paths set a template's TTLs for
        self.forward_cache = server.resolver.forwarding.forward_cache  # its `asked`: the templates answered
        self.rehit = server.resolver.forwarding.rehit
        self.handle = server.resolver.handle
        self.max_udp = server.max_udp_size
        self.sendto: Callable[[bytes, Any], None] = sock.sendto
        self.counts = stats.udp_hit  # hit-path answers per label slot
        self.allowed = server.resolver.allow.allowed  # clients already admitted (limits.AllowList)
        self.policed = server.resolver.allow.policed_hits  # admitted clients under a DNS policy -> their group's memo
        self.table = server.cluster_answers.hot.view
        self.tally = server.tally  # insight's counts by client (None: --insight off)
        self.limiter = server.rate_limiter
        self.misses = server.miss_budget  # --miss-limit: a client's (and namespace's) misses a second
        self.over: Datagrams = []  # datagrams of clients at their budget (the hit path fills it)
        self.sample = hitpath.Sample(server.query_log) if server.query_log is not None else None
        # the C hit path when it was built (a batch per system call), unless the query log samples
        self.batch: BatchServe | None = server.batch_serve if self.sample is None else None
        self.deferred: collections.deque[tuple[bytes, Any]] = collections.deque()  # misses for a later turn
        self.turn_end = 0.0  # until when this wake-up's misses go to the slow path at once (`later`)

    def start(self) -> None:
        self.sock.loop.add_reader(self.sock.sock.fileno(), self.readable)

    def readable(self) -> None:
        """Up to UDP_BATCH datagrams per wake-up, through the hit path; then what it handed back."""
        over, sample = self.over, self.sample
        serve: BatchServe = hitpath.serve if self.batch is None else self.batch
        source: int | socket.socket = self.sock.sock if self.batch is None else self.sock.sock.fileno()
        table, allowed, counts, max_udp, policed = self.table, self.allowed, self.counts, self.max_udp, self.policed
        self.turn_end = 0.0  # this wake-up's slow-path time starts with its first miss (`later`)
        hits = self.tally.hits if self.tally is not None else None  # swapped by Tally.flush between two wake-ups
        on_full = self.tally.hit if self.tally is not None else None  # a full piece of a client's counts
        limiter = self.limiter
        limit = None
        second = self.second()
        asked = self.forward_cache.asked if self.forward_cache is not None else None
        for _ in range(UDP_BATCH // hitpath.BATCH):
            if limiter is not None:
                limiter.tick()  # a new second: its counts cleared in place
                limit = (limiter.counts, limiter.rate, limiter.max_clients, over)
            try:
                if sample is None:
                    received, misses, dropped = serve(source, table, allowed, counts, max_udp, hits, limit, on_full,
                                                      policed, second, asked)
                else:
                    received, misses, dropped = hitpath.serve(source, table, allowed, counts, max_udp,  # type: ignore[arg-type]
                                                              hits, limit, on_full, policed, second, asked, sample)
            except OSError:
                if self.sock.closing:
                    return
                over.clear()  # a failed call answers none of its batch (nodedns/serve/_hitpath.c)
                continue  # an ICMP error queued on the socket: not about this datagram
            if dropped:
                self.sock.send_errors += dropped  # send buffer full: the clients ask again
            if misses is not None:
                for data, addr in misses:
                    self.general(data, addr)
                    if self.sock.closing:
                        return
            if over:
                for data, addr in over:
                    self.over_budget(data, addr)
                over.clear()
            if sample is not None and sample.picked:
                for data, addr in sample.picked:
                    self.general(data, addr, logged=True)
                sample.picked.clear()
            if received < hitpath.BATCH:
                return

    def general(self, data: bytes, addr: Any, logged: bool = False) -> None:
        """A datagram the hit path handed back: a client not in the allow list's memo to the resolver;
        else the canonical key (case-folded), then a re-render, then the slow path. A stored answer
        larger than the client's UDP size is cut to the whole records that fit, TC=1 (`truncate.truncate`). A
        client under a DNS policy (never in the memo) is answered by the canonical key what its group's
        memo holds (`policed_hit`); anything else goes to the resolver, its misses budgeted as any.
        `logged`: a query the query log sampled, the same steps timed and logged (its slow path at once;
        a policed client's through the resolver, which logs it)."""
        t0 = time.perf_counter() if logged else 0.0
        if addr[0] not in self.allowed:
            memo = self.policed.get(addr[0])
            if memo is not None and not logged and self.policed_hit(data, addr, memo):
                return
            if self.misses is not None and addr[0] in self.server.resolver.allow.policed and \
                    not self._stored(data) and not self.within_miss_budget(data, addr):
                return
            self.later(data, addr, t0)  # the resolver admits (and remembers) the client, or refuses it
            return
        fk = fast_key(data)
        if fk is not None:
            key, qend, limit = fk
            w = self.get(key)
            if w is None:
                w = self.rehit(key)  # a cached forwarded answer at the turn of a second: no parsing
            if w is not None:
                out, slot = self.answer_stored(data, addr, w, qend, limit)
                if logged:
                    self.server.log_query(data, out, slot, addr, "udp", time.perf_counter() - t0)
                return
            if self.misses is not None and not self.within_miss_budget(data, addr, qend):
                return
            self.later(data, addr, t0)
            return
        if self.misses is not None and not self.within_miss_budget(data, addr):
            return
        self.later(data, addr, t0)

    def policed_hit(self, data: bytes, addr: Any, memo: dict[bytes, Any]) -> bool:
        """A client under a DNS policy: the stored answer for the canonical key when its group's memo holds
        it (`Resolver.memo_stored`), answered as any hit; False: not held."""
        fk = fast_key(data)
        if fk is None:
            return False
        key, qend, limit = fk
        w = self.server.resolver.memo_stored(key, memo)
        if w is None:
            return False
        self.answer_stored(data, addr, w, qend, limit)
        return True

    def answer_stored(self, data: bytes, addr: Any, w: bytes, qend: int, limit: int) -> tuple[bytes, int]:
        """A stored answer sent as a hit: counted by insight and by label slot, cut to the client's UDP size,
        the query's ID and question case copied in. The bytes sent and their label slot."""
        if self.tally is not None:
            self.tally.hit(addr[0], w)
        if limit > self.max_udp:
            limit = self.max_udp
        if len(w) > limit:
            w = truncate(w, qend, limit)
        self.counts[w[0]] += 1
        out = data[:2] + w[2:12] + data[12:qend] + w[qend:]
        self.sendto(out, addr)
        return out, w[0]

    def _stored(self, data: bytes) -> bool:
        """Whether the query's answer is stored (a hit the resolver serves a client under a DNS policy once
        its policy allows it: not a miss)."""
        fk = fast_key(data)
        return fk is not None and self.get(fk[0]) is not None

    def within_miss_budget(self, data: bytes, addr: Any, qend: int = 0) -> bool:
        """A miss of an admitted client, before the slow path: `MissBudget.take` counts it and decides: on
        (True), or shed (False): a TC=1 reply while the process has the capacity, else dropped. `qend`: where
        the question of a plain query ends (`fast_key`'s), its TC=1 reply made without parsing it again."""
        verdict = self.misses.take(addr[0])  # type: ignore[union-attr]  # only called with a budget
        if verdict == MissBudget.PASS:
            return True
        if verdict == MissBudget.SLIP:
            resolver = self.server.resolver
            out = plain_tc_reply(data, qend, resolver.max_udp_size) if qend else resolver.slip(data)
            if out is not None:
                self.sendto(out, addr)
        return False

    def over_budget(self, data: bytes, addr: Any) -> None:
        """A datagram the hit path did not count: its client is at its budget, or new while the table
        is full. `RateLimiter.take` counts it and decides, as for any query: pass (a new second, or the
        overflow budget), drop, or a TC=1 reply."""
        verdict = self.limiter.take(addr[0])  # type: ignore[union-attr]  # only filled with a limiter
        if verdict == RateLimiter.PASS:
            self.general(data, addr)
        elif verdict == RateLimiter.SLIP:
            out = self.server.resolver.slip(data)
            if out is not None:
                self.sendto(out, addr)

    def later(self, data: bytes, addr: Any, t0: float = 0.0) -> None:
        """A miss to the slow path now while this turn has slow-path time left (and none waits before
        it), else queued for a later turn (module docstring). A sampled query (timed from `t0`): at once."""
        if t0:
            self.slow(data, addr, t0, True)
            return
        deferred = self.deferred
        if not deferred:
            now = time.perf_counter()
            if not self.turn_end:
                self.turn_end = now + SLOW_TURN_SECONDS  # the wake-up's first miss: always answered at once
            if now < self.turn_end:
                self.slow(data, addr)
                return
        if len(deferred) >= MAX_DEFERRED:
            self.stats.udp_deferred_dropped += 1
            self.server.dropped(self.stats.udp)
            return
        if not deferred:
            self.sock.loop.call_soon(self._drain)
        deferred.append((data, addr))
        self.stats.udp_deferred += 1

    def _drain(self) -> None:
        """A turn's share of the misses waiting (`later`); the rest wait for the next turn."""
        deferred = self.deferred
        if self.sock.closing:
            deferred.clear()  # closed under them (a stop): their clients ask again
            return
        end = time.perf_counter() + SLOW_TURN_SECONDS
        while deferred:
            data, addr = deferred.popleft()
            self.slow(data, addr)
            if time.perf_counter() >= end:
                break
        if deferred:
            self.sock.loop.call_soon(self._drain)

    def slow(self, data: bytes, addr: Any, t0: float = 0.0, logged: bool = False) -> None:
        if not t0:
            t0 = time.perf_counter()
        try:
            out = self.handle(data, addr[0])
        except Exception as exc:  # noqa: BLE001 - a bug must cost one answer, never the listener
            self.server.panic(exc)
            out = servfail(data)
        if out is None:
            self.server.dropped(self.stats.udp)
            return
        if isinstance(out, bytes):
            self.send(out, data, addr)
            self.server.account(self.stats, self.stats.udp, data, out, addr, "udp", t0, logged)
        else:
            self.server.spawn(self._finish(out, data, addr, t0, logged))

    async def _finish(self, pending: Coroutine[Any, Any, bytes | None], data: bytes, addr: Any, t0: float,
                      logged: bool) -> None:
        try:
            out = await pending
        except Exception as exc:  # noqa: BLE001
            self.server.panic(exc)
            out = servfail(data)
        if out is not None:
            self.send(out, data, addr)
            self.server.account(self.stats, self.stats.udp, data, out, addr, "udp", t0, logged)
        else:
            self.server.dropped(self.stats.udp)

    def send(self, out: bytes, data: bytes, addr: Any) -> None:
        if len(out) > 512:
            out = fit(out, client_udp_limit(data, self.max_udp))
        try:
            self.sendto(out, addr)
        except Exception as exc:  # noqa: BLE001 - e.g. the socket closed under us at shutdown
            errors.report(exc)
