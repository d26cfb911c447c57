"""Slim records: what a raw object becomes, and that the packed EndpointSlice gives back exactly its endpoints."""

from __future__ import annotations

import ipaddress
import pickle
from dataclasses import FrozenInstanceError
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodedns.cluster import objects as k8s
from nodedns.cluster.index import Index
from nodedns.cluster.objects import V6_KEY, Endpoint, EndpointSlice, Port, ip_key
from nodedns.errors import ObjectError
from tests.support import manifests as m


def slim_slice(endpoints: list[dict[str, Any]], **kw: Any) -> EndpointSlice:
    record = k8s.slim(k8s.ENDPOINTSLICE, m.endpoint_slice("web-1", "web", endpoints, **kw))
    assert isinstance(record, EndpointSlice)
    return record


def ep(*addresses: str, ready: bool = True, hostname: str = "", pod: str = "", node: str = "", zone: str = "",
       for_zones: tuple[str, ...] = ()) -> Endpoint:
    return Endpoint(tuple(addresses), ready, hostname, pod, node, zone, for_zones)


SLICES = [
    ([m.endpoint("10.0.0.1")], "IPv4", (ep("10.0.0.1"),)),
    ([m.endpoint("10.0.0.1", ready=False), m.endpoint("10.0.0.2", ready=None)], "IPv4",
     (ep("10.0.0.1", ready=False), ep("10.0.0.2"))),
    ([m.endpoint("10.0.0.1", hostname="Web-0", pod="Web-0-abc", node="n1", zone="z1")], "IPv4",
     (ep("10.0.0.1", hostname="web-0", pod="web-0-abc", node="n1", zone="z1"),)),
    ([m.endpoint("10.0.0.1", for_zones=["z1", "z2"]), m.endpoint("10.0.0.2")], "IPv4",
     (ep("10.0.0.1", for_zones=("z1", "z2")), ep("10.0.0.2"))),
    ([{"addresses": ["10.0.0.1", "10.0.0.2"]}, {"addresses": ["10.0.0.3"]}], "IPv4",
     (ep("10.0.0.1", "10.0.0.2"), ep("10.0.0.3"))),
    ([m.endpoint("::ffff:10.0.0.9")], "IPv4", (ep("10.0.0.9"),)),
    ([m.endpoint("FD00:0:0::0001"), m.endpoint("fd00::a00:1")], "IPv6", (ep("fd00::1"), ep("fd00::a00:1"))),
    ([m.endpoint("10.0.0.1", hostname="h", node="n1"), m.endpoint("10.0.0.2", pod="p2", node="n2")], "IPv4",
     (ep("10.0.0.1", hostname="h", node="n1"), ep("10.0.0.2", pod="p2", node="n2"))),
    ([], "IPv4", ()),
]


@pytest.mark.parametrize(("raw", "family", "expected"), SLICES, ids=[
    "one ready endpoint", "not ready and no condition", "names lowercased", "topology hints",
    "several addresses", "a mapped address in an IPv4 slice is IPv4", "IPv6 in canonical text",
    "hostname on one, pod name on the other", "no endpoints",
])
def test_a_slice_gives_back_its_endpoints(
    raw: list[dict[str, Any]], family: str, expected: tuple[Endpoint, ...]
) -> None:
    sl = slim_slice(raw, address_type=family)
    assert sl.endpoints == expected
    assert sl.size == len(expected)
    assert sl.ip_keys() == [ip_key(ip) for e in expected for ip in e.addresses]
    for e in expected:
        assert sl.endpoints_at(e.addresses[-1]) == (e,)
    assert sl == EndpointSlice("default", "web-1", "web", family, expected, sl.ports)


@pytest.mark.parametrize(("address", "family"), [
    ("10.0.0.1", "IPv6"), ("fd00::1", "IPv4"), ("fe80::1%eth0", "IPv6"), ("10.0.0.256", "IPv4"), ("", "IPv4"),
], ids=["IPv4 in an IPv6 slice", "IPv6 in an IPv4 slice", "a scoped address", "not an address", "empty"])
def test_a_slice_with_a_bad_address_is_refused(address: str, family: str) -> None:
    with pytest.raises(ObjectError, match="is not an"):
        slim_slice([m.endpoint(address)], address_type=family)


def test_a_slice_is_frozen_hashable_and_pickles() -> None:
    sl = slim_slice([m.endpoint("10.0.0.1", hostname="a", for_zones=["z"]), m.endpoint("10.0.0.2", ready=False)])
    with pytest.raises(FrozenInstanceError):
        sl.name = "other"  # type: ignore[misc]
    copy = pickle.loads(pickle.dumps(sl, protocol=pickle.HIGHEST_PROTOCOL))
    assert copy == sl and hash(copy) == hash(sl) and copy.endpoints == sl.endpoints
    assert sl != slim_slice([m.endpoint("10.0.0.1", hostname="a", for_zones=["z"]), m.endpoint("10.0.0.2")])
    assert "10.0.0.2" in repr(sl)


