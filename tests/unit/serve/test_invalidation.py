"""Targeted invalidation is exact: over random sequences of index changes, every answer served
through the stored-answer table equals the answer a resolver computes fresh from a new index holding
the same objects (headless, ExternalName chains in and out of the zone, reverse names, pods,
NODATA/NXDOMAIN, own Node topology and federation, autopath walks, the clusterset zone and its PTRs
beside the cluster's). Also the pieces: which tags an
answer carries, which tags a change names, and that unrelated changes keep stored answers."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from collections.abc import Callable, Sequence
from typing import Any

import dns.message
import dns.rdatatype
import dns.reversename
import dns.rrset
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nodedns.cluster import manifests
from nodedns.cluster import objects as k8s
from nodedns.cluster.existence import Existence, Feed
from nodedns.cluster.index import Index, SlimChange
from nodedns.cluster.records import ClusterRecords, ZoneSettings, change_tags
from nodedns.dns.keys import key_query
from nodedns.dns.message import parse_query
from nodedns.dns.wire import Query
from nodedns.forward.store import ForwardCache
from nodedns.podconf.resolvconf import KubeletDNS
from nodedns.podconf.searchpath import Autopath, renderer_search_list
from nodedns.serve.answers import Reply
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.limits import EVERYONE, AllowList
from nodedns.serve.resolver import Resolver
from nodedns.workers.pushed import PushedAutopath, autopath_plans
from tests.support import cluster_fixture as cf
from tests.support import clusterset_fixture as mc
from tests.support.wiring import UpstreamDoubleBase, resolver_of, watched

ZONE = "cluster.local"
NODE = "node-a"
NAMESPACES = ("a", "b")
SERVICES = ("s1", "s2", "s3")
IPS = ("10.0.0.1", "10.0.0.2", "10.96.0.1", "10.96.0.2", "fd00::1", "fd00::2")
TARGETS = ("s2.a.svc.cluster.local", "s1.b.svc.cluster.local", "s3.a.svc.cluster.local", "ext.example",
           "nx.example")
MC_ZONE = "clusterset.local"
SETTINGS = ZoneSettings(zone=ZONE, pods="verified", node_name=NODE, federations=(("fed", "example.org"),),
                        authoritative_reverse=(), multicluster_zone=MC_ZONE)
KUBELET = KubeletDNS(cluster_dns=("169.254.20.10",), cluster_domain=ZONE)
CLIENTS = ("10.0.0.1", "10.0.0.2", "192.0.2.99")


class FakeUpstream(UpstreamDoubleBase):
    """Answers every name at once: ext.example. A 192.0.2.1, anything else NXDOMAIN (with an SOA)."""

    async def query(self, qname: str, key: bytes, *, probe: bool = False) -> bytes:
        q = dns.message.from_wire(b"\x00\x00" + key)
        r = dns.message.make_response(q)
        if qname == "ext.example":
            r.answer.append(dns.rrset.from_text("ext.example.", 60, "IN", "A", "192.0.2.1"))
        else:
            r.set_rcode(3)
            r.authority.append(dns.rrset.from_text("example.", 60, "IN", "SOA", "ns.example. h.example. 1 2 3 4 30"))
        return bytes(r.to_wire())


class Counter:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def make_resolver(index: Index, answers: ClusterAnswers | None = None, settings: ZoneSettings = SETTINGS) -> Resolver:
    records = ClusterRecords(index, settings)
    autopath = Autopath(index=index, zone=ZONE, node_name=NODE, search_list=renderer_search_list(KUBELET, None))
    answers = answers if answers is not None else ClusterAnswers()
    cache = ForwardCache(hot=answers.hot, clock=lambda: 5000.0)
    return watched(resolver_of(records=records, index=index, cluster_answers=answers, forward_cache=cache,
                    forwarder=FakeUpstream(), autopath=autopath, allow=AllowList(explicit=EVERYONE)))


def fresh_copy(index: Index) -> Index:
    copy = Index(clock=lambda: index.last_change)
    for change in index.records():
        copy.apply_change(change)
    if index.synced:
        copy.mark_synced()
    return copy


# -- the questions ------------------------------------------------------------------------------


def questions() -> list[tuple[str, str, str]]:
    """(name, type, client) asked after every change."""
    out: list[tuple[str, str, str]] = [
        (ZONE, "SOA", "192.0.2.99"), (ZONE, "NS", "192.0.2.99"), (f"dns-version.{ZONE}", "TXT", "192.0.2.99"),
        (f"c.svc.{ZONE}", "A", "192.0.2.99"), ("2.0.96.10.in-addr.arpa", "PTR", "192.0.2.99"),
        ("s1.a.fed.svc." + ZONE, "A", "192.0.2.99"), ("s9.b.fed.svc." + ZONE, "A", "192.0.2.99"),
    ]
    for ns in NAMESPACES:
        out.append((f"{ns}.svc.{ZONE}", "A", "192.0.2.99"))
        out.append((f"10-0-0-1.{ns}.pod.{ZONE}", "A", "192.0.2.99"))
        for s in SERVICES:
            out.extend((f"{s}.{ns}.svc.{ZONE}", qtype, "192.0.2.99") for qtype in ("A", "AAAA", "SRV", "CNAME"))
            out.append((f"_http._tcp.{s}.{ns}.svc.{ZONE}", "SRV", "192.0.2.99"))
            out.append((f"h1.{s}.{ns}.svc.{ZONE}", "A", "192.0.2.99"))
            out.append((f"10-0-0-2.{s}.{ns}.svc.{ZONE}", "A", "192.0.2.99"))
    out.extend((dns.reversename.from_address(ip).to_text(omit_final_dot=True), "PTR", "192.0.2.99") for ip in IPS)
    # search-list misses of an outside name: a worker decides these from what exists alone
    for ns in (*NAMESPACES, "c"):
        out.append((f"api.example.com.{ns}.svc.{ZONE}", "A", "192.0.2.99"))
        out.append((f"example.s1.{ns}.svc.{ZONE}", "AAAA", "192.0.2.99"))
        out.append((f"a.b.c.d.e.{ns}.svc.{ZONE}", "A", "192.0.2.99"))
    for ns in NAMESPACES:  # the clusterset zone: its PTRs share the addresses above with the cluster's
        for s in SERVICES[:2]:
            out.append((f"{s}.{ns}.svc.{MC_ZONE}", "A", "192.0.2.99"))
            out.append((f"h1.c1.{s}.{ns}.svc.{MC_ZONE}", "A", "192.0.2.99"))
    out.extend([(f"api.example.com.svc.{ZONE}", "A", "192.0.2.99"), (f"api.example.com.{ZONE}", "A", "192.0.2.99"),
                (f"x.pod.{ZONE}", "A", "192.0.2.99"), (f"ns.dns.{ZONE}", "A", "192.0.2.99")])
    for client in CLIENTS:  # autopath walks: <base>.<first search domain> from Pods of this node
        for ns in NAMESPACES:
            out.append((f"s1.{ns}.svc.{ZONE}", "A", client))
            out.append((f"s2.b.{ns}.svc.{ZONE}", "A", client))
            out.append((f"s3.{ns}.svc.{ZONE}", "AAAA", client))
            out.append((f"dns-version.{ns}.svc.{ZONE}", "A", client))  # the walk ends at dns-version.<zone>
            out.append((f"ext.example.{ns}.svc.{ZONE}", "A", client))  # ... at the bare name, forwarded
    return out


QUESTIONS = questions()


def query(name: str, qtype: str) -> bytes:
    """The query for a question: a third of them with EDNS (one of those with DO), as real clients mix."""
    shape = sum(map(ord, name + qtype)) % 6
    q = dns.message.make_query(name, qtype, use_edns=0 if shape < 2 else None, want_dnssec=shape == 0)
    q.id = 4242
    return bytes(q.to_wire())


def normalized(wire: bytes | None) -> str:
    """The response as text with the SOA serial of the authority section zeroed (it may lag: see
    nodedns.cluster.records, Dependencies)."""
    if wire is None:
        return "(dropped)"
    msg = dns.message.from_wire(wire)
    for rrset in msg.authority:
        if rrset.rdtype == dns.rdatatype.SOA:
            rrset.update(dns.rrset.from_rdata_list(rrset.name, rrset.ttl, [r.replace(serial=0) for r in rrset]))
    return str(msg.to_text())


async def ask(resolver: Resolver, name: str, qtype: str, client: str) -> bytes | None:
    out = resolver.handle(query(name, qtype), client)
    if out is None or isinstance(out, bytes):
        return out
    return await out


# -- the changes --------------------------------------------------------------------------------

ports = st.lists(st.sampled_from([cf.port(80, "http"), cf.port(53, "dns", "UDP")]), max_size=2,
                 unique_by=lambda p: (p.get("name"), p.get("protocol")))
slice_ports = st.lists(st.sampled_from([cf.port(80, "http"), cf.port(53, "dns", "UDP"), cf.port(None)]), max_size=2,
                       unique_by=lambda p: (p.get("name"), p.get("protocol")))


@st.composite
def service_obj(draw: Callable[..., Any]) -> dict[str, Any]:
    ns, name = draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from(SERVICES))
    kind = draw(st.sampled_from(["cluster", "headless", "external"]))
    if kind == "external":
        return cf.service(ns, name, external_name=draw(st.sampled_from(TARGETS)))
    if kind == "headless":
        return cf.headless(ns, name, ports=draw(ports), publish_not_ready=draw(st.booleans()))
    ip = draw(st.sampled_from(["10.96.0.1", "10.96.0.2", "10.0.0.1"]))
    return cf.service(ns, name, cluster_ips=[ip], ports=draw(ports))


@st.composite
def slice_obj(draw: Callable[..., Any]) -> dict[str, Any]:
    ns, svc = draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from(SERVICES[:2]))
    name = f"{svc}-{draw(st.sampled_from(['x', 'y']))}"
    v6 = draw(st.booleans())
    pool = ["fd00::1", "fd00::2"] if v6 else ["10.0.0.1", "10.0.0.2", "10.96.0.2"]
    eps = [cf.endpoint(draw(st.sampled_from(pool)), hostname=draw(st.sampled_from([None, "h1"])),
                       ready=draw(st.sampled_from([True, False, None])))
           for _ in range(draw(st.integers(0, 2)))]
    return cf.endpoint_slice(ns, name, svc, "IPv6" if v6 else "IPv4", eps, ports=draw(slice_ports))


@st.composite
def pod_obj(draw: Callable[..., Any]) -> dict[str, Any]:
    ns = draw(st.sampled_from(NAMESPACES))
    ip = draw(st.sampled_from(["10.0.0.1", "10.0.0.2"]))
    return cf.pod(ns, f"p-{ip.replace('.', '-')}-{draw(st.sampled_from(['1', '2']))}", ip,
                  deleting=draw(st.booleans()))


@st.composite
def node_obj(draw: Callable[..., Any]) -> dict[str, Any]:
    labels = {"topology.kubernetes.io/zone": draw(st.sampled_from(["z1", "z2"])),
              "topology.kubernetes.io/region": "r1"} if draw(st.booleans()) else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": labels},
            "spec": {"podCIDRs": ["10.0.0.0/24"]}}


@st.composite
def import_obj(draw: Callable[..., Any]) -> dict[str, Any]:
    """A ServiceImport whose clusterset IP may be a cluster-local address too (the cluster's PTR wins)."""
    ns, name = draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from(SERVICES[:2]))
    if draw(st.booleans()):
        return mc.service_import(ns, name, headless=True)
    return mc.service_import(ns, name, ips=draw(st.sampled_from([["10.96.0.2"], ["10.0.0.2", "fd00::1"], []])))


