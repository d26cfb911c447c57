"""The wire layer: the hand-written fast path agrees with the dnslib slow path, and what we build parses.

dnspython is the independent oracle: every message we build must parse with it, and names we
read must be the names dnspython reads from the same bytes.
"""

from __future__ import annotations

import contextlib
import ipaddress
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from unittest import mock

import dns.flags
import dns.message
import dns.name
import dns.rcode
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords, ZoneSettings
from nodedns.dns import message, pack
from nodedns.dns.keys import fast_key, key_query, patch
from nodedns.dns.message import parse_query
from nodedns.dns.pack import RR, build_response
from nodedns.dns.truncate import truncate
from nodedns.dns.wire import QT, RCODE
from nodedns.errors import FormatError, WireError
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.resolver import Resolver
from tests.support import cluster_fixture as fx
from tests.support.wiring import resolver_of, watched

# ----------------------------------------------------------------------------------------------
# Query construction by hand (so every byte is under the test's control)

LDH = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"


def encode_name(labels: list[bytes]) -> bytes:
    return b"".join(bytes([len(label)]) + label for label in labels) + b"\x00"


def opt_record(payload: int, *, do: bool = False, version: int = 0, options: bytes = b"", ext_rcode: int = 0) -> bytes:
    return b"\x00" + struct.pack("!HHBBHH", QT.OPT, payload, ext_rcode, version, 0x8000 if do else 0,
                                 len(options)) + options


def edns_options(pairs: list[tuple[int, bytes]]) -> bytes:
    return b"".join(struct.pack("!HH", code, len(data)) + data for code, data in pairs)


def make_query(labels: list[bytes], qtype: int = QT.A, *, qid: int = 0x1234, flags: int = 0x0100,
               qclass: int = 1, opt: bytes | None = None) -> bytes:
    head = struct.pack("!HHHHHH", qid, flags, 1, 0, 0, 1 if opt is not None else 0)
    return head + encode_name(labels) + struct.pack("!HH", qtype, qclass) + (opt or b"")


def labels_of(name: str) -> list[bytes]:
    return [label.encode() for label in name.split(".")] if name else []


@dataclass(frozen=True)
class Drawn:
    wire: bytes
    labels: list[bytes]
    qtype: int
    qclass: int
    flags: int
    edns: tuple[int, bool] | None  # (payload, DO)
    nsid: bool = False  # one of the EDNS options is NSID (RFC 5001)


def names(label: st.SearchStrategy[bytes]) -> st.SearchStrategy[list[bytes]]:
    return st.lists(label, max_size=8).filter(lambda ls: sum(len(x) + 1 for x in ls) + 1 <= 255)


ldh_label = st.text(alphabet=LDH, min_size=1, max_size=63).map(str.encode)
# any text dnslib accepts as a label (valid UTF-8), incl. dots, backslashes, spaces, controls
odd_label = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x2FF), min_size=1, max_size=20).map(
    str.encode).filter(lambda b: len(b) <= 63)


@st.composite
def plain_queries(draw: st.DrawFn, label: st.SearchStrategy[bytes] = ldh_label) -> Drawn:
    labels = draw(names(label))
    qtype = draw(st.sampled_from([1, 2, 5, 6, 12, 15, 16, 28, 33, 65, 255]) | st.integers(0, 0xFFFF))
    qclass = draw(st.sampled_from([1, 255, 3]))
    flags = draw(st.sampled_from([0x0000, 0x0100, 0x0110, 0x0120, 0x0130]))  # RD, CD, AD combinations
    edns = draw(st.none() | st.tuples(st.integers(0, 0xFFFF), st.booleans()))
    opt = None
    nsid = False
    if edns is not None:
        options = draw(st.lists(st.tuples(st.sampled_from([3, 8, 10, 12]), st.binary(max_size=16)), max_size=3))
        opt = opt_record(edns[0], do=edns[1], options=edns_options(options))
        nsid = any(code == 3 for code, _ in options)
    wire = make_query(labels, qtype, qid=draw(st.integers(0, 0xFFFF)), flags=flags, qclass=qclass, opt=opt)
    return Drawn(wire, labels, qtype, qclass, flags, edns, nsid)


