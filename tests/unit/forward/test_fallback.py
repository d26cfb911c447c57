"""--fallback-upstream (nodedns.forward.fallback): what it takes from the upstream and what it refuses.

A raw upstream double (tests/support/raw_upstream.py) sends the exact datagrams each test scripts: a spoof
with our query ID but another question, a reply with another ID, a truncated reply, before or
instead of the genuine answer. The bytes Fallback hands back are what the client gets on the wire.
"""

from __future__ import annotations

import asyncio

import dns.flags
import dns.message
import dns.rrset
import pytest

from nodedns.errors import UpstreamError
from nodedns.forward.fallback import Fallback
from tests.support.helpers import rrset_values
from tests.support.raw_upstream import RawUpstream, Verbatim

NAME = "missing.default.svc.cluster.local"


def client_query(name: str = NAME, qid: int = 0x1234) -> bytes:
    msg = dns.message.make_query(name, "A", use_edns=0)
    msg.id = qid
    return bytes(msg.to_wire())


def reply_to(query: bytes, address: str, *, name: str | None = None, tc: bool = False, qid: int | None = None) -> bytes:
    """A reply to `query` (for `name` instead of its question when given) holding one A record."""
    q = dns.message.from_wire(query)
    if name is not None:
        q = dns.message.make_query(name, "A", use_edns=0)
    r = dns.message.make_response(q)
    r.answer.append(dns.rrset.from_text(q.question[0].name, 30, "IN", "A", address))
    if tc:
        r.flags |= dns.flags.TC
        r.answer.clear()
    out = bytes(r.to_wire())
    if qid is not None:  # RawUpstream copies the query's ID into what it sends, unless Verbatim
        return Verbatim(qid.to_bytes(2, "big") + out[2:])
    return out


def ask(upstream: RawUpstream, query: bytes, timeout: float = 2.0) -> bytes:
    return asyncio.run(Fallback(("127.0.0.1", upstream.port), timeout=timeout)(query))


def test_a_reply_with_our_id_but_another_question_is_ignored_and_the_genuine_one_taken() -> None:
    def reply(query: bytes, transport: str) -> list[bytes]:
        return [reply_to(query, "6.6.6.6", name="evil.example"), reply_to(query, "192.0.2.1")]

    with RawUpstream(reply) as up:
        got = dns.message.from_wire(ask(up, client_query()))
    assert got.id == 0x1234 and got.question[0].name.to_text() == NAME + "."
    assert rrset_values(got) == ["192.0.2.1"]


def test_a_reply_of_another_id_is_ignored() -> None:
    def reply(query: bytes, transport: str) -> list[bytes]:
        return [reply_to(query, "6.6.6.6", qid=(int.from_bytes(query[:2], "big") + 1) & 0xFFFF),
                reply_to(query, "192.0.2.1")]

    with RawUpstream(reply) as up:
        got = dns.message.from_wire(ask(up, client_query()))
    assert rrset_values(got) == ["192.0.2.1"] and got.id == 0x1234


def test_only_spoofs_over_udp_end_in_an_upstream_error_at_the_deadline() -> None:
    def reply(query: bytes, transport: str) -> list[bytes]:
        return [reply_to(query, "6.6.6.6", name="evil.example")]

    with RawUpstream(reply) as up, pytest.raises(UpstreamError, match="no answer within 0.5s"):
        ask(up, client_query(), timeout=0.5)


def test_a_tcp_reply_to_another_question_after_a_truncated_one_is_refused() -> None:
    def reply(query: bytes, transport: str) -> bytes:
        if transport == "udp":
            return reply_to(query, "192.0.2.1", tc=True)
        return reply_to(query, "6.6.6.6", name="evil.example")

    with RawUpstream(reply) as up, pytest.raises(UpstreamError, match="TCP answer does not match the query"):
        ask(up, client_query())
    assert [t for _, t in up.queries] == ["udp", "tcp"]


def test_the_question_echoed_in_another_case_is_ours_and_the_client_keeps_its_id_and_case() -> None:
    def reply(query: bytes, transport: str) -> bytes:
        return reply_to(query, "192.0.2.1", name=NAME.upper())

    query = client_query("MiSsInG.default.svc.cluster.local", qid=0xBEEF)
    with RawUpstream(reply) as up:
        raw = ask(up, query)
    assert raw[:2] == b"\xbe\xef" and up.queries[0][0][:2] != b"\xbe\xef"  # a random ID upstream, the client's back
    assert rrset_values(dns.message.from_wire(raw)) == ["192.0.2.1"]