@st.composite
def imported_obj(draw: Callable[..., Any]) -> dict[str, Any]:
    ns, svc = draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from(SERVICES[:2]))
    v6 = draw(st.booleans())
    pool = ["fd00::1", "fd00::2"] if v6 else ["10.0.0.1", "10.0.0.2"]
    eps = [mc.ep(draw(st.sampled_from(pool)), hostname=draw(st.sampled_from([None, "h1"])),
                 ready=draw(st.sampled_from([True, False, None]))) for _ in range(draw(st.integers(0, 2)))]
    return mc.imported_slice(ns, f"{svc}-{draw(st.sampled_from(['x', 'y']))}", svc,
                             draw(st.sampled_from(["c1", None])), "IPv6" if v6 else "IPv4", eps)


objects = st.one_of(service_obj(), slice_obj(), slice_obj(), pod_obj(), node_obj(),
                    st.sampled_from(NAMESPACES).map(cf.namespace), import_obj(), imported_obj())
change = st.tuples(st.sampled_from(["ADDED", "ADDED", "DELETED"]), objects)


def apply(index: Index, event: str, obj: dict[str, Any]) -> None:
    for kind, o in manifests.objects([obj], multicluster=True):  # an imported slice is of its own kind
        assert index.apply(kind, event, o), o