# ----------------------------------------------------------------------------------------------
# fast_key and parse_query agree


@settings(max_examples=400, deadline=None)
@given(plain_queries())
def test_fast_key_and_parse_query_give_the_same_key_for_every_plain_query(q: Drawn) -> None:
    fk = fast_key(q.wire)
    parsed = parse_query(q.wire)
    assert parsed.nsid == q.nsid
    if q.nsid:  # the answer gets our NSID option: never served from a stored answer as it is
        assert fk is None
        return
    assert fk is not None
    key, qend, limit = fk
    assert key == parsed.key
    assert qend == 12 + len(parsed.question) == len(q.wire) - (len(q.wire) - qend)
    assert limit == (max(512, q.edns[0]) if q.edns else 512)
    assert parsed.qname == b".".join(q.labels).decode().lower()
    assert (parsed.qtype, parsed.qclass) == (q.qtype, q.qclass)
    assert parsed.edns == (q.edns is not None)
    assert parsed.do == (q.edns is not None and q.edns[1])
    assert parsed.udp_size == (max(512, q.edns[0]) if q.edns else 512)
    assert (parsed.rd, parsed.cd, parsed.ad) == (bool(q.flags & 0x100), bool(q.flags & 0x10), bool(q.flags & 0x20))


@settings(max_examples=200, deadline=None)
@given(plain_queries().filter(lambda q: not q.nsid), st.randoms(use_true_random=False))
def test_the_key_ignores_the_case_of_the_name_and_the_z_bit_and_nothing_else(q: Drawn, rnd: object) -> None:
    swapped = bytearray(q.wire)
    end = 12 + len(encode_name(q.labels)) - 1
    for i in range(12, end):
        if chr(swapped[i]).isalpha() and rnd.random() < 0.5:  # type: ignore[attr-defined]
            swapped[i] ^= 0x20
    a, b = fast_key(q.wire), fast_key(bytes(swapped))
    assert a is not None and b is not None
    assert a[0] == b[0]
    flipped = bytearray(q.wire)
    flipped[2] ^= 0x01  # RD changes the key
    c = fast_key(bytes(flipped))
    assert c is not None and c[0] != a[0]
    zed = bytearray(q.wire)
    zed[3] |= 0x40  # the header's Z bit is not DO (RFC 3225 section 3): ignored
    z = fast_key(bytes(zed))
    assert z is not None and z[0] == a[0] and parse_query(bytes(zed)).key == a[0]


@settings(max_examples=300, deadline=None)
@given(plain_queries(label=odd_label).filter(lambda q: not q.nsid))
def test_names_with_any_bytes_read_as_dnspython_reads_them(q: Drawn) -> None:
    """The name text must stand for exactly the labels sent: a dot inside a label stays one label."""
    parsed = parse_query(q.wire)
    fk = fast_key(q.wire)
    assert fk is not None and fk[0] == parsed.key
    want = dns.name.Name([label.lower() for label in q.labels] + [b""])
    got = dns.name.from_text(parsed.qname + "." if parsed.qname else ".")
    assert got.labels == want.labels


NOT_PLAIN: list[tuple[str, Callable[[bytes], bytes]]] = [
    ("a-response", lambda q: q[:2] + bytes([q[2] | 0x80]) + q[3:]),
    ("opcode-notify", lambda q: q[:2] + bytes([q[2] | (4 << 3)]) + q[3:]),
    ("two-questions", lambda q: q[:4] + b"\x00\x02" + q[6:]),
    ("no-question", lambda q: q[:4] + b"\x00\x00" + q[6:]),
    ("an-count", lambda q: q[:6] + b"\x00\x01" + q[8:]),
    ("ns-count", lambda q: q[:8] + b"\x00\x01" + q[10:]),
    ("two-additional", lambda q: q[:10] + b"\x00\x02" + q[12:]),
    ("trailing-byte", lambda q: q + b"\x00"),
    ("cut-short", lambda q: q[:-1]),
    ("compression-pointer", lambda q: q[:12] + b"\xc0\x0c\x00\x01\x00\x01"),
    ("edns-version-1", lambda q: q[:10] + b"\x00\x01" + q[12:] + opt_record(1232, version=1)),
    ("opt-not-at-root", lambda q: q[:10] + b"\x00\x01" + q[12:] + b"\x01a" + opt_record(1232)[1:]),
    ("opt-rdlen-past-the-end", lambda q: q[:10] + b"\x00\x01" + q[12:] + opt_record(1232)[:-2] + b"\x00\x09"),
    ("additional-not-opt", lambda q: q[:10] + b"\x00\x01" + q[12:] + b"\x00\x00\x01\x00\x01" + bytes(6)),
    ("header-only", lambda q: q[:12]),
]


