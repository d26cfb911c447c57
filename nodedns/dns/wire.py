"""DNS wire format: the hand-written fast paths (parse, key, pack) and dnslib for the rest (the only dnslib importer).

Two ways in:
- `fast_key(data)`: reads the header, the one question and an optional OPT record by hand and returns
  the cache key of a plain query, or None for anything unusual (which then takes the slow path).
  Used when the hit path's raw lookup misses; it allocates the key and nothing else.
- `parse_query(data)`: the slow path. A plain query (fast_key's shape) is read by hand into the very
  `Query` dnslib would give; anything else is validated whole by dnslib. Returns a `Query`, or
  raises `FormatError` (header readable: answer FORMERR) / `WireError` (drop it). `key_query(key)`
  is the Query of a cache key (what a --workers process sends its index owner).

One way out: `build_response(...)` packs the records for the lowercase question, so the bytes can be
stored and later served to any spelling of the name by copying the query's ID and question over them
(`patch`). It packs by hand what dnslib would pack, byte for byte (its name compression included),
and leaves names outside the plain alphabet to dnslib. `truncate` cuts a stored answer for a small
UDP client to the whole records that fit (miekg/dns `Msg.Truncate`); `short_reply` answers without
records (FORMERR, NOTIMP, REFUSED, TC=1) with the question and our OPT when the query had one
(docs/wire.md). dnslib is imported on first use: a process that meets only usual queries never loads it.
"""

from __future__ import annotations

import functools
import re
import socket
import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

from nodedns.errors import EncodeError, FormatError, WireError


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

# The cache key is what a plain query looks like from byte 2 on: a canonical header (bytes 2..11)
# followed by the question with the name lowercased. Canonical header: byte 2 = RD only; byte 3 =
# AD|CD; QDCOUNT 1, ANCOUNT 0, NSCOUNT 0, ARCOUNT 1 with EDNS else 0, and with DO the ARCOUNT's high
# byte marked (0x8001: a count no query with one OPT record carries). So the key of a lowercase
# query without EDNS is `data[2:]`, and with a bare OPT record (version 0, no flags, no options)
# `data[2:-11]`: the hit path looks those up with one slice, and on a match the stored question is
# byte for byte the client's (only the ID needs copying). No header flag bit marks anything: the
# header's Z bit is not DO (RFC 3225 section 3), so a query with Z=1 never matches a canonical key
# as it is and takes `fast_key`, which ignores Z. The hit paths take the bare-OPT slice only when
# the ARCOUNT's high byte is 0, so no raw query reaches a DO key.
KEY_HEAD = 10
KEY_DO_MARK = 0x80  # in key byte 8, the ARCOUNT's high byte


def _key_head(kflags: int) -> bytes:
    edns = 1 if kflags & KF_EDNS else 0
    do = KEY_DO_MARK if edns and kflags & KF_DO else 0
    return bytes((kflags & KF_RD, kflags & (KF_CD | KF_AD), 0, 1, 0, 0, 0, 0, do, edns))


_KEY_HEADS = tuple(_key_head(i) for i in range(64))


def make_key(question: bytes, kflags: int) -> bytes:
    """The cache key of a query for `question` (name lowercase + type + class) with these flags."""
    return _KEY_HEADS[kflags & 0x3F] + question


def key_flags(key: bytes) -> int:
    """The kflags a key stands for."""
    kflags = (key[0] & KF_RD) | (key[1] & (KF_CD | KF_AD))
    if key[9]:
        kflags |= KF_EDNS
        if key[8] & KEY_DO_MARK:
            kflags |= KF_DO
    return kflags


def key_question(key: bytes) -> bytes:
    """The question (name lowercase + type + class) a key stands for."""
    return key[KEY_HEAD:]


class RR(NamedTuple):
    """A resource record as the pure layer builds it; names lowercase without trailing dot.

    data by type: A/AAAA -> address text; CNAME/PTR/NS -> target name; TXT -> tuple of strings;
    SRV -> (priority, weight, port, target); SOA -> (mname, rname, serial, refresh, retry, expire,
    minimum); MX -> (preference, exchange).
    """

    name: str
    rtype: int
    ttl: int
    data: Any


