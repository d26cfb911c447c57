"""The index owner's replies (nodedns.serve.answers): each kind crosses the worker channel as it is, kept as said."""

from __future__ import annotations

from nodedns.cluster import objects as k8s
from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords, ZoneSettings
from nodedns.dns.message import parse_query
from nodedns.dns.queries import make_query as wire_query
from nodedns.dns.wire import QT, RCODE
from nodedns.serve.answers import ANSWER, BEFORE_SYNC, CHASE, FORWARD, Reply
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.resolver import Resolver
from nodedns.workers.channel import decode, encode_answers
from nodedns.workers.messages import Answers
from tests.support.wiring import resolver_of, watched


def owner() -> Resolver:
    index = Index()
    index.upsert(k8s.Namespace("default"))
    index.upsert(k8s.Service("default", "web", k8s.CLUSTER_IP, ("10.0.0.10",), (), "", False, ""))
    index.upsert(k8s.Service("default", "ext", k8s.EXTERNAL_NAME, (), (), "www.example.org", False, ""))
    index.mark_synced()
    return watched(resolver_of(
        records=ClusterRecords(index, ZoneSettings()), index=index, cluster_answers=ClusterAnswers()))


def ask(resolver: Resolver, name: str, qtype: int = QT.A) -> tuple[bytes, Reply]:
    q = parse_query(wire_query(name, qtype))
    return q.key, resolver.answers.cluster_reply(q)


def test_every_kind_of_reply_crosses_the_worker_channel_unchanged_with_its_typed_fields() -> None:
    resolver = owner()
    answer = ask(resolver, "web.default.svc.cluster.local")
    chase = ask(resolver, "ext.default.svc.cluster.local")
    missing = ask(resolver, "nothing.default.svc.cluster.local")
    forward = ask(resolver, "1.2.0.192.in-addr.arpa", QT.PTR)
    assert answer[1].kind == ANSWER and answer[1].hot and answer[1].wire[3] & 0xF == RCODE.NOERROR
    assert "s:default/web" in answer[1].tags
    assert chase[1].kind == CHASE and chase[1].chase is not None
    assert chase[1].chase.target == "www.example.org" and chase[1].chase.chain[0].rtype == QT.CNAME
    assert missing[1].kind == ANSWER and missing[1].wire[3] & 0xF == RCODE.NXDOMAIN
    assert forward[1].kind == FORWARD and forward[1].wire == b""
    sent = [(key, reply, True) for key, reply in (answer, chase, missing, forward)]
    message = decode(encode_answers(sent, resolver.answers.servfail_reply)[4:])
    assert isinstance(message, Answers) and message.answers == sent
    assert all(type(reply) is Reply for _, reply, _ in message.answers)


def test_before_the_first_sync_with_a_fallback_a_would_be_nxdomain_is_left_to_the_hook() -> None:
    index = Index()
    index.upsert(k8s.Namespace("default"))

    async def hook(data: bytes) -> bytes:
        return data

    resolver = watched(resolver_of(
        records=ClusterRecords(index, ZoneSettings()), index=index, cluster_answers=ClusterAnswers(),
                        before_sync=hook))
    _, reply = ask(resolver, "nothing.default.svc.cluster.local")
    assert reply.kind == BEFORE_SYNC and reply.wire == b""


def test_a_worker_keeps_an_owner_reply_hot_or_aside_as_the_owner_said() -> None:
    worker_index = Index()
    worker = watched(resolver_of(records=ClusterRecords(worker_index, ZoneSettings()), index=worker_index,
                      cluster_answers=ClusterAnswers()))
    key, reply = ask(owner(), "web.default.svc.cluster.local")
    worker.answers.keep(key, reply)
    assert worker.cluster_answers.hot.view.get(key) == reply.wire
    key, reply = ask(owner(), "nothing.default.svc.cluster.local")
    worker.answers.keep(key, reply._replace(hot=False))
    assert key not in worker.cluster_answers.hot.view and worker.cluster_answers.aside[key] == reply.wire
