"""One DNS-over-TLS connection to one upstream: queries pipelined, answers matched by ID, closed when idle.

RFC 7858 transport, RFC 7766 section 6.2.1.1 pipelining: the `Forwarder` (nodedns.forward.upstream)
opens it on first use for a `tls://` server and reads its `tls_idle` and counters live.
"""
from __future__ import annotations

import asyncio
import secrets
from typing import Protocol

from nodedns.dns.queries import answers_query
from nodedns.runtime.tasks import Tasks


class Owner(Protocol):
    """What a connection reads of the forwarder that opened it, live (a test shortens `tls_idle`)."""

    tls_idle: float
    stats: dict[str, int]
    _tasks: Tasks


class Peer(Protocol):
    """The upstream server a connection goes to; it holds the connection while it is open."""

    conn: TLSConnection | None

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
                if not waiting[0].done():
                    waiting[0].set_result(data)
        except (asyncio.IncompleteReadError, OSError):
            pass
        finally:
            self.close(reading=False)

    def close(self, *, reading: bool = True) -> None:
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
                answer.set_exception(ConnectionResetError("the upstream closed the TLS connection"))
        self.pending.clear()
        self.writer.close()
        if reading:
            self._reading.cancel()
