"""The queries nodedns sends upstream (build_query) and the check that a datagram answers one (answers_query)."""

from __future__ import annotations

import dns.flags
import dns.message
import dns.rdatatype
import pytest

from nodedns.dns.queries import answers_query, build_query
from nodedns.dns.wire import KF_AD, KF_CD, KF_DO, KF_EDNS, KF_RD

QUESTION = b"\x03www\x07example\x03com\x00" + b"\x00\x01\x00\x01"  # www.example.com A IN, as in a cache key


def sent(kflags: int, udp_size: int = 1232) -> dns.message.Message:
    return dns.message.from_wire(build_query(QUESTION, 0x4242, kflags, udp_size))


@pytest.mark.parametrize(("kflags", "flags"), [
    (0, set()),
    (KF_RD, {"RD"}),
    (KF_RD | KF_CD, {"RD", "CD"}),
    (KF_AD, {"AD"}),
    (KF_RD | KF_CD | KF_AD, {"RD", "CD", "AD"}),
])
def test_the_query_upstream_carries_the_clients_rd_cd_and_ad(kflags: int, flags: set[str]) -> None:
    q = sent(kflags)
    assert set(dns.flags.to_text(q.flags).split()) - {""} == flags
    assert q.id == 0x4242 and q.question[0].name.to_text() == "www.example.com."
    assert q.question[0].rdtype == dns.rdatatype.A and q.edns == -1  # no OPT without KF_EDNS


def test_an_edns_query_offers_the_udp_size_and_carries_do_only_when_the_client_set_it() -> None:
    plain = sent(KF_RD | KF_EDNS, udp_size=1400)
    assert plain.edns == 0 and plain.payload == 1400 and not plain.ednsflags & dns.flags.DO
    signed = sent(KF_RD | KF_EDNS | KF_DO, udp_size=1232)
    assert signed.edns == 0 and signed.payload == 1232 and signed.ednsflags & dns.flags.DO
    assert sent(KF_RD | KF_DO).edns == -1  # DO without EDNS is no OPT at all


def reply_to(query: bytes, *, qid: int | None = None, qr: bool = True, name: str | None = None) -> bytes:
    q = dns.message.from_wire(query)
    r = dns.message.make_response(q)
    if qid is not None:
        r.id = qid
    if not qr:
        r.flags &= ~dns.flags.QR
    if name is not None:
        r.question[0].name = dns.name.from_text(name)
    return r.to_wire()


def test_a_reply_with_our_id_and_question_answers_the_query_in_any_letter_case() -> None:
    query = build_query(QUESTION, 0x1234, KF_RD, 1232)
    assert answers_query(reply_to(query), 0x1234, QUESTION)
    assert answers_query(reply_to(query, name="WwW.ExAmPlE.cOm."), 0x1234, QUESTION)


def test_a_datagram_that_is_not_a_reply_to_the_query_is_refused() -> None:
    query = build_query(QUESTION, 0x1234, KF_RD, 1232)
    assert not answers_query(query, 0x1234, QUESTION)  # our own query reflected back: QR=0
    assert not answers_query(reply_to(query, qr=False), 0x1234, QUESTION)
    assert not answers_query(reply_to(query, qid=0x1235), 0x1234, QUESTION)
    assert not answers_query(reply_to(query, qid=0x3412), 0x1234, QUESTION)  # bytes of the ID swapped
    assert not answers_query(reply_to(query, name="www.example.org."), 0x1234, QUESTION)
    assert not answers_query(reply_to(query)[:20], 0x1234, QUESTION)  # cut inside the question
    aaaa = QUESTION[:-4] + b"\x00\x1c\x00\x01"
    assert not answers_query(reply_to(build_query(aaaa, 0x1234, KF_RD, 1232)), 0x1234, QUESTION)  # another type
