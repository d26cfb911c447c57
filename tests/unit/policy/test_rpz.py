"""RPZ feeds as the zone files unbound, Knot and BIND read: the QNAME triggers and actions the agent applies,
what it leaves out (counted, the rest applies), and the decisions a feed makes inside a policy (after its
own rules, before the next policy)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodedns.cluster import objects as k8s
from nodedns.dns.wire import QT
from nodedns.policy import rpz
from nodedns.policy.model import ALLOW, DENY, LOCAL, RPZ, decide, parents, parse

FEED = """$TTL 60
$ORIGIN rpz.local.
@   IN SOA localhost. root.localhost. (
        1     ; serial
        3600  ; refresh
        600 86400 300 )
    IN NS  localhost.
bad.example             CNAME .
*.bad.example           CNAME .       ; every name below bad.example
ok.bad.example          CNAME rpz-passthru.
old-passthru.example    CNAME old-passthru.example.rpz.local.
nodata.example  30 IN   CNAME *.
sink.example            CNAME rpz-drop.
walled.example          A     192.0.2.1
                        AAAA  2001:db8::1
                        TXT   "blocked; see the wiki" "second"
moved.example           CNAME www.example.net.
*.wild.example          A     192.0.2.9
Absolute.Example.rpz.local. CNAME .
"""


def feed(text: str = FEED) -> rpz.Feed:
    f = rpz.parse(text)
    assert not f.problem, f.problem
    return f


def hit(f: rpz.Feed, name: str) -> tuple[str, str] | None:
    got = f.match(name, parents(name))
    return None if got is None else (rpz.ACTIONS[got[0]], got[1])


@pytest.mark.parametrize(("name", "expected"), [
    ("bad.example", ("NXDOMAIN", "bad.example")),
    ("x.bad.example", ("NXDOMAIN", "*.bad.example")),
    ("a.b.bad.example", ("NXDOMAIN", "*.bad.example")),
    ("ok.bad.example", ("passthru", "ok.bad.example")),  # an exact trigger wins over the wildcard
    ("old-passthru.example", ("passthru", "old-passthru.example")),  # the older CNAME-to-itself form
    ("nodata.example", ("NODATA", "nodata.example")),
    ("sink.example", ("drop", "sink.example")),
    ("walled.example", ("local-data", "walled.example")),
    ("moved.example", ("local-data", "moved.example")),
    ("deep.x.wild.example", ("local-data", "*.wild.example")),
    ("absolute.example", ("NXDOMAIN", "absolute.example")),  # an absolute owner, any case
    ("wild.example", None),  # a wildcard is below its name, not the name itself
    ("example", None),
    ("notbad.example", None),
    ("bad.example.org", None),
])
def test_qname_triggers_exact_and_wildcard(name: str, expected: tuple[str, str] | None) -> None:
    assert hit(feed(), name) == expected


def test_local_data_answers_its_types_and_nodata_for_the_others() -> None:
    f = feed()
    records = f.records("walled.example")
    assert rpz.local_answer(records, QT.A) == ([(QT.A, 60, "192.0.2.1")], None)
    assert rpz.local_answer(records, QT.AAAA) == ([(QT.AAAA, 60, "2001:db8::1")], None)
    assert rpz.local_answer(records, QT.TXT) == ([(QT.TXT, 60, ("blocked; see the wiki", "second"))], None)
    assert rpz.local_answer(records, QT.MX) == ([], None)  # NODATA
    moved = f.records("moved.example")
    assert rpz.local_answer(moved, QT.AAAA) == ([(QT.CNAME, 60, "www.example.net")], "www.example.net")
    assert f.records("*.wild.example") == ((QT.A, 60, "192.0.2.9"),)


def test_what_is_not_supported_is_counted_and_the_rest_applies() -> None:
    text = FEED + """
