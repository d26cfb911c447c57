"""`nodedns shadow`: the capture (a real AF_PACKET socket on loopback), the parser under malformed packets, the
judge's verdicts on pairs built from real DNS messages, and the command beside a stand-in DNS on loopback."""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.message
import dns.rrset
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.cluster import manifests
from nodedns.dns.wire import QT
from nodedns.shadow import sniff
from nodedns.shadow.judge import Shadow, read_answers
from tests.support.agentproc import metric_value
from tests.support.helpers import ROOT, free_port, nodedns_cmd, subprocess_env, wait_for

EXAMPLE = str(ROOT / "examples" / "cluster.yaml")
WEB = "web.default.svc.cluster.local."  # ClusterIP 10.96.12.34 in examples/cluster.yaml
KUBERNETES = "kubernetes.default.svc.cluster.local."  # 10.96.0.1
DB = "db.prod.svc.cluster.local."  # headless: 10.244.0.30, 10.244.1.31
CLIENT = "10.244.0.90"  # Pod default/client in examples/cluster.yaml
SERVER = "10.96.0.10"
needs_root = pytest.mark.skipif(not hasattr(socket, "AF_PACKET") or __import__("os").geteuid() != 0,
                                reason="a packet socket needs CAP_NET_RAW")


# -- packets built by hand -------------------------------------------------------------------------------

def ipv4_udp(src: str, sport: int, dst: str, dport: int, payload: bytes) -> bytes:
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    head = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, socket.inet_aton(src),
                       socket.inet_aton(dst))
    return head + udp


def ipv6_tcp(src: str, sport: int, dst: str, dport: int, payload: bytes) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 1, 1, 5 << 4, 0x18, 65535, 0, 0) + payload
    head = struct.pack("!IHBB16s16s", 6 << 28, len(tcp), 6, 64, socket.inet_pton(socket.AF_INET6, src),
                       socket.inet_pton(socket.AF_INET6, dst))
    return head + tcp


def query(name: str, rdtype: str = "A", qid: int = 0x1234) -> dns.message.Message:
    q = dns.message.make_query(name, rdtype, use_edns=0)
    q.id = qid
    return q


def rr(owner: str, rdtype: str, data: str, ttl: int = 5) -> dns.rrset.RRset:
    return dns.rrset.from_text(owner, ttl, "IN", rdtype, data)


def answer(q: dns.message.Message, rrsets: list[dns.rrset.RRset], *, rcode: int = 0, tc: bool = False) -> bytes:
    r = dns.message.make_response(q)
    r.set_rcode(rcode)
    r.answer.extend(rrsets)
    if tc:
        r.flags |= dns.flags.TC
    return r.to_wire()


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make_shadow(*flags: str, clock: Clock | None = None, **kw: Any) -> tuple[Shadow, Agent]:
    config = cfgmod.from_sources({"manifests": EXAMPLE, "upstream": ["192.0.2.53:53"],
                                  **dict(f.split("=", 1) for f in flags)})
    clock = clock or Clock()
    agent = Agent(config)
    agent.index.load_changes(manifests.changes(EXAMPLE))
    agent.index.mark_synced()
    shadow = Shadow(resolver=agent.resolver, index=agent.index, zone="cluster.local", port=53, clock=clock, **kw)
    agent.changes.add(shadow.record_changed)  # as the shadow agent wires it
    return shadow, agent


def pair(shadow: Shadow, q: dns.message.Message, resp: bytes | None, *, client: str = CLIENT,
         port: int = 40000) -> None:
    shadow.packet(ipv4_udp(client, port, SERVER, 53, q.to_wire()))
    if resp is not None:
        shadow.packet(ipv4_udp(SERVER, 53, client, port, resp))


# -- the judge -------------------------------------------------------------------------------------------

