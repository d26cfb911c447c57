"""A TCP client connection of a DNS listener: two-byte framing, several queries at once, bounded owing, idle timeout.

TCP: two-byte length framing, several queries per connection (answered as they complete, each
with its own ID), an idle timeout that only whole queries reset (a client dripping bytes is
closed), and half-close: a client that shuts down its sending side after its queries still gets
every answer owed, then the connection closes (RFC 7766 section 6.2). What a client that never reads
can cost is bounded (docs/hardening.md "TCP and pending work"): a connection reads into a small
buffer of its own (`TCPConnection` is a BufferedProtocol) and takes one frame at a time, only while it is
owed little (unsent bytes plus TCP_QUERY_COST per query being worked on, under TCP_OWED_PAUSE: so
at most TCP_IN_FLIGHT queries worked on at once, whose answers, landing together, are what a
connection can hold beyond that); otherwise reading pauses and its pipelined queries wait in the
kernel, whose buffers are small too (TCP_SNDBUF, TCP_RCVBUF on the listener). What all connections
hold unsent is bounded for the process, as unbound's stream-wait-size bounds it: past
TCP_PROCESS_OWED_MAX, the connection holding the most is reset (`TCPPool.shed_owed`). A
connection still owed answers at the idle timeout is reset (`reset`: SO_LINGER 0, so the kernel drops what it holds
too; a close would wait forever for a client that does not read). Caps: open connections
(--tcp-max-connections) and per client address (--tcp-max-connections-per-client), per process.
`TCPPool` holds the connections of a process, these caps and bounds: a connection asks it to be let in,
tells it what it holds unsent and when it goes; its queries go to the pool's `handle` (the resolver) and
their accounting to the server (`reply.Accounting`).

Misses (`TCPMisses.budgeted`): with a miss budget (--miss-limit, --miss-limit-namespace), each query of an
admitted client is looked up by its canonical key first, as the UDP listener does with what its hit
path hands back (`keys.fast_key`, the stored answers, a forwarded answer's re-render): a stored answer
is written at once; anything else is a miss, counted by `MissBudget.take_tcp` (per client and per
namespace, apart from UDP's) before the slow path, and answered REFUSED over the budget. A client not
admitted yet goes to the resolver (its first query), one under a DNS policy is budgeted unless its
answer is stored, as over UDP.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import socket
import struct
import termios
import time
from collections.abc import Callable, Coroutine
from typing import Any, cast

from nodedns.dns.hot import HotTable
from nodedns.dns.keys import fast_key, patch
from nodedns.dns.message import short_reply
from nodedns.dns.wire import RCODE, read_header
from nodedns.metrics.counters import ListenerStats, Sampler
from nodedns.serve.limits import AllowList, MissBudget
from nodedns.serve.reply import Accounting, fit, servfail

TCP_MAX = 65535
TCP_OWED_PAUSE = 4096  # bytes owed (unsent + TCP_QUERY_COST per query worked on) from which no frame is taken
TCP_IN_FLIGHT = 4  # queries of one connection worked on at once: their answers (64 KiB at most each) land together
TCP_QUERY_COST = TCP_OWED_PAUSE // TCP_IN_FLIGHT  # what a query being worked on counts towards the bytes owed
TCP_READ_CHUNK = 4096  # bytes read from a connection at a time (more for a larger frame); the rest waits in the kernel
TCP_PROCESS_OWED_MAX = 8 << 20  # answers unsent on all connections of a process past which the largest holder is reset
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset
Outcome = bytes | None | Coroutine[Any, Any, bytes | None]


class TCPMisses:
    """--miss-limit over TCP (module docstring, "Misses"): the stored answer of an admitted client's query
    by its canonical key, or the budget's say on a miss."""

    def __init__(self, budget: MissBudget, *, allow: AllowList, hot: HotTable,
                 rehit: Callable[[bytes], bytes | None], max_udp_size: int) -> None:
        self.budget = budget
        self.allow = allow
        self.hot = hot  # the hot table (nodedns.dns.hot), read only: `get`, an answer as sent now
        self.rehit = rehit  # a forwarded answer at the turn of a second, re-rendered (ForwardPath.rehit)
        self.max_udp_size = max_udp_size

    def budgeted(self, msg: bytes, peer: str) -> bytes | None:
        """The stored answer, or REFUSED for a miss over the client's budget or its namespace's; None: on to
        the resolver (a miss within the budgets, a client not admitted yet, a message that is not a query)."""
        head = read_header(msg)
        if head is None or head[1] & 0x8000:
            return None  # the resolver drops it (and we close)
        allow = self.allow
        fk = fast_key(msg)
        if peer not in allow.allowed:
            if peer not in allow.policed:
                return None  # its first query: the resolver admits (and remembers) it, or refuses it
            if fk is not None and self.hot.get(fk[0]) is not None:
                return None  # stored: the policy decides, then the stored answer (not a miss)
        elif fk is not None:
            key, qend, _ = fk
            w = self.hot.get(key)
            if w is None:
                w = self.rehit(key)
            if w is not None:
                return patch(w, msg, qend)
        budget = self.budget
        if budget.take_tcp(peer):
            return None
        return short_reply(msg, RCODE.REFUSED, udp_size=self.max_udp_size)


