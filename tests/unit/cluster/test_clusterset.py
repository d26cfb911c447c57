"""The clusterset zone (Multi-Cluster Services) in the pure layers: objects, index, records, tags.

The table of answers lives in `tests/support/clusterset_fixture.py` (from the MCS DNS specification's
examples); `tests/e2e/test_clusterset_zone.py` checks the same table over real sockets.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any

import dns.message
import dns.reversename
import dns.rrset
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from nodedns.cluster import manifests
from nodedns.cluster import objects as k8s
from nodedns.cluster.index import Index, change_of
from nodedns.cluster.records import ClusterRecords, ZoneSettings, change_tags
from nodedns.dns.wire import QT, RCODE
from nodedns.errors import ObjectError
from tests.support import clusterset_fixture as mc
from tests.support.clusterset_fixture import Case
from tests.support.helpers import ROOT
from tests.support.records_check import check
from tests.support.wiring import resolver_of, watched

# ----------------------------------------------------------------------------------------------
# Helpers


def settings(**kw: Any) -> ZoneSettings:
    base: dict[str, Any] = {
        "zone": mc.CLUSTER_ZONE,
        "multicluster_zone": mc.ZONE,
        "ttl": mc.TTL,
        "authoritative_reverse": tuple(ipaddress.ip_network(c) for c in mc.AUTHORITATIVE_REVERSE),
        "ns_addresses": ("127.0.0.1",),
    }
    base.update(kw)
    return ZoneSettings(**base)


def loaded(objs: list[dict[str, Any]] | None = None, *, multicluster: bool = True) -> Index:
    index = Index()
    index.load(mc.kinds(mc.clusterset_objects() if objs is None else objs, multicluster=multicluster))
    index.mark_synced()
    return index


@pytest.fixture(scope="module")
def index() -> Index:
    return loaded()


@pytest.fixture(scope="module")
def records(index: Index) -> ClusterRecords:
    return ClusterRecords(index, settings())


# ----------------------------------------------------------------------------------------------
# The table


@pytest.mark.parametrize("case", mc.CASES, ids=mc.case_ids(mc.CASES))
def test_clusterset_records_answer_as_the_mcs_spec_says(records: ClusterRecords, case: Case) -> None:
    check(records, case)


@pytest.mark.parametrize("case", mc.POD_NAME_CASES, ids=mc.case_ids(mc.POD_NAME_CASES))
def test_endpoint_pod_names_name_imported_endpoints_after_their_pod(index: Index, case: Case) -> None:
    check(ClusterRecords(index, settings(endpoint_pod_names=True)), case)


@pytest.mark.parametrize("case", mc.NO_IMPORT_CASES, ids=mc.case_ids(mc.NO_IMPORT_CASES))
def test_without_imports_the_zone_answers_and_no_import_exists(case: Case) -> None:
    """The manifests read without --multicluster-zone (what a cluster without the CRD gives too)."""
    check(ClusterRecords(loaded(multicluster=False), settings()), case)


def test_the_clusterset_zone_is_not_claimed_when_off(index: Index) -> None:
    records = ClusterRecords(index, settings(multicluster_zone=""))
    assert not records.claims(f"myservice.test.svc.{mc.ZONE}")
    assert records.lookup(f"myservice.test.svc.{mc.ZONE}", QT.A) is None
    assert records.claims(f"myservice.test.svc.{mc.CLUSTER_ZONE}")


def test_answers_say_they_come_from_the_clusterset_zone(records: ClusterRecords) -> None:
    found = records.lookup(f"myservice.test.svc.{mc.ZONE}", QT.A)
    assert found is not None and found.source == "clusterset"


def test_the_soa_of_the_clusterset_zone_names_its_own_server(records: ClusterRecords) -> None:
    found = records.lookup(mc.ZONE, QT.SOA)
    assert found is not None and found.rcode == RCODE.NOERROR
    (soa,) = found.answer
    assert soa.name == mc.ZONE and soa.data[:2] == (f"ns.dns.{mc.ZONE}", f"hostmaster.{mc.ZONE}")


# ----------------------------------------------------------------------------------------------
# Objects and the index


def test_imported_slices_are_no_part_of_the_cluster_zone_and_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    """An MCS controller's slices lack kubernetes.io/service-name: passed over quietly, flag on or off."""
    caplog.set_level(logging.WARNING)
    for multicluster in (False, True):
        index = loaded(multicluster=multicluster)
        assert index.skipped == 0
        assert {name for _, name in index.slices} == {"headless-local"}
    assert not caplog.records


