"""Raw DNS over sockets for tests that need exact bytes: TCP framing, pipelining, odd packets.

Every call is bounded by a timeout; nothing here can hang a test.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator

import dns.message
import dns.rdatatype

from tests.helpers import send_raw_udp


def wire_query(name: str, rdtype: str | int = "A", *, qid: int | None = None, edns: int | bool = False,
               payload: int = 1232, dnssec: bool = False) -> bytes:
    """A query's wire bytes; the name keeps its case (dnspython does not fold it)."""
    msg = dns.message.make_query(name, rdtype, use_edns=edns, payload=payload, want_dnssec=dnssec)
    if qid is not None:
        msg.id = qid
    return msg.to_wire()


def question_end(data: bytes) -> int:
    """End of the single uncompressed question of a message."""
    pos = 12
    while data[pos]:
        pos += data[pos] + 1
    return pos + 5


# One datagram out, the reply in (None on timeout): the shared helper under the name used here.
udp_exchange = send_raw_udp


@contextlib.contextmanager
def tcp_connection(host: str, port: int, *, timeout: float = 3.0) -> Iterator[socket.socket]:
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        yield s
    finally:
        s.close()


def frame(data: bytes) -> bytes:
    return struct.pack("!H", len(data)) + data


def recv_exact(s: socket.socket, n: int, *, deadline: float) -> bytes:
    """n bytes, or fewer when the peer closed the connection first."""
    buf = b""
    while len(buf) < n:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def recv_frame(s: socket.socket, *, timeout: float = 3.0) -> bytes | None:
    """One length-framed message, or None when the connection closed."""
    deadline = time.monotonic() + timeout
    head = recv_exact(s, 2, deadline=deadline)
    if len(head) < 2:
        return None
    (n,) = struct.unpack("!H", head)
    body = recv_exact(s, n, deadline=deadline)
    return body if len(body) == n else None


def tcp_exchange(host: str, port: int, data: bytes, *, timeout: float = 3.0) -> bytes | None:
    with tcp_connection(host, port, timeout=timeout) as s:
        s.sendall(frame(data))
        return recv_frame(s, timeout=timeout)


def closed_by_peer(s: socket.socket, *, timeout: float) -> bool:
    """True when the peer closes (EOF or reset) within `timeout`, False when it stays open."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except (ConnectionResetError, ConnectionAbortedError):
        return True


def rcode_of(data: bytes) -> int:
    return data[3] & 0x0F


def header_id(data: bytes) -> int:
    return int(struct.unpack_from("!H", data)[0])


def is_response(data: bytes) -> bool:
    return bool(data[2] & 0x80)


def parse(data: bytes) -> dns.message.Message:
    return dns.message.from_wire(data, ignore_trailing=False)


def rdtype_num(rdtype: str | int) -> int:
    return int(dns.rdatatype.from_text(rdtype)) if isinstance(rdtype, str) else rdtype