def test_the_same_records_in_another_order_case_and_ttl_match() -> None:
    shadow, _ = make_shadow()
    q = query(DB)
    pair(shadow, q, answer(q, [rr(DB, "A", "10.244.1.31", 30), rr(DB, "A", "10.244.0.30", 1)]))
    q2 = query(WEB, qid=7)
    pair(shadow, q2, answer(q2, [rr(WEB, "A", "10.96.12.34")]), port=40001)
    q3 = dns.message.make_query(WEB, "A")  # no EDNS: the response is built by hand below
    q3.id = 8
    pair(shadow, q3, uncompressed_answer(q3, WEB.upper(), "10.96.12.34"), port=40002)
    assert shadow.answers["match"] == 3 and shadow.answers["mismatch"] == 0


def uncompressed_answer(q: dns.message.Message, owner: str, ip: str) -> bytes:
    """A response whose owner is spelt out (no pointer to the question), so its case is its own."""
    wire = q.to_wire()
    name = b"".join(bytes([len(label)]) + label.encode() for label in owner.rstrip(".").split(".")) + b"\0"
    head = wire[:2] + b"\x85\x80" + struct.pack("!HHHH", 1, 1, 0, 0)
    return head + wire[12:] + name + struct.pack("!HHIH", 1, 1, 5, 4) + socket.inet_aton(ip)


def test_a_wrong_address_is_a_mismatch_with_both_answers_and_the_client_pod() -> None:
    shadow, _ = make_shadow()
    q = query(WEB)
    pair(shadow, q, answer(q, [rr(WEB, "A", "10.96.99.99")]))
    assert shadow.answers["mismatch"] == 1 and shadow.mismatches == {"records": 1}
    entry = shadow.document()["mismatch_list"][0]
    assert entry["question"] == {"name": WEB, "type": "A"}
    assert entry["only_ours"] == [f"{WEB} A 10.96.12.34"]
    assert entry["only_theirs"] == [f"{WEB} A 10.96.99.99"]
    assert entry["pod"] == "default/client"
    assert entry["client"] == f"{CLIENT}:40000" and entry["server"] == f"{SERVER}:53"
    assert entry["ours"]["answer"][0]["data"] == "10.96.12.34"
    assert entry["theirs"]["answer"][0]["data"] == "10.96.99.99"


def test_a_missing_record_is_a_mismatch() -> None:
    shadow, _ = make_shadow()
    q = query(DB)
    pair(shadow, q, answer(q, [rr(DB, "A", "10.244.0.30")]))
    assert shadow.mismatches == {"records": 1}
    assert shadow.document()["mismatch_list"][0]["only_ours"] == [f"{DB} A 10.244.1.31"]


def test_nxdomain_for_an_existing_service_is_an_rcode_mismatch() -> None:
    shadow, _ = make_shadow()
    q = query(KUBERNETES)
    pair(shadow, q, answer(q, [], rcode=3))
    assert shadow.mismatches == {"rcode": 1}
    assert "NOERROR" in shadow.document()["mismatch_list"][0]["why"]


def test_nxdomain_for_an_empty_non_terminal_is_a_known_difference() -> None:
    shadow, _ = make_shadow()
    q = query("default.svc.cluster.local.")
    pair(shadow, q, answer(q, [], rcode=3))
    assert shadow.answers["known"] == 1 and shadow.known == {"empty_non_terminal": 1}
    assert shadow.answers["mismatch"] == 0
    assert "empty non-terminal" in shadow.document()["known_list"][0]["why"]


def test_a_service_changed_under_a_second_ago_is_a_propagation_race_and_later_a_mismatch() -> None:
    clock = Clock()
    shadow, agent = make_shadow(clock=clock)
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "fresh", "namespace": "default"},
           "spec": {"clusterIP": "10.96.50.50", "clusterIPs": ["10.96.50.50"], "ports": [{"port": 80}]}}
    agent.index.apply("Service", "ADDED", svc)
    clock.t += 0.4
    name = "fresh.default.svc.cluster.local."
    q = query(name)
    pair(shadow, q, answer(q, [], rcode=3))  # the other DNS has not seen it yet
    assert shadow.known == {"propagation": 1} and shadow.answers["mismatch"] == 0
    assert "Service default/fresh created 0.4 s before the query" in shadow.document()["known_list"][0]["why"]
    clock.t += 5
    q2 = query(name, qid=99)
    pair(shadow, q2, answer(q2, [], rcode=3))
    assert shadow.mismatches == {"rcode": 1}


