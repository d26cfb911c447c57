"""Names from the API that the wire cannot carry: an ExternalName with a 64-character label or an empty
label, pod names that are no DNS label, long cluster ids, Node labels in federation names; and the
worker channel's defence when an answer cannot be sent (SERVFAIL for that query, the channel kept)."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from nodedns.cluster import objects as k8s
from nodedns.cluster.index import ADDED, MODIFIED, Index
from nodedns.cluster.records import ClusterRecords, ZoneSettings
from nodedns.dns.keys import make_key
from nodedns.dns.message import parse_query
from nodedns.dns.queries import make_query as wire_query
from nodedns.dns.wire import QT, RCODE
from nodedns.names import name_problem
from nodedns.runtime.logutil import error_totals
from nodedns.serve.answers import ANSWER
from nodedns.serve.cache import ClusterAnswers
from nodedns.workers.channel import Channel, decode, encode_answers
from nodedns.workers.messages import Answers
from tests.support import manifests as m
from tests.support.apiserver import FakeApiServer
from tests.support.helpers import running_agent, wait_for
from tests.support.shipped import ShippedAgent, cluster
from tests.support.upstream_double import UpstreamDouble
from tests.support.wiring import resolver_of, watched

LONG_LABEL = "a" * 64 + ".example.com"
EMPTY_LABEL = "a..b.example.com"


@pytest.mark.parametrize(("name", "problem"), [
    ("db.example.com", None),
    ("_dmarc.example.com", None),
    ("a" * 63 + ".example.com", None),
    (".".join(["abcdefgh"] * 28) + ".c", None),  # 253 characters
    (LONG_LABEL, "a label of 64 characters"),
    (EMPTY_LABEL, "an empty label"),
    (".example.com", "an empty label"),
    (".".join(["abcdefgh"] * 28) + ".co", "254 characters"),
    ("ünï.example.com", "not ASCII"),
    ("a b.example.com", "characters other than"),
    ("a\\.b.example.com", "characters other than"),
    ("", "empty"),
], ids=["plain", "underscore", "63-octet-label", "253-characters", "64-octet-label", "empty-label", "leading-dot",
        "254-characters", "not-ascii", "space", "escape", "empty"])
def test_a_name_fits_the_wire_only_with_labels_of_1_to_63_octets_and_253_characters(name: str,
                                                                                     problem: str | None) -> None:
    found = name_problem(name)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def _external(name: str, target: str) -> dict[str, Any]:
    return m.service(name, external_name=target)


@pytest.mark.parametrize("target", [LONG_LABEL, EMPTY_LABEL, "x" * 250 + ".com"],
                         ids=["64-octet-label", "empty-label", "too-long"])
def test_an_externalname_the_wire_cannot_carry_is_kept_with_its_reason(target: str) -> None:
    svc = k8s.slim(k8s.SERVICE, _external("bad", target))
    assert isinstance(svc, k8s.Service) and svc.kind == k8s.EXTERNAL_NAME
    assert svc.external_name == ""
    assert "spec.externalName" in svc.target_problem and "cannot be a DNS name" in svc.target_problem


def test_a_usable_externalname_keeps_its_target_and_no_problem() -> None:
    svc = k8s.slim(k8s.SERVICE, _external("ok", "DB.Example.COM."))
    assert isinstance(svc, k8s.Service)
    assert (svc.external_name, svc.target_problem) == ("db.example.com", "")


def _records_with(*objs: tuple[str, dict[str, Any]]) -> tuple[Index, ClusterRecords]:
    index = Index()
    index.load([("Namespace", m.namespace("default")), *objs])
    index.mark_synced()
    return index, ClusterRecords(index, ZoneSettings())


@pytest.mark.parametrize("qtype", [QT.A, QT.AAAA, QT.CNAME, QT.TXT, QT.SRV, QT.ANY],
                         ids=["A", "AAAA", "CNAME", "TXT", "SRV", "ANY"])
def test_a_service_with_no_usable_target_answers_nxdomain_for_every_type(qtype: int) -> None:
    _, records = _records_with(("Service", _external("bad", LONG_LABEL)))
    found = records.lookup("bad.default.svc.cluster.local", qtype)
    assert found is not None and found.rcode == RCODE.NXDOMAIN and not found.answer


def test_the_index_logs_an_unusable_externalname_once_and_forgets_it_when_fixed(
        caplog: pytest.LogCaptureFixture) -> None:
    index = Index()
    bad = _external("bad", EMPTY_LABEL)
    with caplog.at_level("INFO", logger="nodedns.index"):
        for _ in range(3):  # re-sent unchanged (a resync, a relist): no new line
            index.apply("Service", MODIFIED, bad)
        index.begin_relist("Service")
        index.apply("Service", ADDED, bad)
        index.end_relist("Service")
        changed = {**bad, "spec": {**bad["spec"], "ports": [{"name": "http", "port": 80}]}}
        index.apply("Service", MODIFIED, changed)  # another field changed, the same bad target: no new line
    lines = [r.getMessage() for r in caplog.records if "default/bad" in r.getMessage()]
    assert len(lines) == 1 and "a..b.example.com" in lines[0] and "NXDOMAIN" in lines[0], lines
    assert list(index.unusable) == [("default", "bad")]
    index.apply("Service", MODIFIED, _external("bad", "db.example.com"))
    assert index.unusable == {}
    index.apply("Service", MODIFIED, bad)
    index.delete("Service", "default", "bad")
    assert index.unusable == {}


def test_pod_names_that_are_no_dns_label_name_no_endpoint() -> None:
    long_pod = "p" * 64
    sl = m.endpoint_slice("web-1", "web", [m.endpoint("10.0.0.1", pod=long_pod),
                                           m.endpoint("10.0.0.2", pod="dotted.name"),
                                           m.endpoint("10.0.0.3", pod="web-0")])
    index = Index()
    index.load([("Namespace", m.namespace("default")), ("Service", m.service("web", headless=True,
                ports=[{"name": "http", "port": 80}])), ("EndpointSlice", sl)])
    index.mark_synced()
    records = ClusterRecords(index, ZoneSettings(endpoint_pod_names=True))
    found = records.lookup("web.default.svc.cluster.local", QT.SRV)
    assert found is not None
    targets = sorted(rr.data[3].split(".")[0] for rr in found.answer)
    assert targets == ["10-0-0-1", "10-0-0-2", "web-0"]


def test_srv_targets_longer_than_the_wire_carries_are_left_out() -> None:
    zone = ".".join(["z" * 60] * 3)  # 182 characters: with a 63-character hostname the target is too long
    sl = m.endpoint_slice("web-1", "web", [m.endpoint("10.0.0.1", hostname="h" * 63),
                                           m.endpoint("10.0.0.2", hostname="short")])
    index = Index()
    index.load([("Namespace", m.namespace("default")), ("Service", m.service("web", headless=True,
                ports=[{"name": "http", "port": 80}])), ("EndpointSlice", sl)])
    index.mark_synced()
    records = ClusterRecords(index, ZoneSettings(zone=zone))
    found = records.lookup(f"web.default.svc.{zone}", QT.SRV)
    assert found is not None
    assert [rr.data[3].split(".")[0] for rr in found.answer] == ["short"]
    q = parse_query(wire_query(f"web.default.svc.{zone}", QT.SRV))
    resolver = watched(resolver_of(records=records, index=index, cluster_answers=ClusterAnswers()))
    assert resolver.answers.cluster_reply(q)[1][3] & 0xF == RCODE.NOERROR


@pytest.mark.parametrize(("zone", "region", "domain"), [
    ("z" * 63, "r" * 63, ".".join(["x" * 50] * 2) + ".example.com"),
    ("eu..west", "eu", "example.com"),  # a label value may hold dots, two in a row too
], ids=["too-long", "empty-label"])
def test_a_federation_name_from_node_labels_the_wire_cannot_carry_is_servfail(zone: str, region: str,
                                                                              domain: str) -> None:
    index, _ = _records_with(("Node", m.node("node-a", zone=zone, region=region)))
    records = ClusterRecords(index, ZoneSettings(node_name="node-a", federations=(("fed", domain),)))
    found = records.lookup("web.default.fed.svc.cluster.local", QT.A)
    assert found is not None and found.rcode == RCODE.SERVFAIL
    fine = ClusterRecords(index, ZoneSettings(node_name="node-a", federations=(("fed", "example.com"),)))
    if zone == "z" * 63:
        found = fine.lookup("web.default.fed.svc.cluster.local", QT.A)
        assert found is not None and found.rcode == RCODE.NOERROR  # the same labels fit with a short domain


def test_an_answer_the_wire_cannot_carry_is_servfail_counted_not_an_exception() -> None:
    index = Index()
    index.upsert(k8s.Namespace("default"))
    # a record that slipped past the checks at the edge (built directly, not from an API object)
    index.upsert(k8s.Service("default", "bad", k8s.EXTERNAL_NAME, (), (), LONG_LABEL, False, ""))
    index.mark_synced()
    resolver = watched(resolver_of(
        records=ClusterRecords(index, ZoneSettings()), index=index, cluster_answers=ClusterAnswers()))
    before = error_totals().get("unencodable answer", 0)
    q = parse_query(wire_query("bad.default.svc.cluster.local", QT.CNAME))
    kind, wire, tags, *_ = resolver.answers.cluster_reply(q)
    assert kind == ANSWER and wire[3] & 0xF == RCODE.SERVFAIL and "s:default/bad" in tags
    assert error_totals()["unencodable answer"] == before + 1
    reply = resolver.handle(b"\x12\x34" + wire_query("bad.default.svc.cluster.local", QT.CNAME)[2:], "127.0.0.1")
    assert isinstance(reply, bytes) and reply[:2] == b"\x12\x34" and reply[3] & 0xF == RCODE.SERVFAIL


# ----------------------------------------------------------------------------------------------
# The worker channel


def test_a_reply_that_cannot_be_sent_to_a_worker_is_servfail_for_that_query_only() -> None:
    index = Index()
    resolver = watched(resolver_of(
        records=ClusterRecords(index, ZoneSettings()), index=index, cluster_answers=ClusterAnswers()))
    good_key = make_key(b"\x03web\x07default\x03svc\x07cluster\x05local\x00\x00\x01\x00\x01", 1)
    bad_key = make_key(b"\x03bad\x07default\x03svc\x07cluster\x05local\x00\x00\x01\x00\x01", 1)
    good = (ANSWER, b"good", frozenset({"s:x"}), True)
    unpicklable = (ANSWER, b"bad", frozenset(), lambda: None)  # a lambda cannot be pickled
    frame = encode_answers([(good_key, good, True), (bad_key, unpicklable, True)], resolver.answers.servfail_reply)
    message = decode(frame[4:])
    assert isinstance(message, Answers) and len(message.answers) == 2
    answers = message.answers
    assert answers[0] == (good_key, good, True)
    key, reply, keep = answers[1]
    assert key == bad_key and keep is False and reply[1][3] & 0xF == RCODE.SERVFAIL


@pytest.mark.parametrize("keep_on_error", [True, False], ids=["supervisor-keeps", "worker-closes"])
def test_a_message_the_receiver_fails_on_is_counted_and_only_a_worker_closes_its_channel(keep_on_error: bool) -> None:
    async def main() -> tuple[list[Any], bool]:
        a, b = socket.socketpair()
        got: list[Any] = []

        def deliver(message: Any) -> None:
            if message == "boom":
                raise RuntimeError("a bug in a handler")
            got.append(message)

        receiver = await Channel.open(a, deliver, keep_on_error=keep_on_error)
        sender = await Channel.open(b, lambda _m: None)
        sender.send_encoded(Channel.encode("one") + Channel.encode("boom") + Channel.encode("two"))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(got) == 2 or receiver.is_closing():
                break
        closing = receiver.is_closing()
        assert receiver.delivery_errors == 1
        receiver.close()
        sender.close()
        return got, closing

    got, closing = asyncio.run(main())
    if keep_on_error:
        assert got == ["one", "two"] and not closing
    else:
        assert got == ["one"] and closing


# ----------------------------------------------------------------------------------------------
# On the wire


def _ask(host: str, port: int, name: str, rdtype: str) -> dns.message.Message:
    return dns.query.udp(dns.message.make_query(name, rdtype), host, port=port, timeout=3)


def test_one_process_answers_nxdomain_for_an_unusable_externalname_without_a_panic(tmp_path: Path) -> None:
    manifest = tmp_path / "cluster.yaml"
    m.write(manifest, [m.namespace("default"), _external("long", LONG_LABEL), _external("dots", EMPTY_LABEL),
                       m.service("web", cluster_ips=["10.96.0.10"])])
    with running_agent({"manifests": str(manifest), "status-listen": "127.0.0.1:0"}) as agent:
        for _ in range(5):
            for name in ("long", "dots"):
                for rdtype in ("A", "AAAA", "CNAME"):
                    r = agent.query(f"{name}.default.svc.cluster.local", rdtype)
                    assert r.rcode() == dns.rcode.NXDOMAIN, (name, rdtype, r)
        assert agent.query("web.default.svc.cluster.local").answer[0][0].to_text() == "10.96.0.10"
        text = _metrics(agent.status_url)
        assert _metric(text, "nodedns_index_unusable_names", field="spec.externalName") == 2
        assert _metric(text, "coredns_panics_total") in (0, None)


LONGEST = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 53, "example"])  # 253 characters: 255 octets on the wire


def test_an_externalname_of_the_longest_legal_name_is_chased_to_its_address(tmp_path: Path) -> None:
    """A target of 253 characters (255 octets on the wire, the most a name may have) is a name like any
    other: the CNAME, then the upstream's address for it."""
    assert len(LONGEST) == 253 and name_problem(LONGEST) is None
    manifest = tmp_path / "cluster.yaml"
    m.write(manifest, [m.namespace("default"), _external("longest", LONGEST)])
    with UpstreamDouble({LONGEST: {"A": ["192.0.2.53"]}}) as up, \
            running_agent({"manifests": str(manifest), "upstream": up.address, "status-listen": "127.0.0.1:0"}
                          ) as agent:
        r = agent.query("longest.default.svc.cluster.local", "A")
        assert r.rcode() == dns.rcode.NOERROR
        assert [(rr.rdtype, rr[0].to_text()) for rr in r.answer] == [
            (dns.rdatatype.CNAME, LONGEST + "."), (dns.rdatatype.A, "192.0.2.53")]
        assert up.count(LONGEST) >= 1