class Worker:
    """A --workers process's resolver: no index of its own; misses asked of the owner (in process
    here, by key, as the channel carries them), what exists, invalidations and autopath plans pushed
    by it, in the order nodedns.workers.supervisor sends them over the channel."""

    def __init__(self, owner_index: Index, settings: ZoneSettings = SETTINGS) -> None:
        self.owner = owner = make_resolver(owner_index, settings=settings)
        empty = Index()
        answers = ClusterAnswers()
        cache = ForwardCache(hot=answers.hot, clock=lambda: 5000.0)
        autopath = PushedAutopath(index=empty, zone=ZONE)
        feed = Feed(owner_index, federated=bool(settings.federations))
        self.asked = 0
        worker: Resolver

        async def remote(q: Query) -> Reply:
            self.asked += 1
            reply = owner.answers.cluster_reply(key_query(q.key))  # the key is what crosses the channel
            worker.answers.keep(q.key, reply)  # kept as it arrives, as OwnerLink.answered does
            return reply

        self.resolver = worker = watched(resolver_of(
            records=ClusterRecords(empty, settings), index=empty, cluster_answers=answers,
                                          forward_cache=cache, forwarder=FakeUpstream(), autopath=autopath,
                                          allow=AllowList(explicit=EVERYONE), remote=remote))
        worker.answers.existence = Existence()

        def push(kind: str, old: Any, new: Any) -> None:  # Fleet._flush's order: names, plans, invalidations
            feed.changed(kind, old, new)
            worker.answers.existence.apply(feed.update())  # type: ignore[union-attr]
            autopath.apply(autopath_plans(owner.autopath, owner_index, NODE))  # type: ignore[arg-type]
            worker.chaser.forget_walks()
            if owner_index.synced and not empty.synced:
                empty.mark_synced()
            worker.answers.invalidate(change_tags(kind, old, new))

        owner_index.on_record(push)
        worker.answers.existence.apply(feed.whole())
        if owner_index.synced:
            empty.mark_synced()
        autopath.apply(autopath_plans(owner.autopath, owner_index, NODE))  # type: ignore[arg-type]