def test_a_query_without_response_is_unknown_after_the_timeout() -> None:
    clock = Clock()
    shadow, _ = make_shadow(clock=clock)
    pair(shadow, query(WEB), None)
    assert shadow.expire() == 0 and shadow.status()["pending"] == 1
    clock.t += 3.5
    assert shadow.expire() == 1
    assert shadow.unknown == {"no_response": 1} and shadow.answers["unknown"] == 1


def test_a_truncated_answer_against_a_whole_one_is_a_truncation_mismatch() -> None:
    shadow, _ = make_shadow()
    q = query(WEB)
    pair(shadow, q, answer(q, [], tc=True))
    assert shadow.mismatches == {"truncation": 1}


def test_forwarded_names_compare_the_shape_not_the_records() -> None:
    shadow, _ = make_shadow()
    q = query("example.org.")
    pair(shadow, q, answer(q, [rr("example.org.", "A", "192.0.2.1")]))
    q2 = query("nothing.example.org.", qid=2)
    pair(shadow, q2, answer(q2, [], rcode=3), port=40001)
    assert shadow.answers["match"] == 2
    q3 = query("other.example.org.", qid=3)
    wrong = dns.message.make_response(query("else.example.org.", qid=3)).to_wire()  # not the question asked
    pair(shadow, q3, wrong, port=40002)
    # its response's question differs: it is no response to this query, so the query waits, unpaired
    assert shadow.answers["mismatch"] == 0 and shadow.status()["skipped"]["unpaired_response"] == 1


def test_a_forwarded_name_nodedns_has_no_route_for_is_a_no_route_mismatch() -> None:
    shadow, _ = make_shadow("upstream=none")
    q = query("example.org.")
    pair(shadow, q, answer(q, [rr("example.org.", "A", "192.0.2.1")]))
    assert shadow.mismatches == {"no_route": 1}


def test_queries_beyond_the_rate_are_dropped_and_counted() -> None:
    shadow, _ = make_shadow(max_rate=10.0)
    for i in range(50):
        shadow.packet(ipv4_udp(CLIENT, 41000 + i, SERVER, 53, query(WEB, qid=i).to_wire()))
    assert shadow.dropped["rate"] == 40 and shadow.status()["pending"] == 10


def test_a_query_over_4_kb_is_skipped_and_pending_queries_are_bounded_in_bytes() -> None:
    shadow, _ = make_shadow(max_pending_bytes=2000)
    big = padded_query(9, 5000)
    shadow.packet(ipv6_tcp("fd00::5", 40000, "fd00::53", 53, struct.pack("!H", len(big)) + big))
    assert shadow.skipped["oversize"] == 1 and shadow.status()["pending"] == 0
    wires = [padded_query(i, 900) for i in range(3)]  # two fit in 2,000 bytes, the third does not
    for i, wire in enumerate(wires):
        shadow.packet(ipv4_udp(CLIENT, 42000 + i, SERVER, 53, wire))
    assert shadow.status()["pending"] == 2 and shadow.status()["pending_bytes"] == 1800
    assert shadow.dropped["pending"] == 1
    q0 = dns.message.from_wire(wires[0])
    shadow.packet(ipv4_udp(SERVER, 53, CLIENT, 42000, answer(q0, [rr(WEB, "A", "10.96.12.34")])))
    assert shadow.status()["pending_bytes"] == 900 and shadow.answers["match"] == 1
    shadow.clock.t += 10  # type: ignore[attr-defined]
    assert shadow.expire() == 1 and shadow.status()["pending_bytes"] == 0


def test_the_rate_bucket_refills_at_max_rate_a_second_up_to_a_seconds_worth() -> None:
    """At most --max-rate queries a second are judged: a full bucket holds a second's worth, and it refills
    at --max-rate tokens a second (half a second: half of them), never past a second's worth."""
    clock = Clock()
    shadow, _ = make_shadow(clock=clock, max_rate=10.0)
    port = iter(range(41000, 42000))

    def burst(n: int) -> None:
        for _ in range(n):
            p = next(port)
            shadow.packet(ipv4_udp(CLIENT, p, SERVER, 53, query(WEB, qid=p).to_wire()))

    burst(11)
    assert shadow.status()["pending"] == 10 and shadow.dropped["rate"] == 1
    clock.t += 0.5
    burst(6)
    assert shadow.status()["pending"] == 15 and shadow.dropped["rate"] == 2
    clock.t += 60.0  # a quiet minute: still a second's worth, no more
    shadow.expire()
    burst(11)
    assert shadow.status()["pending"] == 10 and shadow.dropped["rate"] == 3