def test_equal_port_lists_are_one_tuple() -> None:
    a = k8s.slim(k8s.SERVICE, m.service("a", ports=[{"name": "http", "port": 80}]))
    b = k8s.slim(k8s.SERVICE, m.service("b", ports=[{"name": "HTTP", "port": 80, "protocol": "TCP"}]))
    assert isinstance(a, k8s.Service) and isinstance(b, k8s.Service)
    assert a.ports is b.ports and a.ports == (Port("http", "tcp", 80),)


@pytest.mark.parametrize(("text", "key"), [
    ("10.0.0.1", 0x0A000001),
    ("::a00:1", 0x0A000001 | V6_KEY),
    ("::", V6_KEY),
    ("010.0.0.1", None),
    ("::ffff:10.0.0.1", None),
    ("FD00::1", None),
    ("fe80::1%eth0", None),
    ("web", None),
], ids=["IPv4", "IPv6 with the same low bits", "IPv6 zero", "leading zero", "mapped", "upper case", "scoped",
        "not an address"])
def test_ip_keys_are_distinct_per_address_and_only_for_canonical_text(text: str, key: int | None) -> None:
    assert ip_key(text) == key


names = st.text(alphabet="abc-.\n", max_size=6)
# a few fixed addresses, so that endpoints share them and one endpoint repeats one
v4 = st.one_of(st.sampled_from(["10.0.0.1", "10.0.0.2", "0.0.0.0"]),
               st.integers(0, 2**32 - 1).map(lambda n: str(ipaddress.IPv4Address(n))))
v6 = st.one_of(st.sampled_from(["fd00::1", "::a00:1", "::"]),
               st.integers(0, 2**128 - 1).map(lambda n: ipaddress.IPv6Address(n)).filter(
                   lambda a: a.ipv4_mapped is None).map(str))


@st.composite
def endpoints(draw: st.DrawFn, addresses: st.SearchStrategy[str]) -> Endpoint:
    return Endpoint(
        tuple(draw(st.lists(addresses, min_size=0, max_size=3))), draw(st.booleans()), draw(names), draw(names),
        draw(st.sampled_from(["", "n1", "n2"])), draw(st.sampled_from(["", "z1"])),
        tuple(draw(st.lists(st.sampled_from(["z1", "z2"]), max_size=2))),
    )


@given(st.one_of(
    st.tuples(st.just("IPv4"), st.lists(endpoints(v4), max_size=8)),
    st.tuples(st.just("IPv6"), st.lists(endpoints(v6), max_size=8)),
))
def test_packing_any_endpoints_gives_them_back(case: tuple[str, list[Endpoint]]) -> None:
    family, eps = case
    sl = EndpointSlice("ns", "s-1", "s", family, eps, ())
    assert sl.endpoints == tuple(eps)
    assert pickle.loads(pickle.dumps(sl)).endpoints == tuple(eps)
    for ip in {ip for e in eps for ip in e.addresses} | {"10.0.0.1", "fd00::1"}:
        assert sl.endpoints_at(ip) == tuple(e for e in eps if ip in e.addresses)


def _index(*objs: tuple[str, dict[str, Any]]) -> Index:
    index = Index()
    index.load([(k8s.NAMESPACE, m.namespace("default")), *objs])
    return index


def test_an_address_in_two_slices_points_to_both_until_one_goes() -> None:
    index = _index(
        (k8s.ENDPOINTSLICE, m.endpoint_slice("a-1", "a", [m.endpoint("10.0.0.1"), m.endpoint("10.0.0.2")])),
        (k8s.ENDPOINTSLICE, m.endpoint_slice("b-1", "b", [m.endpoint("10.0.0.1")])),
    )
    assert [sl.name for sl in index.slices_with_ip("10.0.0.1")] == ["a-1", "b-1"]
    assert [sl.name for sl in index.slices_with_ip("10.0.0.2")] == ["a-1"]
    assert index.slices_with_ip("::a00:1") == [] and index.slices_with_ip("not-an-ip") == []
    index.delete(k8s.ENDPOINTSLICE, "default", "a-1")
    assert [sl.name for sl in index.slices_with_ip("10.0.0.1")] == ["b-1"]
    assert index.slices_with_ip("10.0.0.2") == []
    index.delete(k8s.ENDPOINTSLICE, "default", "b-1")
    assert index.slices_with_ip("10.0.0.1") == [] and not index._slices_by_block


