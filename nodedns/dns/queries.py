"""The queries nodedns sends: to an upstream from a cache key's question (`build_query`), and by name.

`answers_query` checks that an upstream's response matches the query sent (ID and question);
`make_query` builds a query for a name and type (the explainer, the shadow and the tests).
"""
from __future__ import annotations

import struct

from nodedns.dns.wire import CLASS_IN, KF_AD, KF_CD, KF_DO, KF_EDNS, KF_RD, opt_record


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


def answers_query(response: bytes, qid: int, question: bytes) -> bool:
    """The response is a reply (QR=1) with our ID and our one question (name compared case-insensitively)."""
    n = len(question)
    if len(response) < 12 + n or response[2] & 0x80 == 0:
        return False
    if response[0] != qid >> 8 or response[1] != qid & 0xFF or response[4:6] != b"\x00\x01":
        return False
    got = response[12 : 12 + n]
    return got[-4:] == question[-4:] and got[:-4].lower() == question[:-4].lower()


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
