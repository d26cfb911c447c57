"""Random and mutated packets: no exception escapes the parsers or the resolver, the server keeps answering.

Mutations start from valid queries and break them the ways real garbage does: flipped bytes,
counts (up to 0xFFFF), label lengths (incl. the reserved 0x40/0x80 types and compression
pointers, pointer loops), truncation anywhere (incl. inside the OPT record), inserted and deleted
bytes, odd flags and opcodes. Every response must be a DNS message dnspython parses, with QR=1 and
the query's ID.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import dns.edns
import dns.message
import dns.rcode
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords, ZoneSettings
from nodedns.dns.keys import fast_key, key_question
from nodedns.dns.message import parse_query
from nodedns.errors import FormatError, WireError
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.resolver import Resolver
from tests.support import cluster_fixture as fx
from tests.support import rawdns
from tests.support.fuzzing import label_starts
from tests.support.helpers import RunningAgent, running_agent
from tests.support.wiring import resolver_of, watched

# ----------------------------------------------------------------------------------------------
# Packets


def _seeds() -> list[bytes]:
    out = []
    for name, rdtype, edns, dnssec in [
        ("web.default.svc.cluster.local", "A", False, False),
        ("WEB.Default.svc.cluster.local", "AAAA", 0, True),
        ("_http._tcp.web.default.svc.cluster.local", "SRV", 0, False),
        ("db.prod.svc.cluster.local", "SRV", False, False),
        ("10.0.96.10.in-addr.arpa", "PTR", 0, False),
        ("nope.default.svc.cluster.local", "TXT", False, False),
        ("search.prod.svc.cluster.local", "A", 0, False),
        ("example.com", "MX", 0, True),
        (".", "NS", False, False),
        ("a" * 63 + "." + "b" * 63 + ".cluster.local", "A", 0, False),
    ]:
        out.append(rawdns.wire_query(name, rdtype, qid=0x1000 + len(out), edns=edns, payload=4096,
                                     dnssec=dnssec))
    # EDNS with options (cookie, client subnet)
    msg = dns.message.make_query("web.default.svc.cluster.local", "A", use_edns=0, payload=1232,
                                 options=[dns.edns.GenericOption(10, b"\x01" * 8),
                                          dns.edns.GenericOption(8, b"\x00\x01\x18\x00\x0a\x00\x00")])
    out.append(msg.to_wire())
    return out


SEEDS = _seeds()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "count", "label", "pointer", "cut", "insert", "delete", "flags",
                                   "append", "opt", "text", "text"]))
        n = len(data)
        if op == "flip" and n:
            data[draw(st.integers(0, n - 1))] = draw(st.integers(0, 255))
        elif op == "count" and n >= 12:
            off = draw(st.sampled_from([4, 6, 8, 10]))
            data[off : off + 2] = struct.pack("!H", draw(st.sampled_from([0, 1, 2, 3, 0x7F, 0xFFFF])
                                                         | st.integers(0, 0xFFFF)))
        elif op == "label":
            starts = label_starts(bytes(data))
            if starts:
                pos = draw(st.sampled_from(starts))
                data[pos] = draw(st.sampled_from([0, 1, 62, 63, 64, 0x80, 0xBF, 0xC0, 0xFF]) | st.integers(0, 255))
        elif op == "text":
            # a label rewritten with any text, its length byte kept right: dots, backslashes, UTF-8
            starts = [p for p in label_starts(bytes(data)) if 0 < data[p] <= 63]
            if starts:
                pos = draw(st.sampled_from(starts))
                new = draw(st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x3FF), min_size=1,
                                   max_size=20).map(str.encode).filter(lambda b: len(b) <= 63))
                data[pos : pos + 1 + data[pos]] = bytes([len(new)]) + new
        elif op == "pointer":
            starts = label_starts(bytes(data)) or [12]
            pos = draw(st.sampled_from(starts))
            target = draw(st.sampled_from([pos, 12, 0, n, 0x3FFF]) | st.integers(0, 0x3FFF))  # incl. a self loop
            data[pos : pos + 2] = struct.pack("!H", 0xC000 | target)
        elif op == "cut":
            del data[draw(st.integers(0, n)) :]
        elif op == "insert":
            pos = draw(st.integers(0, n))
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and n:
            pos = draw(st.integers(0, n - 1))
            del data[pos : pos + draw(st.integers(1, 8))]
        elif op == "flags" and n >= 4:
            data[2] = draw(st.integers(0, 255))
            data[3] = draw(st.integers(0, 255))
        elif op == "append":
            data += draw(st.binary(min_size=1, max_size=40))
        elif op == "opt" and n > 20:
            # break the OPT record at the end: cut it, or give it a huge rdlen / odd version
            tail = draw(st.integers(1, 11))
            if draw(st.booleans()):
                del data[-tail:]
            else:
                data[-2:] = struct.pack("!H", draw(st.integers(0, 0xFFFF)))
    return bytes(data)


packets = st.one_of(mutated(), st.binary(max_size=600), st.binary(min_size=12, max_size=40))


# ----------------------------------------------------------------------------------------------
# The pure layers


@pytest.fixture(scope="module")
def resolver() -> Resolver:
    index = Index()
    index.load(fx.kinds(fx.cluster_objects()))
    index.mark_synced()
    return watched(resolver_of(
        records=ClusterRecords(index, ZoneSettings()), index=index, cluster_answers=ClusterAnswers()))


def check_response(query: bytes, out: bytes) -> dns.message.Message:
    """A well-formed response to `query`: QR=1, the same ID, parseable; the question echoed."""
    assert len(out) >= 12
    assert out[:2] == query[:2], "the response carries the query's ID"
    assert out[2] & 0x80, "QR=1"
    msg = dns.message.from_wire(out, ignore_trailing=False, question_only=False)
    if msg.question:
        qend = rawdns.question_end(out)
        assert out[12:qend] == query[12:qend], "the question comes back as asked"
    return msg


@settings(max_examples=1000, deadline=None)
@given(packets)
def test_fast_key_never_raises_and_stays_inside_the_packet(data: bytes) -> None:
    fk = fast_key(data)
    if fk is not None:
        key, qend, limit = fk
        assert 12 < qend <= len(data)
        assert 512 <= limit <= 0xFFFF
        assert key_question(key) == data[12 : qend - 4].lower() + data[qend - 4 : qend]


@settings(max_examples=1000, deadline=None)
@given(packets)
def test_parse_query_raises_only_its_own_errors(data: bytes) -> None:
    try:
        q = parse_query(data)
    except (FormatError, WireError):
        return
    assert q.id == struct.unpack_from("!H", data)[0]
    assert data[12 : 12 + len(q.question)] == q.question
    fk = fast_key(data)
    if fk is not None:
        assert fk[0] == q.key


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(packets)
def test_resolver_handle_returns_none_or_a_well_formed_response(resolver: Resolver, data: bytes) -> None:
    out = resolver.handle(data, "127.0.0.1")
    assert not hasattr(out, "__await__"), "no upstream yet: every answer is immediate"
    if out is None:
        # dropped only when the header is unreadable, the packet is a response, or it is not DNS at all
        assert len(data) < 12 or data[2] & 0x80 or fast_key(data) is None
        return
    assert isinstance(out, bytes)
    check_response(data, out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(SEEDS))
def test_valid_seed_queries_are_answered_not_dropped(resolver: Resolver, data: bytes) -> None:
    out = resolver.handle(data, "127.0.0.1")
    assert isinstance(out, bytes)
    msg = check_response(data, out)
    assert msg.rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN, dns.rcode.REFUSED)


# ----------------------------------------------------------------------------------------------
# A live server


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningAgent, _Errors]]:
    path: Path = tmp_path_factory.mktemp("fuzz") / "cluster.yaml"
    path.write_text(yaml.safe_dump(fx.as_list(fx.cluster_objects())), encoding="utf-8")
    errors = _Errors()
    logging.getLogger("nodedns").addHandler(errors)
    try:
        with running_agent({"manifests": str(path), "tcp-idle-timeout": "1s"}) as agent:
            yield agent, errors
    finally:
        logging.getLogger("nodedns").removeHandler(errors)


SENTINEL_ID = 0xFEED


def sentinel() -> bytes:
    return rawdns.wire_query("web.default.svc.cluster.local", "A", qid=SENTINEL_ID)


def without_sentinel_id(batch: list[bytes]) -> list[bytes]:
    """The packets, none of them carrying the sentinel's ID (so its answer is unmistakable)."""
    tag = struct.pack("!H", SENTINEL_ID)
    return [b"\x00\x00" + p[2:] if p[:2] == tag else p for p in batch]


