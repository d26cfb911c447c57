"""DNS wire format basics: the codes, the header and the question read by hand, records walked, OPT read.

The rest of the wire format lives beside this module, one job each: `dns.keys` (the cache key of a
query: `fast_key`, `make_key`, `patch`, `key_query`), `dns.message` (`parse_query`, the short replies),
`dns.pack` (`build_response`, `RR`, the CNAME-chased answers), `dns.truncate` (cutting a stored answer
for a small UDP client, adding an option), `dns.queries` (the queries nodedns sends) and
`dns.describe` (a JSON view of a message). dnslib is imported on first use, here (`_dnslib`), and only
inside nodedns.dns: a process that meets only usual queries never loads it.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple

from nodedns.errors import FormatError


def _dnslib() -> Any:
    """dnslib, imported on first use: queries and answers of the usual shapes never need it (a worker
    that meets none of the others never loads it)."""
    import dnslib

    return dnslib


class QT:
    """Query and record types used by nodedns (IANA numbers)."""

    A = 1
    NS = 2
    CNAME = 5
    SOA = 6
    PTR = 12
    HINFO = 13
    MX = 15
    TXT = 16
    AAAA = 28
    SRV = 33
    OPT = 41
    IXFR = 251
    AXFR = 252
    ANY = 255

    NAMES: dict[int, str] = {
        1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 13: "HINFO", 15: "MX", 16: "TXT", 28: "AAAA",
        33: "SRV", 41: "OPT", 64: "SVCB", 65: "HTTPS", 251: "IXFR", 252: "AXFR", 255: "ANY", 257: "CAA",
    }

    @classmethod
    def name(cls, qtype: int) -> str:
        return cls.NAMES.get(qtype, f"TYPE{qtype}")

    @classmethod
    def from_text(cls, text: str) -> int:
        t = text.strip().upper()
        for num, name in cls.NAMES.items():
            if name == t:
                return num
        if t.startswith("TYPE") and t[4:].isdigit() and int(t[4:]) < 65536:
            return int(t[4:])
        raise ValueError(f"unknown record type {text!r}")


class RCODE:
    NOERROR = 0
    FORMERR = 1
    SERVFAIL = 2
    NXDOMAIN = 3
    NOTIMP = 4
    REFUSED = 5
    BADVERS = 16

    NAMES: dict[int, str] = {
        0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED", 16: "BADVERS",
    }

    @classmethod
    def name(cls, rcode: int) -> str:
        return cls.NAMES.get(rcode, f"RCODE{rcode}")


CLASS_IN = 1
CLASS_CH = 3
CLASS_ANY = 255
OPCODE_QUERY = 0
OPCODE_UPDATE = 5
OPT_NSID = 3  # EDNS option code of the name server identifier (RFC 5001)

# Flag bits that change an answer (RD, CD, AD, EDNS, DO), as one small int ("kflags").
KF_RD = 0x01  # same bit as in header byte 2
KF_EDNS = 0x02
KF_DO = 0x04
KF_CD = 0x10  # same bits as in header byte 3
KF_AD = 0x20


class Query(NamedTuple):
    """A parsed query (slow path)."""

    id: int
    opcode: int
    rd: bool
    cd: bool
    ad: bool
    qname: str  # lowercase, no trailing dot
    qtype: int
    qclass: int
    question: bytes  # the raw question section as sent (case preserved)
    edns: bool
    do: bool
    udp_size: int  # client's advertised payload size (512 without EDNS)
    edns_version: int
    key: bytes  # cache key, see KEY_HEAD
    nsid: bool = False  # the OPT record asks for the name server identifier (RFC 5001)


def read_header(data: bytes) -> tuple[int, int, int] | None:
    """(id, flags, qdcount) when at least a header is present, else None."""
    if len(data) < 12:
        return None
    qid, flags, qd = struct.unpack_from("!HHH", data)
    return qid, flags, qd


def question_labels(question: bytes) -> tuple[bytes, ...]:
    """The raw labels of an uncompressed question section (name, type, class), as sent."""
    labels = []
    pos = 0
    while question[pos]:
        n = question[pos]
        labels.append(question[pos + 1 : pos + 1 + n])
        pos += n + 1
    return tuple(labels)


_PLAIN_BYTES = bytes(b for b in range(0x21, 0x7F) if b != 0x5C)  # printable ASCII but the backslash
_LABEL_CHARS = tuple(
    "\\" + chr(b) if b in (0x2E, 0x5C) else chr(b) if 0x21 <= b <= 0x7E else f"\\{b:03d}" for b in range(256)
)


def name_text(labels: tuple[bytes, ...]) -> str:
    """Lowercase presentation form of raw labels, no trailing dot (RFC 1035 5.1 escapes).

    A dot or backslash inside a label is escaped (`a\\.b`), other bytes outside printable ASCII
    become `\\DDD`, so no label can pass for two and any byte survives. Only ASCII is folded.
    """
    raw = b".".join(labels)
    if not raw.translate(None, _PLAIN_BYTES) and raw.count(b".") == len(labels) - 1:
        return raw.lower().decode("ascii")  # nothing to escape (the common case)
    return ".".join("".join(_LABEL_CHARS[b] for b in label.lower()) for label in labels)


def _question_end(data: bytes) -> int:
    """End offset of the (single, uncompressed) question, or raise FormatError."""
    pos = 12
    n = len(data)
    total = 0
    while True:
        if pos >= n:
            raise FormatError("question name runs past the end of the message")
        length = data[pos]
        if length == 0:
            pos += 1
            break
        if length > 63:
            raise FormatError("compressed or extended label in the question")
        total += length + 1
        if total > 255:
            raise FormatError("question name longer than 255 bytes")
        pos += length + 1
    if pos + 4 > n:
        raise FormatError("question type/class missing")
    return pos + 4


def header_only(data: bytes, rcode: int) -> bytes:
    """A reply with no sections, for a query whose header is readable (FORMERR, NOTIMP, REFUSED)."""
    qid, flags, _ = struct.unpack_from("!HHH", data)
    opcode_rd = flags & 0x7900  # opcode + RD
    return struct.pack("!HHHHHH", qid, 0x8000 | opcode_rd | (rcode & 0xF), 0, 0, 0, 0)


def _opt_at(data: bytes) -> tuple[int, int] | None:
    """(offset of the type field, end) of the first OPT record in a message's additional section,
    walking every section (names may be compressed); None when there is none or it cannot be walked."""
    try:
        qd, an, ns, ar = struct.unpack_from("!HHHH", data, 4)
        pos = 12
        for _ in range(qd):
            pos = _skip_name(data, pos) + 4
        for i in range(an + ns + ar):
            pos = _skip_name(data, pos)
            rtype, rdlen = struct.unpack_from("!H", data, pos)[0], struct.unpack_from("!H", data, pos + 8)[0]
            end = pos + 10 + rdlen
            if end > len(data):
                return None
            if rtype == QT.OPT and i >= an + ns:
                return pos, end
            pos = end
    except (IndexError, struct.error, FormatError):
        pass
    return None


def _asks_nsid(data: bytes) -> bool:
    """The message's OPT record carries the NSID option (RFC 5001: a request for our identity)."""
    at = _opt_at(data)
    if at is None:
        return False
    pos, end = at[0] + 10, at[1]
    while pos + 4 <= end:
        if (data[pos] << 8) | data[pos + 1] == OPT_NSID:
            return True
        pos += 4 + ((data[pos + 2] << 8) | data[pos + 3])
    return False