class TCPPool:
    """The TCP connections of a process: who holds a slot (per address, oldest first), who holds answers
    unsent, and the caps on both (module docstring). A connection asks it to be let in (`admit`), tells it
    when it holds answers unsent (`hold`, `unhold`, `written`) and when it goes (`release`); `answering` is
    where its queries and their accounting go."""

    def __init__(self, answering: Accounting, *, handle: Callable[[bytes, str], Outcome],
                 idle_timeout: float = 10.0, max_connections: int = 1000, max_per_client: int = 100,
                 misses: TCPMisses | None = None, query_log: Sampler | None = None) -> None:
        self.answering = answering
        self.handle = handle  # the slow path (Resolver.handle)
        self.misses = misses  # --miss-limit (None: every query to the resolver)
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self.max_per_client = max_per_client
        self.clients: set[TCPConnection] = set()
        self.holding: set[TCPConnection] = set()  # connections with answers unsent past TCP_OWED_PAUSE (paused)
        self.by_client: dict[str, dict[TCPConnection, None]] = {}  # client address -> its connections, oldest first
        self.retiring = False  # retire(): idle clients are closed once answered
        self.refused = 0  # at --tcp-max-connections
        self.refused_client = 0  # at --tcp-max-connections-per-client
        self.query_log = query_log
        self._n = 0
        self._log_at = query_log.first() if query_log is not None else Sampler.NEVER

    def connection(self, stats: ListenerStats) -> TCPConnection:
        """A new connection of the listener counted in `stats` (what the TCP server is given as its factory)."""
        return TCPConnection(self, stats)

    def admit(self, conn: TCPConnection) -> bool:
        """Let `conn` in under the caps (making room at the overall cap), or refuse it (counted, reset)."""
        mine = self.by_client.get(conn.client)
        held = len(mine) if mine is not None else 0
        if held >= self.max_per_client:
            conn.refuse(per_client=True)
            self.refused_client += 1
            return False
        if len(self.clients) >= self.max_connections and not self.make_room(held):
            conn.refuse(per_client=False)
            self.refused += 1
            return False
        if mine is None:
            mine = self.by_client[conn.client] = {}
        mine[conn] = None
        self.clients.add(conn)
        return True

    def release(self, conn: TCPConnection) -> None:
        """`conn` goes: its slot, its address's, its unsent answers are no one's to count."""
        self.clients.discard(conn)
        self.holding.discard(conn)
        mine = self.by_client.get(conn.client)
        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self.by_client[conn.client]

    def hold(self, conn: TCPConnection) -> None:
        """`conn` holds answers its client has not taken (its writing paused)."""
        self.holding.add(conn)

    def unhold(self, conn: TCPConnection) -> None:
        self.holding.discard(conn)

    def written(self) -> None:
        """An answer was written to a connection whose client has not taken all: the process's bound."""
        self.shed_owed()

    def make_room(self, held: int) -> bool:
        """At --tcp-max-connections, a newcomer whose address holds `held`: reset the oldest open connection
        of an address holding the most, if that is at least two more (so a client with fewer connections
        than the largest holder always gets one, and equals never evict each other). One closing already
        is not room: of the addresses holding the most, the first with an open connection. True: room made."""
        most = max(map(len, self.by_client.values()), default=0)
        if most < held + 2:
            return False
        for conns in self.by_client.values():
            if len(conns) == most:
                victim = next((c for c in conns if not c.closed), None)
                if victim is not None:
                    victim.abort("evicted")
                    return True
        return False

    def shed_owed(self) -> None:
        """Answers unsent on the connections that hold any, past TCP_PROCESS_OWED_MAX: reset the largest
        holder until the rest fit (a client that reads, even slowly, holds at most its in-flight answers
        and gives them up; clients that never read are the ones holding most, and keep holding)."""
        held = {c: c.unsent_here() for c in self.holding if c.open()}
        total = sum(held.values())
        while total > TCP_PROCESS_OWED_MAX and held:
            victim = max(held, key=held.__getitem__)
            total -= held.pop(victim)
            victim.abort("owed")

    def sampled(self) -> bool:
        """This query is one the query log samples (TCP's own count)."""
        if self.query_log is None:
            return False
        self._n += 1
        if self._n < self._log_at:
            return False
        self._log_at = self.query_log.next(self._n)
        return True

    def retire(self, quiet: float) -> None:
        """Leaving: each connection is closed once answered and idle for `quiet` seconds (one that has not sent
        its first query yet is waited for)."""
        self.retiring = True
        self.idle_timeout = min(self.idle_timeout, quiet)
        for client in list(self.clients):
            client._touch()  # closes it once idle with nothing pending

    def close(self) -> None:
        """Close every connection: reset one still holding answers (it had the whole drain to take them)."""
        for client in list(self.clients):
            if client.transport is not None and not client.closed and client.transport.get_write_buffer_size():
                client.closed = True
                reset(client.transport)
            else:
                client.close()