def test_a_reverse_name_keeps_the_targets_that_fit_and_leaves_out_one_too_long() -> None:
    """A PTR of an endpoint address names each endpoint there; one whose name is longer than 253 characters
    (a long zone, a 63-character hostname) is left out, and the others are answered (not SERVFAIL)."""
    zone = ".".join(["z" * 60] * 3)  # 182 characters: with a 63-character hostname the name is too long
    index = Index()
    index.load([("Namespace", m.namespace("default")),
                ("Service", m.service("web", headless=True, ports=[{"name": "http", "port": 80}])),
                ("Service", m.service("db", headless=True, ports=[{"name": "sql", "port": 5432}])),
                ("EndpointSlice", m.endpoint_slice("web-1", "web", [m.endpoint("10.0.0.1", hostname="h" * 63)])),
                ("EndpointSlice", m.endpoint_slice("db-1", "db", [m.endpoint("10.0.0.1", hostname="short")]))])
    index.mark_synced()
    records = ClusterRecords(index, ZoneSettings(zone=zone))
    resolver = watched(resolver_of(records=records, index=index, cluster_answers=ClusterAnswers()))
    q = parse_query(wire_query("1.0.0.10.in-addr.arpa", QT.PTR))
    reply = resolver.answers.cluster_reply(q)[1]
    assert reply[3] & 0xF == RCODE.NOERROR
    msg = dns.message.from_wire(reply)
    assert [rr.to_text() for rrset in msg.answer for rr in rrset] == [f"short.db.default.svc.{zone}."]


