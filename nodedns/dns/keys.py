"""The cache key of a query: `fast_key` reads a plain query by hand, `make_key`/`key_*` build and read keys.

`fast_key(data)` reads the header, the one question and an optional OPT record by hand and returns
the cache key of a plain query, or None for anything unusual (which then takes the slow path). Used
when the hit path's raw lookup misses; it allocates the key and nothing else. `key_query(key)` is
the Query of a cache key (what a --workers process sends its index owner); `patch` serves stored
bytes to any spelling of the name by copying the query's ID and question over them.
"""
from __future__ import annotations

from nodedns.dns.wire import (
    KF_AD,
    KF_CD,
    KF_DO,
    KF_EDNS,
    KF_RD,
    OPT_NSID,
    Query,
    _question_end,
    name_text,
    question_labels,
)
from nodedns.errors import FormatError

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
