"""A client's query parsed (`parse_query`) and the answers without records (`short_reply`).

`parse_query(data)` is the slow path: a plain query (fast_key's shape) is read by hand into the very
`Query` dnslib would give; anything else is validated whole by dnslib. Returns a `Query`, or raises
`FormatError` (header readable: answer FORMERR) / `WireError` (drop it). `short_reply` answers
without records (FORMERR, NOTIMP, REFUSED, TC=1) with the question and our OPT when the query had
one (docs/wire.md).
"""
from __future__ import annotations

import struct

from nodedns.dns.keys import _KEY_HEADS, fast_key
from nodedns.dns.wire import (
    KF_AD,
    KF_CD,
    KF_DO,
    KF_EDNS,
    KF_RD,
    OPCODE_UPDATE,
    QT,
    Query,
    _asks_nsid,
    _dnslib,
    _question_end,
    name_text,
    opt_record,
    query_opt,
    question_labels,
    read_header,
)
from nodedns.errors import FormatError, WireError


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


def plain_tc_reply(data: bytes, qend: int, udp_size: int) -> bytes:
    """`short_reply(data, NOERROR, tc=True, udp_size=udp_size)` for a plain query (`fast_key` took it; its
    question ends at `qend`), without walking the message again: what a UDP query over a budget gets, at the
    rate a spray sends them."""
    flags = 0x8200 | ((data[2] << 8) & 0x7900) | (data[3] & 0x10)
    if data[11]:  # its one OPT record, right after the question (fast_key's plain query)
        return (data[:2] + _SHORT_HEAD.pack(flags, 1, 0, 0, 1) + data[12:qend]
                + opt_record(udp_size, bool(data[qend + 7] & 0x80)))
    return data[:2] + _SHORT_HEAD.pack(flags, 1, 0, 0, 0) + data[12:qend]


_SHORT_HEAD = struct.Struct("!HHHHH")


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