class TCPConnection(asyncio.BufferedProtocol):
    """One TCP client connection (module docstring, "TCP"): frames read into a small buffer of our own
    (the rest waits in the kernel), taken one at a time while the bytes owed stay under
    TCP_OWED_PAUSE, answered in the order they complete."""

    def __init__(self, pool: TCPPool, stats: ListenerStats) -> None:
        self.pool = pool
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
        peer = self.transport.get_extra_info("peername")
        self.client = str(peer[0]) if peer else ""
        if not self.pool.admit(self):
            return
        self.stats.tcp_accepted += 1
        self.stats.tcp_open += 1
        self.counted = True
        # pause_writing from TCP_OWED_PAUSE unsent (where _blocked stops taking frames: so the drain that
        # unblocks it is always told), resume_writing once the kernel has taken it all
        self.transport.set_write_buffer_limits(high=TCP_OWED_PAUSE - 1, low=0)
        self._touch()

    def refuse(self, *, per_client: bool) -> None:
        """Refused at a cap (`TCPPool.admit`): counted, reset."""
        assert self.transport is not None
        if per_client:
            self.stats.tcp_refused_client += 1
        else:
            self.stats.tcp_refused += 1
        self.closed = True
        reset(self.transport)

    def open(self) -> bool:
        """Connected, and not closing or closed by us."""
        return not self.closed and self.transport is not None

    def _touch(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
        self.idle = asyncio.get_running_loop().call_later(self.pool.idle_timeout, self._on_idle)

    def _on_idle(self) -> None:
        if self.closed:
            if self.counted and self.unsent():
                self.abort("not_reading")  # closed after its last answer (it half-closed), which it never took
            return
        if self.unsent():
            self.abort("not_reading")  # answers it never took: close() would wait for them forever
            return
        if self.pending or (self.pool.retiring and not self.answered):
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
        """Reset the connection now, dropping what it was not sent (a client that does not read); also
        one closing (closed by us) while its last answers wait for a client that does not take them."""
        if self.counted and self.transport is not None:
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
        pool = self.pool
        server = pool.answering
        logged = pool.sampled()
        peer = self.client
        try:
            stored = pool.misses.budgeted(msg, peer) if pool.misses is not None else None
            out = pool.handle(msg, peer) if stored is None else stored
        except Exception as exc:  # noqa: BLE001
            server.panic(exc)
            out = servfail(msg)
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
            self.pool.answering.panic(exc)
            out = None
        finally:
            self.pending -= 1
        if out is not None:
            self._write(out)
            self.pool.answering.account(self.stats, self.stats.tcp, msg, out, (peer, 0), "tcp", t0, logged)
        else:
            self.pool.answering.dropped(self.stats.tcp)
        self._ready()

    def eof_received(self) -> bool:
        """The client half-closed (shutdown(SHUT_WR) after its queries): its frames still buffered are
        taken and every answer is sent, then the connection closes (RFC 7766 section 6.2). Answers
        already written are flushed either way."""
        self.eof = True
        if self._frame_held() or self.pending > 0:
            return True  # keeps the transport open for writing
        self.closed = True  # the transport closes itself once what was written is sent: closing, as after close()
        return False

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
            self.pool.written()

    def pause_writing(self) -> None:
        self.paused_writing = True
        self.pool.hold(self)
        self._flow()

    def resume_writing(self) -> None:
        self.paused_writing = False
        self.pool.unhold(self)
        self._ready()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.idle is not None:
            self.idle.cancel()
        self._release()

    def _release(self) -> None:
        """Count this connection off: the open connections, its address's."""
        self.pool.unhold(self)
        if self.counted:
            self.counted = False
            self.stats.tcp_open -= 1
            self.pool.release(self)


def reset(transport: asyncio.Transport) -> None:
    """Abort a TCP connection with a reset (SO_LINGER 0): what was not sent is dropped, here and in the
    kernel. A plain close would leave the unsent bytes queued in the kernel behind a FIN that a client
    that does not read never gets, holding the socket's memory until the orphan timeout."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    transport.abort()