IMPORTED_SLICES = sum(1 for o in mc.clusterset_objects()
                      if o["kind"] == "EndpointSlice" and "multicluster.kubernetes.io/service-name"
                      in o["metadata"]["labels"])


def test_the_index_keeps_imports_in_tables_of_their_own(index: Index) -> None:
    counts = index.counts()
    assert IMPORTED_SLICES == 13
    assert counts["serviceimports"] == sum(1 for o in mc.clusterset_objects() if o["kind"] == "ServiceImport")
    assert counts["imported_endpointslices"] == IMPORTED_SLICES
    assert [s.name for s in index.imported_slices_of("test", "headless")] == [
        "headless-a-v4", "headless-a-v6", "headless-b-v4"]
    assert index.slices_of("test", "headless")[0].name == "headless-local"
    assert "serviceimports" not in loaded(multicluster=False).counts()


def test_service_import_fields_are_kept_slim_and_canonical() -> None:
    si = k8s.slim(k8s.SERVICE_IMPORT, mc.service_import("test", "x", ips=["2001:DB8:0::1"],
                                                         ports=[mc.HTTPS]))
    assert si == k8s.ServiceImport("test", "x", False, ("2001:db8::1",), (k8s.Port("https", "tcp", 443),))
    headless = k8s.slim(k8s.SERVICE_IMPORT, mc.service_import("test", "h", headless=True, ips=["10.0.0.1"]))
    assert isinstance(headless, k8s.ServiceImport) and headless.headless and headless.ips == ()
    untyped = k8s.slim(k8s.SERVICE_IMPORT, mc.service_import("test", "u", ips=["10.0.0.1"], type_=""))
    assert isinstance(untyped, k8s.ServiceImport) and not untyped.headless


def test_imported_slice_carries_its_lowercase_cluster() -> None:
    obj = mc.imported_slice("test", "s", "svc", "Cluster-A", "IPv4", [mc.ep("10.0.0.1", "h")], [mc.HTTPS])
    im = k8s.slim(k8s.IMPORTED_SLICE, obj)
    assert isinstance(im, k8s.ImportedSlice)
    assert (im.namespace, im.name, im.service, im.cluster) == ("test", "s", "svc", "cluster-a")
    assert im.slice.endpoints[0].hostname == "h"
    assert k8s.slim(k8s.ENDPOINTSLICE, obj) is None
    bad = mc.imported_slice("test", "s", "svc", "not a dns name!", "IPv4", [mc.ep("10.0.0.1", "h")])
    assert isinstance(im2 := k8s.slim(k8s.IMPORTED_SLICE, bad), k8s.ImportedSlice) and im2.cluster == ""


INVALID = [
    ("unknown-type", mc.service_import("test", "x", type_="LoadBalancer"), "spec.type"),
    ("bad-ip", mc.service_import("test", "x", ips=["10.0.0.300"]), "spec.ips[0]"),
    ("ips-not-a-list", {**mc.service_import("test", "x"), "spec": {"type": "ClusterSetIP", "ips": "10.0.0.1"}},
     "not a list"),
    ("port-without-number", mc.service_import("test", "x", ports=[{"name": "http"}]), "port missing"),
    ("namespace-not-a-label", mc.service_import("Not_A_Label", "x"), "not a DNS label"),
]