32.1.2.0.192.rpz-ip         CNAME .
ns.example.rpz-nsdname      CNAME .
32.1.2.0.192.rpz-nsip       CNAME .
32.1.0.0.10.rpz-client-ip   CNAME .
tcp.example                 CNAME rpz-tcp-only.
mx.example                  MX 10 mail.example.
star.example                CNAME *.other.example.
broken.example              A 300.1.1.1
v6-as-v4.example            A 2001:db8::2
$INCLUDE other.rpz
outside.example.            CNAME .
after.example               CNAME .
"""
    f = feed(text)
    assert f.left_out == {
        "rpz-ip triggers (not supported)": 1, "rpz-nsdname triggers (not supported)": 1,
        "rpz-nsip triggers (not supported)": 1, "rpz-client-ip triggers (not supported)": 1,
        "rpz-tcp-only actions (not supported)": 1, "local data of type MX (not supported)": 1,
        "wildcard CNAME targets (not supported)": 1, "unparseable records": 2,
        "$INCLUDE directives (not supported)": 1, "records outside the RPZ origin": 1}
    assert f.examples["unparseable records"] == ("broken.example              A 300.1.1.1",
                                                 "v6-as-v4.example            A 2001:db8::2")
    assert hit(f, "after.example") == ("NXDOMAIN", "after.example")  # what follows still applies
    assert hit(f, "tcp.example") is None and hit(f, "broken.example") is None
    assert f.entries == feed().entries + 1
    assert "left out:" in f.summary() and "10 unparseable records" not in f.summary()


def test_a_feed_without_an_origin_applies_nothing_and_says_why() -> None:
    f = rpz.parse("bad.example CNAME .\n")
    assert f.problem and "origin" in f.problem and not f.exact
    assert rpz.parse("$ORIGIN rpz.\nbad.example CNAME .\n").exact == {"bad.example": rpz.NXDOMAIN}


def test_entries_past_the_bound_are_counted_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rpz, "MAX_ENTRIES", 10)
    f = rpz.parse("$ORIGIN rpz.\n" + "".join(f"n{i}.example CNAME .\n" for i in range(25)))
    assert f.entries == 10 and len(f.exact) == 10
    assert f.left_out == {"triggers past the bound of 10": 15}


def test_two_feeds_of_the_same_text_are_equal_and_a_changed_one_is_not() -> None:
    assert rpz.parse(FEED) == rpz.parse(FEED)
    assert rpz.parse(FEED) != rpz.parse(FEED + "x CNAME .\n")


# -- in a policy ----------------------------------------------------------------------------------


def cluster_policy(name: str, spec: dict[str, Any], text: str = FEED) -> Any:
    import dataclasses

    spec = {"rpz": {"configMapRef": {"namespace": "kube-system", "name": "f", "key": "k"}}, **spec}
    p = parse(k8s.Policy(k8s.CLUSTER_DNS_POLICY, "", name, json.dumps(spec, sort_keys=True)))
    assert p.rpz_ref == ("kube-system", "f", "k") and not p.problems
    return dataclasses.replace(p, rpz=feed(text))


def test_the_feed_decides_after_its_policys_rules_and_before_the_next_policy() -> None:
    own_allow = cluster_policy("a-feed", {"rules": [{"names": ["bad.example"], "action": "allow"}]})
    d = decide([own_allow], "bad.example")
    assert (d.action, d.rule) == (ALLOW, "rules[0]")  # the policy's explicit allow wins over its feed
    d = decide([own_allow], "x.bad.example")
    assert (d.action, d.rcode, d.policy, d.rule, d.trigger) == (DENY, "NXDOMAIN", "a-feed", RPZ, "*.bad.example")
    assert "rpz (*.bad.example)" in d.describe()
    later = parse(k8s.Policy(k8s.DNS_POLICY, "team-a", "allow-all", json.dumps(
        {"rules": [{"names": ["."], "action": "allow"}]})))
    assert decide([own_allow, later], "x.bad.example").action == DENY  # cluster feed before the namespace's
    assert decide([own_allow], "nodata.example").rcode == "NODATA"
    assert decide([own_allow], "sink.example").rcode == "DROP"
    local = decide([own_allow], "walled.example")
    assert local.action == LOCAL and local.local == feed().records("walled.example")
    assert decide([own_allow], "ok.bad.example").action == ALLOW


def test_an_audit_policys_feed_is_reported_not_enforced() -> None:
    audit = cluster_policy("watch-feed", {"mode": "audit"})
    d = decide([audit], "bad.example")
    assert d.action == ALLOW and d.audit is not None and (d.audit.rule, d.audit.rcode) == (RPZ, "NXDOMAIN")


def test_a_dns_policy_cannot_name_a_feed_and_an_incomplete_reference_is_said() -> None:
    ns = parse(k8s.Policy(k8s.DNS_POLICY, "team-a", "p", json.dumps(
        {"rpz": {"configMapRef": {"namespace": "kube-system", "name": "f", "key": "k"}}})))
    assert ns.rpz_ref is None and any("ClusterDNSPolicy" in x for x in ns.problems)
    bad = parse(k8s.Policy(k8s.CLUSTER_DNS_POLICY, "", "p", json.dumps({"rpz": {"configMapRef": {"name": "f"}}})))
    assert bad.rpz_ref is None and any("configMapRef" in x for x in bad.problems)


def test_the_worked_example_of_the_policy_page_does_what_the_page_says() -> None:
    import re
    from pathlib import Path

    import yaml

    page = (Path(__file__).parents[3] / "docs" / "policy.md").read_text()
    block = re.search(r"### An RPZ feed.*?```yaml\n(.*?)```", page, re.S)
    assert block is not None
    cm, policy = list(yaml.safe_load_all(block.group(1)))
    f = feed(cm["data"]["feed.rpz"])
    assert f"{f.entries} triggers applied" == "7 triggers applied" and f.summary() == "7 triggers applied"
    assert "7 triggers applied" in page
    p = cluster_policy("threat-feed", {"rules": policy["spec"]["rules"]}, cm["data"]["feed.rpz"])
    said = {name: decide([p], name) for name in ("malware.example", "a.botnet.example", "botnet.example",
                                                  "ok.botnet.example", "tracker.example", "sinkhole.example",
                                                  "phish.example", "moved.example", "partner.botnet.example")}
    assert (said["malware.example"].action, said["malware.example"].rcode) == (DENY, "NXDOMAIN")
    assert (said["a.botnet.example"].action, said["a.botnet.example"].rcode) == (DENY, "NXDOMAIN")
    assert said["botnet.example"].action == ALLOW and said["ok.botnet.example"].action == ALLOW
    assert said["tracker.example"].rcode == "NODATA" and said["sinkhole.example"].rcode == "DROP"
    assert rpz.local_answer(said["phish.example"].local, QT.A)[0] == [(QT.A, 300, "192.0.2.66")]
    assert rpz.local_answer(said["phish.example"].local, QT.AAAA) == ([], None)
    assert rpz.local_answer(said["moved.example"].local, QT.A)[1] == "www.example.net"
    assert (said["partner.botnet.example"].action, said["partner.botnet.example"].rule) == (ALLOW, "rules[0]")


def test_without_origin_the_soa_names_the_zone_the_records_are_relative_to() -> None:
    f = feed("rpz.local. 60 IN SOA a. b. 1 1 1 1 1\n    NS a.\nbad.example CNAME .\nx.example.rpz.local. CNAME *.\n")
    assert f.origin == "rpz.local" and f.exact == {"bad.example": rpz.NXDOMAIN, "x.example": rpz.NODATA}
    root = feed("@ SOA a. b. 1 1 1 1 1\nbad.example CNAME .\n")  # `@` with no origin at all: the root
    assert root.exact == {"bad.example": rpz.NXDOMAIN}
