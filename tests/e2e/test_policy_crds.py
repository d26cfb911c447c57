"""The DNS policy CRDs in daemonset/: the schema the API server validates with, and the watch they match."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from nodedns.cluster.apisync import resources
from tests.support.daemonset import DIR, docs


def crds() -> dict[str, dict[str, Any]]:
    return {d["spec"]["names"]["kind"]: d for d in docs(DIR / "policy-crds.yaml")}


def schema(kind: str) -> dict[str, Any]:
    (version,) = crds()[kind]["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    s: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return s


def valid(kind: str, spec: dict[str, Any]) -> bool:
    try:
        jsonschema.validate({"apiVersion": "nodedns.io/v1alpha1", "kind": kind, "metadata": {"name": "p"},
                             "spec": spec}, schema(kind))
    except jsonschema.ValidationError:
        return False
    return True


def test_the_two_kinds_are_nodedns_io_v1alpha1_one_namespaced_one_cluster_wide() -> None:
    c = crds()
    assert set(c) == {"DNSPolicy", "ClusterDNSPolicy"}
    assert c["DNSPolicy"]["spec"]["scope"] == "Namespaced"
    assert c["DNSPolicy"]["spec"]["names"]["plural"] == "dnspolicies"
    assert c["ClusterDNSPolicy"]["spec"]["scope"] == "Cluster"
    assert c["ClusterDNSPolicy"]["spec"]["names"]["plural"] == "clusterdnspolicies"
    for d in c.values():
        assert d["spec"]["group"] == "nodedns.io"
        assert d["metadata"]["name"] == f"{d['spec']['names']['plural']}.nodedns.io"


def test_the_agent_watches_both_kinds_at_the_paths_the_crds_serve_optionally() -> None:
    watched = {r.path: r for r in resources(pods="node", node_name="node-a")}
    for d in crds().values():
        path = f"/apis/nodedns.io/v1alpha1/{d['spec']['names']['plural']}"
        assert path in watched, path
        assert watched[path].required is False  # a cluster without the CRDs still syncs


def test_the_examples_of_the_policy_page_are_valid() -> None:
    assert valid("DNSPolicy", {
        "podSelector": {"matchLabels": {"app": "web"}}, "mode": "enforce",
        "clusterZone": {"namespaces": ["team-a", "kube-system"]},
        "rules": [{"names": ["*.ads.example", "tracker.example.net", ".whole.example", "."], "action": "deny",
                   "rcode": "NXDOMAIN"}],
        "default": "allow"})
    assert valid("ClusterDNSPolicy", {
        "namespaceSelector": {"matchExpressions": [{"key": "tenant", "operator": "Exists"}]}, "podSelector": {},
        "mode": "audit", "rpz": {"configMapRef": {"namespace": "kube-system", "name": "rpz-feed", "key": "feed.rpz"}},
        "rules": []})
    assert valid("DNSPolicy", {})  # everything has a default


@pytest.mark.parametrize("spec", [
    {"mode": "shadow"},
    {"default": "refuse"},
    {"rules": [{"names": ["a.example"], "action": "drop"}]},
    {"rules": [{"names": ["a.example"], "action": "deny", "rcode": "SERVFAIL"}]},
    {"rules": [{"names": ["a.example"]}]},  # no action
    {"rules": [{"names": [], "action": "deny"}]},
    {"rules": [{"names": ["a.*.example"], "action": "deny"}]},
    {"rules": [{"names": ["a example"], "action": "deny"}]},
    {"rules": [{"names": ["**.example"], "action": "deny"}]},
    {"clusterZone": {"namespaces": ["Team_A"]}},
    {"podSelector": {"matchExpressions": [{"key": "app", "operator": "Like"}]}},
    {"namespaceSelector": {}},  # a DNSPolicy selects within its own namespace
    {"rpz": {"configMapRef": {"namespace": "kube-system", "name": "feed", "key": "f"}}},  # cluster-wide only
    {"unknown": 1},
], ids=str)
def test_the_schema_refuses_what_the_agent_could_not_mean(spec: dict[str, Any]) -> None:
    assert not valid("DNSPolicy", spec)


def test_a_cluster_policy_refuses_an_rpz_reference_without_its_key() -> None:
    assert not valid("ClusterDNSPolicy", {"rpz": {"configMapRef": {"namespace": "kube-system", "name": "feed"}}})
    assert not valid("ClusterDNSPolicy", {"namespaceSelector": {"matchLabels": {"a": 1}}})


def test_the_status_the_agents_write_is_a_subresource_and_fits_its_schema() -> None:
    """The agents write conditions to `/status` only (the spec stays read-only): the status subresource is
    on, and what they write (nodedns.policy.status) validates against the schema."""
    from nodedns.cluster import objects as k8s
    from nodedns.policy.book import FeedState, PolicyBook
    from nodedns.policy.model import parse
    from nodedns.policy.rpz import parse as parse_feed
    from nodedns.policy.status import conditions, patch_body

    spec = '{"rpz":{"configMapRef":{"key":"feed.rpz","name":"rpz-feed","namespace":"kube-system"}}}'
    record = k8s.Policy(k8s.CLUSTER_DNS_POLICY, "", "threat-feed", spec, "7", 2)
    book = PolicyBook()
    p = parse(record)
    assert p.rpz_ref is not None
    book.set_feed(p.rpz_ref, FeedState(feed=parse_feed("$ORIGIN rpz.\n@ SOA a. b. 1 1 1 1 1\nx CNAME .\ny MX 1 z.\n")))
    wanted = conditions(book, p, record.generation)
    assert wanted is not None and [c["type"] for c in wanted] == ["Accepted", "FeedLoaded"]
    body = patch_body(wanted, record, "2026-01-01T00:00:00Z")
    assert body["metadata"] == {"resourceVersion": "7"}
    for kind, d in crds().items():
        (version,) = d["spec"]["versions"]
        assert version["subresources"] == {"status": {}}, kind
        jsonschema.validate({"apiVersion": "nodedns.io/v1alpha1", "kind": kind, "metadata": {"name": "p"},
                             "spec": {}, "status": body["status"]}, schema(kind))