# ----------------------------------------------------------------------------------------------
# Fast path


def fast_key(data: bytes) -> tuple[bytes, int, int] | None:
    """(cache key, end of question, client's UDP payload limit) of a plain query, or None.

    Plain means: QR=0, opcode QUERY, exactly one question, no answer or authority records, and no
    additional record other than one well-formed OPT. The key is `make_key(question with the name
    lowercased, kflags)`: see KEY_HEAD.
    """
    n = len(data)
    if n < 17:
        return None
    b2 = data[2]
    # QR=0, opcode=0, and counts qd=1 an=0 ns=0 (ar checked below)
    if b2 & 0xF8 or data[4:10] != b"\x00\x01\x00\x00\x00\x00":
        return None
    pos = 12
    while True:
        length = data[pos]
        if length == 0:
            break
        if length > 63:
            return None  # compression pointer or reserved label type: slow path decides
        pos += length + 1
        if pos >= n:
            return None
    nend = pos + 1
    qend = nend + 4
    if qend > n:
        return None
    flags = (b2 & KF_RD) | (data[3] & (KF_CD | KF_AD))
    ar = data[10:12]
    if ar == b"\x00\x00":
        if qend != n:
            return None
        limit = 512
    elif ar == b"\x00\x01":
        # OPT: root name, type 41, class = UDP size, ttl = ext-rcode/version/flags, rdlen
        if qend + 11 > n or data[qend] != 0 or data[qend + 1 : qend + 3] != b"\x00\x29":
            return None
        if data[qend + 6] != 0:  # EDNS version other than 0: the slow path answers BADVERS
            return None
        rdlen = (data[qend + 9] << 8) | data[qend + 10]
        if qend + 11 + rdlen != n:
            return None
        if rdlen and not _plain_options(data, qend + 11, n):
            return None
        limit = (data[qend + 3] << 8) | data[qend + 4]
        if limit < 512:
            limit = 512
        flags |= KF_EDNS
        if data[qend + 7] & 0x80:
            flags |= KF_DO
    else:
        return None
    return _KEY_HEADS[flags] + data[12:nend].lower() + data[nend:qend], qend, limit


def _plain_options(data: bytes, pos: int, end: int) -> bool:
    """The EDNS options from `pos` to `end` are well-formed and none asks for something we add to
    the answer (NSID: RFC 5001): the stored answer serves them as it is."""
    while pos < end:
        if pos + 4 > end:
            return False
        code = (data[pos] << 8) | data[pos + 1]
        pos += 4 + ((data[pos + 2] << 8) | data[pos + 3])
        if code == OPT_NSID or pos > end:
            return False
    return True


def patch(stored: bytes, query: bytes, qend: int) -> bytes:
    """The stored response with the query's ID and question bytes (the client's 0x20 case)."""
    return query[:2] + stored[2:12] + query[12:qend] + stored[qend:]


# ----------------------------------------------------------------------------------------------
# Slow path


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


def key_query(key: bytes) -> Query:
    """The Query of a plain query with this cache key (ID 0, the name lowercase, no NSID; the client's
    payload size unknown: 512, or 1232 with EDNS): all the index owner needs to build a worker's
    cluster answer, which reads the question, RD, CD, EDNS and DO only. Raises FormatError when the
    key holds no valid question."""
    if len(key) < KEY_HEAD + 5:
        raise FormatError("a key shorter than a question")
    question = key[KEY_HEAD:]
    if _question_end(b"\x00" * 12 + question) != 12 + len(question):
        raise FormatError("a key with more than a question")
    kflags = key_flags(key)
    n = len(question)
    edns = bool(kflags & KF_EDNS)
    return Query(id=0, opcode=0, rd=bool(kflags & KF_RD), cd=bool(kflags & KF_CD), ad=bool(kflags & KF_AD),
                 qname=name_text(question_labels(question)), qtype=(question[n - 4] << 8) | question[n - 3],
                 qclass=(question[n - 2] << 8) | question[n - 1], question=question, edns=edns,
                 do=bool(kflags & KF_DO), udp_size=1232 if edns else 512, edns_version=0, key=key)


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