@pytest.mark.parametrize(("obj", "says"), [(o, s) for _, o, s in INVALID], ids=[i for i, _, _ in INVALID])
def test_an_invalid_service_import_is_skipped_with_a_reason(obj: dict[str, Any], says: str) -> None:
    with pytest.raises(ObjectError, match="ServiceImport") as info:
        k8s.slim(k8s.SERVICE_IMPORT, obj)
    assert says in str(info.value)
    index = Index()
    assert index.apply(k8s.SERVICE_IMPORT, "ADDED", obj) is False and index.skipped == 1


def test_an_imported_slice_without_the_service_label_is_invalid_for_the_multicluster_watch() -> None:
    obj = mc.imported_slice("test", "s", "svc", "cluster-a", "IPv4", [mc.ep("10.0.0.1")])
    del obj["metadata"]["labels"]["multicluster.kubernetes.io/service-name"]
    with pytest.raises(ObjectError, match="multicluster.kubernetes.io/service-name"):
        k8s.slim(k8s.IMPORTED_SLICE, obj)


def test_manifests_pass_imports_over_unless_asked() -> None:
    objs = mc.clusterset_objects()
    kinds_off = [k for k, _ in manifests.objects(objs)]
    kinds_on = [k for k, _ in manifests.objects(objs, multicluster=True)]
    assert k8s.SERVICE_IMPORT not in kinds_off and k8s.IMPORTED_SLICE not in kinds_off
    assert kinds_on.count(k8s.SERVICE_IMPORT) == sum(1 for o in objs if o["kind"] == "ServiceImport")
    assert kinds_on.count(k8s.IMPORTED_SLICE) == IMPORTED_SLICES
    # the EndpointSlice itself is still yielded: the cluster zone decides it is not its own
    assert kinds_on.count("EndpointSlice") == kinds_off.count("EndpointSlice")


def test_a_service_import_of_another_api_version_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    obj = mc.service_import("test", "x", ips=["10.0.0.1"])
    obj["apiVersion"] = "multicluster.k8s.io/v1alpha1"  # the KEP's early examples
    caplog.set_level(logging.WARNING)
    assert list(manifests.objects([obj], multicluster=True)) == []
    assert "multicluster.x-k8s.io/v1alpha1" in caplog.text


def test_an_index_rebuilt_from_records_holds_the_same_imports(index: Index) -> None:
    """Index.records (every object as a change that re-creates it) carries the multicluster tables too."""
    replica = Index()
    for change in index.records():
        replica.apply_change(change)
    assert replica.service_imports == index.service_imports
    assert replica.imported_slices == index.imported_slices
    assert replica.imported_slices_of("test", "headless") == index.imported_slices_of("test", "headless")


def test_a_relist_sweeps_imports_it_did_not_see() -> None:
    index = loaded()
    before = len(index.service_imports)
    index.begin_relist(k8s.SERVICE_IMPORT)
    index.apply(k8s.SERVICE_IMPORT, "ADDED", mc.service_import("test", "myservice", ips=["10.42.42.42"]))
    assert index.end_relist(k8s.SERVICE_IMPORT) == before - 1
    assert list(index.service_imports) == [("test", "myservice")]
    index.begin_relist(k8s.IMPORTED_SLICE)
    assert index.end_relist(k8s.IMPORTED_SLICE) == IMPORTED_SLICES
    assert index.imported_slices_of("test", "headless") == [] and not index.imported_slices


# ----------------------------------------------------------------------------------------------
# Dependency tags: what an answer is built from, what a change touches


def tags_of(records: ClusterRecords, name: str, qtype: int = QT.A) -> frozenset[str]:
    return records.resolve(name, qtype)[1]