def test_a_cluster_ip_shared_by_services_lists_them_in_key_order_whichever_came_first() -> None:
    """Key order, not arrival order: the PTR answer (the first one) must not depend on which came first, or an
    answer stored before a relist differs from the one built after it."""
    index = _index(*((k8s.SERVICE, m.service(n, cluster_ips=["10.96.0.10"])) for n in ("c", "a", "b")))
    assert [s.name for s in index.services_with_cluster_ip("10.96.0.10")] == ["a", "b", "c"]
    index.delete(k8s.SERVICE, "default", "c")
    assert [s.name for s in index.services_with_cluster_ip("10.96.0.10")] == ["a", "b"]
    index.delete(k8s.SERVICE, "default", "a")
    index.delete(k8s.SERVICE, "default", "b")
    assert index.services_with_cluster_ip("10.96.0.10") == [] and not index._services_by_ip


def test_a_services_slices_come_in_name_order_as_they_come_and_go() -> None:
    index = _index(*(
        (k8s.ENDPOINTSLICE, m.endpoint_slice(n, "web", [m.endpoint("10.0.0.1")])) for n in ("w-c", "w-a", "w-b")
    ))
    assert [sl.name for sl in index.slices_of("default", "web")] == ["w-a", "w-b", "w-c"]
    index.apply(k8s.ENDPOINTSLICE, "MODIFIED", m.endpoint_slice("w-a", "other", [m.endpoint("10.0.0.1")]))
    assert [sl.name for sl in index.slices_of("default", "web")] == ["w-b", "w-c"]
    assert [sl.name for sl in index.slices_of("default", "other")] == ["w-a"]
    assert index.counts()["endpoints"] == 3
    for n in ("w-a", "w-b", "w-c"):
        index.delete(k8s.ENDPOINTSLICE, "default", n)
    assert index.slices_of("default", "web") == [] and not index._slices_by_service


def test_a_service_port_without_protocol_is_tcp() -> None:
    svc = k8s.slim(k8s.SERVICE, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "a"},
                                 "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "http", "port": 80},
                                                                              {"name": "dns", "port": 53,
                                                                               "protocol": "UDP"}]}})
    assert isinstance(svc, k8s.Service)
    assert [(p.name, p.protocol, p.port) for p in svc.ports] == [("http", "tcp", 80), ("dns", "udp", 53)]


@pytest.mark.parametrize(("phase", "deleting", "terminating"), [
    ("Running", False, False), ("Pending", False, False), ("Running", True, True), ("Succeeded", False, True),
    ("Failed", False, True),
], ids=["running", "pending", "being-deleted", "succeeded", "failed"])
def test_a_pod_is_terminating_when_deleted_or_finished(phase: str, deleting: bool, terminating: bool) -> None:
    meta: dict[str, object] = {"name": "p", "namespace": "a"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-25T10:00:00Z"
    pod = k8s.slim(k8s.POD, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": "n"},
                             "status": {"phase": phase, "podIP": "10.244.0.5"}})
    assert isinstance(pod, k8s.Pod) and pod.terminating is terminating


@pytest.mark.parametrize(
    ("address_type", "text", "stored"),
    [
        ("IPv4", "10.1.2.3", "10.1.2.3"),
        ("IPv4", "010.1.2.3", None),  # a leading zero: not an address (Go and ipaddress refuse it)
        ("IPv4", "10.1", None),  # inet_aton's shorthand: not an address either
        ("IPv4", " 10.1.2.3", "10.1.2.3"),  # surrounding space: read as before, through the slow path
        ("IPv6", "fd00::1", "fd00::1"),
        ("IPv6", "FD00:0:0:0:0:0:0:0001", "fd00::1"),  # canonicalised
        ("IPv6", "fd00:0:0:1:0:0:0:1", "fd00:0:0:1::1"),  # the first of two equal runs of zeros compressed
        ("IPv6", "fd00::1:0:0:1", "fd00::1:0:0:1"),
        ("IPv6", "::ffff:10.1.2.3", None),  # IPv4-mapped: an IPv4 address in Go's eyes
        ("IPv6", "::10.1.2.3", str(ipaddress.IPv6Address("::10.1.2.3"))),  # IPv4-compatible
        ("IPv6", "fd00::1%eth0", None),
        ("IPv6", "10.1.2.3", None),
        ("IPv4", "fd00::1", None),
    ],
    ids=["v4", "v4-leading-zero", "v4-shorthand", "v4-space", "v6", "v6-uppercase-long", "v6-two-runs",
         "v6-later-run", "v6-mapped", "v6-compatible", "v6-zone", "v4-in-v6-slice", "v6-in-v4-slice"],
)
def test_endpoint_addresses_are_stored_in_the_canonical_text_ipaddress_gives(
        address_type: str, text: str, stored: str | None) -> None:
    obj = m.endpoint_slice("web-1", "web", [m.endpoint(text)], address_type=address_type)
    if stored is None:
        with pytest.raises(ObjectError, match="is not an"):
            k8s.slim(k8s.ENDPOINTSLICE, obj)
        return
    record = k8s.slim(k8s.ENDPOINTSLICE, obj)
    assert isinstance(record, EndpointSlice)
    assert [e.addresses for e in record.endpoints] == [(stored,)]
    assert record.address_texts() == [stored]