def parse_query(data: bytes) -> Query:
    """Parse a query for the slow path. FormatError: answer FORMERR; WireError: drop the packet.

    A plain query (`fast_key`'s shape: one question, nothing else but one bare-enough OPT record)
    is read by hand (`_plain_query`, the same Query dnslib's parse would give); anything else is
    validated whole by dnslib."""
    plain = _plain_query(data)
    if plain is not None:
        return plain
    head = read_header(data)
    if head is None:
        raise WireError("shorter than a DNS header")
    qid, flags, qdcount = head
    if flags & 0x8000:
        raise WireError("a response, not a query")
    opcode = (flags >> 11) & 0xF
    if qdcount != 1:
        raise FormatError(f"{qdcount} questions")
    qend = _question_end(data)
    try:
        record = _dnslib().DNSRecord.parse(data)
    except Exception as exc:  # dnslib raises several types, and RecursionError on pointer chains
        raise FormatError(f"unparseable: {exc.__class__.__name__}") from None
    if len(record.questions) != 1:
        raise FormatError("question count mismatch")
    q = record.questions[0]
    # From the raw bytes, not dnslib's text: a label holding a dot must not read as two labels.
    qname = name_text(question_labels(data[12:qend]))
    edns = False
    do = False
    udp_size = 512
    version = 0
    nsid = False
    opts = [rr for rr in record.ar if rr.rtype == QT.OPT]
    if len(opts) > 1:
        raise FormatError("more than one OPT record")
    if opts:
        opt = opts[0]
        if opt.rname.label != ():
            raise FormatError("OPT record not at the root")
        edns = True
        udp_size = max(512, int(opt.rclass))
        version = (opt.ttl >> 16) & 0xFF
        do = bool(opt.ttl & 0x8000)
        nsid = _asks_nsid(data)
    question = data[12:qend]
    nend = qend - 4
    kflags = (data[2] & KF_RD) | (data[3] & (KF_CD | KF_AD))
    if edns:
        kflags |= KF_EDNS
        if do:
            kflags |= KF_DO
    key = _KEY_HEADS[kflags] + data[12:nend].lower() + data[nend:qend]
    return Query(
        id=qid,
        opcode=opcode,
        rd=bool(flags & 0x0100),
        cd=bool(flags & 0x0010),
        ad=bool(flags & 0x0020),
        qname=qname,
        qtype=q.qtype,
        qclass=q.qclass,
        question=question,
        edns=edns,
        do=do,
        udp_size=udp_size,
        edns_version=version,
        key=key,
        nsid=nsid,
    )


def _plain_query(data: bytes) -> Query | None:
    """The Query of a plain query (see `fast_key`) without dnslib, or None: parse it whole. Nothing
    in such a message is left for dnslib to reject once the name is at most 255 bytes on the wire
    (`_question_end`) and its OPT record (if any) is version 0 with well-formed options and no NSID."""
    fk = fast_key(data)
    if fk is None:
        return None
    key, qend, limit = fk
    if qend - 17 > 255:  # labels longer than `_question_end` allows: FORMERR, from the full parse
        return None
    flags = (data[2] << 8) | data[3]
    edns = data[11] == 1
    return Query(
        id=(data[0] << 8) | data[1],
        opcode=0,
        rd=bool(flags & 0x0100),
        cd=bool(flags & 0x0010),
        ad=bool(flags & 0x0020),
        qname=name_text(question_labels(data[12:qend])),
        qtype=(data[qend - 4] << 8) | data[qend - 3],
        qclass=(data[qend - 2] << 8) | data[qend - 1],
        question=data[12:qend],
        edns=edns,
        do=edns and bool(data[qend + 7] & 0x80),
        udp_size=limit if edns else 512,
        edns_version=0,
        key=key,
        nsid=False,
    )