def test_the_other_dns_failing_with_servfail_is_unknown_not_our_mismatch() -> None:
    """A SERVFAIL from the DNS being compared says nothing about our answer: unknown (other_servfail), for a
    cluster name and a name that does not exist alike; never counted as our mismatch."""
    shadow, _ = make_shadow()
    for i, name in enumerate((WEB, KUBERNETES, "nothing.default.svc.cluster.local.")):
        q = query(name, qid=i)
        pair(shadow, q, answer(q, [], rcode=2), port=40000 + i)
    assert shadow.unknown == {"other_servfail": 3}
    assert shadow.answers["mismatch"] == 0 and not shadow.mismatches


PAIRING_EVENTS = st.lists(st.tuples(
    st.sampled_from(["query", "response", "retransmit", "stray-response", "wait", "expire"]),
    st.integers(0, 7),  # which client port
    st.floats(0.0, 2.0),  # seconds (for a wait)
), max_size=60)


@settings(max_examples=60, deadline=None)
@given(events=PAIRING_EVENTS, max_rate=st.sampled_from([2.0, 5.0, 1000.0]), max_pending=st.integers(1, 6))
def test_pairing_and_the_rate_bucket_follow_the_model(events: list[tuple[str, int, float]], max_rate: float,
                                                      max_pending: int) -> None:
    """The shadow's pairing as a sequence of events against a model: a query waits for its response (a
    retransmission of it is not judged again), at most --max-rate a second are taken (a second's worth at
    most, refilled at that rate), at most max_pending wait at once, a response pairs with the query of its
    flow, ID and question or is counted unpaired, and a query unanswered past the pairing timeout is judged
    unknown (no_response)."""
    clock = Clock()
    shadow, _ = make_shadow(clock=clock, max_rate=max_rate, max_pending=max_pending)
    pending: dict[int, float] = {}  # port -> when asked
    tokens, filled = max_rate, clock.t
    judged = dropped_rate = dropped_pending = retransmits = unpaired = no_response = 0
    for what, port, seconds in events:
        q = query(WEB, qid=0x100 + port)
        if what == "wait":
            clock.t += seconds
        elif what == "expire":
            shadow.expire()
            old = [p for p, at in pending.items() if at < clock.t - 3.0]
            for p in old:
                del pending[p]
            judged += len(old)
            no_response += len(old)
        elif what in ("query", "retransmit"):
            if what == "retransmit" and port not in pending:
                continue
            shadow.packet(ipv4_udp(CLIENT, 40000 + port, SERVER, 53, q.to_wire()))
            if port in pending:
                retransmits += 1
                continue
            tokens, filled = min(max_rate, tokens + (clock.t - filled) * max_rate), clock.t
            if tokens < 1:
                dropped_rate += 1
            elif len(pending) >= max_pending:
                dropped_pending += 1
            else:
                tokens -= 1
                pending[port] = clock.t
        elif what == "response":
            shadow.packet(ipv4_udp(SERVER, 53, CLIENT, 40000 + port, answer(q, [rr(WEB, "A", "10.96.12.34")])))
            if pending.pop(port, None) is None:
                unpaired += 1
            else:
                judged += 1
        else:  # a response to a query of another ID: no pair
            other = query(WEB, qid=0x900 + port)
            shadow.packet(ipv4_udp(SERVER, 53, CLIENT, 40000 + port, answer(other, [rr(WEB, "A", "10.96.12.34")])))
            unpaired += 1
        assert shadow.status()["pending"] == len(pending), (what, port)
        assert (shadow.dropped["rate"], shadow.dropped["pending"]) == (dropped_rate, dropped_pending), (what, port)
        assert sum(shadow.answers.values()) == judged and shadow.unknown["no_response"] == no_response
        assert (shadow.skipped["retransmit"], shadow.skipped["unpaired_response"]) == (retransmits, unpaired)