def test_answers_depend_on_their_import_and_namespace(records: ClusterRecords) -> None:
    assert tags_of(records, f"headless.test.svc.{mc.ZONE}") == {"n:test", "m:test/headless"}
    assert tags_of(records, f"_https._tcp.myservice.test.svc.{mc.ZONE}", QT.SRV) == {"n:test", "m:test/myservice"}
    assert tags_of(records, f"nope.test.svc.{mc.ZONE}") == {"n:test", "m:test/nope"}
    assert tags_of(records, f"dns-version.{mc.ZONE}", QT.TXT) == frozenset()
    assert tags_of(records, mc.ZONE, QT.SOA) == {"z"}


def test_a_clusterset_ptr_depends_on_what_has_the_address_and_the_namespace(records: ClusterRecords) -> None:
    assert tags_of(records, "42.42.42.10.in-addr.arpa", QT.PTR) == {"i:10.42.42.42", "n:test"}
    assert tags_of(records, "1.0.3.10.in-addr.arpa", QT.PTR) == {"i:10.3.0.1", "n:test", "m:test/headless"}
    assert tags_of(records, "11.0.96.10.in-addr.arpa", QT.PTR) == {"i:10.96.0.11"}  # the cluster's own PTR


CHANGES = [
    ("service-import", k8s.SERVICE_IMPORT, mc.service_import("test", "myservice", ips=["10.42.42.42", "2001:db8::1"]),
     {"z", "m:test/myservice", "i:10.42.42.42", "i:2001:db8::1"}),
    ("imported-slice", k8s.IMPORTED_SLICE,
     mc.imported_slice("test", "headless-b-v4", "headless", "cluster-b", "IPv4", [mc.ep("10.4.0.1")]),
     {"z", "m:test/headless", "i:10.4.0.1"}),
]