def header_only(data: bytes, rcode: int) -> bytes:
    """A reply with no sections, for a query whose header is readable (FORMERR, NOTIMP, REFUSED)."""
    qid, flags, _ = struct.unpack_from("!HHH", data)
    opcode_rd = flags & 0x7900  # opcode + RD
    return struct.pack("!HHHHHH", qid, 0x8000 | opcode_rd | (rcode & 0xF), 0, 0, 0, 0)


def short_reply(data: bytes, rcode: int, *, tc: bool = False, udp_size: int = 1232) -> bytes | None:
    """A reply without records, cheap (no dnslib): FORMERR, NOTIMP, refused clients, rate-limited ones (TC=1).

    The query's ID, opcode, RD and CD, our rcode (and TC); its one question echoed when it can be
    read (an UPDATE's first section is its zone, echoed only when it is the SOA it must be, else
    header only); and our bare OPT (its DO bit echoed) when the query carried an OPT record: RFC 6891
    section 7, FORMERR included. None for what must get no reply: no header, or a response.
    """
    if len(data) < 12 or data[2] & 0x80:
        return None
    flags = 0x8000 | ((data[2] << 8) & 0x7900) | (data[3] & 0x10) | (0x0200 if tc else 0) | (rcode & 0xF)
    qend = 0
    if data[4:6] == b"\x00\x01":
        try:
            qend = _question_end(data)
        except FormatError:
            qend = 0
        if qend and (data[2] >> 3) & 0xF == OPCODE_UPDATE and data[qend - 4 : qend - 2] != b"\x00\x06":
            qend = 0
    found = query_opt(data)
    opt = opt_record(udp_size, found[1]) if found is not None else b""
    if not qend:
        return data[:2] + struct.pack("!HHHHH", flags, 0, 0, 0, 1 if opt else 0) + opt
    return data[:2] + struct.pack("!HHHHH", flags, 1, 0, 0, 1 if opt else 0) + data[12:qend] + opt


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


def _rdata(rr: RR) -> Any:
    d_ = _dnslib()
    t = rr.rtype
    d = rr.data
    if t == QT.A:
        return d_.A(d)
    if t == QT.AAAA:
        return d_.AAAA(d)
    if t == QT.CNAME:
        return d_.CNAME(d + ".")
    if t == QT.PTR:
        return d_.PTR(d + ".")
    if t == QT.NS:
        return d_.NS(d + ".")
    if t == QT.SRV:
        prio, weight, port, target = d
        return d_.SRV(prio, weight, port, target + ".")
    if t == QT.TXT:
        return d_.TXT([s.encode() for s in d])
    if t == QT.SOA:
        mname, rname, serial, refresh, retry, expire, minimum = d
        return d_.SOA(mname + ".", rname + ".", (serial, refresh, retry, expire, minimum))
    if t == QT.MX:
        pref, exchange = d
        return d_.MX(exchange + ".", pref)
    raise ValueError(f"cannot encode record type {t}")


def _dnslib_rr(rr: RR, rclass: int = CLASS_IN) -> Any:
    d_ = _dnslib()
    return d_.RR(d_.DNSLabel(rr.name + "." if rr.name else "."), rr.rtype, rclass, rr.ttl, _rdata(rr))


def _opt_rr(udp_size: int, do: bool, ext_rcode: int = 0) -> Any:
    return _dnslib().EDNS0(udp_len=udp_size, flags="do" if do else "", ext_rcode=ext_rcode & 0xFF)


# -- the builder without dnslib ------------------------------------------------------------------
# `build_response` packs by hand what dnslib would pack, byte for byte (tests/unit/dns/test_wire.py compares
# both over generated answers): dnslib's name compression (every suffix of every name written is
# remembered at its offset; a later name whose suffix was seen ends in a pointer there; SRV targets
# are never compressed), its header and its OPT record. dnslib's own pass costs ~60 us a response,
# this one ~8; names outside the plain alphabet below (escapes, IDNA) are left to dnslib.

_PLAIN_NAME = re.compile(r"(?:[a-z0-9_*-]{1,63}\.)*[a-z0-9_*-]{1,63}")


