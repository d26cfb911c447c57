"""The cluster zone over real sockets: dnspython (and raw bytes) against a running agent.

The same table of answers as `test_records.py` (tests/support/cluster_fixture.py), over UDP and TCP,
plus what only the wire shows: EDNS, truncation, the query's case echoed, rcodes the resolver
decides (REFUSED, NOTIMP, FORMERR, SERVFAIL before the sync), stored answers dropped when the
index changes, and TCP framing, pipelining, idle timeout and the connection limit.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.query
import dns.rcode
import dns.rdatatype
import pytest
import yaml

from nodedns.app.agent import Agent
from nodedns.cluster.index import Index
from nodedns.config import Config
from tests.support import cluster_fixture as fx
from tests.support import rawdns
from tests.support.cluster_fixture import Case
from tests.support.cluster_zone import TRANSPORTS, ask, check, texts
from tests.support.helpers import RunningAgent, running_agent

pytestmark = pytest.mark.usefixtures("hit_path")  # every test on the C and on the Python hit path

# ----------------------------------------------------------------------------------------------
# The cluster on disk, and agents serving it


def bulk_objects() -> list[dict[str, Any]]:
    """Services big enough to need truncation: `big` > 1232 bytes of A records, `medium` > 512."""
    objs: list[dict[str, Any]] = [fx.namespace("bulk")]
    for name, count in (("big", 100), ("medium", 40)):
        objs.append(fx.headless("bulk", name, ports=[fx.port(80, "http")]))
        octet = 1 if name == "big" else 2
        # split over two slices, with every endpoint of the second also in the first (duplicates)
        eps = [fx.endpoint(f"10.250.{octet}.{i}") for i in range(1, count + 1)]
        objs.append(fx.endpoint_slice("bulk", f"{name}-a", name, "IPv4", eps, [fx.port(80, "http")]))
        objs.append(fx.endpoint_slice("bulk", f"{name}-b", name, "IPv4", eps[: count // 2], [fx.port(80, "http")]))
    return objs


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cluster") / "cluster.yaml"
    path.write_text(yaml.safe_dump(fx.as_list(fx.cluster_objects() + bulk_objects())), encoding="utf-8")
    return path


def agent_config(manifest: Path, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"manifests": str(manifest), "authoritative-reverse": ",".join(fx.AUTHORITATIVE_REVERSE)}
    cfg.update(extra)
    return cfg


@pytest.fixture(scope="module")
def agent(manifest: Path, hit_path: str) -> Iterator[RunningAgent]:
    with running_agent(agent_config(manifest)) as a:
        yield a


@pytest.fixture(scope="module")
def pod_names_agent(manifest: Path, hit_path: str) -> Iterator[RunningAgent]:
    with running_agent(agent_config(manifest, **{"endpoint-pod-names": True})) as a:
        yield a


@pytest.fixture(scope="module")
def verified_agent(manifest: Path, hit_path: str) -> Iterator[RunningAgent]:
    with running_agent(agent_config(manifest, pods="verified")) as a:
        yield a


@pytest.fixture(scope="module")
def disabled_agent(manifest: Path, hit_path: str) -> Iterator[RunningAgent]:
    with running_agent(agent_config(manifest, pods="disabled")) as a:
        yield a


@pytest.fixture()
def fresh_agent(manifest: Path) -> Iterator[RunningAgent]:
    """An agent of its own, for tests that change its index."""
    with running_agent(agent_config(manifest)) as a:
        yield a


# ----------------------------------------------------------------------------------------------
# Helpers


def servfail_or_rcode(agent: RunningAgent, name: str, rdtype: str = "A") -> str:
    return dns.rcode.to_text(ask(agent, name, rdtype, "udp").rcode())


# ----------------------------------------------------------------------------------------------
# The table, over UDP and TCP

def over_transports(cases: tuple[Case, ...]) -> Any:
    """Each case once per transport, as pytest params with readable ids."""
    return [pytest.param(c, t, id=f"{c.id}-{t}") for c in cases for t in TRANSPORTS]


@pytest.mark.parametrize(("case", "transport"), over_transports(fx.CASES))
def test_cluster_zone_answers_as_the_spec_says(agent: RunningAgent, case: Case, transport: str) -> None:
    check(agent, case, transport)


@pytest.mark.parametrize(("case", "transport"), over_transports(fx.POD_NAME_CASES))
def test_endpoint_pod_names_flag_names_endpoints_after_pods(
    pod_names_agent: RunningAgent, case: Case, transport: str
) -> None:
    check(pod_names_agent, case, transport)


@pytest.mark.parametrize(("case", "transport"), over_transports(fx.POD_VERIFIED_CASES))
def test_pods_verified_answers_only_live_pods(verified_agent: RunningAgent, case: Case, transport: str) -> None:
    check(verified_agent, case, transport)


@pytest.mark.parametrize(("case", "transport"), over_transports(fx.POD_DISABLED_CASES))
def test_pods_disabled_answers_nxdomain(disabled_agent: RunningAgent, case: Case, transport: str) -> None:
    check(disabled_agent, case, transport)


@pytest.mark.parametrize("case", fx.CASES, ids=fx.case_ids(fx.CASES))
def test_plain_udp_answers_the_table_or_truncates_what_exceeds_512_bytes(agent: RunningAgent, case: Case) -> None:
    q = rawdns.wire_query(case.fqdn, case.qtype, qid=0x3131)
    out = rawdns.udp_exchange(agent.host, agent.port, q)
    assert out is not None and len(out) <= 512
    r = rawdns.parse(out)
    if r.flags & dns.flags.TC:
        full = rawdns.tcp_exchange(agent.host, agent.port, q)
        assert full is not None and len(full) > 512
        rawdns.assert_truncated_like_miekg(out, full, 512)  # as many whole records as fit, in order
        r = rawdns.parse(full)
    assert r.edns == -1
    assert dns.rcode.to_text(r.rcode()) == case.rcode
    assert texts(r.answer, case.fqdn) == sorted(case.answer)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_repeated_questions_get_the_same_answer_from_stored_bytes(agent: RunningAgent, transport: str) -> None:
    """The second ask of every case is served from the stored answer (UDP hit path): still right."""
    hits = agent.call(lambda: agent.agent.server.hits)
    for case in fx.CASES[:40]:
        check(agent, case, transport)
        check(agent, case, transport)
    if transport == "udp":
        assert agent.call(lambda: agent.agent.server.hits) >= hits + 40


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_apex_soa_over_the_wire(agent: RunningAgent, transport: str) -> None:
    r = ask(agent, fx.ZONE, "SOA", transport)
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    (rrset,) = r.answer
    assert rrset.name.to_text() == "cluster.local." and rrset.ttl == 5
    soa = rrset[0]
    assert (soa.mname.to_text(), soa.rname.to_text()) == ("ns.dns.cluster.local.", "hostmaster.cluster.local.")
    assert (soa.refresh, soa.retry, soa.expire, soa.minimum) == (7200, 1800, 86400, 5)
    assert soa.serial > 0


def test_dns_version_ttl_is_28800(agent: RunningAgent) -> None:
    r = ask(agent, f"dns-version.{fx.ZONE}", "TXT", "udp")
    assert [(rrset.ttl, rrset[0].to_text()) for rrset in r.answer] == [(28800, '"1.1.0"')]


def test_ttl_flag_sets_record_and_negative_ttls(manifest: Path) -> None:
    with running_agent(agent_config(manifest, ttl="30s")) as a:
        r = ask(a, f"web.default.svc.{fx.ZONE}", "A", "udp")
        assert r.answer[0].ttl == 30
        r = ask(a, f"nope.default.svc.{fx.ZONE}", "A", "udp")
        assert r.authority[0].ttl == 30 and r.authority[0][0].minimum == 30
    with running_agent(agent_config(manifest, ttl="1h")) as a:
        r = ask(a, f"nope.default.svc.{fx.ZONE}", "A", "udp")
        assert r.authority[0].ttl == 300 and r.authority[0][0].minimum == 3600


def test_cluster_domain_flag_moves_the_zone(manifest: Path) -> None:
    with running_agent(agent_config(manifest, **{"cluster-domain": "K8s.Example.Org."})) as a:
        r = ask(a, "web.default.svc.k8s.example.org", "A", "udp")
        assert [rd.to_text() for rd in r.answer[0]] == ["10.96.0.10"]
        assert ask(a, "dns-version.k8s.example.org", "TXT", "udp").answer[0][0].to_text() == '"1.1.0"'
        assert servfail_or_rcode(a, f"web.default.svc.{fx.ZONE}") == "REFUSED"


# ----------------------------------------------------------------------------------------------
# Rcodes the resolver decides


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("qtype", ["AXFR", "IXFR"])
def test_zone_transfers_are_refused(agent: RunningAgent, transport: str, qtype: str) -> None:
    q = rawdns.wire_query(fx.ZONE, qtype, qid=0x4242)
    host, port = agent.host, agent.port
    out = rawdns.tcp_exchange(host, port, q) if transport == "tcp" else rawdns.udp_exchange(host, port, q)
    assert out is not None
    r = rawdns.parse(out)
    assert r.id == 0x4242 and r.rcode() == dns.rcode.REFUSED and not r.answer


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("name", "rdtype"),
    [("example.com", "A"), ("1.0.0.127.in-addr.arpa", "PTR"), ("local", "SOA"), ("xcluster.local", "A")],
    ids=["foreign-name", "foreign-ptr", "zone-parent", "zone-as-label-suffix"],
)
def test_names_outside_the_cluster_zone_are_refused_without_a_forwarder(
    agent: RunningAgent, transport: str, name: str, rdtype: str
) -> None:
    r = ask(agent, name, rdtype, transport)
    assert r.rcode() == dns.rcode.REFUSED
    assert not r.answer and not r.flags & dns.flags.AA


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("opcode", [1, 2, 5, 15], ids=["iquery", "status", "update", "opcode-15"])
def test_unknown_opcodes_get_notimp(agent: RunningAgent, transport: str, opcode: int) -> None:
    q = bytearray(rawdns.wire_query(f"web.default.svc.{fx.ZONE}", "A", qid=0x1357))
    q[2] = (q[2] & 0x87) | (opcode << 3)
    host, port = agent.host, agent.port
    out = rawdns.tcp_exchange(host, port, bytes(q)) if transport == "tcp" else rawdns.udp_exchange(host, port, bytes(q))
    assert out is not None
    assert rawdns.header_id(out) == 0x1357 and rawdns.is_response(out)
    assert rawdns.rcode_of(out) == dns.rcode.NOTIMP
    assert (out[2] >> 3) & 0xF == opcode


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_chaos_class_is_refused(agent: RunningAgent, transport: str) -> None:
    msg = dns.message.make_query("version.bind", "TXT", rdclass="CH")
    msg.id = 0x2468
    host, port = agent.host, agent.port
    out = rawdns.tcp_exchange(host, port, msg.to_wire()) if transport == "tcp" else rawdns.udp_exchange(
        host, port, msg.to_wire())
    assert out is not None and rawdns.header_id(out) == 0x2468
    assert rawdns.rcode_of(out) == dns.rcode.REFUSED


MALFORMED: list[tuple[str, Callable[[bytes], bytes]]] = [
    ("question-cut-short", lambda q: q[:20]),
    ("no-question", lambda q: q[:4] + b"\x00\x00" + q[6:12]),
    ("two-questions-one-present", lambda q: q[:4] + b"\x00\x02" + q[6:]),
    ("label-runs-past-the-end", lambda q: q[:12] + b"\x3f" + b"a" * 10),
    ("compression-loop-in-question", lambda q: q[:12] + b"\xc0\x0c\x00\x01\x00\x01"),
    ("answer-count-without-answers", lambda q: q[:6] + b"\x00\x05" + q[8:]),
    ("reserved-label-type", lambda q: q[:12] + b"\x80abc\x00\x00\x01\x00\x01"),
]


@pytest.mark.parametrize("mangle", [m for _, m in MALFORMED], ids=[i for i, _ in MALFORMED])
def test_malformed_query_with_readable_header_gets_formerr(agent: RunningAgent,
                                                           mangle: Callable[[bytes], bytes]) -> None:
    q = mangle(rawdns.wire_query(f"web.default.svc.{fx.ZONE}", "A", qid=0xBEEF))
    out = rawdns.udp_exchange(agent.host, agent.port, q)
    assert out is not None
    assert rawdns.header_id(out) == 0xBEEF and rawdns.is_response(out)
    assert rawdns.rcode_of(out) == dns.rcode.FORMERR
    assert ask(agent, f"web.default.svc.{fx.ZONE}", "A", "udp").rcode() == dns.rcode.NOERROR


@pytest.mark.parametrize(
    "packet",
    [b"", b"\x12", b"\x12\x34\x01\x00\x00\x01\x00\x00\x00",
     b"\x00\x07\x81\x80" + rawdns.wire_query("web.default.svc.cluster.local", qid=7)[4:]],
    ids=["empty", "one-byte", "short-header", "a-response"],
)
def test_unreadable_packets_and_responses_are_dropped(agent: RunningAgent, packet: bytes) -> None:
    assert rawdns.udp_exchange(agent.host, agent.port, packet, timeout=0.3) is None
    assert ask(agent, f"web.default.svc.{fx.ZONE}", "A", "udp").rcode() == dns.rcode.NOERROR


# ----------------------------------------------------------------------------------------------
# EDNS (RFC 6891)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_opt_is_echoed_with_our_payload_size(agent: RunningAgent, transport: str) -> None:
    r = ask(agent, f"web.default.svc.{fx.ZONE}", "A", transport, edns=0, payload=4096)
    assert r.edns == 0 and r.payload == 1232
    assert not r.ednsflags & dns.flags.DO


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_plain_query_gets_no_opt(agent: RunningAgent, transport: str) -> None:
    r = ask(agent, f"web.default.svc.{fx.ZONE}", "A", transport)
    assert r.edns == -1


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("name", [f"web.default.svc.{fx.ZONE}", f"nope.default.svc.{fx.ZONE}"],
                         ids=["positive", "negative"])
def test_do_bit_is_echoed(agent: RunningAgent, transport: str, name: str) -> None:
    with_do = ask(agent, name, "A", transport, edns=0, dnssec=True)
    assert with_do.ednsflags & dns.flags.DO
    without = ask(agent, name, "A", transport, edns=0)
    assert without.edns == 0 and not without.ednsflags & dns.flags.DO
    assert texts(with_do.answer, name) == texts(without.answer, name)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_edns_version_above_zero_gets_badvers(agent: RunningAgent, transport: str) -> None:
    r = ask(agent, f"web.default.svc.{fx.ZONE}", "A", transport, edns=1)
    assert r.rcode() == dns.rcode.BADVERS
    assert r.edns == 0 and not r.answer


def test_max_udp_size_sets_the_payload_we_advertise(manifest: Path) -> None:
    with running_agent(agent_config(manifest, **{"max-udp-size": 4096})) as a:
        r = ask(a, f"web.default.svc.{fx.ZONE}", "A", "udp", edns=0, payload=4096)
        assert r.payload == 4096


# ----------------------------------------------------------------------------------------------
# Truncation


def full_size(agent: RunningAgent, name: str, edns: bool) -> int:
    q = rawdns.wire_query(name, "A", edns=0 if edns else False, payload=4096)
    out = rawdns.tcp_exchange(agent.host, agent.port, q)
    assert out is not None
    return len(out)


BIG = "big.bulk.svc.cluster.local"
MEDIUM = "medium.bulk.svc.cluster.local"


def test_bulk_services_are_the_sizes_the_truncation_tests_need(agent: RunningAgent) -> None:
    assert full_size(agent, BIG, edns=True) > 1232
    assert 512 < full_size(agent, MEDIUM, edns=False) and full_size(agent, MEDIUM, edns=True) <= 1232


@pytest.mark.parametrize(
    ("name", "edns", "payload", "truncated"),
    [
        (MEDIUM, False, 0, True),  # > 512 without EDNS
        (MEDIUM, True, 1232, False),
        (MEDIUM, True, 600, True),  # the client's smaller size is honoured
        (MEDIUM, True, 100, True),  # below 512 counts as 512
        (BIG, False, 0, True),
        (BIG, True, 1232, True),
        (BIG, True, 4096, True),  # capped at our 1232
        (BIG, True, 65535, True),
    ],
    ids=["medium-plain", "medium-1232", "medium-600", "medium-100", "big-plain", "big-1232", "big-4096",
         "big-65535"],
)
def test_udp_answers_larger_than_the_payload_are_truncated(
    agent: RunningAgent, name: str, edns: bool, payload: int, truncated: bool
) -> None:
    for _ in range(2):  # the first answer is built, the second served from stored bytes
        q = rawdns.wire_query(name, "A", qid=0x7777, edns=0 if edns else False, payload=payload)
        out = rawdns.udp_exchange(agent.host, agent.port, q)
        assert out is not None
        limit = max(512, min(payload, 1232)) if edns else 512
        assert len(out) <= limit
        r = rawdns.parse(out)
        assert r.id == 0x7777 and r.rcode() == dns.rcode.NOERROR
        assert bool(r.flags & dns.flags.TC) == truncated
        assert (r.edns == 0) == edns
        assert out[12 : rawdns.question_end(out)] == q[12 : rawdns.question_end(q)]
        if truncated:  # as many whole A records as fit (16 bytes each), the OPT kept: never none
            full = rawdns.tcp_exchange(agent.host, agent.port, q)
            assert full is not None
            kept = rawdns.assert_truncated_like_miekg(out, full, limit)
            assert kept == len(r.answer[0]) == (limit - rawdns.question_end(q) - (11 if edns else 0)) // 16
        else:
            assert len(r.answer[0]) == 40


@pytest.mark.parametrize("edns", [False, True], ids=["plain", "edns"])
def test_tcp_gets_the_full_answer_that_udp_truncates(agent: RunningAgent, edns: bool) -> None:
    r = ask(agent, BIG, "A", "tcp", edns=0 if edns else False)
    assert not r.flags & dns.flags.TC
    (rrset,) = r.answer
    assert sorted(rd.to_text() for rd in rrset) == sorted(f"10.250.1.{i}" for i in range(1, 101))


def test_larger_max_udp_size_avoids_truncation(manifest: Path) -> None:
    with running_agent(agent_config(manifest, **{"max-udp-size": 4096})) as a:
        r = ask(a, BIG, "A", "udp", edns=0, payload=4096)
        assert not r.flags & dns.flags.TC and len(r.answer[0]) == 100
        r = ask(a, BIG, "A", "udp", edns=0, payload=1232)
        assert r.flags & dns.flags.TC


def test_split_slices_with_duplicate_endpoints_answer_each_ip_once(agent: RunningAgent) -> None:
    r = ask(agent, MEDIUM, "A", "tcp")
    ips = [rd.to_text() for rd in r.answer[0]]
    assert len(ips) == len(set(ips)) == 40


# ----------------------------------------------------------------------------------------------
# The query's case (DNS 0x20)

MIXED = [
    ("WeB.DeFaUlT.sVc.ClUsTeR.LoCaL", "A"),
    ("_HTTP._Tcp.wEb.default.SVC.cluster.local", "SRV"),
    ("DB.Prod.Svc.Cluster.Local", "A"),
    ("NoPe.DeFault.svc.CLUSTER.local", "A"),
    ("Default.SVC.cluster.LOCAL", "A"),
    ("DNS-Version.Cluster.Local", "TXT"),
    ("Search.Prod.Svc.Cluster.Local", "A"),
    ("10.0.96.10.In-Addr.Arpa", "PTR"),
    (fx.reverse_v6("fd00:10:96::a").upper(), "PTR"),
    ("10-244-1-50.Default.POD.cluster.local", "A"),
]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(("name", "rdtype"), MIXED, ids=[f"{n}-{t}" for n, t in MIXED])
def test_mixed_case_query_is_answered_and_its_spelling_echoed(
    agent: RunningAgent, transport: str, name: str, rdtype: str
) -> None:
    host, port = agent.host, agent.port
    lower = rawdns.wire_query(name.lower(), rdtype, qid=1)
    exchange = rawdns.tcp_exchange if transport == "tcp" else rawdns.udp_exchange
    reference = exchange(host, port, lower)  # built (or stored) from the lowercase spelling
    assert reference is not None
    for qid in (0x0101, 0x0202):  # both times: the second comes from the stored answer
        q = rawdns.wire_query(name, rdtype, qid=qid)
        out = exchange(host, port, q)
        assert out is not None and rawdns.header_id(out) == qid
        qend = rawdns.question_end(q)
        assert out[12:qend] == q[12:qend], "the question must come back exactly as asked"
        r, ref = rawdns.parse(out), rawdns.parse(reference)
        assert r.rcode() == ref.rcode()
        assert texts(r.answer, name) == texts(ref.answer, name.lower())  # names compare case-insensitively
        assert texts(r.additional, None) == texts(ref.additional, None)
        for rrset in r.answer:
            if rrset.name == dns.name.from_text(name):
                assert rrset.name.to_text() == name.rstrip(".") + ".", "owners echo the query's spelling"


# ----------------------------------------------------------------------------------------------
# Sync and index changes


def unsynced_agent(config: Config) -> Agent:
    """An agent whose index loads the manifest but never reports itself synced."""
    agent = Agent(config)
    agent.index.mark_synced = lambda: None  # type: ignore[method-assign]
    return agent


def test_unsynced_index_answers_servfail_for_would_be_nxdomain(manifest: Path) -> None:
    with running_agent(agent_config(manifest), agent_factory=unsynced_agent) as a:
        for transport in TRANSPORTS:
            for name in (f"nope.default.svc.{fx.ZONE}", f"nowhere.svc.{fx.ZONE}", f"lost.prod.svc.{fx.ZONE}",
                         "98.0.96.10.in-addr.arpa"):
                r = ask(a, name, "PTR" if name.endswith("arpa") else "A", transport)
                assert r.rcode() == dns.rcode.SERVFAIL, (name, transport)
            assert [rd.to_text() for rd in ask(a, f"web.default.svc.{fx.ZONE}", "A", transport).answer[0]] == [
                "10.96.0.10"
            ]
            nodata = ask(a, f"default.svc.{fx.ZONE}", "A", transport)
            assert nodata.rcode() == dns.rcode.NOERROR and not nodata.answer
        a.call(lambda: Index.mark_synced(a.agent.index))
        assert servfail_or_rcode(a, f"nope.default.svc.{fx.ZONE}") == "NXDOMAIN"
        assert ask(a, f"nope.default.svc.{fx.ZONE}", "A", "tcp").rcode() == dns.rcode.NXDOMAIN


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_answers_follow_index_changes(fresh_agent: RunningAgent, transport: str) -> None:
    a = fresh_agent
    index = a.agent.index
    name = f"web.default.svc.{fx.ZONE}"

    def a_records(qname: str = name) -> list[str] | str:
        r = ask(a, qname, "A", transport)
        if r.rcode() != dns.rcode.NOERROR:
            return dns.rcode.to_text(r.rcode())
        return sorted(rd.to_text() for rrset in r.answer for rd in rrset)

    assert a_records() == ["10.96.0.10"]
    assert a_records() == ["10.96.0.10"]  # now stored
    gen = a.call(lambda: index.generation)
    a.call(lambda: index.apply("Service", "MODIFIED", fx.service("default", "web", cluster_ips=["10.96.0.11"])))
    assert a.call(lambda: index.generation) > gen
    assert a_records() == ["10.96.0.11"]
    a.call(lambda: index.apply("Service", "ADDED", fx.service("default", "nope", cluster_ips=["10.96.0.12"])))
    assert a_records(f"nope.default.svc.{fx.ZONE}") == ["10.96.0.12"]
    a.call(lambda: index.apply("Service", "DELETED", fx.service("default", "web")))
    assert a_records() == "NXDOMAIN"
    a.call(lambda: index.apply("EndpointSlice", "MODIFIED", fx.endpoint_slice(
        "prod", "db-1", "db", "IPv4", [fx.endpoint("10.244.1.99", hostname="db-0")], [fx.port(5432, "postgres")])))
    assert a_records(f"db.prod.svc.{fx.ZONE}") == ["10.244.1.5", "10.244.1.99", "10.244.2.8"]


# ----------------------------------------------------------------------------------------------
# TCP


def test_tcp_answers_several_pipelined_queries_on_one_connection(agent: RunningAgent) -> None:
    names = [(f"web.default.svc.{fx.ZONE}", "A"), (f"nope.default.svc.{fx.ZONE}", "A"), (BIG, "A"),
             (f"_postgres._tcp.db.prod.svc.{fx.ZONE}", "SRV"), (f"dns-version.{fx.ZONE}", "TXT"),
             ("example.com", "A")] * 3
    queries = {0x100 + i: rawdns.wire_query(n, t, qid=0x100 + i) for i, (n, t) in enumerate(names)}
    with rawdns.tcp_connection(agent.host, agent.port) as s:
        s.sendall(b"".join(rawdns.frame(q) for q in queries.values()))
        answers = {}
        for _ in queries:
            out = rawdns.recv_frame(s)
            assert out is not None
            answers[rawdns.header_id(out)] = rawdns.parse(out)
    assert set(answers) == set(queries)
    for qid, (name, _t) in zip(queries, names, strict=True):
        r = answers[qid]
        assert r.question[0].name == dns.name.from_text(name)
        want = {"nope": dns.rcode.NXDOMAIN, "example.com": dns.rcode.REFUSED}
        rcode = next((v for k, v in want.items() if name.startswith(k)), dns.rcode.NOERROR)
        assert r.rcode() == rcode, name


def test_tcp_message_split_across_writes_is_reassembled(agent: RunningAgent) -> None:
    data = rawdns.frame(rawdns.wire_query(f"web.default.svc.{fx.ZONE}", "A", qid=0x5151))
    with rawdns.tcp_connection(agent.host, agent.port) as s:
        for i in range(0, len(data), 7):
            s.sendall(data[i : i + 7])
            time.sleep(0.01)
        out = rawdns.recv_frame(s)
    assert out is not None and rawdns.header_id(out) == 0x5151
    assert rawdns.parse(out).answer[0][0].to_text() == "10.96.0.10"


def test_zero_length_frame_is_skipped_and_the_connection_goes_on(agent: RunningAgent) -> None:
    with rawdns.tcp_connection(agent.host, agent.port) as s:
        s.sendall(b"\x00\x00" + rawdns.frame(rawdns.wire_query(f"web.default.svc.{fx.ZONE}", "A", qid=0x0A0A)))
        out = rawdns.recv_frame(s)
    assert out is not None and rawdns.header_id(out) == 0x0A0A


@pytest.mark.parametrize(
    "body",
    [
        rawdns.wire_query(f"web.default.svc.{fx.ZONE}", "A", qid=0x6464) + bytes(65535 - 47),
        b"\x64\x64\x01\x00\x00\x01" + bytes(65535 - 6),
        bytes(range(256)) * 255 + bytes(range(255)),
    ],
    ids=["query-with-64k-of-trailing-zeros", "header-then-zeros", "64k-of-counting-bytes"],
)
def test_a_64k_frame_does_not_kill_the_listener(agent: RunningAgent, body: bytes) -> None:
    assert len(body) == 65535
    with rawdns.tcp_connection(agent.host, agent.port) as s:
        s.sendall(rawdns.frame(body))
        out = rawdns.recv_frame(s, timeout=2.0)
        if out is not None:  # an answer is allowed (FORMERR), a dead server is not
            assert rawdns.is_response(out) and out[:2] == body[:2]
    for transport in TRANSPORTS:
        assert ask(agent, f"web.default.svc.{fx.ZONE}", "A", transport).rcode() == dns.rcode.NOERROR
    assert agent.call(agent.agent.server.alive)


def test_tcp_length_frame_header_then_close_leaves_the_server_serving(agent: RunningAgent) -> None:
    with rawdns.tcp_connection(agent.host, agent.port) as s:
        s.sendall(struct.pack("!H", 300) + b"\x00" * 10)  # promise 300 bytes, send 10, hang up
    assert ask(agent, f"web.default.svc.{fx.ZONE}", "A", "tcp").rcode() == dns.rcode.NOERROR
