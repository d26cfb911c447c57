"""nodedns.cluster.index: the lookup tables follow every change (a ClusterIP that moves, a Pod that goes, a slice that
changes Service), as the cluster zone's answers show."""

from __future__ import annotations

from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords, ZoneSettings
from nodedns.dns.wire import QT, RCODE
from tests.support import cluster_fixture as cf


def loaded(*objs: dict[str, object]) -> tuple[Index, ClusterRecords]:
    index = Index()
    index.apply("Namespace", "ADDED", cf.namespace("a"))
    for obj in objs:
        assert index.apply(str(obj["kind"]), "ADDED", obj)
    index.mark_synced()
    return index, ClusterRecords(index, ZoneSettings(zone="cluster.local"))


def ptr(records: ClusterRecords, ip: str) -> tuple[str, list[str]]:
    name = ".".join(reversed(ip.split("."))) + ".in-addr.arpa"
    found = records.lookup(name, QT.PTR)
    if found is None:
        return "not ours (forwarded)", []
    return RCODE.name(found.rcode), [str(rr.data) for rr in found.answer]


def test_a_service_whose_cluster_ip_moves_answers_the_reverse_of_its_new_address_only() -> None:
    index, records = loaded(cf.service("a", "web", cluster_ips=["10.96.0.10"]))
    assert ptr(records, "10.96.0.10") == ("NOERROR", ["web.a.svc.cluster.local"])
    assert index.apply("Service", "MODIFIED", cf.service("a", "web", cluster_ips=["10.96.0.11"]))
    assert ptr(records, "10.96.0.10")[1] == []
    assert ptr(records, "10.96.0.11") == ("NOERROR", ["web.a.svc.cluster.local"])
    assert index.services_with_cluster_ip("10.96.0.10") == []


def test_two_services_on_one_address_are_found_until_each_goes() -> None:
    index, records = loaded(cf.service("a", "one", cluster_ips=["10.96.0.20"]),
                            cf.service("a", "two", cluster_ips=["10.96.0.20"]))
    assert sorted(s.name for s in index.services_with_cluster_ip("10.96.0.20")) == ["one", "two"]
    index.apply("Service", "DELETED", cf.service("a", "one", cluster_ips=["10.96.0.20"]))
    assert [s.name for s in index.services_with_cluster_ip("10.96.0.20")] == ["two"]
    assert ptr(records, "10.96.0.20") == ("NOERROR", ["two.a.svc.cluster.local"])
    index.apply("Service", "DELETED", cf.service("a", "two", cluster_ips=["10.96.0.20"]))
    assert index.services_with_cluster_ip("10.96.0.20") == [] and ptr(records, "10.96.0.20")[1] == []


def test_a_deleted_pod_leaves_its_node_and_its_address() -> None:
    pod = cf.pod("a", "p1", "10.244.0.5")
    index, _ = loaded(pod, cf.pod("a", "p2", "10.244.0.6"))
    assert sorted(p.name for p in index.pods_on_node("node-a")) == ["p1", "p2"]
    index.apply("Pod", "DELETED", pod)
    assert [p.name for p in index.pods_on_node("node-a")] == ["p2"]
    assert index.pods_with_ip("10.244.0.5") == []


def test_a_relist_deletes_what_it_did_not_see() -> None:
    index, records = loaded(cf.service("a", "kept", cluster_ips=["10.96.0.30"]),
                            cf.service("a", "gone", cluster_ips=["10.96.0.31"]))
    index.begin_relist("Service")
    index.apply("Service", "ADDED", cf.service("a", "kept", cluster_ips=["10.96.0.30"]))
    assert index.end_relist("Service") == 1
    assert sorted(name for _, name in index.services) == ["kept"]
    assert ptr(records, "10.96.0.31")[1] == []


def test_an_endpoint_turning_unready_in_place_is_applied_and_announced() -> None:
    """An update that keeps every address (the commonest: readiness) takes the short path; it still lands."""
    from nodedns.cluster import objects as k8s
    from nodedns.cluster.index import MODIFIED, change_of

    ready = [cf.endpoint("10.1.0.1", pod="web-a"), cf.endpoint("10.1.0.2", pod="web-b")]
    index, _ = loaded(cf.namespace("default"), cf.service("default", "web", cluster_ips=["None"]),
                      cf.endpoint_slice("default", "web-1", "web", "IPv4", ready))
    seen: list[tuple[str, object, object]] = []
    index.on_record(lambda kind, old, new: seen.append((kind, old, new)))
    unready = [cf.endpoint("10.1.0.1", pod="web-a"), cf.endpoint("10.1.0.2", ready=False, pod="web-b")]
    index.apply_change(change_of(k8s.ENDPOINTSLICE, MODIFIED,
                                 cf.endpoint_slice("default", "web-1", "web", "IPv4", unready)))
    (sl,) = index.slices_of("default", "web")
    assert [(e.addresses, e.ready) for e in sl.endpoints] == [(("10.1.0.1",), True), (("10.1.0.2",), False)]
    assert [(kind, new) for kind, _, new in seen] == [(k8s.ENDPOINTSLICE, sl)]
    assert [s.name for s in index.slices_with_ip("10.1.0.2")] == ["web-1"]


def test_an_endpoint_moved_to_another_address_drops_the_answers_of_both_addresses() -> None:
    from nodedns.cluster import objects as k8s
    from nodedns.cluster.records import change_tags

    old = k8s.slim(k8s.ENDPOINTSLICE, cf.endpoint_slice("default", "web-1", "web", "IPv4", [cf.endpoint("10.1.0.1")]))
    moved = k8s.slim(k8s.ENDPOINTSLICE, cf.endpoint_slice("default", "web-1", "web", "IPv4", [cf.endpoint("10.1.0.9")]))
    unready = k8s.slim(k8s.ENDPOINTSLICE, cf.endpoint_slice("default", "web-1", "web", "IPv4",
                                                            [cf.endpoint("10.1.0.1", ready=False)]))
    assert {t for t in change_tags(k8s.ENDPOINTSLICE, old, moved) or () if t.startswith("i:")} == {
        "i:10.1.0.1", "i:10.1.0.9"}
    assert {t for t in change_tags(k8s.ENDPOINTSLICE, old, unready) or () if t.startswith("i:")} == {"i:10.1.0.1"}