class _NotPlain(Exception):
    """A name or record the hand packer leaves to dnslib."""


@functools.lru_cache(maxsize=256)
def _name_labels(name: str) -> tuple[bytes, ...]:
    """The labels of a lowercase name as dnslib reads its text (no escapes: raise _NotPlain)."""
    if not name:
        return ()
    if len(name) > 253 or _PLAIN_NAME.fullmatch(name) is None:
        raise _NotPlain(name)
    return tuple(name.encode("ascii").split(b"."))


def _put_name(buf: bytearray, names: dict[tuple[bytes, ...], int], labels: tuple[bytes, ...]) -> None:
    """dnslib's DNSBuffer.encode_name: compress against every suffix written so far."""
    for i in range(len(labels)):
        suffix = labels[i:]
        at = names.get(suffix)
        if at is not None:
            buf += ((at & 0x3FFF) | 0xC000).to_bytes(2, "big")
            return
        names[suffix] = len(buf)
        label = labels[i]
        buf.append(len(label))
        buf += label
    buf.append(0)


_RR_HEAD = struct.Struct("!HHIH")


def _put_rr(buf: bytearray, names: dict[tuple[bytes, ...], int], rr: RR, rclass: int) -> None:
    _put_name(buf, names, _name_labels(rr.name))
    t = rr.rtype
    d = rr.data
    at = len(buf)
    buf += _RR_HEAD.pack(t, rclass, rr.ttl, 0)
    start = len(buf)
    if t == QT.A:
        buf += bytes(int(x) for x in d.split("."))
        if len(buf) - start != 4:
            raise _NotPlain(d)
    elif t == QT.AAAA:
        try:
            buf += socket.inet_pton(socket.AF_INET6, d)
        except OSError:
            raise _NotPlain(d) from None
    elif t in (QT.CNAME, QT.PTR, QT.NS):
        _put_name(buf, names, _name_labels(d))
    elif t == QT.SRV:
        prio, weight, port, target = d
        buf += struct.pack("!HHH", prio, weight, port)
        buf += b"".join(bytes((len(label),)) + label for label in _name_labels(target)) + b"\x00"
    elif t == QT.SOA:
        mname, rname, serial, refresh, retry, expire, minimum = d
        _put_name(buf, names, _name_labels(mname))
        _put_name(buf, names, _name_labels(rname))
        buf += struct.pack("!IIIII", serial, refresh, retry, expire, minimum)
    elif t == QT.TXT:
        for text in d:
            raw = text.encode()
            if len(raw) > 255:
                raise _NotPlain(text)
            buf.append(len(raw))
            buf += raw
    elif t == QT.MX:
        pref, exchange = d
        buf += struct.pack("!H", pref)
        _put_name(buf, names, _name_labels(exchange))
    else:
        raise _NotPlain(str(t))
    struct.pack_into("!H", buf, at + 8, len(buf) - start)


def _pack(query: Query, rcode: int, aa: bool, ra: bool, sections: tuple[Sequence[RR], Sequence[RR], Sequence[RR]],
          max_udp_size: int, rclass: int) -> bytes | None:
    """`build_response`'s bytes packed by hand, or None: leave it to dnslib (an unusual name)."""
    answer, authority, additional = sections
    flags = 0x8000 | (query.opcode & 0xF) << 11 | (0x0400 if aa else 0) | (0x0100 if query.rd else 0) \
        | (0x0080 if ra else 0) | (0x0010 if query.cd else 0) | (rcode & 0xF)
    buf = bytearray(struct.pack("!HHHHHH", 0, flags, 1, len(answer), len(authority),
                                len(additional) + (1 if query.edns else 0)))
    names: dict[tuple[bytes, ...], int] = {}
    labels = tuple(label.lower() for label in question_labels(query.question))
    if len(labels) and sum(len(label) + 1 for label in labels) - 1 > 253:
        return None  # dnslib's error, from dnslib
    try:
        for label in labels:
            if len(label) > 63:
                return None
        _put_name(buf, names, labels)
        buf += struct.pack("!HH", query.qtype, query.qclass)
        for section in sections:
            for rr in section:
                _put_rr(buf, names, rr, rclass)
    except (_NotPlain, ValueError, struct.error):
        return None
    if query.edns:
        buf += opt_record(max_udp_size, query.do, rcode >> 4)
    return bytes(buf)


