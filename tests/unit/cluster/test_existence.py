"""What exists, as a --workers process learns it: the Service filter never says "no" for a Service that
exists, the updates a worker gets add up to the whole state, and the NXDOMAIN a worker decides from it
is the one the index gives (rcode and tags)."""

from __future__ import annotations

import asyncio
from typing import Any

import dns.message
import dns.rdatatype
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nodedns.cluster.existence import BITS_PER_SERVICE, MIN_BITS, Existence, Feed
from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords, ZoneSettings, change_tags
from nodedns.dns.keys import key_query
from nodedns.dns.message import parse_query
from nodedns.dns.wire import RCODE
from nodedns.serve.answers import Reply
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.resolver import Resolver
from nodedns.workers.channel import Channel, decode
from nodedns.workers.messages import Invalidate, Names
from tests.support import cluster_fixture as cf
from tests.support.wiring import resolver_of, watched

NAMESPACES = ("a", "b", "c")
SERVICES = ("web", "db", "com", "api", "x1")

service_change = st.tuples(st.sampled_from(["ADDED", "DELETED"]), st.sampled_from(NAMESPACES),
                           st.sampled_from(SERVICES))
namespace_change = st.tuples(st.sampled_from(["ADDED", "DELETED"]), st.sampled_from(NAMESPACES), st.just(""))


def apply(index: Index, event: str, ns: str, name: str) -> None:
    obj: dict[str, Any] = cf.service(ns, name, cluster_ips=["10.96.0.1"], ports=[cf.port(80, "http")]) if name \
        else cf.namespace(ns)
    assert index.apply(obj["kind"], event, obj)


@settings(max_examples=200, deadline=None)
@given(st.lists(service_change | namespace_change, max_size=40))
def test_the_filter_never_denies_a_service_that_exists_and_updates_add_up_to_the_whole(
        changes: list[tuple[str, str, str]]) -> None:
    index = Index()
    feed = Feed(index, federated=False)
    index.on_record(feed.changed)
    worker = Existence()
    worker.apply(feed.whole())
    for event, ns, name in changes:
        apply(index, event, ns, name)
        worker.apply(feed.update())
        for key in index.services:
            assert worker.may_have_service(*key), key
        assert worker.namespaces == frozenset(index.namespaces)
        assert worker.serial == index.last_change
    fresh = Existence()
    fresh.apply(feed.whole())
    assert (fresh.bits, fresh.mask, fresh.namespaces) == (worker.bits, worker.mask, worker.namespaces)


def test_the_filter_grows_with_the_services_and_stays_selective() -> None:
    index = Index()
    feed = Feed(index, federated=False)
    index.on_record(feed.changed)
    worker = Existence()
    worker.apply(feed.whole())
    assert len(worker.bits) * 8 == MIN_BITS
    for i in range(2000):
        apply(index, "ADDED", "a", f"svc-{i}")
        worker.apply(feed.update())
    assert len(worker.bits) * 8 >= 2000 * BITS_PER_SERVICE
    assert all(worker.may_have_service("a", f"svc-{i}") for i in range(2000))
    false_positives = sum(worker.may_have_service("a", f"nope-{i}") for i in range(10_000))
    assert false_positives < 300  # ~1.4 % expected
    for i in range(2000):  # and empties again
        apply(index, "DELETED", "a", f"svc-{i}")
    worker.apply(feed.update())
    assert not any(worker.bits)


class Exact:
    """Existence read straight from an index (no filter): the reference."""

    def __init__(self, index: Index, *, federated: bool) -> None:
        self.index, self.federated = index, federated

    def has_namespace(self, namespace: str) -> bool:
        return self.index.has_namespace(namespace)

    def may_have_service(self, namespace: str, name: str) -> bool:
        return self.index.service(namespace, name) is not None


label = st.sampled_from([*NAMESPACES, *SERVICES, "svc", "pod", "dns", "ns", "dns-version", "x", "_http", "_tcp",
                         "10-0-0-1", "cluster", "local", "example"])
