"""One DNS-over-TLS connection to one upstream: queries pipelined, answers matched by ID, closed when idle,
abandoned when it stops answering.

RFC 7858 transport, RFC 7766 section 6.2.1.1 pipelining: the `Forwarder` (nodedns.forward.upstream)
opens it on first use for a `tls://` server and reads its `tls_idle` and counters live. A connection
that stops answering while the server still accepts new ones (a wedged server process, a middlebox
that dropped the flow) is told by its timeouts (`timed_out`): a query that timed out with nothing read
on the connection since it was sent, or MAX_TIMEOUTS timeouts in a row, abandon it; its other queries
fail with `Abandoned` and the forwarder re-sends them on a new connection.
"""
from __future__ import annotations

import asyncio
import secrets
from typing import Protocol

from nodedns.dns.queries import answers_query
from nodedns.runtime.tasks import Tasks

MAX_TIMEOUTS = 3  # queries timed out in a row (no answer read between them) that abandon a connection


class Abandoned(ConnectionResetError):
    """The connection was abandoned as wedged: the query never got an answer on it (re-send it)."""


class Owner(Protocol):
    """What a connection reads of the forwarder that opened it, live (a test shortens `tls_idle`)."""

    tls_idle: float
    stats: dict[str, int]
    _tasks: Tasks


class Peer(Protocol):
    """The upstream server a connection goes to; it holds the connection while it is open."""

    conn: TLSConnection | None
    tls_closed_by_server: int

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def text(self) -> str: ...


class TLSConnection:
    """One DNS-over-TLS connection to one upstream: queries pipelined on it (RFC 7766 section 6.2.1.1),
    each answer matched to its query by ID and question, closed after the forwarder's `tls_idle` seconds
    with nothing in flight. When it closes, every query still waiting on it fails (ConnectionError)."""

    def __init__(self, fw: Owner, server: Peer, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.fw = fw
        self.server = server
        self.reader = reader
        self.writer = writer
        self.pending: dict[int, tuple[asyncio.Future[bytes], bytes]] = {}
        self.closed = False
        self.answered = 0
        self.timeouts = 0  # queries timed out on it since the last answer read
        self.opened = asyncio.get_running_loop().time()
        self.last_read = self.opened  # when the last answer was read (loop time); `opened` until one is
        self.by_server = False  # closed by the server (EOF, reset), not by us
        self.abandoned = False  # closed by us as wedged (`timed_out`)
        self._idle: asyncio.TimerHandle | None = None
        self._reading = fw._tasks.spawn(self._read(), f"tls-read {server.text}")
        self._arm_idle()

    async def ask(self, msg: bytes, qid: int, question: bytes) -> bytes:
        if self.closed:
            raise ConnectionResetError("the TLS connection closed")
        while qid in self.pending:  # pipelined: the ID must be unique on this connection
            qid = secrets.randbits(16)
            msg = qid.to_bytes(2, "big") + msg[2:]
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.pending[qid] = (answer, question)
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        try:
            self.writer.write(len(msg).to_bytes(2, "big") + msg)
            await self.writer.drain()
            return await answer
        finally:
            if self.pending.get(qid, (None,))[0] is answer:
                del self.pending[qid]
            if not self.pending:
                self._arm_idle()

    def _arm_idle(self) -> None:
        if not self.closed and self._idle is None:
            self._idle = asyncio.get_running_loop().call_later(self.fw.tls_idle, self._idle_close)

    def _idle_close(self) -> None:
        self._idle = None
        if not self.pending:
            self.close()

    async def _read(self) -> None:
        try:
            while True:
                size = int.from_bytes(await self.reader.readexactly(2), "big")
                data = await self.reader.readexactly(size)
                qid = int.from_bytes(data[:2], "big") if len(data) >= 12 else -1
                waiting = self.pending.get(qid)
                if waiting is None or not answers_query(data, qid, waiting[1]):
                    self.fw.stats["mismatched"] += 1
                    continue
                self.answered += 1
                self.timeouts = 0
                self.last_read = asyncio.get_running_loop().time()
                if not waiting[0].done():
                    waiting[0].set_result(data)
        except (asyncio.IncompleteReadError, OSError):
            pass
        finally:
            if not self.closed:
                self.by_server = True
                self.server.tls_closed_by_server += 1
                self.fw.stats["tls_closed_by_server"] += 1
            self.close(reading=False)

    def timed_out(self, sent: float, bound: float) -> bool:
        """A query sent on this connection at `sent` (loop time) timed out: whether the connection is now
        abandoned as wedged (nothing read on it since that query was sent, or MAX_TIMEOUTS in a row). Its
        other queries fail with `Abandoned`, for the forwarder to re-send on a new connection. A query
        that waited on it less than `bound` seconds (re-sent here late in its timeout) says nothing of it."""
        if self.closed or asyncio.get_running_loop().time() - sent < bound:
            return False
        self.timeouts += 1
        if self.timeouts < MAX_TIMEOUTS and self.last_read > sent:
            return False
        self.abandoned = True
        self.close(error=Abandoned("the TLS connection stopped answering: abandoned"))
        return True

    async def settled(self) -> None:
        """Wait (1 s at most) until the connection has read all the server sent before it closed, so
        `answered` counts every answer (a write can fail on a closed connection before the read task
        has taken the last answers)."""
        if not self._reading.done():
            await asyncio.wait({self._reading}, timeout=1.0)

    def state(self) -> dict[str, object]:
        """How the connection is doing, for the server's `tls` entry in /status."""
        now = asyncio.get_running_loop().time()
        return {"pending": len(self.pending), "timeouts_in_a_row": self.timeouts, "answered": self.answered,
                "idle_seconds": round(now - self.last_read, 3)}

    def close(self, *, reading: bool = True, error: ConnectionError | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        if self.server.conn is self:
            self.server.conn = None
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        for answer, _question in self.pending.values():
            if not answer.done():
                answer.set_exception(error or ConnectionResetError("the TLS connection closed"))
        self.pending.clear()
        self.writer.close()
        if reading:
            self._reading.cancel()