def run(steps: Sequence[tuple[str, dict[str, Any]]], sync_at: int, mode: str = "one process",
        settings: ZoneSettings = SETTINGS) -> None:
    index = Index(clock=Counter())
    worker = Worker(index, settings) if mode == "worker" else None
    served = make_resolver(index, settings=settings) if worker is None else worker.resolver
    decided_alone = 0

    async def scenario() -> None:
        nonlocal decided_alone
        for n, (event, obj) in enumerate([("ADDED", cf.namespace("a")), *steps]):
            if n == sync_at:
                index.mark_synced()
            apply(index, event, obj)
            fresh = make_resolver(fresh_copy(index), settings=settings)
            for name, qtype, client in QUESTIONS:
                if worker is not None:  # an NXDOMAIN the worker decides alone is the owner's, byte for byte
                    q = parse_query(query(name, qtype))
                    alone = worker.resolver.answers.absent(q)
                    if alone is not None:
                        decided_alone += 1
                        assert alone == worker.owner.answers.cluster_reply(q), (n, event, obj, name, qtype)
                got = await ask(served, name, qtype, client)
                want = await ask(fresh, name, qtype, client)
                assert normalized(got) == normalized(want), (n, event, obj, name, qtype, client)
            # and once more from the table alone (what the hit path would send)
            for name, qtype, client in QUESTIONS[:40]:
                got = await ask(served, name, qtype, client)
                want = await ask(fresh, name, qtype, client)
                assert normalized(got) == normalized(want), ("stored", n, event, obj, name, qtype, client)

    asyncio.run(scenario())
    if worker is not None and index.synced:
        assert decided_alone > 0  # the worker's own NXDOMAINs were compared, not only asked ones