def test_a_retransmitted_query_is_judged_once() -> None:
    shadow, _ = make_shadow()
    q = query(WEB)
    shadow.packet(ipv4_udp(CLIENT, 40000, SERVER, 53, q.to_wire()))
    pair(shadow, q, answer(q, [rr(WEB, "A", "10.96.12.34")]))
    assert shadow.answers["match"] == 1 and shadow.skipped["retransmit"] == 1


def test_tcp_segments_carrying_whole_messages_are_paired_and_a_split_one_is_skipped() -> None:
    shadow, _ = make_shadow()
    q1, q2 = query(WEB, qid=1), query(KUBERNETES, qid=2)
    w1, w2 = q1.to_wire(), q2.to_wire()
    both = struct.pack("!H", len(w1)) + w1 + struct.pack("!H", len(w2)) + w2
    shadow.packet(ipv6_tcp("fd00::5", 40000, "fd00::53", 53, both))
    r1 = answer(q1, [rr(WEB, "A", "10.96.12.34")])
    r2 = answer(q2, [rr(KUBERNETES, "A", "10.96.0.2")])
    shadow.packet(ipv6_tcp("fd00::53", 53, "fd00::5", 40000, struct.pack("!H", len(r1)) + r1))
    shadow.packet(ipv6_tcp("fd00::53", 53, "fd00::5", 40000, struct.pack("!H", len(r2)) + r2))
    assert shadow.answers["match"] == 1 and shadow.mismatches == {"records": 1}
    shadow.packet(ipv6_tcp("fd00::5", 40001, "fd00::53", 53, struct.pack("!H", len(w1)) + w1[:10]))
    assert shadow.skipped["tcp_partial"] == 1


def test_the_srv_weight_is_not_compared_but_the_port_is() -> None:
    shadow, _ = make_shadow()
    name = "_http._tcp.web.default.svc.cluster.local."
    q = query(name, "SRV")
    pair(shadow, q, answer(q, [rr(name, "SRV", "0 50 80 web.default.svc.cluster.local.")]))
    assert shadow.answers["match"] == 1, shadow.document()
    q2 = query(name, "SRV", qid=2)
    pair(shadow, q2, answer(q2, [rr(name, "SRV", "0 100 8080 web.default.svc.cluster.local.")]), port=40001)
    assert shadow.mismatches == {"records": 1}


def test_an_external_name_target_outside_the_zone_is_judged_on_its_cname_only() -> None:
    clock = Clock()
    shadow, agent = make_shadow("upstream=none", clock=clock)
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext", "namespace": "default"},
           "spec": {"type": "ExternalName", "externalName": "www.example.org"}}
    agent.index.apply("Service", "ADDED", svc)
    clock.t += 5  # long after: no propagation race
    name = "ext.default.svc.cluster.local."
    q = query(name)
    pair(shadow, q, answer(q, [rr(name, "CNAME", "www.example.org."), rr("www.example.org.", "A", "192.0.2.7")]))
    assert shadow.answers["match"] == 1, shadow.document()
    q2 = query(name, qid=2)
    pair(shadow, q2, answer(q2, [rr(name, "CNAME", "elsewhere.example.org."),
                                 rr("elsewhere.example.org.", "A", "192.0.2.7")]), port=40001)
    assert shadow.mismatches == {"records": 1}


def test_the_unsynced_index_judges_nothing() -> None:
    config = cfgmod.from_sources({"manifests": EXAMPLE, "upstream": ["192.0.2.53:53"]})
    agent = Agent(config)
    shadow = Shadow(resolver=agent.resolver, index=agent.index, zone="cluster.local", port=53, clock=Clock())
    agent.changes.add(shadow.record_changed)  # as the shadow agent wires it
    q = query(WEB)
    pair(shadow, q, answer(q, [rr(WEB, "A", "10.96.12.34")]))
    assert shadow.unknown == {"not_synced": 1} and shadow.answers["match"] == 0


# -- malformed packets -------------------------------------------------------------------------------------