def build_response(
    query: Query,
    *,
    rcode: int,
    aa: bool,
    ra: bool,
    answer: list[RR] | tuple[RR, ...] = (),
    authority: list[RR] | tuple[RR, ...] = (),
    additional: list[RR] | tuple[RR, ...] = (),
    max_udp_size: int = 1232,
    rclass: int = CLASS_IN,
) -> bytes:
    """Pack a response for `query` with ID 0 and the question lowercased (a storable template).

    Serve it with `patch(wire, query_bytes, qend)` to copy the query's ID and question case in.
    The OPT record is added when the query had one: our payload size, the DO bit echoed. Records
    are of class `rclass` (CH for the server identity answers). Raises EncodeError when a record
    holds a name the wire cannot carry (a label over 63 octets, an empty label, over 255 octets).
    """
    packed = _pack(query, rcode, aa, ra, (answer, authority, additional), max_udp_size, rclass)
    if packed is not None:
        return packed
    try:
        return _dnslib_response(query, rcode, aa, ra, (answer, authority, additional), max_udp_size, rclass)
    except EncodeError:
        raise
    except Exception as exc:  # dnslib's DNSLabelError, the IDNA codec's UnicodeError, struct.error, ...
        raise EncodeError(f"cannot encode the answer: {exc.__class__.__name__}: {exc}") from None


def _dnslib_response(query: Query, rcode: int, aa: bool, ra: bool,
                     sections: tuple[Sequence[RR], Sequence[RR], Sequence[RR]], max_udp_size: int,
                     rclass: int) -> bytes:
    """`build_response` by dnslib: names outside the hand packer's alphabet (escapes, IDNA)."""
    answer, authority, additional = sections
    d_ = _dnslib()
    header = d_.DNSHeader(
        id=0, qr=1, opcode=query.opcode, aa=int(aa), rd=int(query.rd), ra=int(ra), rcode=rcode & 0xF
    )
    if query.cd:
        header.cd = 1
    # The question from the query's own labels (lowercased): re-encoding the text would fail on
    # bytes IDNA rejects and could change the question's length, which `patch` relies on.
    labels = tuple(label.lower() for label in question_labels(query.question))
    record = d_.DNSRecord(header, q=d_.DNSQuestion(d_.DNSLabel(labels), query.qtype, query.qclass))
    for rr in answer:
        record.add_answer(_dnslib_rr(rr, rclass))
    for rr in authority:
        record.add_auth(_dnslib_rr(rr, rclass))
    for rr in additional:
        record.add_ar(_dnslib_rr(rr, rclass))
    if query.edns:
        record.add_ar(_opt_rr(max_udp_size, query.do, rcode >> 4))
    return bytes(record.pack())


def add_option(response: bytes, code: int, payload: bytes) -> bytes:
    """The response with one EDNS option appended to its OPT record when that is its last record
    (as in every response nodedns builds and stores); else the response unchanged."""
    try:
        rrs = iter_rrs(response, _question_end(response))
    except FormatError:
        return response
    if not rrs or rrs[-1][0] != 2 or rrs[-1][2] != QT.OPT or rrs[-1][4] != len(response):
        return response
    _section, _start, _rtype, ttl_off, end = rrs[-1]
    rdlen = end - ttl_off - 6 + 4 + len(payload)
    if len(payload) > 0xFFFF or rdlen > 0xFFFF:
        return response
    return (response[: ttl_off + 4] + struct.pack("!H", rdlen) + response[ttl_off + 6 : end]
            + struct.pack("!HH", code, len(payload)) + payload)