# a stored PTR answer for an endpoint's address, then another Service's slice claims the same address: only
# the address's tag ties the stored answer to that slice (the SOA serial is in negative answers only)
SHARED_ADDRESS = [
    ("ADDED", cf.headless("a", "s1", ports=[])),
    ("ADDED", cf.endpoint_slice("a", "s1-x", "s1", "IPv4", [cf.endpoint("10.0.0.1", hostname="h1", ready=True)])),
    ("ADDED", cf.headless("a", "s2", ports=[])),
    ("ADDED", cf.endpoint_slice("a", "s2-x", "s2", "IPv4", [cf.endpoint("10.0.0.1", hostname="h1", ready=True)])),
]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps=st.lists(change, min_size=1, max_size=14), sync_at=st.integers(0, 3))
@example(steps=SHARED_ADDRESS, sync_at=0)
def test_answers_served_through_the_table_equal_answers_computed_fresh(steps: list[tuple[str, dict[str, Any]]],
                                                                      sync_at: int) -> None:
    run(steps, sync_at)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps=st.lists(change, min_size=1, max_size=12), sync_at=st.integers(0, 3))
def test_a_worker_without_an_index_serves_what_the_owner_would_compute_fresh(
        steps: list[tuple[str, dict[str, Any]]], sync_at: int) -> None:
    run(steps, sync_at, mode="worker")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps=st.lists(change, min_size=1, max_size=12), sync_at=st.integers(0, 3))
def test_a_worker_deciding_nxdomain_alone_serves_what_the_owner_would_compute_fresh(
        steps: list[tuple[str, dict[str, Any]]], sync_at: int) -> None:
    """Without federations a worker decides more names alone (`<a>.<b>.<c>.svc` ones too)."""
    run(steps, sync_at, mode="worker", settings=dataclasses.replace(SETTINGS, federations=()))


def test_a_worker_answers_search_list_misses_without_asking_the_owner() -> None:
    index = loaded()
    worker = Worker(index, dataclasses.replace(SETTINGS, federations=()))
    misses = ["api.example.com.a.svc.cluster.local", "api.example.com.svc.cluster.local",
              "api.example.com.cluster.local", "nothing.c.svc.cluster.local", "x.nope.a.svc.cluster.local"]
    for name in misses:
        out = asyncio.run(ask(worker.resolver, name, "A", "192.0.2.99"))
        assert out is not None and out[3] & 0xF == 3, name  # NXDOMAIN
    assert worker.asked == 0
    asyncio.run(ask(worker.resolver, "web.a.svc.cluster.local", "A", "192.0.2.99"))  # a name that exists: asked
    asyncio.run(ask(worker.resolver, "nx.web.a.svc.cluster.local", "A", "192.0.2.99"))  # an endpoint: the index decides
    assert worker.asked == 2


# -- the pieces ---------------------------------------------------------------------------------


def loaded() -> Index:
    index = Index()
    for obj in [cf.namespace("a"), cf.namespace("b"), cf.service("a", "web", cluster_ips=["10.96.0.1"]),
                cf.headless("a", "db"),
                cf.endpoint_slice("a", "db-1", "db", "IPv4", [cf.endpoint("10.0.0.5", hostname="h1")]),
                *(cf.service("b", f"other{i}", cluster_ips=[f"10.96.1.{i}"]) for i in range(50))]:
        apply(index, "ADDED", obj)
    index.mark_synced()
    return index


