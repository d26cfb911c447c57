"""A stored answer fitted to its client: `truncate` to the whole records that fit, options added or moved last.

`truncate` cuts a stored answer for a small UDP client to the whole records that fit (miekg/dns
`Msg.Truncate`); `add_option` adds an EDNS option (NSID) to our OPT record; `opt_last` moves the OPT
record to the end of the additional section.
"""
from __future__ import annotations

import struct

from nodedns.dns.wire import QT, _dnslib, _question_end, iter_rrs
from nodedns.errors import FormatError


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
