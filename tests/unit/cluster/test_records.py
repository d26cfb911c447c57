"""Cluster-zone answers from the index, checked in the pure layer (no sockets, no event loop).

The expected answers come from the spec (schema 1.1.0) and docs/cluster-dns-behaviours.md; the table
lives in `tests/support/cluster_fixture.py` and the socket tests check the same table over the wire.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from nodedns.cluster import objects as k8s
from nodedns.cluster.changes import Change, Changes
from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords, ZoneSettings
from nodedns.dns.wire import QT, RCODE
from tests.support import cluster_fixture as fx
from tests.support.cluster_fixture import Case
from tests.support.records_check import check

# ----------------------------------------------------------------------------------------------
# Helpers


def settings(**kw: Any) -> ZoneSettings:
    base: dict[str, Any] = {
        "zone": fx.ZONE,
        "ttl": fx.TTL,
        "authoritative_reverse": tuple(ipaddress.ip_network(c) for c in fx.AUTHORITATIVE_REVERSE),
        "ns_addresses": ("127.0.0.1",),
    }
    base.update(kw)
    return ZoneSettings(**base)


def loaded_index(objs: list[dict[str, Any]] | None = None, **kw: Any) -> Index:
    index = Index(**kw)
    index.load(fx.kinds(fx.cluster_objects() if objs is None else objs))
    index.mark_synced()
    return index


@pytest.fixture(scope="module")
def index() -> Index:
    return loaded_index()


@pytest.fixture(scope="module")
def records(index: Index) -> ClusterRecords:
    return ClusterRecords(index, settings())


# ----------------------------------------------------------------------------------------------
# The table


@pytest.mark.parametrize("case", fx.CASES, ids=fx.case_ids(fx.CASES))
def test_cluster_records_answer_as_the_spec_says(records: ClusterRecords, case: Case) -> None:
    check(records, case)


@pytest.mark.parametrize("case", fx.POD_NAME_CASES, ids=fx.case_ids(fx.POD_NAME_CASES))
def test_endpoint_pod_names_name_hostname_less_endpoints_after_their_pod(index: Index, case: Case) -> None:
    check(ClusterRecords(index, settings(endpoint_pod_names=True)), case)


@pytest.mark.parametrize("case", fx.POD_VERIFIED_CASES, ids=fx.case_ids(fx.POD_VERIFIED_CASES))
def test_verified_pods_answer_only_for_live_pods_with_that_ip(index: Index, case: Case) -> None:
    check(ClusterRecords(index, settings(pods="verified")), case)


@pytest.mark.parametrize("case", fx.POD_DISABLED_CASES, ids=fx.case_ids(fx.POD_DISABLED_CASES))
def test_disabled_pods_answer_nxdomain_below_pod(index: Index, case: Case) -> None:
    check(ClusterRecords(index, settings(pods="disabled")), case)


@pytest.mark.parametrize(
    "qname",
    ["1.0.0.127.in-addr.arpa", "8.8.8.8.in-addr.arpa", fx.reverse_v6("2001:db8:ffff::1"), "example.com",
     "cluster.local.example.com", "local", "xcluster.local"],
    ids=["loopback-ptr", "foreign-ptr", "foreign-v6-ptr", "foreign-name", "zone-as-prefix", "zone-parent",
         "zone-as-suffix-of-a-label"],
)
def test_names_outside_our_zones_are_not_answered(records: ClusterRecords, qname: str) -> None:
    assert records.lookup(qname, QT.A) is None
    assert records.lookup(qname, QT.PTR) is None


# ----------------------------------------------------------------------------------------------
# TTLs and the SOA (b19, b21)


@pytest.mark.parametrize("ttl", [0, 5, 30, 300, 3600], ids=lambda t: f"ttl-{t}")
def test_records_carry_the_configured_ttl_and_the_soa_caps_it_at_300(index: Index, ttl: int) -> None:
    recs = ClusterRecords(index, settings(ttl=ttl))
    for qname, qtype in [("web.default.svc", QT.A), ("_http._tcp.web.default.svc", QT.SRV),
                         ("db.prod.svc", QT.SRV), ("search.prod.svc", QT.A), ("10-244-1-50.default.pod", QT.A)]:
        found = recs.lookup(fx.fqdn(qname), qtype)
        assert found is not None and found.answer
        assert {rr.ttl for rr in found.answer + found.additional} == {ttl}, qname
    ptr = recs.lookup("10.0.96.10.in-addr.arpa", QT.PTR)
    assert ptr is not None and [rr.ttl for rr in ptr.answer] == [ttl]
    negative = recs.lookup(fx.fqdn("nope.default.svc"), QT.A)
    assert negative is not None
    (soa,) = negative.authority
    assert soa.ttl == min(ttl, 300)
    assert soa.data[-1] == ttl  # the SOA minimum is the record TTL


def test_dns_version_has_a_ttl_of_28800_whatever_the_record_ttl(index: Index) -> None:
    found = ClusterRecords(index, settings(ttl=30)).lookup(f"dns-version.{fx.ZONE}", QT.TXT)
    assert found is not None
    assert [(rr.ttl, rr.data) for rr in found.answer] == [(28800, ("1.1.0",))]


def test_apex_soa_has_the_coredns_shape(index: Index) -> None:
    found = ClusterRecords(index, settings()).lookup(fx.ZONE, QT.SOA)
    assert found is not None and found.rcode == RCODE.NOERROR
    (soa,) = found.answer
    assert soa.name == fx.ZONE and soa.ttl == 5
    mname, rname, serial, refresh, retry, expire, minimum = soa.data
    assert (mname, rname) == (f"ns.dns.{fx.ZONE}", f"hostmaster.{fx.ZONE}")
    assert (refresh, retry, expire, minimum) == (7200, 1800, 86400, 5)
    assert serial == int(index.last_change) & 0xFFFFFFFF


@pytest.mark.parametrize(
    ("qname", "zone"),
    [("98.0.96.10.in-addr.arpa", "96.10.in-addr.arpa"), ("7.3.244.10.in-addr.arpa", "244.10.in-addr.arpa")],
    ids=["clusterip-range", "pod-range"],
)
def test_reverse_negatives_carry_the_soa_of_the_reverse_zone(records: ClusterRecords, qname: str, zone: str) -> None:
    found = records.lookup(qname, QT.PTR)
    assert found is not None and found.rcode == RCODE.NXDOMAIN
    (soa,) = found.authority
    assert soa.name == zone
    assert soa.data[:2] == (f"ns.dns.{zone}", f"hostmaster.{zone}")


def test_soa_serial_is_the_time_of_the_last_index_change() -> None:
    now = [1_000_000.0]
    index = loaded_index(clock=lambda: now[0])
    recs = ClusterRecords(index, settings())

    def serial() -> int:
        found = recs.lookup(fx.ZONE, QT.SOA)
        assert found is not None
        return int(found.answer[0].data[2])

    assert serial() == 1_000_000
    now[0] = 1_000_500.0
    assert serial() == 1_000_000  # time alone does not move it
    index.apply("Namespace", "ADDED", fx.namespace("fresh"))
    assert serial() == 1_000_500


def test_reverse_zone_apex_answers_its_soa(records: ClusterRecords) -> None:
    found = records.lookup("96.10.in-addr.arpa", QT.SOA)
    assert found is not None and found.rcode == RCODE.NOERROR
    assert [rr.name for rr in found.answer] == ["96.10.in-addr.arpa"]


def test_ns_dns_names_this_agent(records: ClusterRecords) -> None:
    found = records.lookup(f"ns.dns.{fx.ZONE}", QT.A)
    assert found is not None
    assert [rr.data for rr in found.answer] == ["127.0.0.1"]
    apex = records.lookup(fx.ZONE, QT.NS)
    assert apex is not None
    assert [(rr.name, rr.data) for rr in apex.additional] == [(f"ns.dns.{fx.ZONE}", "127.0.0.1")]


# ----------------------------------------------------------------------------------------------
# Other zones and chains


def test_another_cluster_domain_is_served_the_same_way() -> None:
    recs = ClusterRecords(loaded_index(), settings(zone="k8s.example.org"))
    found = recs.lookup("web.default.svc.k8s.example.org", QT.A)
    assert found is not None and [rr.data for rr in found.answer] == ["10.96.0.10"]
    assert recs.lookup("web.default.svc.cluster.local", QT.A) is None
    # an ExternalName into cluster.local is now outside the zone: a CNAME to chase upstream
    alias = recs.lookup("alias.prod.svc.k8s.example.org", QT.A)
    assert alias is not None and alias.rcode == RCODE.NOERROR
    assert [(rr.rtype, rr.data) for rr in alias.answer] == [(QT.CNAME, "web.default.svc.cluster.local")]
    assert alias.chase == "web.default.svc.cluster.local"


def test_externalname_outside_the_zone_is_left_to_chase_upstream(records: ClusterRecords) -> None:
    found = records.lookup(fx.fqdn("search.prod.svc"), QT.A)
    assert found is not None
    assert found.chase == "search.example.com"


def test_externalname_chain_stops_at_the_chain_limit() -> None:
    """A ring of ExternalNames in the zone never loops and ends without a CNAME (b16: limit 10)."""
    objs = [fx.namespace("ring")] + [
        fx.service("ring", f"n{i}", external_name=f"n{(i + 1) % 12}.ring.svc.cluster.local") for i in range(12)
    ]
    recs = ClusterRecords(loaded_index(objs), settings())
    found = recs.lookup("n0.ring.svc.cluster.local", QT.A)
    assert found is not None and found.rcode == RCODE.NOERROR
    assert found.answer == []


def test_externalname_chain_within_the_limit_is_followed() -> None:
    objs = [fx.namespace("c"), fx.service("c", "end", cluster_ips=["10.96.1.1"], ports=[fx.port(80, "http")])]
    objs += [fx.service("c", f"h{i}", external_name=f"h{i + 1}.c.svc.cluster.local") for i in range(4)]
    objs.append(fx.service("c", "h4", external_name="end.c.svc.cluster.local"))
    recs = ClusterRecords(loaded_index(objs), settings())
    found = recs.lookup("h0.c.svc.cluster.local", QT.A)
    assert found is not None
    assert [rr.rtype for rr in found.answer] == [QT.CNAME] * 5 + [QT.A]
    assert found.answer[-1].data == "10.96.1.1"


# ----------------------------------------------------------------------------------------------
# The index: add, update, delete, generation, relist


def svc_a(index: Index, name: str = "web", ns: str = "default") -> list[str] | str:
    """The A answer for a service, or the rcode name when there is none."""
    found = ClusterRecords(index, settings()).lookup(f"{name}.{ns}.svc.{fx.ZONE}", QT.A)
    assert found is not None
    if found.rcode != RCODE.NOERROR or not found.answer:
        return RCODE.name(found.rcode) if found.rcode else "NODATA"
    return sorted(str(rr.data) for rr in found.answer)


@pytest.fixture()
def small() -> Index:
    index = Index()
    index.load(fx.kinds([
        fx.namespace("default"),
        fx.service("default", "web", cluster_ips=["10.96.0.10"], ports=[fx.port(80, "http")]),
        fx.headless("default", "hl", ports=[fx.port(80, "http")]),
        fx.endpoint_slice("default", "hl-1", "hl", "IPv4", [fx.endpoint("10.244.0.1")], [fx.port(80, "http")]),
    ]))
    index.mark_synced()
    return index


def test_adding_an_object_bumps_the_generation_and_tells_listeners(small: Index) -> None:
    nxdomain, tags = ClusterRecords(small, settings()).resolve(f"new.default.svc.{fx.ZONE}", QT.A)
    assert nxdomain is not None and nxdomain.rcode == RCODE.NXDOMAIN
    calls: list[tuple[int, Change]] = []
    Changes(small).add(lambda change: calls.append((small.generation, change)))
    before = small.generation
    assert small.apply("Service", "ADDED", fx.service("default", "new", cluster_ips=["10.96.0.77"]))
    assert small.generation == before + 1
    assert [generation for generation, _ in calls] == [before + 1]
    named = calls[0][1].tags
    assert named is not None and tags & named  # the NXDOMAIN built before the Service came is among what goes
    assert svc_a(small, "new") == ["10.96.0.77"]


def test_an_identical_object_resent_changes_nothing(small: Index) -> None:
    before = small.generation
    small.apply("Service", "MODIFIED", fx.service("default", "web", cluster_ips=["10.96.0.10"],
                                                  ports=[fx.port(80, "http")]))
    small.apply("Namespace", "ADDED", fx.namespace("default"))
    assert small.generation == before


def test_updating_a_service_changes_its_answer(small: Index) -> None:
    before = small.generation
    small.apply("Service", "MODIFIED", fx.service("default", "web", cluster_ips=["10.96.0.11"]))
    assert small.generation > before
    assert svc_a(small) == ["10.96.0.11"]
    recs = ClusterRecords(small, settings())
    assert recs.ptr_targets("10.96.0.10") == []
    assert recs.ptr_targets("10.96.0.11") == ["web.default.svc.cluster.local"]


@pytest.mark.parametrize("order", [("a", "b"), ("b", "a")], ids=["a-first", "b-first"])
def test_two_services_sharing_a_cluster_ip_give_the_same_ptr_whichever_came_first(order: tuple[str, str]) -> None:
    """A ClusterIP two Services hold for a moment (a manifest, a change half applied): the PTR names the first
    by namespace and name, not the first the index happened to see, so a stored answer and one built
    fresh agree."""
    index = Index()
    for ns in order:
        index.apply("Namespace", "ADDED", fx.namespace(ns))
        index.apply("Service", "ADDED", fx.service(ns, "s2", cluster_ips=["10.96.0.1"]))
    index.mark_synced()
    assert ClusterRecords(index, settings()).ptr_targets("10.96.0.1") == ["s2.a.svc.cluster.local"]


def test_deleting_objects_removes_their_names(small: Index) -> None:
    before = small.generation
    small.apply("Service", "DELETED", fx.service("default", "web"))
    assert small.generation == before + 1
    assert svc_a(small) == "NXDOMAIN"
    small.apply("EndpointSlice", "DELETED", fx.endpoint_slice("default", "hl-1", "hl", "IPv4", []))
    assert svc_a(small, "hl") == "NXDOMAIN"
    small.apply("Namespace", "DELETED", fx.namespace("default"))
    found = ClusterRecords(small, settings()).lookup("default.svc.cluster.local", QT.A)
    assert found is not None and found.rcode == RCODE.NXDOMAIN


def test_deleting_something_unknown_changes_nothing(small: Index) -> None:
    before = small.generation
    small.apply("Service", "DELETED", fx.service("default", "never"))
    small.apply("Pod", "DELETED", fx.pod("default", "never", "10.0.0.1"))
    assert small.generation == before


def test_a_slice_relabelled_to_another_service_moves_its_endpoints(small: Index) -> None:
    small.apply("Service", "ADDED", fx.headless("default", "hl2", ports=[fx.port(80, "http")]))
    small.apply("EndpointSlice", "MODIFIED",
                fx.endpoint_slice("default", "hl-1", "hl2", "IPv4", [fx.endpoint("10.244.0.1")]))
    assert svc_a(small, "hl") == "NXDOMAIN"
    assert svc_a(small, "hl2") == ["10.244.0.1"]


def test_endpoints_turning_unready_make_a_headless_service_nxdomain(small: Index) -> None:
    small.apply("EndpointSlice", "MODIFIED",
                fx.endpoint_slice("default", "hl-1", "hl", "IPv4", [fx.endpoint("10.244.0.1", ready=False)]))
    assert svc_a(small, "hl") == "NXDOMAIN"
    small.apply("Service", "MODIFIED", fx.headless("default", "hl", publish_not_ready=True))
    assert svc_a(small, "hl") == ["10.244.0.1"]


def test_a_slice_added_later_joins_the_service_by_label(small: Index) -> None:
    small.apply("EndpointSlice", "ADDED",
                fx.endpoint_slice("default", "zzz", "hl", "IPv4",
                                  [fx.endpoint("10.244.0.2"), fx.endpoint("10.244.0.1")]))
    assert svc_a(small, "hl") == ["10.244.0.1", "10.244.0.2"]


def test_a_relist_replaces_the_objects_of_one_kind(small: Index) -> None:
    small.apply("Service", "ADDED", fx.service("default", "stale", cluster_ips=["10.96.0.88"]))
    before = small.generation
    small.begin_relist("Service")
    for obj in [fx.service("default", "web", cluster_ips=["10.96.0.10"], ports=[fx.port(80, "http")]),
                fx.service("default", "newer", cluster_ips=["10.96.0.89"]),
                fx.headless("default", "hl", ports=[fx.port(80, "http")])]:
        record = k8s.slim("Service", obj)
        assert record is not None
        small.upsert(record)
    assert svc_a(small, "stale") == ["10.96.0.88"]  # nothing goes before the relist ends
    assert small.end_relist("Service") == 1
    assert svc_a(small, "stale") == "NXDOMAIN"
    assert svc_a(small, "newer") == ["10.96.0.89"]
    assert svc_a(small) == ["10.96.0.10"]
    assert svc_a(small, "hl") == ["10.244.0.1"]  # other kinds untouched
    assert small.generation > before
    assert small.counts()["services"] == 3


def test_a_relist_that_changes_nothing_keeps_the_generation(small: Index) -> None:
    before = small.generation
    small.begin_relist("EndpointSlice")
    record = k8s.slim("EndpointSlice", fx.endpoint_slice("default", "hl-1", "hl", "IPv4", [fx.endpoint("10.244.0.1")],
                                                         [fx.port(80, "http")]))
    assert record is not None
    small.upsert(record)
    assert small.end_relist("EndpointSlice") == 0
    assert small.generation == before


def test_a_relist_of_namespaces_removes_missing_namespaces(small: Index) -> None:
    small.apply("Namespace", "ADDED", fx.namespace("old"))
    small.begin_relist("Namespace")
    small.upsert(k8s.Namespace("default"))
    assert small.end_relist("Namespace") == 1
    assert not small.has_namespace("old") and small.has_namespace("default")


INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("service-bad-cluster-ip", fx.service("default", "bad-ip", cluster_ips=["10.96.0.300"]), "Service default/bad-ip"),
    ("service-port-not-a-number", fx.service("default", "bad-port", cluster_ips=["10.96.0.5"],
                                             ports=[{"name": "http", "port": "eighty"}]), "Service default/bad-port"),
    ("service-port-out-of-range", fx.service("default", "big-port", cluster_ips=["10.96.0.5"],
                                             ports=[fx.port(70000, "http")]), "Service default/big-port"),
    ("externalname-without-target", {"apiVersion": "v1", "kind": "Service",
                                     "metadata": {"name": "noext", "namespace": "default"},
                                     "spec": {"type": "ExternalName"}}, "Service default/noext"),
    ("service-without-name", {"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "default"},
                              "spec": {"clusterIP": "10.96.0.6"}}, "Service"),
    ("service-bad-namespace", fx.service("Not_A_Label", "x", cluster_ips=["10.96.0.7"]), "Service Not_A_Label/x"),
    ("slice-without-service-label", fx.endpoint_slice("default", "orphan", None, "IPv4", [fx.endpoint("10.1.1.1")]),
     "EndpointSlice default/orphan"),
    ("slice-bad-address-type", fx.endpoint_slice("default", "weird", "web", "IPv5", [fx.endpoint("10.1.1.1")]),
     "EndpointSlice default/weird"),
    ("slice-bad-address", fx.endpoint_slice("default", "badaddr", "web", "IPv4", [fx.endpoint("10.1.1")]),
     "EndpointSlice default/badaddr"),
    ("slice-v6-address-in-v4-slice", fx.endpoint_slice("default", "mixed", "web", "IPv4", [fx.endpoint("fd00::1")]),
     "EndpointSlice default/mixed"),
    ("pod-bad-ip", fx.pod("default", "badpod", "10.244.999.1"), "Pod default/badpod"),
    ("not-a-mapping", ["a", "list"], "Service"),  # type: ignore[list-item]
]


@pytest.mark.parametrize(("obj", "names"), [(o, n) for _, o, n in INVALID], ids=[i for i, _, _ in INVALID])
def test_invalid_objects_are_skipped_with_a_reason_naming_them(
    caplog: pytest.LogCaptureFixture, obj: dict[str, Any], names: str
) -> None:
    kind = obj["kind"] if isinstance(obj, dict) else "Service"
    good = fx.service("default", "good", cluster_ips=["10.96.0.8"])
    index = Index()
    with caplog.at_level(logging.WARNING, logger="nodedns"):
        loaded = index.load([("Namespace", fx.namespace("default")), (kind, obj), ("Service", good)])
    assert loaded == 2
    assert index.skipped == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert names in warnings[0]
    index.mark_synced()
    assert svc_a(index, "good") == ["10.96.0.8"]


def test_an_fqdn_slice_is_ignored_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    index = Index()
    with caplog.at_level(logging.WARNING, logger="nodedns"):
        assert index.apply("EndpointSlice", "ADDED",
                           fx.endpoint_slice("default", "f", "web", "FQDN", [{"addresses": ["example.com"]}]))
    assert index.skipped == 0 and not caplog.records
    assert index.counts()["endpointslices"] == 0


def test_loading_the_fixture_skips_nothing(index: Index) -> None:
    assert index.skipped == 0
    counts = index.counts()
    assert counts["services"] == sum(1 for o in fx.cluster_objects() if o["kind"] == "Service")
    assert counts["namespaces"] == 4


def iter_names(index: Index) -> Iterator[str]:
    for ns, name in index.services:
        yield f"{name}.{ns}"


def test_cluster_records_answer_every_service_of_the_fixture(records: ClusterRecords, index: Index) -> None:
    """Every loaded Service name is known: it answers something other than NXDOMAIN unless the spec
    says NXDOMAIN (headless without ready endpoints, IP-valued ExternalName, namespace not present)."""
    expected_nx = {"lost.prod", "noslices.prod", "ipext.prod", "phantom.ghost"}
    for name in iter_names(index):
        found = records.lookup(f"{name}.svc.{fx.ZONE}", QT.A)
        assert found is not None
        assert (found.rcode == RCODE.NXDOMAIN) == (name in expected_nx), name
