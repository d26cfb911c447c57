"""The policy model: a spec read (what it cannot use said, the rest kept), selectors, name patterns and the
decision for one question (first match wins, cluster policies first, the cluster zone by namespace, audit)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodedns.cluster import objects as k8s
from nodedns.policy.model import (
    ALLOW,
    AUDIT,
    DENY,
    NO_POLICY,
    Selector,
    decide,
    order,
    parents,
    parse,
    pattern,
    zone_namespace,
)

ZONES = ("cluster.local",)


def pol(spec: Any, name: str = "p", ns: str = "team-a") -> Any:
    kind = k8s.DNS_POLICY if ns else k8s.CLUSTER_DNS_POLICY
    return parse(k8s.Policy(kind, ns, name, json.dumps(spec)))


@pytest.mark.parametrize(("text", "expected"), [
    ("ads.example", ("exact", "ads.example")),
    ("ADS.Example.", ("exact", "ads.example")),
    ("*.ads.example", ("below", "ads.example")),
    (".ads.example", ("zone", "ads.example")),
    (".", ("zone", "")),
    ("_dmarc.example", ("exact", "_dmarc.example")),
])
def test_the_three_name_shapes_and_the_root(text: str, expected: tuple[str, str]) -> None:
    assert pattern(text) == expected


@pytest.mark.parametrize("text", ["", "a." * 127 + "a", "x" * 64 + ".example", "a.*.example", "**.example",
                                  "a..example", "bücher.example", 7, None])
def test_a_name_the_agent_cannot_use_says_why(text: Any) -> None:
    assert isinstance(pattern(text), str)


def test_a_wildcard_is_below_the_name_a_zone_is_the_name_and_below() -> None:
    p = pol({"rules": [{"names": ["*.w.example"], "action": "deny"}, {"names": [".z.example"], "action": "deny"},
                       {"names": ["e.example"], "action": "deny"}]})
    assert [decide((p,), n).action for n in ("w.example", "a.w.example", "b.a.w.example")] == [ALLOW, DENY, DENY]
    assert [decide((p,), n).action for n in ("z.example", "a.z.example", "xz.example")] == [DENY, DENY, ALLOW]
    assert [decide((p,), n).action for n in ("e.example", "a.e.example", "ee.example")] == [DENY, ALLOW, ALLOW]
    assert decide((p,), "a.w.example").rule == "rules[0]"
    assert decide((p,), "z.example").rule == "rules[1]"


def test_the_root_zone_matches_every_name() -> None:
    p = pol({"rules": [{"names": ["ok.example"], "action": "allow"}, {"names": ["."], "action": "deny",
                                                                          "rcode": "REFUSED"}]})
    assert decide((p,), "ok.example").action == ALLOW
    d = decide((p,), "anything.else")
    assert (d.action, d.rcode, d.rule) == (DENY, "REFUSED", "rules[1]")


def test_the_first_matching_rule_wins_and_the_rcode_is_the_rules() -> None:
    p = pol({"rules": [{"names": ["a.example"], "action": "allow"},
                       {"names": [".example"], "action": "deny", "rcode": "NODATA"}]})
    assert decide((p,), "a.example") .action == ALLOW
    d = decide((p,), "b.example")
    assert (d.action, d.rcode, d.policy) == (DENY, "NODATA", "team-a/p")
    assert decide((p,), "example.org") == decide((p,), "example.org")
    assert decide((p,), "example.org").rule == "default"


def test_the_default_decides_what_no_rule_matches_deny_wins_over_allow() -> None:
    allow = pol({"rules": [{"names": ["x.example"], "action": "deny"}]}, "a")
    deny = pol({"default": "deny", "rules": [{"names": ["ok.example"], "action": "allow"}]}, "b")
    d = decide(order((allow, deny)), "other.example")
    assert (d.action, d.rcode, d.policy, d.rule) == (DENY, "NXDOMAIN", "team-a/b", "default")
    assert decide(order((allow, deny)), "ok.example").action == ALLOW
    assert decide((allow,), "other.example").action == ALLOW


def test_cluster_policies_come_before_namespace_ones() -> None:
    ns_allow = pol({"rules": [{"names": ["x.example"], "action": "allow"}]}, "aaa")
    cl_deny = pol({"rules": [{"names": ["x.example"], "action": "deny"}]}, "zzz", ns="")
    ordered = order((ns_allow, cl_deny))
    assert [p.ref for p in ordered] == ["zzz", "team-a/aaa"]
    assert decide(ordered, "x.example").policy == "zzz"
    assert decide(ordered, "x.example").action == DENY


def test_audit_reports_what_it_would_deny_without_denying() -> None:
    audit = pol({"mode": "audit", "rules": [{"names": [".example.com"], "action": "deny"}]}, "watch", ns="")
    d = decide((audit,), "api.example.com")
    assert d.action == ALLOW and d.audit is not None
    assert (d.audit.action, d.audit.policy, d.audit.rule) == (DENY, "watch", "rules[0]")
    assert decide((audit,), "api.example.org").audit is None
    enforce = pol({"rules": [{"names": ["api.example.com"], "action": "deny", "rcode": "REFUSED"}]})
    both = decide(order((audit, enforce)), "api.example.com")
    assert (both.action, both.rcode, both.policy, both.audit) == (DENY, "REFUSED", "team-a/p", None)
    assert audit.mode == AUDIT


def test_the_cluster_zone_by_namespace_hides_the_others_as_absent() -> None:
    p = pol({"clusterZone": {"namespaces": ["team-a", "kube-system"]},
             "rules": [{"names": [".cluster.local"], "action": "allow"}]})
    for name in ("db.team-b.svc.cluster.local", "_http._tcp.db.team-b.svc.cluster.local",
                 "host-0.db.team-b.svc.cluster.local", "10-0-0-1.team-b.pod.cluster.local", "team-b.svc.cluster.local"):
        d = decide((p,), name, ZONES)
        assert (d.action, d.rcode, d.rule) == (DENY, "NXDOMAIN", "clusterZone"), name  # no rule widens it
    for name in ("web.team-a.svc.cluster.local", "kube-dns.kube-system.svc.cluster.local",
                 "dns-version.cluster.local", "svc.cluster.local", "db.team-b.svc.other.zone"):
        assert decide((p,), name, ZONES).action == ALLOW, name


def test_zone_namespace_and_parents() -> None:
    assert zone_namespace("a.b.ns.svc.cluster.local", ZONES) == "ns"
    assert zone_namespace("1-2-3-4.ns.pod.cluster.local", ZONES) == "ns"
    assert zone_namespace("cluster.local", ZONES) is None
    assert zone_namespace("x.cluster.local.evil", ZONES) is None
    assert parents("a.b.c") == ["b.c", "c", ""]
    assert parents("") == []


def test_selectors_match_labels_and_expressions() -> None:
    s = pol({"podSelector": {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["a", "b"]}, {"key": "canary", "operator": "DoesNotExist"},
        {"key": "team", "operator": "Exists"}, {"key": "env", "operator": "NotIn", "values": ["dev"]}]}}).pods
    assert s.matches({"app": "web", "tier": "a", "team": "x"})
    assert s.matches({"app": "web", "tier": "b", "team": "x", "env": "prod"})
    assert not s.matches({"app": "web", "tier": "c", "team": "x"})
    assert not s.matches({"app": "web", "tier": "a", "team": "x", "canary": ""})
    assert not s.matches({"app": "web", "tier": "a"})
    assert not s.matches({"app": "web", "tier": "a", "team": "x", "env": "dev"})
    assert not s.matches({"app": "db", "tier": "a", "team": "x"})
    assert Selector().matches({}) and pol({}).pods.matches({"any": "thing"})


def test_a_policy_applies_in_its_namespace_a_cluster_one_where_its_selectors_say() -> None:
    p = pol({"podSelector": {"matchLabels": {"app": "web"}}})
    assert p.applies("team-a", {"app": "web"}, {}) and not p.applies("team-b", {"app": "web"}, {})
    c = pol({"namespaceSelector": {"matchLabels": {"tenant": "b"}}}, "c", ns="")
    assert c.applies("x", {}, {"tenant": "b"}) and not c.applies("x", {}, {"tenant": "a"})


@pytest.mark.parametrize(("spec", "said"), [
    ({"rules": [{"names": ["a.*.example", "ok.example"], "action": "deny"}]}, "the rule's other names apply"),
    ({"rules": [{"names": ["a.*.example"], "action": "deny"}]}, "no usable name: the rule is dropped"),
    ({"rules": [{"names": ["a.example"], "action": "block"}]}, "the rule is dropped"),
    ({"rules": [{"names": ["a.example"], "action": "deny", "rcode": "SERVFAIL"}]}, "NXDOMAIN"),
    ({"mode": "shadow"}, "enforce"),
    ({"default": "refuse"}, "allow"),
    ({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Like"}]}}, "selects nothing"),
    ({"podSelector": "web"}, "selects nothing"),
    ({"clusterZone": {"namespaces": ["team-a", "Bad_NS"]}}, "left out"),
    ({"rpz": {"configMapRef": {"namespace": "kube-system", "name": "f", "key": "k"}}}, "is for a ClusterDNSPolicy"),
])
def test_what_the_agent_cannot_use_is_said_and_the_rest_applies(spec: dict[str, Any], said: str) -> None:
    p = pol(spec)
    assert any(said in problem for problem in p.problems), p.problems


def test_a_broken_part_never_turns_into_deny_or_allow_everything() -> None:
    p = pol({"rules": [{"names": ["a.*.example", "bad.example"], "action": "deny"},
                       {"names": ["x" * 64 + ".example"], "action": "allow"},
                       {"names": ["good.example"], "action": "deny", "rcode": "SERVFAIL"}]})
    assert [r.number for r in p.rules] == [1, 3]
    assert decide((p,), "bad.example").action == DENY
    assert decide((p,), "good.example").rcode == "NXDOMAIN"
    assert decide((p,), "other.example").action == ALLOW
    unreadable = pol({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Like"}]}, "default": "deny"})
    assert not unreadable.applies("team-a", {}, {})  # selects no Pod: nobody denied everything
    narrowed = pol({"clusterZone": {"namespaces": ["team-a", "Bad_NS"]}})
    assert narrowed.cluster_namespaces == frozenset({"team-a"})
    assert decide((), "x") is NO_POLICY