@pytest.mark.parametrize(("kind", "obj", "tags"), [c[1:] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_a_multicluster_change_names_its_import_and_its_addresses(kind: str, obj: dict[str, Any],
                                                                  tags: set[str]) -> None:
    change = change_of(kind, "ADDED", obj)
    assert change_tags(kind, None, change.record) == tags
    assert change_tags(kind, change.record, None) == tags


def test_an_imported_slice_moving_to_another_import_names_both() -> None:
    old = change_of(k8s.IMPORTED_SLICE, "ADDED", mc.imported_slice("test", "s", "a", "c1", "IPv4",
                                                                   [mc.ep("10.0.0.1")])).record
    new = change_of(k8s.IMPORTED_SLICE, "ADDED", mc.imported_slice("test", "s", "b", "c1", "IPv4",
                                                                   [mc.ep("10.0.0.1")])).record
    assert change_tags(k8s.IMPORTED_SLICE, old, new) == {"z", "m:test/a", "m:test/b", "i:10.0.0.1"}


def test_the_index_finds_imports_and_imported_slices_by_address() -> None:
    index = loaded()
    assert [si.name for si in index.service_imports_with_ip("2001:db8::1")] == ["myservice"]
    assert [im.name for im in index.imported_slices_with_ip("2001:db8::1")] == ["headless-a-v6"]
    assert [im.name for im in index.imported_slices_with_ip("10.3.0.4")] == ["headless-a-v4"]  # not ready: still held
    assert index.imported_slices_with_ip("10.3.0.9") == []  # same block, no such address
    index.delete(k8s.IMPORTED_SLICE, "test", "headless-a-v4")
    index.delete(k8s.SERVICE_IMPORT, "test", "myservice")
    assert index.imported_slices_with_ip("10.3.0.1") == []
    assert index.service_imports_with_ip("10.42.42.42") == []
    moved = mc.service_import("test", "v4only", ips=["10.42.0.3"], ports=[mc.cf.port(80, "http")])
    mc_apply(index, "ADDED", moved)
    assert index.service_imports_with_ip("10.42.0.2") == []
    assert [si.name for si in index.service_imports_with_ip("10.42.0.3")] == ["v4only"]


def test_a_cluster_zone_service_of_the_same_name_touches_no_import_answer(records: ClusterRecords) -> None:
    svc = change_of("Service", "ADDED", mc.cf.service("test", "myservice", cluster_ips=["10.96.0.11"])).record
    touched = change_tags("Service", None, svc)
    assert touched is not None
    assert not touched & tags_of(records, f"myservice.test.svc.{mc.ZONE}")


EXAMPLE_ANSWERS = [
    ("myservice.test.svc", QT.A, ["10.42.42.42"]),
    ("myservice.test.svc", QT.AAAA, ["2001:db8::1"]),
    ("headless.test.svc", QT.AAAA, ["2001:db8::1", "2001:db8::2", "2001:db8::3"]),
    ("my-pet-1.cluster-b.headless.test.svc", QT.A, ["10.4.0.1"]),
    ("v4only.test.svc", QT.A, ["10.42.0.2"]),
]


@pytest.mark.parametrize(("name", "qtype", "data"), EXAMPLE_ANSWERS, ids=[f"{n}-{QT.name(t)}" for n, t, _ in
                                                                           EXAMPLE_ANSWERS])
def test_the_bundled_example_answers_as_docs_multicluster_shows(name: str, qtype: int, data: list[str]) -> None:
    index = Index()
    index.load(manifests.read(str(ROOT / "examples" / "clusterset.yaml"), multicluster=True))
    index.mark_synced()
    assert index.skipped == 0
    found = ClusterRecords(index, settings()).lookup(f"{name}.{mc.ZONE}", qtype)
    assert found is not None and sorted(str(rr.data) for rr in found.answer) == data


# ----------------------------------------------------------------------------------------------
# Targeted invalidation is exact: over random changes of imports, imported slices, Namespaces and
# cluster-zone Services of the same names, every answer served through the stored-answer table
# equals the answer computed fresh from an index holding the same objects.

NAMESPACES = ("a", "b")
IMPORTS = ("s1", "s2")
MC_SETTINGS = ZoneSettings(zone=mc.CLUSTER_ZONE, multicluster_zone=mc.ZONE,
                           authoritative_reverse=(ipaddress.ip_network("fd00::/8"),))  # 10/8: forwarded


def mc_questions() -> list[tuple[str, str]]:
    out = [(mc.ZONE, "SOA"), (f"dns-version.{mc.ZONE}", "TXT")]
    for ns in NAMESPACES:
        out.append((f"{ns}.svc.{mc.ZONE}", "A"))
        for s in IMPORTS:
            base = f"{s}.{ns}.svc.{mc.ZONE}"
            out.extend((base, qtype) for qtype in ("A", "AAAA", "SRV"))
            out.append((f"_https._tcp.{base}", "SRV"))
            out.extend((f"{host}.{cluster}.{base}", "A") for host in ("h1", "10-0-0-1") for cluster in ("c1", "c2"))
            out.append((f"c1.{base}", "A"))
            out.append((f"{s}.{ns}.svc.{mc.CLUSTER_ZONE}", "A"))
    # the clusterset PTRs (and the cluster's own, which win) of every address the changes use
    out.extend((dns.reversename.from_address(ip).to_text(omit_final_dot=True), "PTR")
               for ip in ("10.0.0.1", "10.0.0.2", "10.42.0.1", "10.42.0.2", "fd00::2", "10.96.0.1"))
    return out


MC_QUESTIONS = mc_questions()


def mc_resolver(index: Index) -> Any:
    from nodedns.serve.cache import ClusterAnswers
    from nodedns.serve.limits import EVERYONE, AllowList

    return watched(resolver_of(records=ClusterRecords(index, MC_SETTINGS), index=index,
                               cluster_answers=ClusterAnswers(), allow=AllowList(explicit=EVERYONE)))


def mc_fresh(index: Index) -> Index:
    copy = Index(clock=lambda: index.last_change)
    for change in index.records():
        copy.apply_change(change)
    if index.synced:
        copy.mark_synced()
    return copy


@st.composite
def import_obj(draw: Any) -> dict[str, Any]:
    ns, name = draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from(IMPORTS))
    ports = draw(st.lists(st.sampled_from([mc.HTTPS, mc.cf.port(53, "dns", "UDP")]), max_size=2,
                          unique_by=lambda p: p["name"]))
    if draw(st.booleans()):
        return mc.service_import(ns, name, headless=True, ports=ports)
    return mc.service_import(ns, name, ips=draw(st.sampled_from([[], ["10.42.0.1"], ["10.42.0.2", "fd00::2"]])),
                             ports=ports)


@st.composite
def imported_obj(draw: Any) -> dict[str, Any]:
    ns, svc = draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from(IMPORTS))
    cluster = draw(st.sampled_from(["c1", "c2", None]))
    name = f"{svc}-{draw(st.sampled_from(['x', 'y']))}"
    eps = [mc.ep(draw(st.sampled_from(["10.0.0.1", "10.0.0.2"])), hostname=draw(st.sampled_from([None, "h1"])),
                 ready=draw(st.sampled_from([True, False, None]))) for _ in range(draw(st.integers(0, 2)))]
    return mc.imported_slice(ns, name, svc, cluster, "IPv4", eps, draw(st.sampled_from([[mc.HTTPS], []])))