@pytest.mark.parametrize("mangle", [m for _, m in NOT_PLAIN], ids=[i for i, _ in NOT_PLAIN])
def test_fast_key_leaves_anything_unusual_to_the_slow_path(mangle: Callable[[bytes], bytes]) -> None:
    assert fast_key(mangle(make_query(labels_of("web.default.svc.cluster.local")))) is None


PARSE_ERRORS: list[tuple[str, bytes, type[Exception]]] = [
    ("empty", b"", WireError),
    ("short-header", b"\x00\x01\x01\x00\x00\x01", WireError),
    ("a-response", b"\x00\x01\x81\x00" + make_query([b"a"])[4:], WireError),
    ("no-question", b"\x00\x01\x01\x00" + bytes(8), FormatError),
    ("two-questions", b"\x00\x01\x01\x00\x00\x02" + make_query([b"a"])[6:], FormatError),
    ("name-runs-past-end", make_query([b"a"])[:12] + b"\x05ab", FormatError),
    ("type-missing", make_query([b"a"])[:-3], FormatError),
    ("compressed-question", make_query([b"a"])[:12] + b"\xc0\x0c\x00\x01\x00\x01", FormatError),
    ("name-longer-than-255", make_query([b"a" * 63] * 5), FormatError),
    ("two-opt-records", make_query([b"a"], opt=opt_record(1232))[:10] + b"\x00\x02"
     + make_query([b"a"], opt=opt_record(1232))[12:] + opt_record(1232), FormatError),
    ("answer-count-without-answer", make_query([b"a"])[:6] + b"\x00\x01" + make_query([b"a"])[8:], FormatError),
]


