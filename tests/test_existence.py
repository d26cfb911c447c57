"""What exists, as a --workers process learns it: the Service filter never says "no" for a Service that
exists, the updates a worker gets add up to the whole state, and the NXDOMAIN a worker decides from it
is the one the index gives (rcode and tags)."""

from __future__ import annotations

from typing import Any

import dns.rdatatype
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodedns.existence import BITS_PER_SERVICE, MIN_BITS, Existence, Feed
from nodedns.index import Index
from nodedns.records import ClusterRecords, ZoneSettings
from nodedns.wire import RCODE
from tests import cluster_fixture as cf

NAMESPACES = ("a", "b", "c")
SERVICES = ("web", "db", "com", "api", "x1")

service_change = st.tuples(st.sampled_from(["ADDED", "DELETED"]), st.sampled_from(NAMESPACES),
                           st.sampled_from(SERVICES))
namespace_change = st.tuples(st.sampled_from(["ADDED", "DELETED"]), st.sampled_from(NAMESPACES), st.just(""))


def apply(index: Index, event: str, ns: str, name: str) -> None:
    obj: dict[str, Any] = cf.service(ns, name, cluster_ips=["10.96.0.1"]) if name else cf.namespace(ns)
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
