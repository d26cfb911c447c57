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

from tests.support.helpers import send_raw_udp


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


def turned_away(host: str, port: int, *, probe: bytes = b"", timeout: float = 3.0) -> bool:
    """True when a new connection is closed by the server within `timeout` (the server over its cap).

    The server resets at once (SO_LINGER 0), and on loopback the reset can land before connect()
    has read its outcome: a reset at connect time is the same refusal as one at the first read."""
    try:
        with tcp_connection(host, port, timeout=timeout) as s:
            if probe:
                try:
                    s.sendall(frame(probe))
                except (BrokenPipeError, ConnectionResetError):
                    return True
            return closed_by_peer(s, timeout=timeout)
    except (ConnectionResetError, ConnectionRefusedError):
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


def record_spans(data: bytes) -> list[tuple[int, int, int, int]]:
    """(section 0/1/2, start, end, type) of every record after the single question, in wire order."""
    an, ns, ar = struct.unpack_from("!HHH", data, 6)
    pos = question_end(data)
    out = []
    for i in range(an + ns + ar):
        start = pos
        while True:
            length = data[pos]
            if length == 0:
                pos += 1
                break
            if length >= 0xC0:
                pos += 2
                break
            pos += length + 1
        rtype, rdlen = struct.unpack_from("!H", data, pos)[0], struct.unpack_from("!H", data, pos + 8)[0]
        pos += 10 + rdlen
        out.append((0 if i < an else 1 if i < an + ns else 2, start, pos, rtype))
    assert pos == len(data), "bytes after the last record"
    return out


def assert_truncated_like_miekg(out: bytes, full: bytes, limit: int) -> int:
    """`out` is `full` cut the way miekg/dns `Msg.Truncate` cuts it for a client of `limit` bytes:
    TC=1, at most `limit` bytes, the records a prefix of `full`'s (answer, then authority, then
    additional, none skipped), the OPT kept last when `full` has one, and the next record would not
    have fit. Returns how many records (OPT aside) were kept."""
    assert out[2] & 0x02 and len(out) <= max(512, limit)
    assert out[2] & ~0x02 == full[2] & ~0x02 and out[3] == full[3] and out[12 : question_end(out)] == full[
        12 : question_end(full)]
    spans_out, spans_full = record_spans(out), record_spans(full)
    opt_full = [s for s in spans_full if s[3] == 41]
    opt_out = [s for s in spans_out if s[3] == 41]
    assert len(opt_out) == len(opt_full) <= 1
    if opt_out:
        assert spans_out[-1] == opt_out[0][:1] + spans_out[-1][1:] and out[opt_out[0][1] :] == full[
            opt_full[0][1] : opt_full[0][2]]
    kept = [s for s in spans_out if s[3] != 41]
    body_end = kept[-1][2] if kept else question_end(out)
    assert out[12:body_end] == full[12:body_end]  # whole records, a prefix of the full answer
    rest = [s for s in spans_full if s[3] != 41][len(kept):]
    assert rest, "nothing was left out, yet TC=1"
    opt_len = (opt_full[0][2] - opt_full[0][1]) if opt_full else 0
    nxt = rest[0]
    assert body_end + (nxt[2] - nxt[1]) + opt_len > max(512, limit), "the next record would have fit"
    assert [s[0] for s in kept] == [s[0] for s in spans_full[: len(kept)]]
    return len(kept)
