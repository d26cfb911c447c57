"""UDP and TCP DNS listeners; moves bytes between sockets and the resolver, decides no rcode itself.

The UDP hit path lives in `_UDP.readable`, a reader callback that drains the socket with `recvfrom`
and answers hits inline (measured cheaper per datagram than a DatagramProtocol callback; with
`--query-log` each datagram goes through `_UDP.datagram_received`, the same path). The hot dict
(cluster answers, and forwarded answers rendered for the current second) is keyed so that a plain
query is its own key from byte 2 on (see `keys.KEY_HEAD`): a query without EDNS is looked up as
`data[2:]`, one with a bare OPT record as `data[2:-11]`. A match means the question is byte for
byte the stored one, so only the ID is copied in, then `sendto`: one slice, one lookup, one
concatenation. Any other query (mixed case, DO bit, EDNS options, the header's Z bit, an answer
too big for the client) takes `keys.fast_key` (hand-parsed header and question, canonical key, the
query's question case copied in) and one more lookup; a forwarded answer that left the hot dict at
the turn of a second is re-rendered from its key (`Resolver.rehit`). Everything else goes to
`Resolver.handle` (the slow path). An answer larger than the client's UDP size (512 without EDNS,
else its payload size capped by ours) is sent cut the way miekg/dns `Msg.Truncate` cuts it
(`truncate.truncate`: the whole records that fit, answer section first, the OPT kept, TC=1), whichever
path found it: old musl and busybox never retry over TCP and live on what that holds.

When it was built (an optional C extension; `NODEDNS_HIT_PATH=python` turns it off), the same hit
path runs in C instead (`nodedns/serve/_hitpath.c`, `_UDP._readable_batched`): one recvmmsg reads up to
64 datagrams, the same two lookups and checks decide each, one sendmmsg sends the hits (the ID from
the query, the rest straight from the stored bytes, cut there when too big for the client), and
everything else — clients not in the allow list's memo, anything but a byte-for-byte hit — comes
back to the Python path below with the address `recvfrom` would give. The query log keeps the
per-datagram Python path; the rate limit does not (below).

Who may query (docs/hardening.md): before the hit path, one set lookup of the client's address in
the allow list's memo (`limits.AllowList.allowed`); a client not in it takes the slow path, where
the resolver admits and remembers it or answers REFUSED. With `--rate-limit` (`limits.RateLimiter`),
the hit path, in C or inlined in Python, first counts the datagram against its client's budget of
the current second: one clock read per wake-up (`RateLimiter.tick`), then one dict lookup and one
store per datagram (in C, per run of datagrams from one address). A client at its budget (or new
to a full table) is handed to `_over_budget`, where `RateLimiter.take` decides: pass, drop, or a
TC=1 reply. With the query log on too, each datagram goes through `_received_limited` (take, then
the sampled path). Without a limit the hit path does not pay for it.

TCP: two-byte length framing, several queries per connection (answered as they complete, each
with its own ID), an idle timeout that only whole queries reset (a client dripping bytes is
closed), and half-close: a client that shuts down its sending side after its queries still gets
every answer owed, then the connection closes (RFC 7766 section 6.2). What a client that never reads
can cost is bounded (docs/hardening.md "TCP and pending work"): a connection reads into a small
buffer of its own (`_TCP` is a BufferedProtocol) and takes one frame at a time, only while it is
owed little (unsent bytes plus TCP_QUERY_COST per query being worked on, under TCP_OWED_PAUSE: so
at most TCP_IN_FLIGHT queries worked on at once, whose answers, landing together, are what a
connection can hold beyond that); otherwise reading pauses and its pipelined queries wait in the
kernel, whose buffers are small too (TCP_SNDBUF, TCP_RCVBUF on the listener). What all connections
hold unsent is bounded for the process, as unbound's stream-wait-size bounds it: past
TCP_PROCESS_OWED_MAX, the connection holding the most is reset (`DNSServer.shed_owed`). A
connection still owed answers at the idle timeout is reset (`reset`: SO_LINGER 0, so the kernel drops what it holds
too; a close would wait forever for a client that does not read). Caps: open connections
(--tcp-max-connections) and per client address (--tcp-max-connections-per-client), per process.

Leaving without dropping a query (`DNSServer.retire`, when a successor shares the addresses through
SO_REUSEPORT): each UDP socket is connected to its own address, which takes it out of the group's
hash selection while its queue stays readable (nodedns.node.handover has the kernel details); the reader
keeps draining it and the slow path finishes what is in flight; TCP listeners close (with
net.ipv4.tcp_migrate_req=1 their accept queues move to the successor) and open connections are
closed once answered and idle. Then the sockets close.

Counting (read by `metrics.Collector` at scrape time, see metrics.py): each listen address has a
`ListenerStats`. The hit path adds one list increment, `counts[w[0]] += 1` (the stored template's
first byte is its label slot); the slow path classifies what it sends and times it. With
`--query-log` on, `datagram_received` is swapped per protocol object for a variant that adds one
counter and one integer compare against the next sampled query number.

Insight (`--insight on`, the default; nodedns.serve.tally): every answer is also counted by client
address. A hit adds one to `tally.hits[address][w]` (one dict lookup and one increment, the same
in C and in Python: `Tally.hit`), a slow-path answer goes through `Tally.answered` with its label
slot and, when an upstream made it, the time it took. With `--insight off` there is no tally and
the hit path does not look.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import functools
import importlib
import logging
import os
import socket
import struct
import termios
import time
from collections.abc import Callable, Coroutine
from typing import Any, cast

from nodedns.dns.keys import fast_key
from nodedns.dns.truncate import truncate
from nodedns.dns.wire import QT, header_only, question_end, question_of, read_header
from nodedns.errors import ListenError
from nodedns.metrics.registry import ListenerStats, Sampler, Slots
from nodedns.runtime.logutil import Consolidated, log_query
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.limits import RateLimiter
from nodedns.serve.resolver import Resolver
from nodedns.serve.tally import MAX_ANSWERS, Tally, went_upstream

log = logging.getLogger("nodedns.server")
errors = Consolidated(log, "DNS listener error")

HostPort = tuple[str, int]
TCP_MAX = 65535
TCP_OWED_PAUSE = 4096  # bytes owed (unsent + TCP_QUERY_COST per query worked on) from which no frame is taken
TCP_IN_FLIGHT = 4  # queries of one connection worked on at once: their answers (64 KiB at most each) land together
TCP_QUERY_COST = TCP_OWED_PAUSE // TCP_IN_FLIGHT  # what a query being worked on counts towards the bytes owed
TCP_PROCESS_OWED_MAX = 8 << 20  # answers unsent on all connections of a process past which the largest holder is reset
TCP_READ_CHUNK = 4096  # bytes read from a connection at a time (more for a larger frame); the rest waits in the kernel
# the kernel's buffers of each connection (set on the listener, inherited by every accepted socket; the kernel
# doubles them): without them the send buffer grows to net.ipv4.tcp_wmem's 4 MB for a client that does not read
TCP_SNDBUF = 16 * 1024
TCP_RCVBUF = 8 * 1024
UDP_RCVBUF = 8 * 1024 * 1024
UDP_BATCH = 64  # datagrams per reader wake-up before other callbacks get their turn
UDP_RECV_SIZE = 65535
BATCH_SIZE = 64  # datagrams per call of the C hit path (BATCH in nodedns/serve/_hitpath.c)
_OPT_HEAD = b"\x00\x00\x29"  # OPT: root owner, type 41
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset
_OPT_PLAIN = b"\x00" * 6  # extended rcode 0, version 0, flags 0 (no DO), no options

Misses = list[tuple[bytes, Any]] | None
# the rate limit as the C hit path takes it: the limiter's counts, its rate, its max_clients, the list it fills
Limit = tuple[dict[str, int], int, int, list[tuple[bytes, Any]]] | None
BatchServe = Callable[[int, dict[bytes, bytes], set[str], list[int], int, dict[str, dict[bytes | int, int]] | None,
                       Limit], tuple[int, Misses, int]]
HIT_PATH_ENV = "NODEDNS_HIT_PATH"  # "python": never the C hit path (tests of both, benchmarks A/B)


def c_hit_path() -> BatchServe | None:
    """The C hit path (nodedns/serve/_hitpath.c: recvmmsg, the same lookups, sendmmsg), when it was built
    and not turned off with NODEDNS_HIT_PATH=python; else None (the Python hit path below)."""
    if os.environ.get(HIT_PATH_ENV, "").lower() == "python":
        return None
    try:
        module = importlib.import_module("nodedns.serve._hitpath")
    except ImportError:
        return None
    serve: BatchServe = module.serve
    return serve


def client_udp_limit(data: bytes, max_udp_size: int) -> int:
    """The largest UDP response this query may get: its EDNS payload size capped by ours, or 512."""
    try:
        fk = fast_key(data)
        if fk is not None:
            return min(fk[2], max_udp_size) if fk[2] > 512 else 512
        qend = question_end(data)
        if data[10:12] == b"\x00\x01" and qend + 11 <= len(data) and data[qend] == 0 \
                and data[qend + 1: qend + 3] == b"\x00\x29":
            size: int = struct.unpack_from("!H", data, qend + 3)[0]
            return max(512, min(size, max_udp_size))
    except Exception:  # noqa: BLE001 - any oddity means the classic limit
        return 512
    return 512


def fit(response: bytes, limit: int) -> bytes:
    """The response, or as many of its whole records as fit `limit` with TC=1 (`truncate.truncate`)."""
    if len(response) <= limit:
        return response
    try:
        return truncate(response, question_end(response), limit)
    except Exception:  # noqa: BLE001 - header-only responses (FORMERR) are always small
        return response[:12]


class _Socket:
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


class _UDP:
    """One UDP listener: `readable` drains the socket (hit path inlined), the rest as below."""

    def __init__(self, server: DNSServer, stats: ListenerStats, sock: _Socket) -> None:
        self.server = server
        self.stats = stats
        self.sock = sock
        self.get = server.cluster_answers.table.get
        self.rehit = server.resolver.rehit
        self.handle = server.resolver.handle
        self.max_udp = server.max_udp_size
        self.sendto: Callable[[bytes, Any], None] = sock.sendto
        self.counts = stats.udp_hit  # hit-path answers per label slot
        self.allowed = server.resolver.allow.allowed  # clients already admitted (limits.AllowList)
        self.n = 0  # queries seen, counted only while the query log is on
        self.sampler = server.query_log
        if self.sampler is not None:
            self.log_at = self.sampler.first()
            self.datagram_received = self._received_sampled  # type: ignore[method-assign]
        self.limiter = server.rate_limiter
        self.over: list[tuple[bytes, Any]] = []  # datagrams of clients at their budget (the C hit path fills it)
        if self.limiter is not None:
            self.take = self.limiter.take
            if self.sampler is not None:
                self.unlimited = self.datagram_received
                self.datagram_received = self._received_limited  # type: ignore[method-assign]
        # each datagram through datagram_received (the query log), else the hit path inlined, which
        # counts the rate limit itself (the module docstring)
        self.per_datagram = self.sampler is not None
        # else, when it was built, the C hit path: a batch per system call (nodedns/serve/_hitpath.c)
        self.batch = None if self.per_datagram else server.batch_serve
        self.table = server.cluster_answers.table
        self.tally = server.tally  # insight's counts by client (None: --insight off)

    def start(self) -> None:
        self.sock.loop.add_reader(self.sock.sock.fileno(), self.readable)

    def readable(self) -> None:
        """Up to UDP_BATCH datagrams per wake-up. Without the query log the hit path is inlined here
        (no call per query), the rate limit counted first; with it, each datagram goes through
        `datagram_received` (sampled)."""
        if self.batch is not None:
            self._readable_batched(self.batch)
            return
        recvfrom = self.sock.sock.recvfrom
        send = self.sock.sock.sendto
        get = self.get
        counts = self.counts
        allowed = self.allowed
        sampled = self.per_datagram
        tally = self.tally
        hits = tally.hits if tally is not None else None  # swapped by Tally.flush between two wake-ups
        limiter = None if sampled else self.limiter
        rl: dict[str, int] = {}
        rate = max_clients = 0
        if limiter is not None:
            limiter.tick()  # a new second: its counts cleared in place
            rl, rate, max_clients = limiter.counts, limiter.rate, limiter.max_clients
        for _ in range(UDP_BATCH):
            try:
                data, addr = recvfrom(UDP_RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                if self.sock.closing:
                    return
                continue  # an ICMP error queued on the socket: not about this datagram
            if sampled:
                self.datagram_received(data, addr)
                continue
            if limiter is not None:  # RateLimiter.take's count, inlined while the client is under its budget
                seen = rl.get(addr[0])
                if seen is None:
                    if len(rl) >= max_clients:
                        self._over_budget(data, addr)  # a new client, the table full: the overflow budget
                        continue
                    seen = 0
                elif seen >= rate:
                    self._over_budget(data, addr)
                    continue
                rl[addr[0]] = seen + 1
            if addr[0] not in allowed:
                self.slow(data, addr)  # the resolver admits (and remembers) the client, or refuses it
                continue
            # the same steps as datagram_received, inlined: no call per query on the hit path
            w = None
            n = len(data)
            if n > 16:
                if data[11] == 0:  # ARCOUNT low byte: no OPT, the key is the rest of the message
                    w = get(data[2:])
                    if w is not None and len(w) > 512:
                        w = None
                elif data[10] == 0 and data[n - 11 : n - 8] == _OPT_HEAD and data[n - 6 :] == _OPT_PLAIN:
                    w = get(data[2 : n - 11])  # a bare OPT (EDNS 0, no DO, no options) at the end
                    if w is not None and len(w) > 512 and len(w) > min((data[n - 8] << 8) | data[n - 7],
                                                                       self.max_udp):
                        w = None
            if w is None:
                self.general(data, addr)
                continue
            counts[w[0]] += 1
            if hits is not None:  # Tally.hit, inlined
                cd = hits.get(addr[0])
                if cd is None:
                    cd = tally.client(addr[0])  # type: ignore[union-attr]
                seen = cd.get(w)
                if seen is not None:
                    cd[w] = seen + 1
                elif len(cd) < MAX_ANSWERS:
                    cd[w] = 1
                else:
                    tally.hit(addr[0], w)  # type: ignore[union-attr]  # a full piece: set aside, a fresh one
            try:
                send(data[:2] + w[2:], addr)
            except OSError:
                self.sock.send_errors += 1  # send buffer full: the client asks again

    def _readable_batched(self, serve: BatchServe) -> None:
        """The C hit path: each call reads up to 64 datagrams (recvmmsg), answers the hits as the
        Python loop above would (sendmmsg) and hands back the rest, which take the Python path."""
        fd = self.sock.sock.fileno()
        table, allowed, counts, max_udp = self.table, self.allowed, self.counts, self.max_udp
        hits = self.tally.hits if self.tally is not None else None  # swapped by Tally.flush between two wake-ups
        limiter, over = self.limiter, self.over
        limit = None
        for _ in range(UDP_BATCH // BATCH_SIZE):
            if limiter is not None:
                limiter.tick()  # a new second: its counts cleared in place
                limit = (limiter.counts, limiter.rate, limiter.max_clients, over)
            try:
                received, misses, dropped = serve(fd, table, allowed, counts, max_udp, hits, limit)
            except OSError:
                if self.sock.closing:
                    return
                over.clear()  # a failed call answers none of its batch (nodedns/serve/_hitpath.c)
                continue  # an ICMP error queued on the socket: not about this datagram
            if dropped:
                self.sock.send_errors += dropped  # send buffer full: the clients ask again
            if misses is not None:
                for data, addr in misses:
                    if addr[0] not in allowed:
                        self.slow(data, addr)  # the resolver admits (and remembers) the client, or refuses it
                    else:
                        self.general(data, addr)
                    if self.sock.closing:
                        return
            if over:
                for data, addr in over:
                    self._over_budget(data, addr)
                over.clear()
            if received < BATCH_SIZE:
                return

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if addr[0] not in self.allowed:
            self.slow(data, addr)
            return
        w = None
        n = len(data)
        if n > 16:
            if data[11] == 0:
                w = self.get(data[2:])
                if w is not None and len(w) > 512:
                    w = None
            elif data[10] == 0 and data[n - 11 : n - 8] == _OPT_HEAD and data[n - 6 :] == _OPT_PLAIN:
                w = self.get(data[2 : n - 11])
                if w is not None and len(w) > 512 and len(w) > min((data[n - 8] << 8) | data[n - 7], self.max_udp):
                    w = None
        if w is None:
            self.general(data, addr)
            return
        self.counts[w[0]] += 1
        if self.tally is not None:
            self.tally.hit(addr[0], w)
        self.sendto(data[:2] + w[2:], addr)

    def general(self, data: bytes, addr: Any) -> None:
        """Queries the raw lookup missed: the canonical key (case-folded), then a re-render, then the
        slow path. A stored answer larger than the client's UDP size is cut to the whole records
        that fit, TC=1 (`truncate.truncate`)."""
        fk = fast_key(data)
        if fk is not None:
            key, qend, limit = fk
            w = self.get(key)
            if w is None:
                w = self.rehit(key)  # a cached forwarded answer at the turn of a second: no parsing
            if w is not None:
                if self.tally is not None:
                    self.tally.hit(addr[0], w)
                if limit > self.max_udp:
                    limit = self.max_udp
                if len(w) > limit:
                    w = truncate(w, qend, limit)
                self.counts[w[0]] += 1
                self.sendto(data[:2] + w[2:12] + data[12:qend] + w[qend:], addr)
                return
        self.slow(data, addr)

    def _received_sampled(self, data: bytes, addr: Any) -> None:
        """datagram_received while the query log is on: one count and one compare, then the hit path."""
        self.n += 1
        if self.n >= self.log_at:
            assert self.sampler is not None
            self.log_at = self.sampler.next(self.n)
            self._received_logged(data, addr)
            return
        _UDP.datagram_received(self, data, addr)

    def _received_limited(self, data: bytes, addr: Any) -> None:
        """datagram_received with --rate-limit and the query log: the client's budget first
        (limits.RateLimiter), then the sampled path."""
        verdict = self.take(addr[0])
        if verdict == RateLimiter.PASS:
            self.unlimited(data, addr)
        elif verdict == RateLimiter.SLIP:
            out = self.server.resolver.slip(data)
            if out is not None:
                self.sendto(out, addr)

    def _over_budget(self, data: bytes, addr: Any) -> None:
        """A datagram the hit path did not count: its client is at its budget, or new while the table
        is full. `RateLimiter.take` counts it and decides, as for any query: pass (a new second, or the
        overflow budget), drop, or a TC=1 reply."""
        verdict = self.take(addr[0])
        if verdict == RateLimiter.PASS:
            _UDP.datagram_received(self, data, addr)
        elif verdict == RateLimiter.SLIP:
            out = self.server.resolver.slip(data)
            if out is not None:
                self.sendto(out, addr)

    def _received_logged(self, data: bytes, addr: Any) -> None:
        t0 = time.perf_counter()
        if addr[0] not in self.allowed:
            self.slow(data, addr, t0, True)
            return
        fk = fast_key(data)
        if fk is not None:
            key, qend, limit = fk
            w = self.get(key)
            if w is not None:
                if self.tally is not None:
                    self.tally.hit(addr[0], w)
                if len(w) > min(limit, self.max_udp):
                    w = truncate(w, qend, min(limit, self.max_udp))
                self.counts[w[0]] += 1
                out = data[:2] + w[2:12] + data[12:qend] + w[qend:]
                self.sendto(out, addr)
                self.server.log_query(data, out, w[0], addr, "udp", time.perf_counter() - t0)
                return
        self.slow(data, addr, t0, True)

    def slow(self, data: bytes, addr: Any, t0: float = 0.0, logged: bool = False) -> None:
        if not t0:
            t0 = time.perf_counter()
        try:
            out = self.handle(data, addr[0])
        except Exception as exc:  # noqa: BLE001 - a bug must cost one answer, never the listener
            self.server.panic(exc)
            out = _servfail(data)
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
            out = _servfail(data)
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


class _TCP(asyncio.BufferedProtocol):
    """One TCP client connection (module docstring, "TCP"): frames read into a small buffer of our own
    (the rest waits in the kernel), taken one at a time while the bytes owed stay under
    TCP_OWED_PAUSE, answered in the order they complete."""

    def __init__(self, server: DNSServer, stats: ListenerStats) -> None:
        self.server = server
        self.stats = stats
        self.counted = False
        self.client = ""  # the peer's address, counted against --tcp-max-connections-per-client
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray(TCP_READ_CHUNK)  # frames read and not yet taken: buf[start:end]
        self.start = 0
        self.end = 0
        self.pending = 0
        self.idle: asyncio.TimerHandle | None = None
        self.paused_writing = False
        self.reading_paused = False
        self.taking = False  # inside _take: an answer written meanwhile must not start another pass
        self.closed = False
        self.answered = 0
        self.eof = False  # the client half-closed: close once every answer it is owed is written

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        server = self.server
        peer = self.transport.get_extra_info("peername")
        self.client = str(peer[0]) if peer else ""
        mine = server.tcp_by_client.get(self.client)
        held = len(mine) if mine is not None else 0
        if held >= server.tcp_max_per_client:
            self._refuse(per_client=True)
            return
        if len(server.tcp_clients) >= server.tcp_max_connections and not server.make_room(held):
            self._refuse(per_client=False)
            return
        if mine is None:
            mine = server.tcp_by_client[self.client] = {}
        mine[self] = None
        server.tcp_clients.add(self)
        self.stats.tcp_accepted += 1
        self.stats.tcp_open += 1
        self.counted = True
        # pause_writing past TCP_OWED_PAUSE unsent, resume_writing once the kernel has taken it all
        self.transport.set_write_buffer_limits(high=TCP_OWED_PAUSE, low=0)
        self._touch()

    def _refuse(self, *, per_client: bool) -> None:
        assert self.transport is not None
        if per_client:
            self.server.tcp_refused_client += 1
            self.stats.tcp_refused_client += 1
        else:
            self.server.tcp_refused += 1
            self.stats.tcp_refused += 1
        self.closed = True
        reset(self.transport)

    def open(self) -> bool:
        """Connected, and not closing or closed by us."""
        return not self.closed and self.transport is not None

    def _touch(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
        self.idle = asyncio.get_running_loop().call_later(self.server.tcp_idle_timeout, self._on_idle)

    def _on_idle(self) -> None:
        if self.closed:
            return
        if self.unsent():
            self.abort("not_reading")  # answers it never took: close() would wait for them forever
            return
        if self.pending or (self.server.retiring and not self.answered):
            self._touch()  # answers still owed, or (leaving) its first query is surely on its way: wait
            return
        self.close()

    def unsent(self) -> int:
        """Bytes written for this client that it has not taken: ours (the transport's buffer) and the
        kernel's send queue."""
        assert self.transport is not None
        queued = self.transport.get_write_buffer_size()
        if queued:
            return queued
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return 0
        out = array.array("i", [0])
        try:
            fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, out, True)
        except OSError:
            return 0
        return out[0]

    def unsent_here(self) -> int:
        """Bytes written for this client still in the process (the transport's buffer)."""
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def close(self) -> None:
        """Close once what was written has been sent (a client that takes its answers)."""
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()

    def abort(self, reason: str) -> None:
        """Reset the connection now, dropping what it was not sent (a client that does not read)."""
        if not self.closed and self.transport is not None:
            self.closed = True
            if reason == "owed":
                self.stats.tcp_aborted_owed += 1
            elif reason == "evicted":
                self.stats.tcp_aborted_evicted += 1
            else:
                self.stats.tcp_aborted_unread += 1
            self._release()  # its slot is free at once (the transport says connection_lost later)
            reset(self.transport)

    # reading: our buffer, a frame at a time

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the next read goes: the free end of our buffer (TCP_READ_CHUNK, or room for the whole
        frame being read when it is larger). Reading pauses while we take no frames, so a client's
        pipelined queries wait in the kernel, not here."""
        buf = self.buf
        if self.end == len(buf):
            held = self.end - self.start
            need = TCP_READ_CHUNK
            if held >= 2:
                need = max(need, 2 + ((buf[self.start] << 8) | buf[self.start + 1]) + 2)
            fresh = bytearray(max(need, held + 512))
            fresh[:held] = buf[self.start:self.end]
            self.buf, self.start, self.end = fresh, 0, held
        return memoryview(self.buf)[self.end:]

    def buffer_updated(self, nbytes: int) -> None:
        self.end += nbytes
        self._take()

    def _take(self) -> None:
        """Take the buffered frames one by one while the client is owed little enough; then pause or
        resume reading."""
        if self.taking or not self.open():
            return
        self.taking = True
        queries = 0
        try:
            buf = self.buf
            while not self.closed and not self._blocked():
                held = self.end - self.start
                if held < 2:
                    break
                n = (buf[self.start] << 8) | buf[self.start + 1]
                if held < 2 + n:
                    break
                msg = bytes(buf[self.start + 2: self.start + 2 + n])
                self.start += 2 + n
                if n:
                    queries += 1
                    self._query(msg)
            if self.start == self.end:
                self.start = self.end = 0
                if len(self.buf) > TCP_READ_CHUNK:
                    self.buf = bytearray(TCP_READ_CHUNK)  # a large frame's room is not kept
            elif self.start and self.end == len(self.buf):
                held = self.end - self.start  # a partial frame at the end: move it to the front
                self.buf[:held] = self.buf[self.start:self.end]
                self.start, self.end = 0, held
        finally:
            self.taking = False
        if self.closed:
            return
        if queries:
            self._touch()  # only whole queries keep a connection open: a byte-a-second drip does not
        if self.eof:
            self._done_if_answered()
        else:
            self._flow()

    def _blocked(self) -> bool:
        """Take no further frame: too many answers owed, in bytes or in queries being worked on."""
        assert self.transport is not None
        return self.transport.get_write_buffer_size() + self.pending * TCP_QUERY_COST >= TCP_OWED_PAUSE

    def _flow(self) -> None:
        """Read while frames can be taken, pause reading while they cannot (or our buffer is full)."""
        if self.transport is None or self.closed:
            return
        stop = self._blocked()
        if stop and not self.reading_paused:
            self.transport.pause_reading()
            self.reading_paused = True
        elif not stop and self.reading_paused:
            self.transport.resume_reading()
            self.reading_paused = False

    def _ready(self) -> None:
        """Something owed went out or was answered: take what is buffered, then read on."""
        if self.end > self.start:
            self._take()
        elif self.eof:
            self._done_if_answered()
        else:
            self._flow()

    def _query(self, msg: bytes) -> None:
        t0 = time.perf_counter()
        server = self.server
        logged = server.tcp_sampled()
        peer = self.client
        try:
            out = server.resolver.handle(msg, peer)
        except Exception as exc:  # noqa: BLE001
            server.panic(exc)
            out = _servfail(msg)
        if out is None:
            server.dropped(self.stats.tcp)
            if read_header(msg) is None:
                self.close()  # garbage on a stream: nothing sensible follows
            return
        if isinstance(out, bytes):
            self._write(out)
            server.account(self.stats, self.stats.tcp, msg, out, (peer, 0), "tcp", t0, logged)
        else:
            self.pending += 1
            server.spawn(self._finish(out, msg, peer, t0, logged))

    async def _finish(self, pending: Coroutine[Any, Any, bytes | None], msg: bytes, peer: str, t0: float,
                      logged: bool) -> None:
        try:
            out = await pending
        except Exception as exc:  # noqa: BLE001
            self.server.panic(exc)
            out = None
        finally:
            self.pending -= 1
        if out is not None:
            self._write(out)
            self.server.account(self.stats, self.stats.tcp, msg, out, (peer, 0), "tcp", t0, logged)
        else:
            self.server.dropped(self.stats.tcp)
        self._ready()

    def eof_received(self) -> bool:
        """The client half-closed (shutdown(SHUT_WR) after its queries): its frames still buffered are
        taken and every answer is sent, then the connection closes (RFC 7766 section 6.2). Answers
        already written are flushed either way."""
        self.eof = True
        return self._frame_held() or self.pending > 0  # True keeps the transport open for writing

    def _frame_held(self) -> bool:
        """A whole frame is buffered, not taken yet."""
        held = self.end - self.start
        return held >= 2 and held >= 2 + ((self.buf[self.start] << 8) | self.buf[self.start + 1])

    def _done_if_answered(self) -> None:
        """A half-closed client: close once every frame it sent is answered."""
        if not self.pending and not self._frame_held():
            self.close()

    def _write(self, out: bytes) -> None:
        if self.closed or self.transport is None:
            return
        self.answered += 1
        out = fit(out, TCP_MAX)
        self.transport.write(struct.pack("!H", len(out)) + out)
        if self.paused_writing:  # the client has not taken it all: the process's bound on what all hold
            self.server.shed_owed()

    def pause_writing(self) -> None:
        self.paused_writing = True
        self.server.tcp_holding.add(self)
        self._flow()

    def resume_writing(self) -> None:
        self.paused_writing = False
        self.server.tcp_holding.discard(self)
        self._ready()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.idle is not None:
            self.idle.cancel()
        self._release()

    def _release(self) -> None:
        """Count this connection off: the open connections, its address's."""
        server = self.server
        server.tcp_clients.discard(self)
        server.tcp_holding.discard(self)
        if self.counted:
            self.counted = False
            self.stats.tcp_open -= 1
            mine = server.tcp_by_client.get(self.client)
            if mine is not None:
                mine.pop(self, None)
                if not mine:
                    del server.tcp_by_client[self.client]