def test_malformed_packets_never_raise_and_count_nothing_as_judged() -> None:
    shadow, _ = make_shadow()
    rnd = random.Random(32)
    q = query(WEB)
    good = [ipv4_udp(CLIENT, 40000, SERVER, 53, q.to_wire()),
            ipv4_udp(SERVER, 53, CLIENT, 40000, answer(q, [rr(WEB, "A", "10.96.12.34")])),
            ipv6_tcp("fd00::5", 40000, "fd00::53", 53, b"\x00\x20" + q.to_wire())]
    for _ in range(6000):
        base = bytearray(rnd.choice(good))
        how = rnd.randrange(4)
        if how == 0:
            data = bytes(base[:rnd.randrange(len(base) + 1)])
        elif how == 1:
            for _ in range(rnd.randrange(1, 6)):
                base[rnd.randrange(len(base))] = rnd.randrange(256)
            data = bytes(base)
        elif how == 2:
            data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(80)))
        else:
            data = bytes(base) + bytes(rnd.randrange(256) for _ in range(rnd.randrange(40)))
        shadow.packet(data)  # must not raise
        sniff.parse_packet(data)
    shadow.expire(shadow.clock() + 10)
    assert shadow.packets == 6000


def test_unreadable_responses_are_not_judged_records() -> None:
    with pytest.raises(Exception):  # noqa: B017 - the judge's own error type, raised for any byte string
        read_answers(b"\x00" * 5)


# -- the capture on a real socket ------------------------------------------------------------------------

@needs_root
def test_the_filter_keeps_the_port_both_ways_over_udp_and_tcp_and_loopback_once() -> None:
    port, other = free_port(), free_port()
    cap = sniff.open_capture("lo", port)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", port))
    srv.listen()
    try:
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.sendto(b"to-port", ("127.0.0.1", port))
        u.sendto(b"elsewhere", ("127.0.0.1", other))
        u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        u6.sendto(b"to-port-v6", ("::1", port))
        t = socket.create_connection(("127.0.0.1", port))
        t.sendall(b"\x00\x03tcp")
        seen: list[sniff.Segment] = []

        def read() -> bool:
            while True:
                try:
                    data, addr = cap.recvfrom(65535)
                except BlockingIOError:
                    break
                assert not sniff.duplicate(addr[2], addr[3])  # the filter drops loopback's outgoing copy
                seg = sniff.parse_packet(data)
                if seg is not None and seg.payload:
                    seen.append(seg)
            return len(seen) >= 3

        wait_for(read, 5, "three payloads captured")
        payloads = sorted(s.payload for s in seen)
        assert payloads == [b"\x00\x03tcp", b"to-port", b"to-port-v6"]  # each once, nothing of the other port
        assert {s.dport for s in seen} == {port}
        assert [s.tcp for s in seen if s.payload == b"\x00\x03tcp"] == [True]
        for s in (u, u6, t):
            s.close()
    finally:
        srv.close()
        cap.close()


def test_the_port_filter_rejects_a_port_that_is_none() -> None:
    with pytest.raises(ValueError):
        sniff.port_filter(0)


# -- the command beside a stand-in DNS --------------------------------------------------------------------

@contextlib.contextmanager
def dnsmasq(port: int, records: dict[str, str], tmp: Path) -> Iterator[None]:
    """A stand-in current DNS on 127.0.0.1:port answering these A records, NXDOMAIN for the rest of the zone."""
    args = ["dnsmasq", "--no-daemon", f"--port={port}", "--listen-address=127.0.0.1", "--bind-interfaces",
            "--no-resolv", "--no-hosts", "--local=/cluster.local/", f"--pid-file={tmp / 'dnsmasq.pid'}",
            f"--log-facility={tmp / 'dnsmasq.log'}", "--user=root"]
    args += [f"--host-record={name.rstrip('.')},{ip}" for name, ip in records.items()]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def shadow_process(port: int, tmp: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[bytes], int, int]]:
    status, debug = free_port(), free_port()
    log = tmp / "shadow.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(nodedns_cmd("shadow", "--manifests", EXAMPLE, "--interface", "lo", "--port", str(port),
                                            "--status-listen", f"127.0.0.1:{status}", "--debug-listen",
                                            f"127.0.0.1:{debug}", "--upstream", "none", *extra),
                                env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc, status, debug
    finally:
        proc.terminate()
        proc.wait(10)


