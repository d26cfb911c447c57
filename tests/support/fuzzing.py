"""Hostile packets in bulk and a fast raw-socket client that checks every reply (tests/e2e/test_hostile.py,
scripts/fuzz).

    gen = Generator(random.Random(seed))
    report = blast_udp(host, port, (gen.packet() for _ in range(80_000)))
    report = blast_tcp(host, port, gen.tcp_batches(20_000))

Packets: valid queries (with 0x20 case), the same mutated (flipped bytes, counts up to 0xFFFF, label
lengths incl. the reserved 0x40/0x80 types, compression pointers and pointer loops, truncation
anywhere incl. inside the OPT record, inserted and deleted bytes, odd flags and opcodes), built
nasties (compression loops, bad label lengths, names over 255 bytes, huge counts, truncated and
duplicated OPT records, OPT with an rdlen past the end) and random bytes. Over TCP also zero-length
frames, 64 KiB frames and a length prefix that promises more than follows.

The rule every reply is held to: a packet with a DNS header and QR=0 gets exactly one reply; the
reply carries its ID, has QR=1, parses with dnspython (no trailing bytes) and, when it has a
question, it is the query's own question byte for byte. A packet without a header, or a response
(QR=1), gets no reply at all (no reflection between servers). Each UDP packet carries an ID unique
on its socket, so every reply is matched to its packet; a window bounds the replies owed at once.
"""

from __future__ import annotations

import random
import selectors
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import dns.exception
import dns.message
import dns.rcode

CLUSTER_NAMES = (
    "web.default.svc.cluster.local", "web.prod.svc.cluster.local", "db.default.svc.cluster.local",
    "_postgres._tcp.db.default.svc.cluster.local", "api.prod.svc.cluster.local",
    "kube-dns.kube-system.svc.cluster.local",
    "search.prod.svc.cluster.local", "web-alias.default.svc.cluster.local", "nope.default.svc.cluster.local",
    "10-244-0-5.default.pod.cluster.local", "cluster.local", "default.svc.cluster.local",
    "34.12.96.10.in-addr.arpa", "1.0.96.10.in-addr.arpa",
    "a" * 63 + "." + "b" * 63 + ".svc.cluster.local",
)
FORWARDED_NAMES = ("www.example.com", "nope.example.com", "example.com", "4.3.2.1.in-addr.arpa", "")
TYPES = (1, 28, 33, 12, 16, 5, 6, 2, 15, 255, 13, 65, 252, 251, 41, 0, 99, 65535)
MAX_TCP_FRAME = 65535
T = TypeVar("T")


def encode(name: str) -> bytes:
    labels = [p.encode() for p in name.split(".") if p]
    return b"".join(bytes((len(p),)) + p for p in labels) + b"\x00"


def query(name: str, qtype: int, *, qid: int = 0, rd: bool = True, edns: bool = False, do: bool = False,
          payload: int = 1232, options: bytes = b"", qclass: int = 1) -> bytes:
    head = struct.pack("!HHHHHH", qid, 0x0100 if rd else 0, 1, 0, 0, 1 if edns else 0)
    body = encode(name) + struct.pack("!HH", qtype, qclass)
    if edns:
        body += b"\x00\x00\x29" + struct.pack("!HBBHH", payload, 0, 0, 0x8000 if do else 0, len(options)) + options
    return head + body


def case_0x20(data: bytes, rng: random.Random) -> bytes:
    """The question name with random letter case (what resolvers do for spoofing resistance)."""
    out = bytearray(data)
    for i in range(12, len(out)):
        if 0x61 <= out[i] <= 0x7A and rng.random() < 0.5:
            out[i] -= 0x20
    return bytes(out)


def label_starts(data: bytes) -> list[int]:
    """Offsets of the question's label-length bytes (as far as they can be followed)."""
    starts = []
    pos = 12
    while pos < len(data) and len(starts) < 130:
        starts.append(pos)
        n = data[pos]
        if n == 0 or n > 63:
            break
        pos += n + 1
    return starts