def assert_sentinel_answer(out: bytes) -> None:
    msg = rawdns.parse(out)
    assert msg.rcode() == dns.rcode.NOERROR
    assert [rd.to_text() for rd in msg.answer[0]] == ["10.96.0.10"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(packets, min_size=5, max_size=25))
def test_live_server_over_udp_survives_garbage_and_keeps_answering(
    live: tuple[RunningAgent, _Errors], batch: list[bytes]
) -> None:
    agent, errors = live
    batch = without_sentinel_id(batch)
    sent = {bytes(p[:2]) for p in batch if len(p) >= 2}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((agent.host, agent.port))
        for p in batch:
            s.send(p)
        s.send(sentinel())
        deadline = time.monotonic() + 3.0
        while True:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            out = s.recv(65535)  # TimeoutError here means the server stopped answering
            if out[:2] == struct.pack("!H", SENTINEL_ID) and out[2] & 0x80 and len(out) > 40:
                assert_sentinel_answer(out)
                break
            assert out[:2] in sent
            assert out[2] & 0x80
            dns.message.from_wire(out, ignore_trailing=False)
    assert not errors.records, [r.getMessage() for r in errors.records]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(packets, min_size=1, max_size=10), st.integers(0, 7))
def test_live_server_over_tcp_survives_garbage_frames(
    live: tuple[RunningAgent, _Errors], batch: list[bytes], lie: int
) -> None:
    lie_about_length = lie == 0
    agent, errors = live
    batch = without_sentinel_id(batch)
    frames = b"".join(rawdns.frame(p) for p in batch)
    if lie_about_length:  # a length prefix that does not match what follows
        frames = struct.pack("!H", len(batch[0]) + 7) + frames[2:]
    with rawdns.tcp_connection(agent.host, agent.port, timeout=2.0) as s:
        try:
            s.sendall(frames + rawdns.frame(sentinel()))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may hang up on garbage
        deadline = time.monotonic() + (0.2 if lie_about_length else 2.0)
        while time.monotonic() < deadline:
            try:
                out = rawdns.recv_frame(s, timeout=max(0.01, deadline - time.monotonic()))
            except (TimeoutError, ConnectionResetError):
                break
            if out is None:
                break
            assert out[2] & 0x80
            dns.message.from_wire(out, ignore_trailing=False)
            if out[:2] == struct.pack("!H", SENTINEL_ID) and len(out) > 40:
                assert_sentinel_answer(out)
                break
    # whatever happened to that connection, a new one is answered
    out = rawdns.tcp_exchange(agent.host, agent.port, sentinel())
    assert out is not None
    assert_sentinel_answer(out)
    assert not errors.records, [r.getMessage() for r in errors.records]


def test_live_server_is_still_whole_after_the_fuzz(live: tuple[RunningAgent, _Errors]) -> None:
    agent, errors = live
    assert agent.call(agent.agent.server.alive)
    for transport in ("udp", "tcp"):
        r = agent.query("_http._tcp.web.default.svc.cluster.local", "SRV", tcp=transport == "tcp")
        assert r.rcode() == dns.rcode.NOERROR and r.answer
    assert not errors.records
