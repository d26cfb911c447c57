"""The policy book: which policies apply to which client of this node (the Pods and Namespaces the index
holds), what it counts and logs, the namespaces a cluster answer names; the allow list that keeps those
clients off the hit paths."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import dns.message
import dns.rrset
import pytest

from nodedns.cluster.index import Index
from nodedns.policy.book import FeedState, PolicyBook, answer_names
from nodedns.policy.model import DENY
from nodedns.policy.rpz import parse as parse_feed
from nodedns.serve.limits import EVERYONE, AllowList
from tests.support import manifests as m

NODE = "node-a"


def labelled(obj: dict[str, Any], **labels: str) -> dict[str, Any]:
    obj["metadata"]["labels"] = labels
    return obj


def policy(name: str, ns: str, spec: dict[str, Any]) -> dict[str, Any]:
    kind = "DNSPolicy" if ns else "ClusterDNSPolicy"
    meta = {"name": name, "namespace": ns} if ns else {"name": name}
    return {"apiVersion": "nodedns.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}


def index_with(*objs: dict[str, Any]) -> Index:
    index = Index()
    base = [labelled(m.namespace("team-a"), tenant="a"), m.namespace("team-b"),
            m.pod("web", "team-a", ip="10.1.0.2", node_name=NODE, labels={"app": "web"}),
            m.pod("batch", "team-a", ip="10.1.0.3", node_name=NODE, labels={"app": "batch"}),
            m.pod("b", "team-b", ip="10.1.0.4", node_name=NODE, labels={"app": "web"}),
            m.pod("far", "team-a", ip="10.2.0.2", node_name="node-b", labels={"app": "web"}),
            m.pod("host", "team-a", ip="192.168.0.1", node_name=NODE, host_network=True, labels={"app": "web"})]
    for obj in [*base, *objs]:
        assert index.apply(obj["kind"], "ADDED", obj)
    return index


def test_a_policy_applies_to_the_pods_of_this_node_its_selector_picks() -> None:
    book = PolicyBook(node_name=NODE, zones=("cluster.local",))
    book.rebuild(index_with(policy("web", "team-a", {"podSelector": {"matchLabels": {"app": "web"}}})))
    assert {ip: a.pod for ip, a in book.clients.items()} == {"10.1.0.2": "team-a/web"}  # not far, not host


def test_a_cluster_policy_selects_namespaces_by_label_and_by_name() -> None:
    book = PolicyBook(node_name=NODE)
    index = index_with(policy("tenants", "", {"namespaceSelector": {"matchLabels": {"tenant": "a"}}}))
    book.rebuild(index)
    assert set(book.clients) == {"10.1.0.2", "10.1.0.3"}
    index.apply("ClusterDNSPolicy", "MODIFIED", policy("tenants", "", {"namespaceSelector": {
        "matchLabels": {"kubernetes.io/metadata.name": "team-b"}}}))
    book.rebuild(index)
    assert set(book.clients) == {"10.1.0.4"}
    index.apply("Namespace", "MODIFIED", labelled(m.namespace("team-a"), tenant="a", **{
        "kubernetes.io/metadata.name": "team-b"}))  # the API server sets this label to the name: kept as that
    book.rebuild(index)
    assert set(book.clients) == {"10.1.0.4"}


def test_the_clients_follow_label_changes_and_deletions_and_listeners_hear_of_it() -> None:
    heard: list[frozenset[str]] = []
    book = PolicyBook(node_name=NODE)
    book.on_clients.append(heard.append)
    index = index_with(policy("web", "team-a", {"podSelector": {"matchLabels": {"app": "web"}}}))
    book.rebuild(index)
    index.apply("Pod", "MODIFIED", m.pod("batch", "team-a", ip="10.1.0.3", node_name=NODE, labels={"app": "web"}))
    assert book.rebuild(index)
    assert not book.rebuild(index)  # nothing changed: nobody told
    index.apply("DNSPolicy", "DELETED", policy("web", "team-a", {}))
    book.rebuild(index)
    assert heard == [frozenset({"10.1.0.2"}), frozenset({"10.1.0.2", "10.1.0.3"}), frozenset()]


def test_problems_are_logged_once_per_version_of_a_policy(caplog: pytest.LogCaptureFixture) -> None:
    book = PolicyBook(node_name=NODE)
    index = index_with(policy("p", "team-a", {"rules": [{"names": ["a.*.b"], "action": "deny"}]}))
    with caplog.at_level(logging.WARNING, logger="nodedns.policy"):
        book.rebuild(index)
        first = len(caplog.records)
        book.rebuild(index)
        index.apply("Pod", "MODIFIED", m.pod("b", "team-b", ip="10.1.0.9", node_name=NODE))
        book.rebuild(index)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == first == 2  # the unusable name, the rule left without names: once
    assert all(s.startswith("DNSPolicy team-a/p: rules[0]") for s in said) and "a.*.b" in said[0]
    assert book.status()["policies"][0]["problems"]


def test_decisions_are_counted_by_action_and_policy_denials_by_pod_and_rule(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    book = PolicyBook(node_name=NODE, clock=lambda: now[0])
    book.rebuild(index_with(
        policy("web", "team-a", {"podSelector": {"matchLabels": {"app": "web"}},
                                 "rules": [{"names": [".ads.example"], "action": "deny"}]}),
        policy("watch", "", {"mode": "audit", "rules": [{"names": ["t.example"], "action": "deny"}]})))
    assert book.check("10.9.9.9", "x.ads.example") is None  # not a Pod under a policy
    with caplog.at_level(logging.INFO, logger="nodedns.policy"):
        for _ in range(3):
            d = book.check("10.1.0.2", "x.ads.example")
            assert d is not None and d.action == DENY
        now[0] = 61.0
        book.check("10.1.0.2", "y.ads.example")
        book.check("10.1.0.3", "t.example")
        book.check("10.1.0.3", "ok.example")
    assert book.decisions == {("deny", "team-a/web"): 4, ("audit", "watch"): 1, ("allow", "watch"): 2}
    assert book.denied == {("team-a/web", "team-a/web", "rules[0]"): 4,
                           ("team-a/batch", "watch", "rules[0] (audit)"): 1}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3  # the first of each row, then one a minute per policy
    assert "would deny (audit)" in lines[2]


def test_the_namespaces_an_answer_names_its_owners_and_targets() -> None:
    r = dns.message.make_response(dns.message.make_query("11.0.96.10.in-addr.arpa.", "PTR"))
    r.answer.append(dns.rrset.from_text("11.0.96.10.in-addr.arpa.", 5, "IN", "PTR", "db.team-b.svc.cluster.local."))
    wire = r.to_wire()  # compressed
    qend = 12 + len(dns.message.make_query("11.0.96.10.in-addr.arpa.", "PTR").question[0].name.to_wire()) + 4
    assert answer_names(wire, qend) == ["11.0.96.10.in-addr.arpa", "db.team-b.svc.cluster.local"]
    c = dns.message.make_response(dns.message.make_query("ext.team-a.svc.cluster.local.", "A"))
    c.answer.append(dns.rrset.from_text("ext.team-a.svc.cluster.local.", 5, "IN", "CNAME",
                                        "db.team-b.svc.cluster.local."))
    c.answer.append(dns.rrset.from_text("db.team-b.svc.cluster.local.", 5, "IN", "A", "10.96.0.11"))
    cwire = c.to_wire()
    qend = 12 + len(c.question[0].name.to_wire()) + 4
    assert answer_names(cwire, qend) == ["ext.team-a.svc.cluster.local", "db.team-b.svc.cluster.local",
                                         "db.team-b.svc.cluster.local"]
    assert answer_names(cwire[:qend + 3], qend) == []  # cannot be walked: nothing to say
    book = PolicyBook(node_name=NODE, zones=("cluster.local",))
    book.rebuild(index_with(policy("iso", "team-a", {"clusterZone": {"namespaces": ["team-a"]}})))
    hidden = book.outside("10.1.0.2", cwire, qend)
    assert hidden is not None and (hidden.rule, hidden.policy) == ("clusterZone", "team-a/iso")
    assert book.outside("10.1.0.4", cwire, qend) is None  # team-b: no policy


def test_the_allow_list_never_remembers_a_client_under_a_policy() -> None:
    allow = AllowList(explicit=EVERYONE)
    assert allow.admit("10.1.0.2") and "10.1.0.2" in allow.allowed
    allow.set_policed(frozenset({"10.1.0.2"}))
    assert "10.1.0.2" not in allow.allowed  # forgotten at once: the hit paths hand it back
    assert allow.admit("10.1.0.2") and "10.1.0.2" not in allow.allowed
    assert allow.admit("10.1.0.3") and "10.1.0.3" in allow.allowed
    allow.set_policed(frozenset())
    assert allow.admit("10.1.0.2") and "10.1.0.2" in allow.allowed


# -- the memo of answers a group's policies let through unchanged -----------------------------------------------


def memo_book(*extra: dict[str, Any]) -> tuple[PolicyBook, Index]:
    book = PolicyBook(node_name=NODE, zones=("cluster.local",))
    index = index_with(policy("web", "team-a", {"podSelector": {}, "rules": [{"names": [".ads.example"],
                                                                              "action": "deny"}]}), *extra)
    book.rebuild(index)
    return book, index


def test_only_an_enforcing_allow_no_audit_policy_would_deny_enters_the_memo_and_a_group_shares_it() -> None:
    book, _ = memo_book(policy("watch", "", {"mode": "audit", "rules": [{"names": ["t.example"], "action": "deny"}]}))
    web, batch = "10.1.0.2", "10.1.0.3"  # both under team-a/web and the cluster's audit policy: one group
    allowed = book.check(web, "ok.example")
    assert allowed is not None and allowed.audit is None
    group = book.remember(web, b"k-ok", True, allowed)
    assert group is not None and book.remember(batch, b"k-ok2", b"answer", allowed) is group
    denied = book.check(web, "x.ads.example")
    assert denied is not None and book.remember(web, b"k-ads", True, denied) is None
    audited = book.check(web, "t.example")
    assert audited is not None and audited.audit is not None and book.remember(web, b"k-t", True, audited) is None
    assert book.remember("10.9.9.9", b"k-ok", True, allowed) is None  # under no policy
    assert set(group) == {b"k-ok", b"k-ok2"} and book.memo_status()["bytes"] == len(b"answer")
    other = book.check("10.1.0.4", "ok.example")  # team-b: only the audit policy, another group
    assert other is not None and book.remember("10.1.0.4", b"k-ok", True, other) is not group


def test_what_the_memo_answers_is_counted_under_the_deciding_policy_when_the_counts_are_read() -> None:
    book, _ = memo_book()
    d = book.check("10.1.0.2", "ok.example")
    assert d is not None
    group = book.remember("10.1.0.2", b"k", True, d)
    assert group is not None
    group[b"k"][1][0] += 5  # five questions a hit path answered from it
    assert book.decisions == {("allow", "team-a/web"): 1}
    decisions = {(x["action"], x["policy"]): x["count"] for x in book.status()["decisions"]}
    assert decisions == {("allow", "team-a/web"): 6} and group[b"k"][1] == [0]
    group[b"k"][1][0] += 2
    book.forget()  # folded before it goes
    assert book.decisions == {("allow", "team-a/web"): 8}


def test_the_memo_is_forgotten_in_place_on_every_change_of_the_book_and_kept_otherwise() -> None:
    book, index = memo_book()
    d = book.check("10.1.0.2", "ok.example")
    assert d is not None
    group = book.remember("10.1.0.2", b"k", True, d)
    assert group is not None
    index.apply("Pod", "ADDED", m.pod("far2", "team-a", ip="10.2.0.9", node_name="node-b"))
    book.rebuild(index)  # another node's Pod: nothing this book decides changed
    assert b"k" in group
    index.apply("DNSPolicy", "MODIFIED", policy("web", "team-a", {"podSelector": {}, "rules": [
        {"names": ["ok.example"], "action": "deny"}]}))
    book.rebuild(index)  # the policy changed: what was remembered goes, in place (a hit path's map may hold it)
    assert group == {} and book.memo == {} and book.memo_status()["keys"] == 0
    d = book.check("10.1.0.2", "fine.example")
    assert d is not None
    group = book.remember("10.1.0.2", b"k2", True, d)
    assert group is not None
    index.apply("Pod", "MODIFIED", m.pod("web", "team-a", ip="10.1.0.2", node_name=NODE, labels={"app": "x"}))
    index.apply("Pod", "ADDED", m.pod("new", "team-a", ip="10.1.0.7", node_name=NODE))
    book.rebuild(index)  # a client more under the policy: the clients changed
    assert group == {}
    group = book.remember("10.1.0.2", b"k3", True, d)
    assert group is not None
    book.take(dict(book.clients))  # a worker pushed the same clients: nothing changed
    assert b"k3" in group
    book.take({})
    assert group == {}


def test_the_memo_is_bounded_per_group_in_all_and_in_the_bytes_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodedns.policy import book as bookmod
    monkeypatch.setattr(bookmod, "MEMO_KEYS", 4)
    monkeypatch.setattr(bookmod, "MEMO_ENTRIES", 6)
    monkeypatch.setattr(bookmod, "MEMO_BYTES", 100)
    book, _ = memo_book(policy("b", "team-b", {"podSelector": {}}))
    d = book.check("10.1.0.2", "ok.example")
    e = book.check("10.1.0.4", "ok.example")
    assert d is not None and e is not None
    a = book.remember("10.1.0.2", b"a0", True, d)
    assert a is not None
    for i in range(1, 4):
        book.remember("10.1.0.2", b"a%d" % i, True, d)
    assert len(a) == 4
    book.remember("10.1.0.2", b"a4", True, d)  # the group full: its keys go, the new one stays
    assert set(a) == {b"a4"} and book.memo_status()["keys"] == 1
    b = book.remember("10.1.0.4", b"b0", b"x" * 60, e)
    assert b is not None and book.memo_status() == {"groups": 2, "keys": 2, "bytes": 60, "clears": 0}
    book.remember("10.1.0.4", b"b1", b"y" * 60, e)  # over the bytes held: every group's keys go
    assert a == {} and book.memo_status() == {"groups": 1, "keys": 1, "bytes": 60, "clears": 1}
    for i in range(1, 4):
        book.remember("10.1.0.2", b"a%d" % i, True, d)
    book.remember("10.1.0.4", b"b2", True, e)
    book.remember("10.1.0.4", b"b3", True, e)
    assert book.memo_status() == {"groups": 2, "keys": 6, "bytes": 60, "clears": 1}
    book.remember("10.1.0.4", b"b4", True, e)  # MEMO_ENTRIES in all: every group's keys go
    assert book.memo_status() == {"groups": 1, "keys": 1, "bytes": 0, "clears": 2}
    monkeypatch.setattr(bookmod, "MEMO_GROUPS", 1)
    book.remember("10.1.0.2", b"a9", True, d)  # a group more than MEMO_GROUPS: every group's keys go
    assert book.memo_status()["groups"] == 1 and book.memo_status()["clears"] == 3


def test_the_allow_list_gives_the_hit_paths_a_policed_clients_memo_only_once_admitted() -> None:
    allow = AllowList(explicit=(ipaddress.ip_network("10.1.0.0/24"),))
    allow.set_policed(frozenset({"10.1.0.2", "10.2.0.2"}))
    memo: dict[bytes, Any] = {b"k": (True, [0])}
    allow.policed_hit("10.2.0.2", memo)  # never admitted (outside the list)
    assert not allow.admit("10.2.0.2")
    allow.policed_hit("10.2.0.2", memo)
    assert allow.policed_hits == {}
    assert allow.admit("10.1.0.2")
    allow.policed_hit("10.1.0.2", memo)
    assert allow.policed_hits == {"10.1.0.2": memo} and "10.1.0.2" not in allow.allowed
    allow.set_policed(frozenset({"10.1.0.2"}))  # the clients changed: forgotten
    assert allow.policed_hits == {}
    assert allow.admit("10.1.0.2")
    allow.policed_hit("10.1.0.2", memo)
    allow.refresh(force=True)  # the rules formed again: forgotten too, admitted anew
    assert allow.policed_hits == {}


def test_an_rpz_feed_read_anew_forgets_the_memo_so_a_name_it_now_denies_is_decided_again() -> None:
    ref_spec = {"namespaceSelector": {}, "rpz": {"configMapRef": {"namespace": "kube-system", "name": "rpz-feed",
                                                                  "key": "feed.rpz"}}, "rules": []}
    book, index = memo_book(policy("feed", "", ref_spec))
    ref = book.policies[next(k for k in book.policies if "feed" in str(k))].rpz_ref
    assert ref is not None
    book.set_feed(ref, FeedState(feed=parse_feed("$ORIGIN rpz.\n@ SOA a. b. 1 1 1 1 1\nother.example CNAME .\n")))
    book.rebuild(index)
    d = book.check("10.1.0.2", "ok.example")
    assert d is not None and d.action != DENY
    group = book.remember("10.1.0.2", b"k-ok", True, d)
    assert group is not None and b"k-ok" in group
    book.set_feed(ref, FeedState(feed=parse_feed("$ORIGIN rpz.\n@ SOA a. b. 1 1 1 1 1\nok.example CNAME .\n")))
    book.rebuild(index)  # what the feed watch does when the ConfigMap changes
    assert group == {} and book.memo == {}
    d = book.check("10.1.0.2", "ok.example")
    assert d is not None and d.action == DENY