def get(port: int, path: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:  # noqa: S310
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@needs_root
@pytest.mark.skipif(shutil.which("dnsmasq") is None, reason="dnsmasq is not installed")
def test_shadow_beside_a_stand_in_dns_reports_the_wrong_service_and_matches_the_rest(tmp_path: Path) -> None:
    port = free_port()
    records = {WEB: "10.96.99.99", KUBERNETES: "10.96.0.1", "api.prod.svc.cluster.local.": "10.244.0.50"}
    with dnsmasq(port, records, tmp_path), shadow_process(port, tmp_path) as (proc, status, debug):
        wait_for(lambda: get(status, "/readyz")[0] == 200, 30, "the shadow ready")
        names = [WEB, KUBERNETES, WEB, KUBERNETES]
        for name in names:
            assert wait_for_answer(dns.message.make_query(name, "A"), port).rcode() == 0, name

        def settled() -> dict[str, Any] | None:
            doc = json.loads(get(debug, "/debug/shadow")[1])
            return doc if sum(doc["answers"].values()) >= len(names) else None

        wait_for(settled, 10, "every pair judged")
        doc = settled()
        assert doc is not None
        assert doc["answers"]["mismatch"] == 2 and doc["answers"]["match"] == 2, doc
        assert {m["question"]["name"] for m in doc["mismatch_list"]} == {WEB}
        assert doc["mismatch_list"][0]["only_theirs"] == [f"{WEB} A 10.96.99.99"]
        metrics = get(status, "/metrics")[1]
        assert metric_value(metrics, "nodedns_shadow_answers_total", result="mismatch") == 2
        assert metric_value(metrics, "nodedns_shadow_answers_total", result="match") == 2
        assert metric_value(metrics, "nodedns_shadow_mismatches_total", reason="records") == 2
        report = subprocess.run(nodedns_cmd("shadow", "--report", "--debug", f"http://127.0.0.1:{debug}"),
                                env=subprocess_env(), capture_output=True, text=True, timeout=30)
        assert report.returncode == 0, report.stderr
        assert "mismatch   2" in report.stdout and WEB in report.stdout and "A 10.96.99.99" in report.stdout
        assert f"watching lo port {port}: 4 queries judged" in report.stdout
        page = get(debug, "/")[1]
        assert "<section id=shadow>" in page and "10.96.99.99" in page
        # it answers nothing: the page leads with the verdict, then what it found; no serving chart
        assert page.index("id=verdict") < page.index("<section id=shadow>") < page.index("<section id=now>")
        assert "2 mismatches in 4 answers judged (records 2;" in page and f"on lo port {port}" in page
        assert "<section id=charts>" not in page and "Answers since the start" not in page
        assert "<section id=insight>" not in page
        assert proc.poll() is None


def wait_for_answer(q: dns.message.Message, port: int) -> dns.message.Message:
    import dns.query

    got: list[dns.message.Message] = []

    def ask() -> bool:
        try:
            got.append(dns.query.udp(q, "127.0.0.1", port=port, timeout=1))
        except dns.exception.Timeout:
            return False
        return True

    wait_for(ask, 10, f"an answer from the stand-in DNS for {q.question[0].name}")
    return got[0]


def test_report_of_an_agent_that_is_no_shadow_says_so(tmp_path: Path) -> None:
    from tests.support.agentproc import AgentProcess

    with AgentProcess(["--manifests", EXAMPLE], log=tmp_path / "agent.log") as agent:
        agent.wait_ready()
        r = subprocess.run(nodedns_cmd("shadow", "--report", "--debug", f"http://127.0.0.1:{agent.debug_port}"),
                           env=subprocess_env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "/debug/shadow" in r.stderr and "shadow" in r.stderr


def test_report_without_a_shadow_running_is_exit_1() -> None:
    port = free_port()
    r = subprocess.run(nodedns_cmd("shadow", "--report", "--debug", f"http://127.0.0.1:{port}"),
                       env=subprocess_env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and r.stderr.startswith("nodedns:")


def test_shadow_without_the_capability_fails_with_one_line(tmp_path: Path) -> None:
    r = subprocess.run(nodedns_cmd("shadow", "--manifests", EXAMPLE, "--interface", "no-such-if0", "--port", "5",
                                   "--status-listen", "none", "--debug-listen", "none", "--upstream", "none"),
                       env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "capture on no-such-if0 port 5" in r.stderr and "Traceback" not in r.stderr


def test_read_answers_folds_case_and_drops_ttl_and_srv_weight() -> None:
    q = query(WEB, "SRV")
    a = read_answers(answer(q, [rr(WEB.upper(), "SRV", "0 33 80 WEB.default.svc.cluster.local.", 77)]))
    assert a.records == frozenset({(WEB, "SRV", f"0 80 {WEB}")})
    assert QT.name(QT.SRV) == "SRV"


def shadow_memory_limit() -> int:
    """The memory limit daemonset-shadow/ states for the shadow's container, in bytes."""
    import yaml

    doc = yaml.safe_load((ROOT / "daemonset-shadow" / "shadow.yaml").read_text())
    (container,) = [c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == "nodedns"]
    text = container["resources"]["limits"]["memory"]
    assert text.endswith("Mi"), text
    return int(text[:-2]) << 20


def padded_query(qid: int, size: int) -> bytes:
    """A query for a cluster name with an EDNS padding option (RFC 7830) making it `size` bytes."""
    q = dns.message.make_query(WEB, "A", use_edns=0)
    q.id = qid
    wire = q.to_wire()
    pad = size - len(wire) - 4
    # the OPT record is last: its RDLENGTH (2 bytes before the end) grows by the option
    return wire[:-2] + struct.pack("!HHH", pad + 4, 12, pad) + b"\x00" * pad


@needs_root
def test_padded_tcp_floods_hold_the_shadow_within_its_queue_and_pending_bytes(tmp_path: Path) -> None:
    """16 connections of one Pod sending TCP queries padded to 60 KB (each in one loopback segment) as fast as
    the current DNS reads them: the shadow skips them ("oversize"), its queue holds at most its bytes, and
    its memory stays far under the DaemonSet's limit; a plain query after the flood is still judged."""
    import threading
    import time

    from tests.support.agentproc import proc_kib

    port = free_port()
    stop = threading.Event()
    server = socket.create_server(("127.0.0.1", port), backlog=64)

    def serve() -> None:  # the current DNS: takes every byte, answers nothing
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            threading.Thread(target=drain, args=(conn,), daemon=True).start()

    def drain(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(0.5)
            while not stop.is_set():
                try:
                    if not conn.recv(1 << 20):
                        return
                except OSError:
                    continue

    sent = [0]

    def flood() -> None:
        frame = padded_query(7, 60_000)
        data = struct.pack("!H", len(frame)) + frame
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)) as c:
            while not stop.is_set():
                c.sendall(data)
                sent[0] += 1

    threading.Thread(target=serve, daemon=True).start()
    with shadow_process(port, tmp_path) as (proc, status, debug):
        wait_for(lambda: get(status, "/readyz")[0] == 200, 30, "the shadow ready")
        before = proc_kib(proc.pid, "VmRSS")
        floods = [threading.Thread(target=flood, daemon=True) for _ in range(16)]
        for t in floods:
            t.start()
        peak = before
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            peak = max(peak, proc_kib(proc.pid, "VmRSS"))
            time.sleep(0.1)
        stop.set()
        for t in floods:
            t.join(5)
        server.close()
        doc = json.loads(get(debug, "/debug/shadow")[1])
        assert proc.poll() is None
        assert sent[0] > 1000, sent  # the flood ran
        assert (peak - before) // 1024 < 96, f"the shadow grew {(peak - before) // 1024} MB under the flood"
        assert peak * 1024 < shadow_memory_limit() // 2, f"the shadow reached {peak // 1024} MB"
        assert doc["skipped"].get("oversize", 0) > 100, doc["skipped"]
        assert doc["pending"] == 0 or doc["pending_bytes"] <= 16 << 20