def _metrics(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:  # noqa: S310 - our own loopback URL
        return str(resp.read().decode())


def _metric(text: str, name: str, **labels: str) -> float | None:
    from tests.support.agentproc import metric_value

    return metric_value(text, name, **labels)


@pytest.fixture
def api_and_upstream() -> Iterator[tuple[FakeApiServer, UpstreamDouble]]:
    with FakeApiServer() as api, UpstreamDouble({"db.example.com": {"A": ["192.0.2.7"]}}) as up:
        yield api, up


def test_the_shipped_agent_answers_nxdomain_for_unusable_externalnames_and_no_worker_restarts(
        tmp_path: Path, api_and_upstream: tuple[FakeApiServer, UpstreamDouble]) -> None:
    api, up = api_and_upstream
    cluster(api)
    api.put("Service", _external("long", LONG_LABEL))
    api.put("Service", _external("dots", EMPTY_LABEL))
    api.put("Service", _external("fine", "db.example.com"))
    with ShippedAgent(tmp_path, api, up) as agent:
        agent.wait_ready()
        # fresh source ports: SO_REUSEPORT spreads the queries over both workers; each asks the supervisor
        for _ in range(12):
            for name in ("long", "dots"):
                for rdtype in ("A", "AAAA", "CNAME"):
                    r = _ask("127.0.0.1", agent.port, f"{name}.default.svc.cluster.local", rdtype)
                    assert r.rcode() == dns.rcode.NXDOMAIN, (name, rdtype, r)
        fine = _ask("127.0.0.1", agent.port, "fine.default.svc.cluster.local", "A")
        assert [rrset.rdtype for rrset in fine.answer] == [dns.rdatatype.CNAME, dns.rdatatype.A]
        status = agent.get("/status")[1]
        assert [w["restarts"] for w in _json(status)["workers"]["workers"]] == [0, 0]
        assert agent.metric("nodedns_index_unusable_names", field="spec.externalName") == 2
        assert "supervisor is gone" not in agent.log.read_text()
        log = agent.log.read_text()
        assert len(re.findall(r"Service default/long: spec\.externalName", log)) == 1, log[-3000:]
        assert len(re.findall(r"Service default/dots: spec\.externalName", log)) == 1, log[-3000:]
        api.put("Service", _external("long", "db.example.com"))  # fixed: the Service answers again

        def fixed() -> bool:
            r = _ask("127.0.0.1", agent.port, "long.default.svc.cluster.local", "CNAME")
            return r.rcode() == dns.rcode.NOERROR and bool(r.answer)

        wait_for(fixed, timeout=10, what="the fixed ExternalName answered")
        assert agent.metric("nodedns_index_unusable_names", field="spec.externalName") == 1


def _json(text: str) -> Any:
    import json

    return json.loads(text)