@pytest.mark.parametrize(("data", "error"), [(d, e) for _, d, e in PARSE_ERRORS], ids=[i for i, _, _ in PARSE_ERRORS])
def test_parse_query_rejects_malformed_messages_with_the_right_error(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_query(data)


@contextlib.contextmanager
def dnslib_only() -> Iterator[None]:
    """parse_query and build_response as dnslib alone does them (no hand-read query, no hand packer)."""
    with mock.patch.object(message, "_plain_query", lambda data: None), mock.patch.object(pack, "_pack",
                                                                                       lambda *a: None):
        yield


@settings(max_examples=400, deadline=None)
@given(plain_queries(label=odd_label) | plain_queries())
def test_a_plain_query_read_by_hand_is_the_query_dnslib_reads(q: Drawn) -> None:
    got = parse_query(q.wire)
    with dnslib_only():
        assert got == parse_query(q.wire)


@settings(max_examples=300, deadline=None)
@given(plain_queries(label=odd_label) | plain_queries())
def test_the_key_alone_gives_the_query_an_answer_is_built_for(q: Drawn) -> None:
    """What a worker sends the index owner (the cache key) is all the owner needs to build its answer."""
    parsed = parse_query(q.wire)
    from_key = key_query(parsed.key)
    assert from_key._replace(udp_size=parsed.udp_size) == parsed._replace(id=0, question=from_key.question,
                                                                          nsid=False)
    assert from_key.question == parsed.question[:-4].lower() + parsed.question[-4:]
    soa = [RR("cluster.local", QT.SOA, 5, ("ns.dns.cluster.local", "hostmaster.cluster.local", 7, 1, 2, 3, 5))]
    assert build_response(from_key, rcode=3, aa=True, ra=True, authority=soa) == \
        build_response(parsed, rcode=3, aa=True, ra=True, authority=soa)


ZONE_NAMES = ["cluster.local", "svc.cluster.local", "web.default.svc.cluster.local", "ns.dns.cluster.local",
              "hostmaster.cluster.local", "x.y", "a", "", "_http._tcp.web.default.svc.cluster.local", "b*.c-d"]
record_name = st.sampled_from(ZONE_NAMES) | st.lists(st.sampled_from(["web", "a", "cluster", "local", "x", "ns"]),
                                                     min_size=1, max_size=5).map(".".join)
odd_name = st.sampled_from(["Web.cluster.local", "a\\.b.cluster.local", "\\000x.local", "é.local"])


@st.composite
def records_of(draw: st.DrawFn, names: st.SearchStrategy[str]) -> RR:
    name = draw(names)
    rtype = draw(st.sampled_from([QT.A, QT.AAAA, QT.CNAME, QT.PTR, QT.NS, QT.SRV, QT.SOA, QT.TXT, QT.MX]))
    data: object
    if rtype == QT.A:
        data = str(ipaddress.IPv4Address(draw(st.integers(0, 2**32 - 1))))
    elif rtype == QT.AAAA:
        data = str(ipaddress.IPv6Address(draw(st.integers(0, 2**128 - 1))))
    elif rtype in (QT.CNAME, QT.PTR, QT.NS):
        data = draw(names)
    elif rtype == QT.SRV:
        data = (draw(st.integers(0, 0xFFFF)), draw(st.integers(0, 0xFFFF)), draw(st.integers(0, 0xFFFF)), draw(names))
    elif rtype == QT.SOA:
        data = (draw(names), draw(names), *draw(st.tuples(*[st.integers(0, 2**32 - 1)] * 5)))
    elif rtype == QT.TXT:
        data = tuple(draw(st.lists(st.text(max_size=40), min_size=1, max_size=3)))
    else:
        data = (draw(st.integers(0, 0xFFFF)), draw(names))
    return RR(name, rtype, draw(st.integers(0, 2**31 - 1)), data)


@settings(max_examples=400, deadline=None)
@given(q=plain_queries(label=odd_label) | plain_queries(), sections=st.tuples(
    *[st.lists(records_of(record_name | odd_name), max_size=4)] * 3), rcode=st.integers(0, 23),
    aa=st.booleans(), ra=st.booleans(), rclass=st.sampled_from([1, 3]), size=st.sampled_from([512, 1232, 4096]))
def test_the_hand_packed_response_is_byte_for_byte_the_one_dnslib_packs(
        q: Drawn, sections: tuple[list[RR], ...], rcode: int, aa: bool, ra: bool, rclass: int, size: int) -> None:
    parsed = parse_query(q.wire)
    answer, authority, additional = sections
    kwargs = {"rcode": rcode, "aa": aa, "ra": ra, "answer": answer, "authority": authority,
              "additional": additional, "max_udp_size": size, "rclass": rclass}
    try:
        got: bytes | str = build_response(parsed, **kwargs)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - whatever dnslib raises, the same
        got = type(exc).__name__
    with dnslib_only():
        try:
            want: bytes | str = build_response(parsed, **kwargs)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001
            want = type(exc).__name__
    assert got == want


@settings(max_examples=200, deadline=None)
@given(q=plain_queries(), sections=st.tuples(*[st.lists(records_of(record_name), max_size=4)] * 3))
def test_plain_names_are_packed_by_hand(q: Drawn, sections: tuple[list[RR], list[RR], list[RR]]) -> None:
    """Not a vacuous comparison: the names of the cluster zone never fall back to dnslib."""
    parsed = parse_query(q.wire)
    if sum(len(label) + 1 for label in q.labels) - 1 > 253:
        return  # dnslib refuses such a question name: left to it
    assert pack._pack(parsed, 0, True, True, sections, 1232, 1) is not None


# ----------------------------------------------------------------------------------------------
# Building, patching, truncating


def test_built_response_parses_and_echoes_flags_and_edns() -> None:
    q = parse_query(make_query(labels_of("Web.Default.svc.cluster.local"), flags=0x0110,
                               opt=opt_record(4096, do=True)))
    wire = build_response(q, rcode=RCODE.NOERROR, aa=True, ra=False,
                          answer=[RR("web.default.svc.cluster.local", QT.A, 5, "10.96.0.10")], max_udp_size=1232)
    m = dns.message.from_wire(wire)
    assert m.id == 0 and m.flags & dns.flags.QR and m.flags & dns.flags.AA
    assert m.flags & dns.flags.RD and m.flags & dns.flags.CD and not m.flags & dns.flags.RA
    assert m.edns == 0 and m.payload == 1232 and m.ednsflags & dns.flags.DO
    assert m.question[0].name.to_text() == "web.default.svc.cluster.local."  # stored lowercase
    assert [rd.to_text() for rd in m.answer[0]] == ["10.96.0.10"]


def test_badvers_is_carried_in_the_opt_extended_rcode() -> None:
    q = parse_query(make_query([b"a"], opt=opt_record(1232)))
    m = dns.message.from_wire(build_response(q, rcode=RCODE.BADVERS, aa=False, ra=False))
    assert m.rcode() == dns.rcode.BADVERS


@pytest.mark.parametrize(("rcode", "tc"), [(RCODE.REFUSED, False), (RCODE.FORMERR, False), (RCODE.NOTIMP, False),
                                           (RCODE.NOERROR, True)], ids=["refused", "formerr", "notimp", "slip"])
@pytest.mark.parametrize("edns", [False, True], ids=["plain", "edns-do"])
def test_a_short_reply_echoes_the_id_question_rd_cd_and_do_of_the_query(rcode: int, tc: bool, edns: bool) -> None:
    """REFUSED (allow list), FORMERR, NOTIMP and a rate limit's TC=1 slip: RFC 1035 and RFC 4035 section 3.2.2
    (CD copied), RFC 6891 section 7 (our OPT when the query had one, DO echoed)."""
    query = make_query(labels_of("Web.default.svc.cluster.local"), qid=0x5A5A, flags=0x0110,
                       opt=opt_record(4096, do=True) if edns else None)
    out = message.short_reply(query, rcode, tc=tc)
    assert out is not None
    m = dns.message.from_wire(out)
    assert m.id == 0x5A5A and m.rcode() == rcode and m.flags & dns.flags.QR
    assert m.flags & dns.flags.RD and m.flags & dns.flags.CD and bool(m.flags & dns.flags.TC) == tc
    assert out[12:12 + len(query) - 12 - (11 if edns else 0)] == query[12:len(query) - (11 if edns else 0)]
    assert (m.edns == 0) == edns and bool(m.ednsflags & dns.flags.DO) == edns
    assert message.short_reply(out, rcode) is None  # a response gets no reply


def test_patch_copies_the_query_id_and_the_question_spelling() -> None:
    q_bytes = make_query(labels_of("WEB.default.SVC.cluster.local"), qid=0xABCD)
    q = parse_query(q_bytes)
    stored = build_response(q, rcode=RCODE.NOERROR, aa=True, ra=False,
                            answer=[RR("web.default.svc.cluster.local", QT.A, 5, "10.96.0.10")])
    out = patch(stored, q_bytes, 12 + len(q.question))
    m = dns.message.from_wire(out)
    assert m.id == 0xABCD
    assert out[12 : 12 + len(q.question)] == q.question
    assert m.answer[0].name.to_text() == "WEB.default.SVC.cluster.local."  # the owner points at the question


A_RECORD = 16  # an A record whose owner is a pointer to the question: 2 + 10 + 4 bytes


@pytest.mark.parametrize(
    ("edns", "count", "limit"),
    [
        (False, 100, 512),
        (True, 100, 512),
        (True, 100, 1232),
        (True, 100, 100),  # below 512 counts as 512
        (False, 31, 512),  # 31 fit without EDNS: not cut
        (True, 100, 1700),  # exactly the whole message: not cut
    ],
    ids=["plain-512", "edns-512", "edns-1232", "edns-below-512", "fits", "fits-exactly"],
)
def test_truncate_keeps_as_many_whole_records_as_fit_and_the_opt(edns: bool, count: int, limit: int) -> None:
    q_bytes = make_query(labels_of("big.bulk.svc.cluster.local"), qid=0x0102,
                         opt=opt_record(1232, do=True) if edns else None)
    q = parse_query(q_bytes)
    qend = 12 + len(q.question)
    rrs = [RR("big.bulk.svc.cluster.local", QT.A, 5, f"10.0.{i // 250}.{i % 250}") for i in range(count)]
    full = patch(build_response(q, rcode=RCODE.NOERROR, aa=True, ra=False, answer=rrs), q_bytes, qend)
    opt = 11 if edns else 0
    assert len(full) == qend + count * A_RECORD + opt
    limit = max(limit, 512)
    cut = truncate(full, qend, limit)
    m = dns.message.from_wire(cut)
    fits = (limit - qend - opt) // A_RECORD
    assert m.id == 0x0102 and m.flags & dns.flags.AA and len(cut) <= limit
    if fits >= count:
        assert cut == full and not m.flags & dns.flags.TC
        return
    assert m.flags & dns.flags.TC
    assert [rd.to_text() for rd in m.answer[0]] == [r.data for r in rrs[:fits]]  # whole records, in order
    assert (m.edns == 0 and bool(m.ednsflags & dns.flags.DO)) if edns else m.edns == -1


def test_truncate_fills_authority_and_additional_after_the_answer_and_stops_at_the_first_misfit() -> None:
    q_bytes = make_query(labels_of("x.example"), qid=1, opt=opt_record(1232))
    q = parse_query(q_bytes)
    qend = 12 + len(q.question)
    answer = [RR("x.example", QT.TXT, 5, (c * 100,)) for c in "abc"]  # 12 + 101 bytes each
    authority = [RR("example", QT.TXT, 5, ("b" * 200,))]  # does not fit after the answers
    additional = [RR("x.example", QT.A, 5, "192.0.2.1")]  # would fit, but comes after the misfit
    full = build_response(q, rcode=RCODE.NOERROR, aa=False, ra=True, answer=answer, authority=authority,
                          additional=additional)
    cut = truncate(full, qend, 512)
    m = dns.message.from_wire(cut)
    assert m.flags & dns.flags.TC and len(m.answer[0]) == 3 and not m.authority and not m.additional
    assert m.edns == 0  # the OPT is kept
    # with room for the authority record, the additional A record follows it
    assert truncate(full, qend, len(full) - 1) != full
    m = dns.message.from_wire(truncate(full, qend, len(full) - 1))
    assert len(m.answer[0]) == 3 and len(m.authority) == 1 and not m.additional and m.flags & dns.flags.TC


# ----------------------------------------------------------------------------------------------
# Odd names through the resolver (regressions)


@pytest.fixture(scope="module")
def resolver() -> Resolver:
    index = Index()
    index.load(fx.kinds(fx.cluster_objects()))
    index.mark_synced()
    zone = ZoneSettings(authoritative_reverse=tuple(ipaddress.ip_network(c) for c in fx.AUTHORITATIVE_REVERSE))
    return watched(resolver_of(records=ClusterRecords(index, zone), index=index, cluster_answers=ClusterAnswers()))


ODD_NAMES: list[tuple[str, list[bytes], str]] = [
    ("dot-inside-a-label", [b"web.default", b"svc", b"cluster", b"local"], "NXDOMAIN"),
    ("dot-inside-the-namespace-label", [b"web", b"default.svc", b"cluster", b"local"], "NXDOMAIN"),
    ("non-ascii-label", [b"w\xc3\xa9b", b"default", b"svc", b"cluster", b"local"], "NXDOMAIN"),
    ("space-in-label", [b"we b", b"default", b"svc", b"cluster", b"local"], "NXDOMAIN"),
    ("backslash-in-label", [b"web\\", b"default", b"svc", b"cluster", b"local"], "NXDOMAIN"),
    ("escaped-looking-label", [b"web\\046default", b"svc", b"cluster", b"local"], "NXDOMAIN"),
    ("non-ascii-outside-the-zone", [b"\xc3\xa9", b"example"], "REFUSED"),
    ("uppercase-is-the-same-name", [b"WEB", b"DEFAULT", b"svc", b"cluster", b"local"], "NOERROR"),
]


@pytest.mark.parametrize(("labels", "rcode"), [(n, r) for _, n, r in ODD_NAMES], ids=[i for i, _, _ in ODD_NAMES])
def test_odd_names_are_answered_for_exactly_the_name_asked(resolver: Resolver, labels: list[bytes], rcode: str) -> None:
    """A label is compared as a whole: `web\\.default.svc.<zone>` (one label holding a dot) is not
    `web.default.svc.<zone>`; and any label's bytes come back unchanged in the question."""
    q = make_query(labels, qid=0x4321)
    for _ in range(2):
        out = resolver.handle(q, "127.0.0.1")
        assert isinstance(out, bytes)
        m = dns.message.from_wire(out)
        assert m.id == 0x4321 and dns.rcode.to_text(m.rcode()) == rcode
        assert out[12 : len(q)] == q[12:]
        assert bool(m.answer) == (rcode == "NOERROR")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plain_queries(label=odd_label))