def reset(transport: asyncio.Transport) -> None:
    """Abort a TCP connection with a reset (SO_LINGER 0): what was not sent is dropped, here and in the
    kernel. A plain close would leave the unsent bytes queued in the kernel behind a FIN that a client
    that does not read never gets, holding the socket's memory until the orphan timeout."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    transport.abort()


def _servfail(data: bytes) -> bytes | None:
    if read_header(data) is None:
        return None
    return header_only(data, 2)


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
    ) -> None:
        self.resolver = resolver
        self.cluster_answers = cluster_answers
        self.addresses = addresses
        self.max_udp_size = max_udp_size
        self.tcp_idle_timeout = tcp_idle_timeout
        self.tcp_max_connections = tcp_max_connections
        self.tcp_max_per_client = tcp_max_per_client
        self.reuse_port = reuse_port
        self.freebind = freebind
        self.bound: list[HostPort] = []
        self.udp: list[tuple[_Socket, _UDP]] = []
        self.tcp_servers: list[asyncio.Server] = []
        self.tcp_clients: set[_TCP] = set()
        self.tcp_holding: set[_TCP] = set()  # connections with answers unsent past TCP_OWED_PAUSE (paused writing)
        self.tcp_by_client: dict[str, dict[_TCP, None]] = {}  # client address -> its open connections, oldest first
        self.retiring = False  # retire(): idle TCP clients are closed once answered
        self.tcp_refused = 0  # at --tcp-max-connections
        self.tcp_refused_client = 0  # at --tcp-max-connections-per-client
        self._tasks: set[asyncio.Task[None]] = set()
        self.slots = slots if slots is not None else Slots()
        self.query_log = query_log if query_log is not None and query_log.rate > 0 else None
        self.rate_limiter = rate_limiter
        self.tally = tally  # insight's counts by client address (None: --insight off)
        self.batch_serve = c_hit_path()  # None: the Python hit path (not built, or NODEDNS_HIT_PATH=python)
        self.stats: list[ListenerStats] = []
        self.panics = 0
        self._tcp_n = 0
        self._tcp_log_at = self.query_log.first() if self.query_log is not None else Sampler.NEVER

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
                handle = _Socket(loop, udp_sock)
                listener = _UDP(self, stats, handle)
                self.udp.append((handle, listener))
                listener.start()
                server = await loop.create_server(functools.partial(_TCP, self, stats), sock=tcp_sock)
                self.tcp_servers.append(server)
                self.stats.append(stats)
                self.bound.append((host, real_port))
                log.info("listening on %s port %d (udp, tcp; %s hit path)", host, self.bound[-1][1],
                         "C" if listener.batch is not None else "Python")
        except BaseException:
            self.close()
            raise

    def make_room(self, held: int) -> bool:
        """At --tcp-max-connections, a newcomer whose address holds `held`: reset the oldest connection of
        the address holding the most, if that is at least two more (so a client with fewer connections
        than the largest holder always gets one, and equals never evict each other). True: room made."""
        if not self.tcp_by_client:
            return False
        conns = max(self.tcp_by_client.values(), key=len)
        victim = next((c for c in conns if not c.closed), None)  # one closing already is not room
        if len(conns) < held + 2 or victim is None:
            return False
        victim.abort("evicted")
        return True

    def shed_owed(self) -> None:
        """Answers unsent on the connections that hold any, past TCP_PROCESS_OWED_MAX: reset the largest
        holder until the rest fit (a client that reads, even slowly, holds at most its in-flight answers
        and gives them up; clients that never read are the ones holding most, and keep holding)."""
        held = {c: c.unsent_here() for c in self.tcp_holding if c.open()}
        total = sum(held.values())
        while total > TCP_PROCESS_OWED_MAX and held:
            victim = max(held, key=held.__getitem__)
            total -= held.pop(victim)
            victim.abort("owed")

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

    def tcp_sampled(self) -> bool:
        if self.query_log is None:
            return False
        self._tcp_n += 1
        if self._tcp_n < self._tcp_log_at:
            return False
        self._tcp_log_at = self.query_log.next(self._tcp_n)
        return True

    def log_query(self, query: bytes, out: bytes, slot: int, addr: Any, proto: str, elapsed: float) -> None:
        q = question_of(query)
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
        for client in list(self.tcp_clients):
            if client.transport is not None and not client.closed and client.transport.get_write_buffer_size():
                client.closed = True
                reset(client.transport)  # it had the whole drain to take its answers
            else:
                client.close()

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
        self.retiring = True
        self.tcp_idle_timeout = min(self.tcp_idle_timeout, quiet)
        for client in list(self.tcp_clients):
            client._touch()  # closes it once idle with nothing pending
        deadline = loop.time() + drain
        still_since: float | None = None
        while loop.time() < deadline:
            busy = bool(self._tasks or self.tcp_clients) or any(h.queued() for h, _ in self.udp)
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
