"""Wire-level interoperability over real sockets: what real stub resolvers and the RFC checks need.

- UDP answers too big for the client are cut the way miekg/dns `Msg.Truncate` (CoreDNS) cuts them:
  as many whole records as fit, answer section first, the OPT kept, TC=1 — cluster and forwarded
  answers, with and without EDNS, on the C and the Python hit path (docs/wire.md).
- The header's Z bit is not DO (RFC 3225 section 3), on both hit paths.
- An upstream OPT anywhere in the additional section is relayed (RFC 6891 section 6.1.1).
- An EDNS-intolerant upstream is asked again without EDNS and remembered (RFC 6891 section 7).
- FORMERR / NOTIMP to EDNS queries carry an OPT and the question when it parsed (RFC 6891 section 7).
- TCP half-close: answers still owed are sent (RFC 7766 section 6.2).
- CH TXT id.server. / hostname.bind., NSID (RFC 4892, RFC 5001); version.bind. only when configured.
- Objects with names that cannot be DNS names are skipped, every problem reported.
"""

from __future__ import annotations

import json
import logging
import socket
import struct
import urllib.request
from pathlib import Path
from typing import Any

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import pytest
import yaml

from nodedns.cluster import objects
from nodedns.errors import ObjectError
from tests.support import cluster_fixture as fx
from tests.support import rawdns
from tests.support.helpers import RunningAgent, running_agent
from tests.support.raw_upstream import RawUpstream, has_opt
from tests.support.upstream_double import UpstreamDouble

BIG = "big.default.svc.cluster.local"  # headless, 60 ready endpoints: 60 A records, > 512 bytes
BIG_COUNT = 60
HUGE = "huge.default.svc.cluster.local"  # 100 endpoints: > 1232 bytes
HUGE_COUNT = 100
A_RECORD = 16  # an A record whose owner is a compression pointer: 2 + 10 + 4 bytes


def big_objects() -> list[dict[str, Any]]:
    eps = [fx.endpoint(f"10.244.60.{i}", hostname=f"big-{i}") for i in range(1, BIG_COUNT + 1)]
    many = [fx.endpoint(f"10.244.61.{i}") for i in range(1, HUGE_COUNT + 1)]
    return [
        fx.headless("default", "big", ports=[fx.port(80, "http")]),
        fx.endpoint_slice("default", "big-1", "big", "IPv4", eps, [fx.port(80, "http")]),
        fx.headless("default", "huge", ports=[fx.port(80, "http")]),
        fx.endpoint_slice("default", "huge-1", "huge", "IPv4", many, [fx.port(80, "http")]),
    ]


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("interop") / "cluster.yaml"
    path.write_text(yaml.safe_dump(fx.as_list(fx.cluster_objects() + big_objects())), encoding="utf-8")
    return path