def test_resolver_echoes_any_question_byte_for_byte(resolver: Resolver, q: Drawn) -> None:
    out = resolver.handle(q.wire, "127.0.0.1")
    assert isinstance(out, bytes)
    assert out[:2] == q.wire[:2] and out[2] & 0x80
    qend = 12 + len(encode_name(q.labels)) + 4
    assert out[12:qend] == q.wire[12:qend]
    dns.message.from_wire(out)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([c for c in fx.CASES if c.qtype != "HTTPS"]), st.randoms(use_true_random=False))
def test_resolver_answers_table_names_in_any_case(resolver: Resolver, case: fx.Case, rnd: object) -> None:
    name = "".join(ch.upper() if rnd.random() < 0.5 else ch for ch in case.fqdn)  # type: ignore[attr-defined]
    q = make_query(labels_of(name), QT.from_text(case.qtype), qid=0x0F0F)
    out = resolver.handle(q, "127.0.0.1")
    assert isinstance(out, bytes)
    m = dns.message.from_wire(out)
    assert dns.rcode.to_text(m.rcode()) == case.rcode
    assert out[12 : len(q)] == q[12:]
    assert sum(len(rrset) for rrset in m.answer) == len(case.answer)


@given(name=st.lists(st.text("abcXYZ09-_", min_size=1, max_size=20), min_size=1, max_size=5).map(".".join),
       rdtype=st.sampled_from(["A", "AAAA", "TXT", "SRV"]), edns=st.sampled_from([None, 512, 1232, 4096]),
       do=st.booleans(), rd=st.booleans(), cd=st.booleans(), udp_size=st.sampled_from([512, 1232]))
def test_the_tc_reply_of_a_plain_query_is_short_reply_s_byte_for_byte(name: str, rdtype: str, edns: int | None,
                                                                      do: bool, rd: bool, cd: bool,
                                                                      udp_size: int) -> None:
    """What a UDP query over a miss budget gets (`plain_tc_reply`, made from fast_key's question end) is what
    `short_reply` makes of it: TC=1, the question, our OPT with its DO when it had one."""
    q = dns.message.make_query(name + ".example", rdtype, use_edns=edns is not None, payload=edns or 512,
                               want_dnssec=do and edns is not None)
    q.flags = (q.flags | dns.flags.RD if rd else q.flags & ~dns.flags.RD) | (dns.flags.CD if cd else 0)
    data = q.to_wire()
    fk = fast_key(data)
    assert fk is not None
    assert message.plain_tc_reply(data, fk[1], udp_size) == message.short_reply(data, 0, tc=True, udp_size=udp_size)
