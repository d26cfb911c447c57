"""Cache keys: a plain lowercase query is its own key from byte 2 on, so the hit path needs no parsing."""

from __future__ import annotations

import dns.edns
import dns.flags
import dns.message
import pytest

from nodedns.dns.keys import fast_key, key_flags, key_question, make_key
from nodedns.dns.wire import KF_DO, KF_EDNS, KF_RD


def wire(name: str, *, edns: int = -1, do: bool = False, options: list[dns.edns.Option] | None = None,
         rd: bool = True) -> bytes:
    q = dns.message.make_query(name, "A", use_edns=edns, want_dnssec=do, options=options)
    if not rd:
        q.flags &= ~dns.flags.RD
    return q.to_wire()


@pytest.mark.parametrize(
    ("data", "raw"),
    [
        (wire("www.example.com"), lambda d: d[2:]),
        (wire("www.example.com", rd=False), lambda d: d[2:]),
        (wire("www.example.com", edns=0), lambda d: d[2:-11]),
    ],
    ids=["plain", "no-recursion", "bare-edns"],
)
def test_a_lowercase_query_is_its_own_key(data: bytes, raw: object) -> None:
    fk = fast_key(data)
    assert fk is not None
    assert fk[0] == raw(data)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("data", "flags"),
    [
        (wire("WWW.Example.com"), KF_RD),
        (wire("www.example.com", edns=0, do=True), KF_RD | KF_EDNS | KF_DO),
        (wire("www.example.com", edns=0, options=[dns.edns.GenericOption(10, b"12345678")]), KF_RD | KF_EDNS),
    ],
    ids=["mixed-case", "dnssec-ok", "edns-options"],
)
def test_other_queries_get_the_canonical_key_of_the_same_question(data: bytes, flags: int) -> None:
    fk = fast_key(data)
    assert fk is not None
    key = fk[0]
    assert key != data[2:] and key != data[2:-11]
    assert key_flags(key) == flags
    assert key_question(key) == b"\x03www\x07example\x03com\x00\x00\x01\x00\x01"


VALID_FLAGS = [f for f in range(64) if not f & 0x08 and not (f & KF_DO and not f & KF_EDNS)]


@pytest.mark.parametrize("kflags", VALID_FLAGS, ids=lambda f: f"flags-{f:02x}")
def test_key_flags_round_trip(kflags: int) -> None:
    assert key_flags(make_key(b"\x00\x00\x01\x00\x01", kflags)) == kflags