def opt_last(response: bytes) -> bytes:
    """The response with its OPT record moved to the end of the additional section, re-packed by
    dnslib (RFC 6891 section 6.1.1 lets the OPT sit anywhere there; a prefix of a message that ends
    with it can then be cut for truncation and its OPT replaced). Raises FormatError."""
    try:
        record = _dnslib().DNSRecord.parse(response)
        opts = [rr for rr in record.ar if rr.rtype == QT.OPT]
        record.ar = [rr for rr in record.ar if rr.rtype != QT.OPT] + opts
        return bytes(record.pack())
    except Exception as exc:  # dnslib raises several types
        raise FormatError(f"unparseable: {exc.__class__.__name__}") from None


def truncate(response: bytes, qend: int, limit: int) -> bytes:
    """The response cut to fit `limit` bytes the way miekg/dns `Msg.Truncate` (CoreDNS) cuts it.

    As many whole records as fit, in order: the answer section first, then authority, then
    additional; the first record that does not fit ends the message (nothing after it is kept, in
    any section). The OPT record is kept (it was counted off the budget first) and stays last. TC=1
    is set when any record was left out. A limit below 512 counts as 512. Records are kept as they
    are: a prefix of a message is still a valid message (compression pointers only point back).
    A response that cannot be walked is cut to header + question with TC=1.
    """
    limit = max(limit, 512)
    if len(response) <= limit:
        return response
    qid, flags = struct.unpack_from("!HH", response)
    try:
        rrs = iter_rrs(response, qend)
    except FormatError:
        return struct.pack("!HHHHHH", qid, flags | 0x0200, 1, 0, 0, 0) + response[12:qend]
    opt = b""
    for section, start, rtype, _ttl, end in rrs:
        if section == 2 and rtype == QT.OPT:
            opt = response[start:end]
            break
    budget = limit - len(opt)
    cut = qend
    counts = [0, 0, 0]
    for section, start, rtype, _ttl, end in rrs:
        if section == 2 and rtype == QT.OPT:
            break  # records after an OPT in the middle would move: the OPT ends what is kept
        if start != cut or end > budget:
            break
        cut = end
        counts[section] += 1
    kept = counts[0] + counts[1] + counts[2]
    tc = 0x0200 if kept < len(rrs) - (1 if opt else 0) else 0
    head = struct.pack("!HHHHHH", qid, flags | tc, 1, counts[0], counts[1], counts[2] + (1 if opt else 0))
    return head + response[12:cut] + opt


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


def describe(data: bytes) -> dict[str, Any]:
    """A JSON-able view of a message (for the lookup explainer and logs); never raises."""
    try:
        record = _dnslib().DNSRecord.parse(data)
    except Exception as exc:
        return {"error": f"unparseable: {exc.__class__.__name__}"}
    h = record.header

    def rrs(section: Any) -> list[dict[str, Any]]:
        return [
            {"name": str(rr.rname), "type": QT.name(rr.rtype), "ttl": rr.ttl, "data": str(rr.rdata)}
            for rr in section
            if rr.rtype != QT.OPT
        ]

    return {
        "rcode": RCODE.name(h.rcode),
        "flags": [f for f in ("aa", "tc", "rd", "ra") if getattr(h, f)],
        "answer": rrs(record.rr),
        "authority": rrs(record.auth),
        "additional": rrs(record.ar),
    }


# ----------------------------------------------------------------------------------------------
# Forwarding: the query we send upstream, and the checks its answer must pass


def build_query(question: bytes, qid: int, kflags: int, udp_size: int) -> bytes:
    """A query for `question` (name + type + class, as in a cache key) with the flags of a key byte.

    RD, CD and AD are copied from `kflags`; with KF_EDNS an OPT record offers `udp_size` and
    carries the DO bit.
    """
    b2 = kflags & KF_RD
    b3 = kflags & (KF_CD | KF_AD)
    edns = kflags & KF_EDNS
    head = struct.pack("!HBBHHHH", qid, b2, b3, 1, 0, 0, 1 if edns else 0)
    if not edns:
        return head + question
    return head + question + opt_record(udp_size, bool(kflags & KF_DO))


