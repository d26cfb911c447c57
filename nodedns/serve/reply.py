"""How a listener's reply leaves: sized for the client (its UDP limit, the cut), SERVFAIL for a bug, the error log.

Shared by the UDP listener (nodedns.serve.udp), the TCP connections (nodedns.serve.tcp) and the
DNS server that owns them (nodedns.serve.server); `Accounting` is what the listeners tell that server.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Coroutine
from typing import Any, Protocol

from nodedns.dns.keys import fast_key
from nodedns.dns.truncate import truncate
from nodedns.dns.wire import header_only, question_end, read_header
from nodedns.metrics.counters import ListenerStats
from nodedns.runtime.logutil import Consolidated

log = logging.getLogger("nodedns.server")
errors = Consolidated(log, "DNS listener error")


class Accounting(Protocol):
    """What a listener (UDP or TCP) tells the server that made it (`nodedns.serve.server.DNSServer`): an
    answer the slow path made, a query dropped, a bug, a task to own until it ends, a sampled query."""

    def account(self, stats: ListenerStats, counts: list[int], query: bytes, out: bytes, addr: Any, proto: str,
                t0: float, logged: bool) -> None: ...

    def dropped(self, counts: list[int]) -> None: ...

    def panic(self, exc: BaseException) -> None: ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...

    def log_query(self, query: bytes, out: bytes, slot: int, addr: Any, proto: str, elapsed: float) -> None: ...


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


def servfail(data: bytes) -> bytes | None:
    """SERVFAIL for a query whose answering raised (a bug costs one answer); None when it has no header."""
    if read_header(data) is None:
        return None
    return header_only(data, 2)