class Generator:
    """Random hostile packets from one seeded RNG (the same seed gives the same packets)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.made: Counter[str] = Counter()

    # -- valid queries ---------------------------------------------------------------------

    def valid(self) -> bytes:
        r = self.rng
        name = r.choice(CLUSTER_NAMES) if r.random() < 0.7 else r.choice(FORWARDED_NAMES)
        qtype = r.choice(TYPES[:10]) if r.random() < 0.9 else r.choice(TYPES)
        options = b""
        if r.random() < 0.1:  # a cookie, a client subnet
            options = r.choice([b"\x00\x0a\x00\x08" + bytes(8), b"\x00\x08\x00\x07\x00\x01\x18\x00\x0a\x00\x00"])
        data = query(name, qtype, qid=r.getrandbits(16), rd=r.random() < 0.9, edns=r.random() < 0.6,
                     do=r.random() < 0.2, payload=r.choice([512, 1232, 4096, 65535, 0]), options=options,
                     qclass=1 if r.random() < 0.95 else r.choice([3, 254, 255, 0]))
        return case_0x20(data, r)

    # -- mutations -------------------------------------------------------------------------

    def mutated(self) -> bytes:
        r = self.rng
        data = bytearray(self.valid())
        for _ in range(r.randint(1, 4)):
            op = r.choice(("flip", "count", "label", "pointer", "cut", "insert", "delete", "flags", "append",
                           "opt"))
            n = len(data)
            if op == "flip" and n:
                data[r.randrange(n)] = r.getrandbits(8)
            elif op == "count" and n >= 12:
                off = r.choice((4, 6, 8, 10))
                data[off : off + 2] = struct.pack("!H", r.choice((0, 1, 2, 3, 0x7F, 0xFFFF, r.getrandbits(16))))
            elif op == "label":
                starts = label_starts(bytes(data))
                if starts:
                    data[r.choice(starts)] = r.choice((0, 1, 62, 63, 64, 0x80, 0xBF, 0xC0, 0xFF, r.getrandbits(8)))
            elif op == "pointer":
                pos = r.choice(label_starts(bytes(data)) or [12])
                target = r.choice((pos, 12, 0, n, 0x3FFF, r.getrandbits(14)))  # incl. a pointer to itself
                data[pos : pos + 2] = struct.pack("!H", 0xC000 | target)
            elif op == "cut":
                del data[r.randint(0, n) :]
            elif op == "insert":
                pos = r.randint(0, n)
                data[pos:pos] = r.randbytes(r.randint(1, 8))
            elif op == "delete" and n:
                pos = r.randrange(n)
                del data[pos : pos + r.randint(1, 8)]
            elif op == "flags" and n >= 4:
                data[2] = r.getrandbits(8) & 0x7F if r.random() < 0.7 else r.getrandbits(8)
                data[3] = r.getrandbits(8)
            elif op == "append":
                data += r.randbytes(r.randint(1, 40))
            elif op == "opt" and n > 20:
                tail = r.randint(1, 11)
                if r.random() < 0.5:
                    del data[-tail:]  # the OPT record cut short
                else:
                    data[-2:] = struct.pack("!H", r.getrandbits(16))  # its rdlen past the end
        return bytes(data)

    # -- built nasties ---------------------------------------------------------------------

    def nasty(self) -> bytes:
        r = self.rng
        qid = r.getrandbits(16)
        kind = r.choice(("self-pointer", "pointer-pair", "pointer-forward", "bad-label", "long-name", "long-label",
                         "huge-counts", "truncated-opt", "two-opts", "opt-not-root", "opt-in-answer", "no-question",
                         "many-questions", "empty-name", "header-only", "short"))
        head = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
        if kind == "self-pointer":
            return head + b"\xc0\x0c" + b"\x00\x01\x00\x01"
        if kind == "pointer-pair":  # two labels pointing at each other
            return head + b"\x01a\xc0\x10" + b"\x01b\xc0\x0c" + b"\x00\x01\x00\x01"
        if kind == "pointer-forward":
            return head + b"\xc0\x20" + b"\x00\x01\x00\x01" + b"\x00" * 20 + b"\x03www\xc0\x0c"
        if kind == "bad-label":
            return head + bytes((r.choice((0x40, 0x41, 0x7F, 0x80, 0xBF)),)) + b"abc\x00\x00\x01\x00\x01"
        if kind == "long-name":  # over 255 bytes in 63-byte labels
            return head + (b"\x3f" + b"x" * 63) * 5 + b"\x00\x00\x01\x00\x01"
        if kind == "long-label":
            return head + b"\x40" + b"y" * 64 + b"\x00\x00\x01\x00\x01"
        if kind == "huge-counts":
            counts = [r.choice((0xFFFF, 0x8000, 1)) for _ in range(4)]
            return struct.pack("!HHHHHH", qid, 0x0100, *counts) + encode("web.default.svc.cluster.local") + \
                b"\x00\x01\x00\x01" + r.randbytes(r.randint(0, 64))
        q = query("web.default.svc.cluster.local", 1, qid=qid, edns=True)
        if kind == "truncated-opt":
            return q[: len(q) - r.randint(1, 10)]
        if kind == "two-opts":
            return q[:10] + b"\x00\x02" + q[12:] + q[-11:]
        if kind == "opt-not-root":
            return q[:-11] + b"\x01x" + q[-10:]
        if kind == "opt-in-answer":
            return q[:6] + b"\x00\x01" + q[8:10] + b"\x00\x00" + q[12:]
        if kind == "no-question":
            return struct.pack("!HHHHHH", qid, 0x0100, 0, 0, 0, 0)
        if kind == "many-questions":
            one = encode("web.default.svc.cluster.local") + b"\x00\x01\x00\x01"
            return struct.pack("!HHHHHH", qid, 0x0100, 3, 0, 0, 0) + one * 3
        if kind == "empty-name":
            return head + b"\x00\x00\x01\x00\x01"
        if kind == "header-only":
            return head
        return r.randbytes(r.randint(0, 11))  # "short": not even a header

    def random(self) -> bytes:
        r = self.rng
        if r.random() < 0.5:
            return r.randbytes(r.randint(0, 600))
        return r.randbytes(r.randint(12, 40))

    def packet(self) -> bytes:
        """One packet: 25% valid, 45% mutated, 15% built nasties, 15% random bytes."""
        x = self.rng.random()
        kind = "valid" if x < 0.25 else "mutated" if x < 0.70 else "nasty" if x < 0.85 else "random"
        self.made[kind] += 1
        return getattr(self, kind)()  # type: ignore[no-any-return]

    # -- TCP -------------------------------------------------------------------------------

    def frame_payload(self) -> bytes:
        r = self.rng
        x = r.random()
        if x < 0.03:
            self.made["tcp-empty-frame"] += 1
            return b""
        if x < 0.05:
            self.made["tcp-64k-frame"] += 1
            if r.random() < 0.5:
                return r.randbytes(MAX_TCP_FRAME)
            q = self.valid()
            return q + r.randbytes(MAX_TCP_FRAME - len(q))  # a query followed by junk up to 64 KiB
        return self.packet()

    def tcp_batches(self, frames: int) -> Iterator[TcpBatch]:
        """`frames` frames in all, pipelined 1-20 per connection; 5% of connections end with a lying
        length prefix."""
        left = frames
        while left > 0:
            batch = [self.frame_payload() for _ in range(min(left, self.rng.randint(1, 20)))]
            left -= len(batch)
            yield TcpBatch(batch, lie=self.rng.random() < 0.05)


# ----------------------------------------------------------------------------------------------
# Checking replies


def owes_reply(packet: bytes) -> bool:
    """A DNS header with QR=0: the server owes exactly one reply."""
    return len(packet) >= 12 and not packet[2] & 0x80


_PARSEABLE: dict[bytes, bool] = {}
_REPLY_OK: dict[bytes, str | None] = {}
MEMO_MAX = 200_000


def _memo(table: dict[bytes, T], key: bytes, compute: Callable[[], T]) -> T:
    """dnspython is the slow part of the client: the same bytes (after the ID) give the same verdict."""
    try:
        return table[key]
    except KeyError:
        pass
    value = compute()
    if len(table) >= MEMO_MAX:
        table.clear()
    table[key] = value
    return value


def dnspython_query(packet: bytes) -> bool:
    """dnspython reads it as a well-formed query (for the report: how much of the fuzz was parseable)."""

    def parse() -> bool:
        try:
            msg = dns.message.from_wire(packet)
        except Exception:  # noqa: BLE001 - dnspython raises many types on garbage
            return False
        return not msg.flags & 0x8000

    return _memo(_PARSEABLE, packet[2:], parse)


def question_end(data: bytes) -> int | None:
    pos = 12
    try:
        while data[pos]:
            if data[pos] > 63:
                return None
            pos += data[pos] + 1
    except IndexError:
        return None
    return pos + 5 if pos + 5 <= len(data) else None


def reply_problem(packet: bytes, reply: bytes) -> str | None:
    """Why `reply` is not a well-formed reply to `packet` (None: it is)."""
    if len(reply) < 12:
        return "reply shorter than a header"
    if reply[:2] != packet[:2]:
        return "reply ID differs"
    if not reply[2] & 0x80:
        return "reply without QR"
    if len(reply) == 12 and reply[4:12] == bytes(8):
        return None  # header only (FORMERR, NOTIMP): nothing else to check
    problem = _memo(_REPLY_OK, reply[2:], lambda: _parse_problem(reply))
    if problem is None and reply[4:6] == b"\x00\x01":
        end = question_end(reply)
        if end is None or reply[12:end] != packet[12:end]:
            return "reply question is not the query's"
    return problem


def _parse_problem(reply: bytes) -> str | None:
    try:
        dns.message.from_wire(reply, ignore_trailing=False)
    except dns.exception.DNSException as exc:
        return f"reply does not parse: {exc.__class__.__name__}: {exc}"
    return None


@dataclass
class Report:
    """What one run sent, got and found wrong."""

    sent: int = 0
    owed: int = 0  # packets that must get a reply
    parseable: int = 0  # of those, queries dnspython reads as well-formed
    answered: int = 0
    missing: int = 0  # owed replies that never came
    unexpected: int = 0  # replies to packets that must get none, or to no packet at all
    closed_early: int = 0  # TCP: owed replies lost because the server closed after garbage
    dropped: int = 0  # owed replies a server may leave out (rate limit) that did not come
    rcodes: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)  # first examples of each kind of failure
    elapsed: float = 0.0

    def problem(self, text: str, packet: bytes) -> None:
        if len(self.problems) < 20:
            self.problems.append(f"{text}: {packet[:80].hex()}")

    def merge(self, other: Report) -> None:
        for name in ("sent", "owed", "parseable", "answered", "missing", "unexpected", "closed_early", "dropped"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.rcodes.update(other.rcodes)
        self.problems.extend(other.problems[: max(0, 20 - len(self.problems))])
        self.elapsed += other.elapsed

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unexpected and not self.problems

    def summary(self) -> str:
        parseable = f" ({self.parseable} well-formed queries)" if self.parseable else ""
        dropped = f", dropped (allowed) {self.dropped}" if self.dropped else ""
        return (f"sent {self.sent}, owed {self.owed} replies{parseable}, answered "
                f"{self.answered}, missing {self.missing}, unexpected {self.unexpected}, closed early "
                f"{self.closed_early}{dropped} in {self.elapsed:.1f}s; rcodes {dict(self.rcodes.most_common())}")


def _tally(report: Report, packet: bytes, reply: bytes) -> None:
    report.answered += 1
    problem = reply_problem(packet, reply)
    if problem is not None:
        report.problem(problem, packet)
    else:
        report.rcodes[dns.rcode.to_text(reply[3] & 0x0F)] += 1


# ----------------------------------------------------------------------------------------------
# UDP


@dataclass
class _Pending:
    packet: bytes
    owed: bool
    until: float


class _UdpClient:
    """One socket; every packet on it gets an ID unique on this socket."""

    IDS = 65536

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
        force = getattr(socket, "SO_RCVBUFFORCE", 33)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, force, 8 << 20)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.connect((host, port))
        self.sock.setblocking(False)
        self.next_id = 0
        self.pending: dict[int, _Pending] = {}
        self.owed = 0

    @property
    def exhausted(self) -> bool:
        return self.next_id >= self.IDS

    def close(self) -> None:
        self.sock.close()


def blast_udp(host: str, port: int, packets: Iterable[bytes], *, window: int = 512, sockets: int = 4,
              reply_timeout: float = 5.0, quiet_grace: float = 0.5, count_parseable: bool = True,
              may_drop: bool = False) -> Report:
    """Send every packet over UDP, at most `window` owed replies outstanding; check every reply.

    count_parseable: also count the owed packets dnspython reads as queries (~40 us each: the
    largest cost of the client, so a time-bounded test may leave it out). may_drop: the server may
    leave owed packets unanswered (a rate limit): they count as `dropped`, not `missing`.
    """
    report = Report()
    started = time.monotonic()
    sel = selectors.DefaultSelector()
    clients: list[_UdpClient] = []
    retired: list[_UdpClient] = []

    def fresh() -> _UdpClient:
        c = _UdpClient(host, port)
        sel.register(c.sock, selectors.EVENT_READ, c)
        return c

    clients = [fresh() for _ in range(sockets)]
    owed_total = 0
    turn = 0

    def drain(timeout: float) -> None:
        nonlocal owed_total
        for key, _ in sel.select(timeout):
            c: _UdpClient = key.data
            while True:
                try:
                    reply = c.sock.recv(65535)
                except (BlockingIOError, InterruptedError):
                    break
                except ConnectionRefusedError:
                    report.problem("the server's port is closed (ICMP port unreachable)", b"")
                    break
                if len(reply) < 2:
                    report.unexpected += 1
                    report.problem("a reply without an ID", reply)
                    continue
                qid = (reply[0] << 8) | reply[1]
                p = c.pending.pop(qid, None)
                if p is None or not p.owed:
                    report.unexpected += 1
                    report.problem("a reply to a packet that must get none" if p else "a reply to no packet",
                                   p.packet if p else reply)
                    continue
                c.owed -= 1
                owed_total -= 1
                _tally(report, p.packet, reply)

    def expire(now: float) -> None:
        nonlocal owed_total
        for c in (*clients, *retired):
            late = [qid for qid, p in c.pending.items() if p.until < now]
            for qid in late:
                p = c.pending.pop(qid)
                if p.owed:
                    c.owed -= 1
                    owed_total -= 1
                    if may_drop:
                        report.dropped += 1
                    else:
                        report.missing += 1
                        report.problem("no reply", p.packet)

    last_expire = started
    for packet in packets:
        while owed_total >= window:
            drain(0.05)
            now = time.monotonic()
            if now - last_expire > 0.2:
                expire(now)
                last_expire = now
        c = clients[turn % len(clients)]
        turn += 1
        if c.exhausted:  # every ID used once: a new socket (the old one stays until its replies are in)
            retired.append(c)
            c = clients[(turn - 1) % len(clients)] = fresh()
        report.sent += 1
        owed = owes_reply(packet)
        if len(packet) >= 2:
            qid = c.next_id
            c.next_id += 1
            packet = struct.pack("!H", qid) + packet[2:]
            c.pending[qid] = _Pending(packet, owed, time.monotonic() + (reply_timeout if owed else quiet_grace))
        if owed:
            c.owed += 1
            owed_total += 1
            report.owed += 1
            if count_parseable:
                report.parseable += dnspython_query(packet)
        try:
            c.sock.send(packet)
        except BlockingIOError:
            drain(0.01)
            c.sock.send(packet)
        if report.sent % 64 == 0:
            drain(0)
    deadline = time.monotonic() + reply_timeout + quiet_grace
    while time.monotonic() < deadline and any(c.pending for c in (*clients, *retired)):
        drain(0.05)
        expire(time.monotonic())
    expire(float("inf"))
    for c in (*clients, *retired):
        sel.unregister(c.sock)
        c.close()
    sel.close()
    report.elapsed = time.monotonic() - started
    return report


# ----------------------------------------------------------------------------------------------
# TCP


@dataclass
class TcpBatch:
    """Frames pipelined on one connection; with `lie`, the last length prefix promises 100 more bytes."""

    frames: list[bytes]
    lie: bool = False


class _TcpConn:
    def __init__(self, host: str, port: int, batch: TcpBatch, report: Report, reply_timeout: float,
                 count_parseable: bool) -> None:
        self.report = report
        self.sock = socket.create_connection((host, port), timeout=5)
        self.sock.setblocking(False)
        self.buf = bytearray()
        self.owed: dict[int, bytes] = {}
        self.quiet: dict[int, bytes] = {}  # sent, must get no reply
        self.order: list[bytes] = []
        self.until = time.monotonic() + reply_timeout
        self.has_short = False
        out = bytearray()
        closes = False  # after a frame under 12 bytes the server may hang up: later replies are not owed
        for i, payload in enumerate(batch.frames):
            if len(payload) >= 2:
                payload = struct.pack("!H", i) + payload[2:]
            report.sent += 1
            # a length prefix promising 100 bytes more than follow: the server waits for the rest
            never_complete = batch.lie and i == len(batch.frames) - 1 and len(payload) + 100 <= MAX_TCP_FRAME
            if owes_reply(payload) and not closes and not never_complete:
                self.owed[i] = payload
                report.owed += 1
                if count_parseable:
                    report.parseable += dnspython_query(payload)
            elif len(payload) >= 2:
                self.quiet[i] = payload
            if 0 < len(payload) < 12:
                closes = self.has_short = True
            out += struct.pack("!H", len(payload) + (100 if never_complete else 0)) + payload
        self.pending_out = bytes(out)

    def flush(self) -> None:
        while self.pending_out:
            try:
                n = self.sock.send(self.pending_out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # the server hung up (after garbage): what it owed is settled in finish()
                self.pending_out = b""
                return
            self.pending_out = self.pending_out[n:]

    def readable(self) -> bool:
        """Read what arrived; False when the connection is finished (closed, or nothing more owed)."""
        try:
            chunk = self.sock.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            chunk = b""
        if not chunk:
            return False
        self.buf += chunk
        while len(self.buf) >= 2:
            n = (self.buf[0] << 8) | self.buf[1]
            if len(self.buf) < 2 + n:
                break
            reply = bytes(self.buf[2 : 2 + n])
            del self.buf[: 2 + n]
            qid = (reply[0] << 8) | reply[1] if len(reply) >= 2 else -1
            packet = self.owed.pop(qid, None)
            if packet is None:
                self.report.unexpected += 1
                self.report.problem("a TCP reply to a frame that must get none" if qid in self.quiet
                                    else "a TCP reply to no frame", reply)
                continue
            _tally(self.report, packet, reply)
        return bool(self.owed) or bool(self.pending_out)

    def finish(self, closed_by_server: bool) -> None:
        for packet in self.owed.values():
            if closed_by_server and self.has_short:
                self.report.closed_early += 1
            else:
                self.report.missing += 1
                self.report.problem("no TCP reply", packet)
        self.sock.close()


def blast_tcp(host: str, port: int, batches: Iterable[TcpBatch], *, connections: int = 16,
              reply_timeout: float = 5.0, count_parseable: bool = True) -> Report:
    """Each batch on its own connection, `connections` at once; check every reply.

    A server may close a connection after a frame too short to be DNS (garbage on a stream): replies
    owed after such a frame are not counted as missing; replies owed before it are (counted
    `closed_early` when the close came first, so a test can bound it).
    """
    report = Report()
    started = time.monotonic()
    sel = selectors.DefaultSelector()
    todo = iter(batches)
    live: set[_TcpConn] = set()

    def open_next() -> bool:
        batch = next(todo, None)
        if batch is None:
            return False
        conn = _TcpConn(host, port, batch, report, reply_timeout, count_parseable)
        conn.flush()
        live.add(conn)
        sel.register(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
        return True

    def done(conn: _TcpConn, closed: bool) -> None:
        sel.unregister(conn.sock)
        live.discard(conn)
        conn.finish(closed)

    more = True
    while more or live:
        while more and len(live) < connections:
            more = open_next()
        for key, events in sel.select(0.05):
            conn = key.data
            if events & selectors.EVENT_WRITE:
                conn.flush()
                if not conn.pending_out:
                    sel.modify(conn.sock, selectors.EVENT_READ, conn)
            if events & selectors.EVENT_READ and not conn.readable():
                done(conn, closed=bool(conn.owed))
        now = time.monotonic()
        for conn in [c for c in live if c.until < now]:
            done(conn, closed=False)
    sel.close()
    report.elapsed = time.monotonic() - started
    return report


CLUSTER_ANSWERS_CAP = 50_000  # cache.ClusterAnswers default


def fill_tables(host: str, port: int, *, denial_cap: int) -> Report:
    """Distinct names until the stored cluster answers (50,000) and the denial cache (`denial_cap`, the
    agent's --cache-denial) are at their caps: from then on memory can only stay flat (each new
    entry evicts one). Forwarded names need an upstream that answers NXDOMAIN."""
    names = [f"fill-{i}.default.svc.cluster.local" for i in range(CLUSTER_ANSWERS_CAP)]
    report = blast_udp(host, port, (query(n, 1) for n in names), count_parseable=False)
    # the forwarded names with fewer owed at once than one client's share of the upstream queries in
    # flight (an eighth of --max-concurrent: 125), so every one is asked and its NXDOMAIN stored
    forwarded = [f"fill-{i}.example.com" for i in range(denial_cap)]
    report.merge(blast_udp(host, port, (query(n, 1) for n in forwarded), window=64, count_parseable=False))
    return report