@pytest.mark.parametrize(("name", "qtype", "tags"), [
    ("web.a.svc.cluster.local", "A", {"n:a", "s:a/web"}),
    ("db.a.svc.cluster.local", "SRV", {"n:a", "s:a/db"}),
    ("h1.db.a.svc.cluster.local", "A", {"n:a", "s:a/db"}),
    ("nothing.c.svc.cluster.local", "A", {"n:c"}),
    ("5.0.0.10.in-addr.arpa", "PTR", {"i:10.0.0.5", "s:a/db"}),
    ("cluster.local", "SOA", {"z"}),
    ("dns-version.cluster.local", "TXT", set()),
], ids=["clusterip", "headless-srv", "endpoint-hostname", "missing-namespace", "reverse-endpoint", "apex-soa",
        "static"])
def test_an_answer_carries_the_tags_of_what_it_read(name: str, qtype: str, tags: set[str]) -> None:
    records = ClusterRecords(loaded(), ZoneSettings(zone=ZONE))
    found, deps = records.resolve(name, getattr(dns.rdatatype, qtype).value)
    assert found is not None and set(deps) == tags == set(found.deps)


@pytest.mark.parametrize(("kind", "old", "new", "tags"), [
    (k8s.SERVICE, None, cf.service("a", "web", cluster_ips=["10.96.0.9"]), {"s:a/web", "i:10.96.0.9", "z"}),
    (k8s.ENDPOINTSLICE, cf.endpoint_slice("a", "db-1", "db", "IPv4", [cf.endpoint("10.0.0.5")]),
     cf.endpoint_slice("a", "db-1", "db", "IPv4", [cf.endpoint("10.0.0.6")]), {"s:a/db", "i:10.0.0.5", "i:10.0.0.6",
                                                                               "z"}),
    (k8s.POD, cf.pod("a", "p", "10.0.0.7"), None, {"p:10.0.0.7", "a:a", "z"}),
    (k8s.NAMESPACE, cf.namespace("c"), None, {"n:c", "z"}),
], ids=["service", "slice-old-and-new", "pod", "namespace"])
def test_a_change_names_the_tags_of_its_old_and_new_record(kind: str, old: Any, new: Any, tags: set[str]) -> None:
    def slim(obj: Any) -> Any:
        return None if obj is None else k8s.slim(kind, obj)

    assert change_tags(kind, slim(old), slim(new)) == tags


def _db(*endpoints: Any) -> Any:
    return k8s.slim(k8s.ENDPOINTSLICE, cf.endpoint_slice("a", "db-1", "db", "IPv4", list(endpoints)))


THREE = [("10.0.0.5", "h5", True, "p5"), ("10.0.0.6", "h6", True, "p6"), ("10.0.0.7", None, True, "p7")]


@pytest.mark.parametrize(("changed", "tags"), [
    ({1: {"ready": False}}, {"s:a/db", "i:10.0.0.6", "z"}),
    ({0: {"hostname": "other"}, 2: {"ready": False}}, {"s:a/db", "i:10.0.0.5", "i:10.0.0.7", "z"}),
    ({2: {"pod": "p8"}}, {"s:a/db", "i:10.0.0.7", "z"}),
    ({}, {"s:a/db", "z"}),
], ids=["one-turns-unready", "a-hostname-and-a-readiness", "a-pod-name", "nothing-but-the-version"])
def test_an_update_of_the_same_addresses_names_only_the_addresses_whose_endpoint_changed(
        changed: dict[int, dict[str, Any]], tags: set[str]) -> None:
    """A readiness or name change of one endpoint touches the Service's answers and that address's
    reverse answer, not the reverse answers of every address in the slice."""
    rows = [dict(zip(("ip", "hostname", "ready", "pod"), row, strict=True)) for row in THREE]
    new_rows = [{**row, **changed.get(i, {})} for i, row in enumerate(rows)]
    old = _db(*(cf.endpoint(r["ip"], hostname=r["hostname"], ready=r["ready"], pod=r["pod"]) for r in rows))
    new = _db(*(cf.endpoint(r["ip"], hostname=r["hostname"], ready=r["ready"], pod=r["pod"]) for r in new_rows))
    assert change_tags(k8s.ENDPOINTSLICE, old, new) == tags