def opt_record(udp_size: int, do: bool, ext_rcode: int = 0) -> bytes:
    """A bare OPT record (root owner, EDNS version 0, no options)."""
    return b"\x00\x00\x29" + struct.pack("!HBBHH", udp_size, ext_rcode & 0xFF, 0, 0x8000 if do else 0, 0)


def answers_query(response: bytes, qid: int, question: bytes) -> bool:
    """The response is a reply (QR=1) with our ID and our one question (name compared case-insensitively)."""
    n = len(question)
    if len(response) < 12 + n or response[2] & 0x80 == 0:
        return False
    if response[0] != qid >> 8 or response[1] != qid & 0xFF or response[4:6] != b"\x00\x01":
        return False
    got = response[12 : 12 + n]
    return got[-4:] == question[-4:] and got[:-4].lower() == question[:-4].lower()


def encode_name(name: str) -> bytes:
    """A lowercase name (no trailing dot) in uncompressed wire form. Raises ValueError if it cannot be."""
    out = bytearray()
    for label in name.split(".") if name else ():
        raw = label.encode("ascii")
        if not 0 < len(raw) <= 63:
            raise ValueError(f"bad label in {name!r}")
        out.append(len(raw))
        out += raw
    out.append(0)
    if len(out) > 255:
        raise ValueError(f"name too long: {name!r}")
    return bytes(out)


def build_chased(
    query: Query, *, chain: list[RR] | tuple[RR, ...], target: bytes, ra: bool, max_udp_size: int = 1232
) -> bytes:
    """`query`'s CNAME `chain` followed by the records of `target` (a response for the chain's end).

    The rcode, authority and additional records are the target's: the end of the chain decides.
    Like `build_response`, the result is a template (ID 0, lowercase question).
    """
    d_ = _dnslib()
    got = d_.DNSRecord.parse(target)
    th = got.header
    header = d_.DNSHeader(id=0, qr=1, opcode=query.opcode, aa=0, rd=int(query.rd), ra=int(ra), rcode=th.rcode)
    if query.cd:
        header.cd = 1
    record = d_.DNSRecord(header, q=d_.DNSQuestion(d_.DNSLabel(query.qname + "." if query.qname else "."),
                                             query.qtype, query.qclass))
    for rr in chain:
        record.add_answer(_dnslib_rr(rr))
    for rr in got.rr:
        record.add_answer(rr)
    for rr in got.auth:
        record.add_auth(rr)
    for rr in got.ar:
        if rr.rtype != QT.OPT:
            record.add_ar(rr)
    if query.edns:
        record.add_ar(_opt_rr(max_udp_size, query.do))
    return bytes(record.pack())


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


def make_query(name: str, qtype: int, *, rd: bool = True, udp_size: int = 1232, qid: int = 0) -> bytes:
    """A query for `name` (dotted, trailing dot optional) with one EDNS OPT record, for the explainer.

    Raises ValueError for a name that is not a valid DNS name (empty label, label > 63, > 255 bytes).
    """
    text = name.strip()
    if text in ("", "."):
        labels: list[bytes] = []
    else:
        try:
            labels = [p.encode("ascii") for p in text.rstrip(".").split(".")]
        except UnicodeEncodeError:
            raise ValueError(f"{name!r} is not an ASCII DNS name (use the IDNA form)") from None
    for label in labels:
        if not label:
            raise ValueError(f"{name!r} has an empty label")
        if len(label) > 63:
            raise ValueError(f"{name!r} has a label longer than 63 bytes")
    qname = b"".join(bytes((len(p),)) + p for p in labels) + b"\x00"
    if len(qname) > 255:
        raise ValueError(f"{name!r} is longer than 255 bytes")
    if not 0 <= qtype < 65536:
        raise ValueError(f"type {qtype} out of range")
    header = struct.pack("!HHHHHH", qid, 0x0100 if rd else 0, 1, 0, 0, 1)
    opt = b"\x00\x00\x29" + struct.pack("!HIH", udp_size, 0, 0)
    return header + qname + struct.pack("!HH", qtype, CLASS_IN) + opt