mc_objects = st.one_of(import_obj(), imported_obj(), imported_obj(), st.sampled_from(NAMESPACES).map(mc.cf.namespace),
                       st.builds(lambda ns, s, ip: mc.cf.service(ns, s, cluster_ips=[ip]),
                                 st.sampled_from(NAMESPACES), st.sampled_from(IMPORTS),
                                 st.sampled_from(["10.96.0.1", "10.42.0.1"])))


def mc_apply(index: Index, event: str, obj: dict[str, Any]) -> None:
    for kind, o in manifests.objects([obj], multicluster=True):
        assert index.apply(kind, event, o), o


async def mc_ask(resolver: Any, name: str, qtype: str) -> str:
    q = dns.message.make_query(name, qtype)
    q.id = 4242
    out = resolver.handle(q.to_wire(), "127.0.0.1")
    if out is not None and not isinstance(out, bytes):
        out = await out
    assert out is not None
    msg = dns.message.from_wire(out)
    for rrset in msg.authority:  # the SOA serial may lag (nodedns.cluster.records, Dependencies)
        rrset.update(dns.rrset.from_rdata_list(rrset.name, rrset.ttl, [r.replace(serial=0) for r in rrset]))
    return str(msg.to_text())


@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from(["ADDED", "ADDED", "DELETED"]), mc_objects), min_size=2,
                      max_size=12))
def test_clusterset_answers_through_the_table_equal_answers_computed_fresh(
        steps: list[tuple[str, dict[str, Any]]]) -> None:
    index = Index()
    index.mark_synced()
    served = mc_resolver(index)

    start = [mc.cf.namespace("a"), mc.cf.namespace("b"),
             mc.service_import("a", "s1", headless=True, ports=[mc.HTTPS]),
             mc.service_import("a", "s2", ips=["10.42.0.1"], ports=[mc.HTTPS]),
             mc.service_import("b", "s1", headless=True),
             mc.imported_slice("a", "s1-x", "s1", "c1", "IPv4", [mc.ep("10.0.0.1", "h1")], [mc.HTTPS]),
             mc.imported_slice("b", "s1-y", "s1", "c2", "IPv4", [mc.ep("10.0.0.2")], [mc.HTTPS])]

    async def scenario() -> None:
        for n, (event, obj) in enumerate([*(("ADDED", o) for o in start), *steps]):
            mc_apply(index, event, obj)
            fresh = mc_resolver(mc_fresh(index))
            for name, qtype in MC_QUESTIONS:
                assert await mc_ask(served, name, qtype) == await mc_ask(fresh, name, qtype), (n, event, obj, name)
        assert served.cluster_answers.hot.view  # answers were stored and served from the table

    asyncio.run(scenario())