def query_opt(data: bytes) -> tuple[int, bool] | None:
    """(payload size, DO bit) of the first OPT record in a message's additional section, or None.

    When the message cannot be walked, a bare OPT record at its very end still counts. Never raises.
    """
    at = _opt_at(data)
    if at is not None:
        pos = at[0]
        return (data[pos + 2] << 8) | data[pos + 3], bool(data[pos + 6] & 0x80)
    n = len(data)
    if n >= 23 and data[10:12] != b"\x00\x00" and data[n - 11 : n - 8] == b"\x00\x00\x29" \
            and data[n - 2 :] == b"\x00\x00":
        return (data[n - 8] << 8) | data[n - 7], bool(data[n - 4] & 0x80)
    return None


def _skip_name(data: bytes, pos: int) -> int:
    while True:
        length = data[pos]
        if length == 0:
            return pos + 1
        if length >= 0xC0:
            return pos + 2
        if length > 63:
            raise FormatError("bad label type")
        pos += length + 1


def iter_rrs(data: bytes, qend: int) -> list[tuple[int, int, int, int, int]]:
    """Every RR after the question: (section, offset of the record, type, offset of its TTL, end).

    section is 0 answer, 1 authority, 2 additional. Raises FormatError on malformed input.
    """
    try:
        _qid, _flags, _qd, an, ns, ar = struct.unpack_from("!HHHHHH", data)
        out = []
        pos = qend
        for section, count in ((0, an), (1, ns), (2, ar)):
            for _ in range(count):
                start = pos
                pos = _skip_name(data, pos)
                rtype, _rclass, _ttl, rdlen = struct.unpack_from("!HHIH", data, pos)
                ttl_off = pos + 4
                pos += 10 + rdlen
                if pos > len(data):
                    raise FormatError("record runs past the end")
                out.append((section, start, rtype, ttl_off, pos))
        return out
    except (IndexError, struct.error):
        raise FormatError("truncated record") from None


def question_end(data: bytes) -> int:
    """End offset of the single question of a message we built or accepted (raises FormatError)."""
    return _question_end(data)


def opt_record(udp_size: int, do: bool, ext_rcode: int = 0) -> bytes:
    """A bare OPT record (root owner, EDNS version 0, no options)."""
    return b"\x00\x00\x29" + struct.pack("!HBBHH", udp_size, ext_rcode & 0xFF, 0, 0x8000 if do else 0, 0)


def question_of(data: bytes) -> tuple[str, int] | None:
    """(name in presentation form with trailing dot, qtype) of a message's single question, or None.

    For logs (the query log): lowercase, RFC 1035 escapes for odd bytes; never raises.
    """
    try:
        if len(data) < 12 or data[4:6] != b"\x00\x01":
            return None
        qend = _question_end(data)
        return name_text(question_labels(data[12:qend])) + ".", (data[qend - 4] << 8) | data[qend - 3]
    except (FormatError, IndexError):
        return None
