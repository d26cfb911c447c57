"""Answers packed: `build_response` writes the records for the lowercase question, by hand where it can.

The bytes can be stored and later served to any spelling of the name (`dns.keys.patch`). It packs
by hand what dnslib would pack, byte for byte (its name compression included), and leaves names
outside the plain alphabet to dnslib. `build_chased` packs an answer whose CNAME chain was followed;
`encode_name` is a name in wire form.
"""
from __future__ import annotations

import functools
import re
import socket
import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

from nodedns.dns.wire import CLASS_IN, QT, Query, _dnslib, opt_record, question_labels
from nodedns.errors import EncodeError


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