def hit_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the agent with the C hit path or with the Python one (NODEDNS_HIT_PATH=python)."""
    choice = str(request.param)
    if choice == "c":
        pytest.importorskip("nodedns.serve._hitpath", reason="the C hit path is not built here")
        monkeypatch.delenv("NODEDNS_HIT_PATH", raising=False)
    else:
        monkeypatch.setenv("NODEDNS_HIT_PATH", "python")
    return choice


@pytest.fixture(params=["c", "python"], ids=["c-hit-path", "python-hit-path"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    return hit_path(request, monkeypatch)


def expect_path(agent: RunningAgent, choice: str) -> None:
    assert (agent.agent.server.batch_serve is not None) == (choice == "c")


def udp(agent: RunningAgent, q: bytes) -> bytes:
    out = rawdns.udp_exchange(agent.host, agent.port, q)
    assert out is not None, "no answer"
    return out


def tcp(agent: RunningAgent, q: bytes) -> bytes:
    out = rawdns.tcp_exchange(agent.host, agent.port, q)
    assert out is not None, "no answer over TCP"
    return out


# ----------------------------------------------------------------------------------------------
# Truncation: whole records, answer first, OPT kept, TC=1 (miekg/dns Msg.Truncate)

SIZES = [
    pytest.param(False, 0, 512, id="no-edns-512"),
    pytest.param(0, 512, 512, id="edns-512"),
    pytest.param(0, 800, 800, id="edns-800"),
    pytest.param(0, 300, 512, id="edns-300-counts-as-512"),
    pytest.param(0, 4096, 1232, id="edns-4096-capped-at-ours"),
]


@pytest.mark.parametrize(("edns", "payload", "limit"), SIZES)
@pytest.mark.parametrize(("name", "count"), [(BIG, BIG_COUNT), (HUGE, HUGE_COUNT)], ids=["60-endpoints",
                                                                                      "100-endpoints"])
def test_a_big_headless_answer_keeps_the_whole_records_that_fit_on_every_hit_path(
    manifest: Path, path: str, name: str, count: int, edns: int | bool, payload: int, limit: int
) -> None:
    with running_agent({"manifests": str(manifest)}) as agent:
        expect_path(agent, path)
        hits = agent.call(lambda: agent.agent.server.hits)
        for attempt in range(3):  # built on the slow path, then served from the stored bytes
            q = rawdns.wire_query(name, "A", qid=0x4242 + attempt, edns=edns, payload=payload)
            out = udp(agent, q)
            full = tcp(agent, q)
            r = rawdns.parse(out)
            assert r.id == 0x4242 + attempt and r.rcode() == dns.rcode.NOERROR
            assert (r.edns == 0) == (edns is not False)
            assert len(rawdns.parse(full).answer[0]) == count
            if len(full) <= limit:  # 60 records fit 1232 bytes: sent whole
                assert out == full and not r.flags & dns.flags.TC
                continue
            kept = rawdns.assert_truncated_like_miekg(out, full, limit)
            opt = 11 if edns is not False else 0
            assert kept == len(r.answer[0]) == (limit - rawdns.question_end(q) - opt) // A_RECORD
        assert agent.call(lambda: agent.agent.server.hits) >= hits + 2  # answered from the stored bytes


def test_a_mixed_case_or_do_query_is_cut_the_same_way(manifest: Path, path: str) -> None:
    with running_agent({"manifests": str(manifest)}) as agent:
        for name, dnssec in ((BIG.upper(), False), (BIG, True), ("BiG.default.svc.cluster.local", True)):
            for _ in range(2):
                q = rawdns.wire_query(name, "A", qid=7, edns=0, payload=600, dnssec=dnssec)
                out = udp(agent, q)
                assert out[12 : rawdns.question_end(out)] == q[12 : rawdns.question_end(q)]  # its 0x20 case
                rawdns.assert_truncated_like_miekg(out, tcp(agent, q), 600)
                assert bool(rawdns.parse(out).ednsflags & dns.flags.DO) == dnssec


def test_srv_records_come_first_and_the_additional_section_fills_what_is_left(manifest: Path, path: str) -> None:
    with running_agent({"manifests": str(manifest)}) as agent:
        for edns, limit in ((False, 512), (0, 1232)):
            q = rawdns.wire_query(f"_http._tcp.{BIG}", "SRV", edns=edns)
            full = tcp(agent, q)
            for _ in range(2):
                out = udp(agent, q)
                kept = rawdns.assert_truncated_like_miekg(out, full, limit)
                r = rawdns.parse(out)
                assert kept > 0 and len(r.answer[0]) == min(kept, BIG_COUNT)
                assert not r.additional or len(r.answer[0]) == BIG_COUNT  # additional only after every SRV


BIG_EXTERNAL = {"many.example.com": {"A": [f"192.0.2.{i}" for i in range(1, 101)]}}


@pytest.mark.parametrize(("edns", "payload", "limit"), SIZES)
def test_a_big_forwarded_answer_keeps_the_whole_records_that_fit_on_every_hit_path(
    path: str, edns: int | bool, payload: int, limit: int
) -> None:
    with UpstreamDouble(BIG_EXTERNAL) as up, running_agent({"manifests": str(fx_manifest()), "upstream": up.address,
                                                            "health-check": "0s"}) as agent:
        expect_path(agent, path)
        for attempt in range(3):  # forwarded (the upstream retries over TCP), then from the cache
            q = rawdns.wire_query("many.example.com", "A", qid=attempt, edns=edns, payload=payload)
            for _ in range(5):  # the two in the same second: a forwarded answer's TTLs go down each second
                out = udp(agent, q)
                full = tcp(agent, q)
                if rawdns.parse(out).answer[0].ttl == rawdns.parse(full).answer[0].ttl:
                    break
            kept = rawdns.assert_truncated_like_miekg(out, full, limit)
            assert kept == (limit - rawdns.question_end(q) - (11 if edns is not False else 0)) // A_RECORD
            assert len(rawdns.parse(full).answer[0]) == 100
        assert up.count("many.example.com", transport="udp") >= 1 and up.count("many.example.com", transport="tcp")


def fx_manifest() -> Path:
    return Path(__file__).resolve().parents[3] / "examples" / "cluster.yaml"


# ----------------------------------------------------------------------------------------------
# The header's Z bit is not DO


def with_z(q: bytes) -> bytes:
    return q[:3] + bytes([q[3] | 0x40]) + q[4:]


def test_a_z_bit_query_gets_the_answer_of_its_own_do_bit_on_every_hit_path(manifest: Path, path: str) -> None:
    name = "web.default.svc.cluster.local"
    with running_agent({"manifests": str(manifest)}) as agent:
        expect_path(agent, path)
        do = rawdns.wire_query(name, "A", edns=0, dnssec=True)
        for _ in range(3):  # the DO=1 answer is stored for the hit path
            assert rawdns.parse(udp(agent, do)).ednsflags & dns.flags.DO
        plain = rawdns.wire_query(name, "A", edns=0)
        hits = agent.call(lambda: agent.agent.server.hits)
        for qid in range(8):
            q = with_z(plain[:0] + struct.pack("!H", qid) + plain[2:])
            out = udp(agent, q)
            r = rawdns.parse(out)
            assert r.id == qid and r.edns == 0 and not r.ednsflags & dns.flags.DO, "Z=1 is not DO=1"
            assert not out[3] & 0x40  # Z is zero in our replies
            assert [rd.to_text() for rd in r.answer[0]] == ["10.96.0.10"]
        no_edns = with_z(rawdns.wire_query(name, "A"))
        assert rawdns.parse(udp(agent, no_edns)).edns == -1
        # the first is built and stored (DO=0), the other seven are hits of the stored DO=0 answer
        assert agent.call(lambda: agent.agent.server.hits) >= hits + 7


# ----------------------------------------------------------------------------------------------
# Upstream replies: an OPT anywhere, EDNS-intolerant servers


def a_reply(query: bytes, *, rcode: int = 0, records: bytes = b"", an: int = 0, ar: int = 0) -> bytes:
    qend = rawdns.question_end(query)
    return query[:2] + struct.pack("!HHHHH", 0x8180 | rcode, 1, an, 0, ar) + query[12:qend] + records


def a_record(ip: str, ttl: int = 300) -> bytes:
    return b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, ttl, 4) + socket.inet_aton(ip)


COOKIE_OPT = b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x0c" + struct.pack("!HH", 10, 8) + b"cookie!!"


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_an_upstream_opt_anywhere_in_the_additional_section_is_relayed(where: str) -> None:
    glue = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + socket.inet_aton("192.0.2.99")

    def reply(query: bytes, transport: str) -> bytes:
        extra = {"first": COOKIE_OPT + glue + glue, "middle": glue + COOKIE_OPT + glue,
                 "last": glue + glue + COOKIE_OPT}
        return a_reply(query, records=a_record("192.0.2.7") + extra[where], an=1, ar=3)

    with RawUpstream(reply) as up, running_agent({"manifests": str(fx_manifest()), "upstream": up.address}) as agent:
        for edns in (0, False):
            r = agent.query("odd.example.com", "A", edns=edns)  # type: ignore[arg-type]
            assert r.rcode() == dns.rcode.NOERROR, "an OPT that is not last is no reason for SERVFAIL"
            assert [rd.to_text() for rd in r.answer[0]] == ["192.0.2.7"]
            assert r.edns == (0 if edns is not False else -1) and not r.options  # ours, not the upstream's cookie
            assert sum(len(rrset) for rrset in r.additional) == 1  # the glue (two identical records, one RRset)


def test_a_tcp_answer_to_another_question_is_skipped_for_the_one_that_answers_ours() -> None:
    """After a truncated UDP reply, the upstream's TCP connection carries a reply with our ID but another
    question first (a spoof, or a stale answer on a reused connection), then ours: the client gets ours."""
    def reply(query: bytes, transport: str) -> bytes | list[bytes]:
        if transport == "udp":
            return query[:2] + struct.pack("!HHHHH", 0x8380, 1, 0, 0, 0) + query[12:rawdns.question_end(query)]
        spoof = rawdns.wire_query("evil.example.com", "A")
        spoof_reply = a_reply(spoof, records=a_record("203.0.113.66"), an=1)
        return [spoof_reply, a_reply(query, records=a_record("192.0.2.10"), an=1)]

    with RawUpstream(reply) as up, running_agent({"manifests": str(fx_manifest()), "upstream": up.address,
                                                  "health-check": "0s"}) as agent:
        r = agent.query("tcp.example.com", "A")
        assert r.rcode() == dns.rcode.NOERROR and [rd.to_text() for rd in r.answer[0]] == ["192.0.2.10"]
        assert [t for q, t in up.queries if b"\x03tcp" in q] == ["udp", "tcp"]


BARE_OPT = b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00"


@pytest.mark.parametrize("refusal", [dns.rcode.FORMERR, dns.rcode.NOTIMP], ids=["formerr", "notimp"])
@pytest.mark.parametrize("with_opt", [False, True], ids=["no-opt", "with-opt"])
def test_an_edns_intolerant_upstream_is_asked_again_without_edns_and_remembered(refusal: int, with_opt: bool) -> None:
    """FORMERR or NOTIMP to our OPT record, whether the refusal carries an OPT of its own (a middlebox
    that speaks EDNS but not to this server) or none (a server that does not speak it)."""
    def reply(query: bytes, transport: str) -> bytes:
        if has_opt(query):
            return query[:2] + struct.pack("!HHHHH", 0x8180 | refusal, 1, 0, 0, 1 if with_opt else 0) + query[
                12 : rawdns.question_end(query)] + (BARE_OPT if with_opt else b"")
        return a_reply(query, records=a_record("192.0.2.8"), an=1)

    cfg = {"manifests": str(fx_manifest()), "upstream": "{}", "debug-listen": "127.0.0.1:0", "health-check": "0s"}
    with RawUpstream(reply) as up, running_agent({**cfg, "upstream": up.address}) as agent:
        r = agent.query("old.example.com", "A", edns=0, dnssec=True)
        assert r.rcode() == dns.rcode.NOERROR and [rd.to_text() for rd in r.answer[0]] == ["192.0.2.8"]
        assert r.edns == 0 and r.ednsflags & dns.flags.DO  # the client still talks EDNS with us
        asked = [has_opt(q) for q, _ in up.queries if b"\x03old" in q]
        assert asked == [True, False]
        r = agent.query("other.example.com", "A", edns=0)
        assert r.rcode() == dns.rcode.NOERROR
        assert [has_opt(q) for q, _ in up.queries if b"\x05other" in q] == [False]  # remembered: no EDNS
        with urllib.request.urlopen(agent.debug_url + "/status", timeout=5) as resp:  # noqa: S310 - loopback
            status = json.load(resp)
        (server,) = status["upstream"]["upstreams"]
        assert server["edns"] is False and server["edns_fallbacks"] == 1
        assert status["upstream"]["edns_fallback"] == 1


@pytest.mark.parametrize("with_opt", [False, True], ids=["no-opt", "with-opt"])
def test_an_upstream_answering_formerr_with_and_without_edns_is_not_remembered_as_edns_intolerant(
        with_opt: bool) -> None:
    """FORMERR to the query without EDNS too: the server objects to the question, not to EDNS. The client
    gets the FORMERR (as SERVFAIL), and the next name is asked with EDNS first again."""
    def reply(query: bytes, transport: str) -> bytes:
        opt = BARE_OPT if with_opt and has_opt(query) else b""
        return query[:2] + struct.pack("!HHHHH", 0x8181, 1, 0, 0, 1 if opt else 0) + query[
            12 : rawdns.question_end(query)] + opt

    cfg = {"manifests": str(fx_manifest()), "debug-listen": "127.0.0.1:0", "health-check": "0s"}
    with RawUpstream(reply) as up, running_agent({**cfg, "upstream": up.address}) as agent:
        for name in ("one.example.com", "two.example.com"):
            r = agent.query(name, "A", edns=0)
            assert r.rcode() in (dns.rcode.FORMERR, dns.rcode.SERVFAIL) and not r.answer
            label = name.split(".")[0].encode()
            asked = [has_opt(q) for q, _ in up.queries if bytes([len(label)]) + label in q]
            assert asked[:2] == [True, False], (name, asked)  # with EDNS first, every time
        with urllib.request.urlopen(agent.debug_url + "/status", timeout=5) as resp:  # noqa: S310 - loopback
            status = json.load(resp)
        (server,) = status["upstream"]["upstreams"]
        assert server["edns"] is True and server.get("edns_fallbacks", 0) == 0
        assert status["upstream"]["edns_fallback"] == 0


def test_an_edns_intolerant_upstream_gets_edns_again_after_a_while() -> None:
    def reply(query: bytes, transport: str) -> bytes:
        if has_opt(query):
            return a_reply(query, rcode=dns.rcode.FORMERR)
        return a_reply(query, records=a_record("192.0.2.9"), an=1)

    clock = [1000.0]

    from nodedns.app.agent import Agent

    with RawUpstream(reply) as up, running_agent(
        {"manifests": str(fx_manifest()), "upstream": up.address, "health-check": "0s", "cache-success": 0},
        agent_factory=lambda cfg: Agent(cfg, clock=lambda: clock[0]),
    ) as agent:
        assert agent.query("a.example.com", "A", edns=0).rcode() == dns.rcode.NOERROR
        assert agent.query("b.example.com", "A", edns=0).rcode() == dns.rcode.NOERROR
        clock[0] += 901  # past the 900 s an EDNS-intolerant server is remembered
        assert agent.query("c.example.com", "A", edns=0).rcode() == dns.rcode.NOERROR
        edns_by_name = [(q[13:14], has_opt(q)) for q, _ in up.queries if q[12] == 1]
        assert edns_by_name == [(b"a", True), (b"a", False), (b"b", False), (b"c", True), (b"c", False)]


# ----------------------------------------------------------------------------------------------
# FORMERR / NOTIMP replies: our OPT when the query had one, the question when it parsed


def raw_query(name: str, *, opcode: int = 0, opts: int = 1, qdcount: int = 1, do: bool = False) -> bytes:
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00"
    opt = b"\x00\x00\x29\x04\xd0\x00\x00" + (b"\x80" if do else b"\x00") + b"\x00\x00\x00"
    head = struct.pack("!HHHHHH", 0xBEEF, (opcode << 11) | 0x0100, qdcount, 0, 0, opts)
    return head + (qname + b"\x00\x01\x00\x01") * qdcount + opt * opts


ERROR_CASES = [
    # (id, query, rcode, question echoed, OPT in the reply)
    ("unknown-opcode-edns", raw_query("web.default.svc.cluster.local", opcode=15), dns.rcode.NOTIMP, True, True),
    ("notify-edns-do", raw_query("web.default.svc.cluster.local", opcode=4, do=True), dns.rcode.NOTIMP, True, True),
    ("unknown-opcode-plain", raw_query("web.default.svc.cluster.local", opcode=15, opts=0), dns.rcode.NOTIMP, True,
     False),
    ("two-opts", raw_query("web.default.svc.cluster.local", opts=2), dns.rcode.FORMERR, True, True),
    ("two-questions-edns", raw_query("web.default.svc.cluster.local", qdcount=2), dns.rcode.FORMERR, False, True),
    ("two-questions-plain", raw_query("web.default.svc.cluster.local", qdcount=2, opts=0), dns.rcode.FORMERR, False,
     False),
]


@pytest.mark.parametrize(("query", "rcode", "question", "opt"), [c[1:] for c in ERROR_CASES],
                         ids=[c[0] for c in ERROR_CASES])
@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_formerr_and_notimp_carry_our_opt_and_the_question_when_it_parsed(
    manifest: Path, query: bytes, rcode: int, question: bool, opt: bool, transport: str
) -> None:
    with running_agent({"manifests": str(manifest)}) as agent:
        out = udp(agent, query) if transport == "udp" else tcp(agent, query)
    assert out[:2] == b"\xbe\xef" and out[2] & 0x80 and out[3] & 0x0F == rcode
    qd, _an, _ns, ar = struct.unpack_from("!HHHH", out, 4)
    assert qd == (1 if question else 0)
    if question:
        qend = rawdns.question_end(out)
        assert out[12:qend] == query[12:qend]
    assert ar == (1 if opt else 0)
    if opt:
        assert out[-11:-8] == b"\x00\x00\x29" and out[-2:] == b"\x00\x00"  # our bare OPT, last
        assert bool(out[-4] & 0x80) == bool(query[-4] & 0x80)  # DO echoed
    if question or qd == 0:
        dns.message.from_wire(out)  # a well-formed message


# ----------------------------------------------------------------------------------------------
# TCP half-close (RFC 7766 section 6.2)


@pytest.mark.parametrize("names", [["slow.example.com"], ["search.prod.svc.cluster.local"],
                                   ["slow.example.com", "web.default.svc.cluster.local",
                                    "search.prod.svc.cluster.local"]],
                         ids=["forwarded", "externalname-chased", "pipelined-mix"])
def test_a_client_that_half_closes_still_gets_every_answer(manifest: Path, names: list[str]) -> None:
    zone = {"slow.example.com": {"A": ["192.0.2.30"]}, "search.example.com": {"A": ["192.0.2.80"]}}
    with UpstreamDouble(zone) as up, running_agent({"manifests": str(manifest), "upstream": up.address}) as agent:
        up.mode = "delay"
        up.delay = 0.3
        with rawdns.tcp_connection(agent.host, agent.port, timeout=5) as s:
            for i, name in enumerate(names):
                s.sendall(rawdns.frame(rawdns.wire_query(name, "A", qid=100 + i)))
            s.shutdown(socket.SHUT_WR)  # "that is all": the answers must still come
            got = {}
            for _ in names:
                out = rawdns.recv_frame(s, timeout=5)
                assert out is not None, "connection closed before every answer was sent"
                r = rawdns.parse(out)
                got[r.id] = r
            assert rawdns.closed_by_peer(s, timeout=5)  # then the server closes
        assert sorted(got) == [100 + i for i in range(len(names))]
        assert all(r.rcode() == dns.rcode.NOERROR and r.answer for r in got.values())


# ----------------------------------------------------------------------------------------------
# Which agent answered: CH TXT id.server. / hostname.bind., NSID, version.bind.


def ch_txt(agent: RunningAgent, name: str, rdtype: str = "TXT", tcp_: bool = False) -> dns.message.Message:
    q = dns.message.make_query(name, rdtype, rdclass=dns.rdataclass.CH)
    wire = q.to_wire()
    return rawdns.parse(tcp(agent, wire) if tcp_ else udp(agent, wire))


@pytest.mark.parametrize("name", ["id.server.", "hostname.bind.", "ID.Server."])
@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_id_server_and_hostname_bind_answer_the_node_name(manifest: Path, name: str, transport: str) -> None:
    with running_agent({"manifests": str(manifest), "node-name": "node-a"}) as agent:
        r = ch_txt(agent, name, tcp_=transport == "tcp")
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    (rrset,) = r.answer
    assert rrset.rdclass == dns.rdataclass.CH and rrset.rdtype == dns.rdatatype.TXT
    assert [rd.to_text() for rd in rrset] == ['"node-a"']


def test_without_a_node_name_the_host_name_answers(manifest: Path) -> None:
    with running_agent({"manifests": str(manifest)}) as agent:
        r = ch_txt(agent, "id.server.")
    assert [rd.to_text() for rd in r.answer[0]] == [f'"{socket.gethostname()}"']


@pytest.mark.parametrize(
    ("name", "rdtype", "version", "expect"),
    [
        ("version.bind.", "TXT", None, "REFUSED"),
        ("version.server.", "TXT", None, "REFUSED"),
        ("version.bind.", "TXT", "nodedns", '"nodedns"'),
        ("version.server.", "TXT", "nodedns", '"nodedns"'),
        ("authors.bind.", "TXT", "nodedns", "REFUSED"),
        ("id.server.", "A", None, "REFUSED"),
        ("web.default.svc.cluster.local.", "A", None, "REFUSED"),
        ("version.bind.", "TXT", "v" * 300, '"' + "v" * 255 + '" "' + "v" * 45 + '"'),  # 255 bytes a string
        ("version.bind.", "TXT", "w" * 255, '"' + "w" * 255 + '"'),
    ],
    ids=["version-bind-unset", "version-server-unset", "version-bind-set", "version-server-set", "authors-bind",
         "id-server-type-a", "cluster-name-in-ch", "version-of-300-bytes-in-two-strings",
         "version-of-255-bytes-in-one-string"],
)
def test_other_ch_questions_are_refused_unless_a_version_reply_is_set(
    manifest: Path, name: str, rdtype: str, version: str | None, expect: str
) -> None:
    cfg: dict[str, Any] = {"manifests": str(manifest), "node-name": "node-a"}
    if version is not None:
        cfg["version-reply"] = version
    with running_agent(cfg) as agent:
        r = ch_txt(agent, name, rdtype)
    if expect == "REFUSED":
        assert r.rcode() == dns.rcode.REFUSED and not r.answer
    else:
        assert r.rcode() == dns.rcode.NOERROR and [rd.to_text() for rd in r.answer[0]] == [expect]


@pytest.mark.parametrize("name", ["web.default.svc.cluster.local", "nothing.default.svc.cluster.local", BIG],
                         ids=["answer", "nxdomain", "truncated"])
def test_nsid_names_the_node_in_every_reply_that_asks(manifest: Path, path: str, name: str) -> None:
    with running_agent({"manifests": str(manifest), "node-name": "node-a"}) as agent:
        for _ in range(3):  # stored answers too: a query asking for NSID never takes them as they are
            q = dns.message.make_query(name, "A", use_edns=0, options=[dns.edns.NSIDOption(b"")])
            r = rawdns.parse(udp(agent, q.to_wire()))
            nsid = [o for o in r.options if o.otype == dns.edns.OptionType.NSID]
            assert len(nsid) == 1 and nsid[0].nsid == b"node-a"  # type: ignore[attr-defined]
            plain = rawdns.parse(udp(agent, rawdns.wire_query(name, "A", edns=0)))
            assert not plain.options  # not asked: not given


# ----------------------------------------------------------------------------------------------
# Names that cannot be DNS names


def test_a_service_name_that_is_not_a_dns_label_is_skipped_with_every_reason_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = fx.service("default", "Checkout_Svc", cluster_ips=["10.96.7.7", "not-an-ip"],
                     ports=[fx.port(70000, "http")])
    good = fx.service("default", "checkout", cluster_ips=["10.96.7.8"], ports=[fx.port(80, "http")])
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(fx.as_list([fx.namespace("default"), bad, good])), encoding="utf-8")
    with caplog.at_level(logging.WARNING), running_agent({"manifests": str(path)}) as agent:
        info = agent.agent.source_info
        assert info["loaded"] == 2 and info["skipped"] == 1  # counted as skipped, not as loaded
        assert agent.query("checkout.default.svc.cluster.local").answer
        for name in ("checkout_svc.default.svc.cluster.local", "Checkout_Svc.default.svc.cluster.local"):
            assert agent.query(name).rcode() == dns.rcode.NXDOMAIN
    (line,) = [r.getMessage() for r in caplog.records if "Checkout_Svc" in r.getMessage()]
    assert "Service default/Checkout_Svc" in line and "DNS-1035" in line
    assert "clusterIPs[1] 'not-an-ip'" in line and "ports[0].port 70000" in line  # every problem, not the first


OBJECT_PROBLEMS = [
    ("service-name", "Service", fx.service("default", "Web_1", cluster_ips=["10.96.0.1"]), ["DNS-1035"]),
    ("service-name-digit", "Service", fx.service("default", "1web", cluster_ips=["10.96.0.1"]), ["DNS-1035"]),
    ("namespace-name", "Namespace", fx.namespace("Prod_1"), ["DNS-1123"]),
    ("endpoint-hostname-and-address", "EndpointSlice",
     fx.endpoint_slice("default", "s", "web", "IPv4", [fx.endpoint("10.0.0.1", hostname="db_0"),
                                                       fx.endpoint("fd00::1")]),
     ["endpoints[0].hostname 'db_0'", "endpoints[1].addresses[0] 'fd00::1'"]),
    ("pod-hostname-and-ip", "Pod", fx.pod("default", "p", "999.1.1.1", hostname="My_Host"),
     ["spec.hostname 'my_host'", "status.podIP '999.1.1.1'"]),
]


@pytest.mark.parametrize(("kind", "obj", "reasons"), [c[1:] for c in OBJECT_PROBLEMS],
                         ids=[c[0] for c in OBJECT_PROBLEMS])
def test_an_invalid_object_names_every_problem(kind: str, obj: dict[str, Any], reasons: list[str]) -> None:
    with pytest.raises(ObjectError) as err:
        objects.slim(kind, obj)
    for reason in reasons:
        assert reason in str(err.value)


def test_valid_names_still_load() -> None:
    assert objects.slim("Service", fx.service("default", "web-1", cluster_ips=["10.96.0.1"])) is not None
    assert objects.slim("Namespace", fx.namespace("prod-1")) is not None
    assert objects.slim("Pod", fx.pod("default", "p.q", "10.0.0.1", hostname="host-1", subdomain="sub")) is not None