name = st.lists(label, max_size=7).map(lambda ls: ".".join([*ls, "cluster.local"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=st.lists(service_change | namespace_change, max_size=12), qname=name,
       qtype=st.sampled_from(["A", "AAAA", "SRV", "SOA", "TXT", "PTR", "NS", "ANY", "CNAME"]),
       federations=st.sampled_from([(), (("fed", "example.org"),)]), filtered=st.booleans())
def test_an_nxdomain_decided_from_existence_is_the_one_the_index_gives(
        changes: list[tuple[str, str, str]], qname: str, qtype: str, federations: tuple[tuple[str, str], ...],
        filtered: bool) -> None:
    index = Index()
    feed = Feed(index, federated=bool(federations))
    index.on_record(feed.changed)
    for event, ns, svc in changes:
        apply(index, event, ns, svc)
    records = ClusterRecords(index, ZoneSettings(zone="cluster.local", federations=federations))
    exists: Any = Exact(index, federated=bool(federations))
    if filtered:
        exists = Existence()
        exists.apply(feed.whole())
    t = dns.rdatatype.from_text(qtype).value
    tags = records.absent(qname, t, exists)
    if tags is None:
        return  # the index decides (asked of the owner)
    found, deps = records.resolve(qname, t)
    assert found is not None and found.rcode == RCODE.NXDOMAIN and not found.answer
    assert deps == tags


# ----------------------------------------------------------------------------------------------
# The two deciders side by side: a worker's resolver fed what exists over the channel, the owner's index


class WorkerSide:
    """A --workers process's resolver: an empty index, what exists as the owner's State messages arrive
    (pickled and read back, as the channel carries them), cluster misses asked of the owner by key."""

    def __init__(self, owner: Resolver, feed: Feed, settings: ZoneSettings) -> None:
        self.asked = 0
        empty = Index()
        empty.mark_synced()
        worker: Resolver

        async def remote(q: Any) -> Reply:
            self.asked += 1
            reply = owner.answers.cluster_reply(key_query(q.key))  # the key is what crosses the channel
            worker.answers.keep(q.key, reply)  # kept as it arrives, before what follows on the stream
            return reply

        self.resolver = worker = watched(resolver_of(records=ClusterRecords(empty, settings), index=empty,
                                          cluster_answers=ClusterAnswers(), remote=remote))
        self.existence = worker.answers.existence = Existence()
        feed.update()  # a new worker: the others get what changed so far (Fleet._spawn), it gets the whole
        self.receive(Names(feed.whole()))

    def receive(self, message: Names | Invalidate) -> None:
        """One message of the owner's stream, through the channel's own encoding."""
        frame = Channel.encode(message)
        read = decode(frame[4:])
        if isinstance(read, Names):
            self.existence.apply(read.state)
        elif isinstance(read, Invalidate):
            self.resolver.answers.invalidate(read.tags)


def reply(resolver: Resolver, data: bytes) -> bytes | None:
    out = resolver.handle(data, "192.0.2.99")
    if out is None or isinstance(out, bytes):
        return out
    return asyncio.run(out)  # type: ignore[arg-type]


outside = st.sampled_from(["api.example.com", "www.google.com", "registry.k8s.io", "x", "com"])
asked_name = st.one_of(
    name,
    st.tuples(outside, st.sampled_from(NAMESPACES + ("nope",))).map(lambda t: f"{t[0]}.{t[1]}.svc.cluster.local"),
    st.tuples(outside, st.sampled_from(["svc.cluster.local", "cluster.local"])).map(lambda t: f"{t[0]}.{t[1]}"),
    st.tuples(st.sampled_from(SERVICES + ("other",)), st.sampled_from(NAMESPACES)).map(
        lambda t: f"{t[0]}.{t[1]}.svc.cluster.local"),
    st.tuples(st.sampled_from(SERVICES + ("other",)), st.sampled_from(NAMESPACES)).map(  # a named port's SRV
        lambda t: f"_http._tcp.{t[0]}.{t[1]}.svc.cluster.local"),
    st.tuples(st.sampled_from(SERVICES + ("other",)), st.sampled_from(NAMESPACES)).map(  # a federation's name
        lambda t: f"{t[0]}.{t[1]}.fed.svc.cluster.local"),
)
questions = st.lists(st.tuples(asked_name, st.sampled_from(["A", "AAAA", "SRV", "TXT"]), st.booleans()),
                     min_size=1, max_size=12)
MANY_SERVICES = [("ADDED", "a", "")] + [("ADDED", "a", f"svc-{i}") for i in range(300)]  # the filter is resized


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@example(before=MANY_SERVICES, changes=[("DELETED", "a", "svc-7"), ("ADDED", "b", "")],
         asked=[("svc-7.a.svc.cluster.local", "A", False), ("api.example.com.a.svc.cluster.local", "A", True),
                ("svc-8.a.svc.cluster.local", "AAAA", False), ("web.b.svc.cluster.local", "A", False)],
         federated=False)
@example(before=[("ADDED", "a", ""), ("ADDED", "a", "web")], changes=[("ADDED", "b", ""), ("ADDED", "b", "db")],
         asked=[("_http._tcp.web.a.svc.cluster.local", "SRV", False), ("web.a.fed.svc.cluster.local", "A", False),
                ("_http._tcp.db.b.svc.cluster.local", "SRV", True), ("nope.b.svc.cluster.local", "A", False)],
         federated=True)
@given(before=st.lists(service_change | namespace_change, max_size=15),
       changes=st.lists(service_change | namespace_change, max_size=8), asked=questions, federated=st.booleans())
def test_a_worker_answers_every_name_byte_for_byte_as_the_index_owner(
        before: list[tuple[str, str, str]], changes: list[tuple[str, str, str]],
        asked: list[tuple[str, str, bool]], federated: bool) -> None:
    """Generated indexes (Namespaces, Services, a filter that grows past its first size) and names (search-list
    misses of outside names, Services that may or may not exist, any shape): after every change, the bytes
    a worker sends, deciding an NXDOMAIN alone from what exists or asking the owner, are the bytes the
    owner sends from its index; and the worker asks about none of the names existence decides."""
    settings = ZoneSettings(zone="cluster.local", federations=(("fed", "example.org"),) if federated else ())
    index = Index()
    feed = Feed(index, federated=federated)
    pending: list[frozenset[str] | None] = []

    def changed(kind: str, old: Any, new: Any) -> None:  # the owner's index stream (nodedns.workers.supervisor:
    # _index_changed)
        feed.changed(kind, old, new)
        pending.append(change_tags(kind, old, new))

    index.on_record(changed)
    for event, ns, svc in before:
        apply(index, event, ns, svc)
    index.mark_synced()
    owner = watched(resolver_of(records=ClusterRecords(index, settings), index=index, cluster_answers=ClusterAnswers()))
    worker = WorkerSide(owner, feed, settings)
    pending.clear()
    alone = 0
    for step in [None, *changes]:
        if step is not None:
            apply(index, *step)
            worker.receive(Names(feed.update()))  # what exists first, then the invalidations (Fleet._flush)
            tags = set()
            for t in pending:
                tags = None if t is None or tags is None else tags | t
            worker.receive(Invalidate(None if tags is None else frozenset(tags)))
            pending.clear()
        for qname, qtype, edns in asked:
            data = dns.message.make_query(qname, qtype, use_edns=0 if edns else False)
            data.id = 0x2B2B
            wire = data.to_wire()
            before_asks = worker.asked
            assert reply(worker.resolver, wire) == reply(owner, wire), (step, qname, qtype)
            q = parse_query(wire)
            if worker.resolver.records.absent(q.qname, q.qtype, worker.existence) is not None:
                assert worker.asked == before_asks, (step, qname, qtype)  # decided alone: not asked
                alone += 1
    if before is MANY_SERVICES:
        assert alone >= 2  # the example is no comparison of two deciders that never decide alone
