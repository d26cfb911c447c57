"""A DNS-over-TLS connection's judgement of its own timeouts (nodedns.forward.tls.TLSConnection.timed_out):
abandoned as wedged when a query timed out with nothing read on it since it was sent, or at the third
timeout in a row — "in a row" meaning with no answer read between them (docs/operators.md, docs/hardening.md).
Driven on an in-memory stream: the answers are fed to its reader, the clock is the event loop's."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Coroutine
from typing import Any

import dns.message

from nodedns.forward.tls import MAX_TIMEOUTS, TLSConnection


class Tasks:
    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return asyncio.ensure_future(coro)


class Owner:
    tls_idle = 60.0

    def __init__(self) -> None:
        self.stats: collections.Counter[str] = collections.Counter()
        self._tasks = Tasks()


class Peer:
    host, port, text = "10.0.0.53", 853, "10.0.0.53:853"

    def __init__(self) -> None:
        self.tls_closed_by_server = 0
        self.conn: TLSConnection | None = None


class Writer:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True


def connection() -> tuple[TLSConnection, asyncio.StreamReader]:
    reader = asyncio.StreamReader()
    peer = Peer()
    conn = TLSConnection(Owner(), peer, reader, Writer())  # type: ignore[arg-type]
    peer.conn = conn
    return conn, reader


async def answered(conn: TLSConnection, reader: asyncio.StreamReader, n: int) -> None:
    """One query asked on the connection and its answer read."""
    q = dns.message.make_query(f"n{n}.example.com.", "A", id=1000 + n)
    wire = q.to_wire()
    asking = asyncio.ensure_future(conn.ask(wire, 1000 + n, wire[12:]))
    await asyncio.sleep(0)
    reply = dns.message.make_response(q).to_wire()
    reader.feed_data(len(reply).to_bytes(2, "big") + reply)
    assert await asyncio.wait_for(asking, 1.0) == reply


def test_timeouts_with_answers_read_between_them_never_abandon_the_connection() -> None:
    async def main() -> None:
        conn, reader = connection()
        for n in range(MAX_TIMEOUTS + 2):
            sent = asyncio.get_running_loop().time()
            await asyncio.sleep(0.001)
            await answered(conn, reader, n)  # the connection answers: whatever timed out was the query's own
            assert conn.timed_out(sent, 0.0) is False, n
            assert conn.state()["timeouts_in_a_row"] == 1
        assert not conn.closed and not conn.abandoned

    asyncio.run(main())


def test_the_third_timeout_in_a_row_abandons_it() -> None:
    async def main() -> None:
        conn, reader = connection()
        sent = asyncio.get_running_loop().time()
        await asyncio.sleep(0.001)
        await answered(conn, reader, 0)  # read since these queries were sent: not wedged at once
        verdicts = [conn.timed_out(sent, 0.0) for _ in range(MAX_TIMEOUTS)]
        assert verdicts == [False] * (MAX_TIMEOUTS - 1) + [True]
        assert conn.closed and conn.abandoned

    asyncio.run(main())


def test_a_timeout_with_nothing_read_since_the_query_was_sent_abandons_it_at_once() -> None:
    async def main() -> None:
        conn, reader = connection()
        await answered(conn, reader, 0)
        await asyncio.sleep(0.001)
        sent = asyncio.get_running_loop().time()
        assert conn.timed_out(sent, 0.0) is True and conn.abandoned

    asyncio.run(main())


def test_a_query_that_waited_less_than_the_bound_says_nothing_of_the_connection() -> None:
    async def main() -> None:
        conn, _ = connection()
        sent = asyncio.get_running_loop().time()
        assert conn.timed_out(sent, 5.0) is False
        assert conn.state()["timeouts_in_a_row"] == 0 and not conn.closed

    asyncio.run(main())