def test_addresses_regrouped_into_other_endpoints_name_every_address() -> None:
    old = _db(cf.endpoint("10.0.0.5", "10.0.0.6"), cf.endpoint("10.0.0.7"))
    new = _db(cf.endpoint("10.0.0.5"), cf.endpoint("10.0.0.6", "10.0.0.7"))
    assert change_tags(k8s.ENDPOINTSLICE, old, new) == {"s:a/db", "i:10.0.0.5", "i:10.0.0.6", "i:10.0.0.7", "z"}
    two = _db(cf.endpoint("10.0.0.5", "10.0.0.6"), cf.endpoint("10.0.0.7", ready=False))
    assert change_tags(k8s.ENDPOINTSLICE, old, two) == {"s:a/db", "i:10.0.0.7", "z"}  # the second endpoint's only


def test_the_first_sync_names_everything() -> None:
    assert change_tags("", None, None) is None


def test_an_unrelated_update_keeps_the_stored_answers_and_the_forwarded_ones() -> None:
    index = loaded()
    resolver = make_resolver(index)
    asyncio.run(ask(resolver, "web.a.svc.cluster.local", "A", "192.0.2.99"))
    asyncio.run(ask(resolver, "ext.example", "A", "192.0.2.99"))
    table = resolver.cluster_answers.hot.view
    before = set(table)
    assert len(before) == 2
    apply(index, "ADDED", cf.service("b", "other3", cluster_ips=["10.96.2.3"]))  # unrelated
    assert set(table) == before
    apply(index, "ADDED", cf.service("a", "web", cluster_ips=["10.96.0.2"]))  # related
    remaining = {struct.unpack_from("!H", k, 10)[0] for k in table}
    assert len(table) == 1 and remaining  # the forwarded answer stays
    assert resolver.cluster_answers.invalidated == 1


def test_the_stored_answer_follows_the_change() -> None:
    index = loaded()
    resolver = make_resolver(index)
    first = asyncio.run(ask(resolver, "web.a.svc.cluster.local", "A", "192.0.2.99"))
    apply(index, "ADDED", cf.service("a", "web", cluster_ips=["10.96.0.2"]))
    second = asyncio.run(ask(resolver, "web.a.svc.cluster.local", "A", "192.0.2.99"))
    assert first is not None and second is not None
    assert "10.96.0.1" in normalized(first) and "10.96.0.2" in normalized(second)


def test_a_change_drops_the_answers_of_its_tags_and_their_side_entries() -> None:
    answers = ClusterAnswers()
    answers.put(b"k1", b"\x00\x00one", frozenset({"s:a/web", "n:a"}))
    answers.put(b"k2", b"\x00\x00two", frozenset({"s:a/db", "n:a"}))
    answers.put(b"k3", b"\x00\x00three", frozenset({"s:a/db"}), hot=False)
    answers.hot.put(b"fwd", b"\x00\x00forwarded")
    assert answers.invalidate({"s:a/db"}) == 2
    assert set(answers.hot.view) == {b"k1", b"fwd"} and not answers.aside
    assert answers.tagged() == 1
    answers.invalidate(None)
    assert set(answers.hot.view) == {b"fwd"} and answers.tagged() == 0


def test_an_answer_whose_tags_change_while_it_is_built_is_not_kept() -> None:
    answers = ClusterAnswers()
    answers.expect(b"k", frozenset({"s:a/x"}))
    answers.invalidate({"s:a/x"})
    assert not answers.settled(b"k")
    answers.expect(b"k", frozenset({"s:a/x"}))
    answers.invalidate({"s:a/y"})
    assert answers.settled(b"k")


def test_the_table_stays_bounded_with_its_tags() -> None:
    answers = ClusterAnswers(max_entries=10)
    for i in range(100):
        answers.put(b"k%d" % i, b"\x00\x00x", frozenset({f"s:a/{i}"}))
    assert len(answers.hot.view) == 10 and answers.tagged() == 10 and answers.evictions == 90


def test_replayed_changes_give_the_same_answers() -> None:
    """The fresh-copy helper itself: a copy answers like the original."""
    index = loaded()
    copy = fresh_copy(index)
    assert sorted(map(repr, copy.records())) == sorted(map(repr, index.records()))
    assert isinstance(index.records()[0], SlimChange)
