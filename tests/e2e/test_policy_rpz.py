"""An RPZ feed as a user meets it: a ClusterDNSPolicy names a ConfigMap holding an RPZ zone file, through the
API double; the Pods it selects get the feed's NXDOMAIN, NODATA, local data, passthru and drop on the
agent's real query path (each asked twice: the second meets the hit path), the others are untouched; a
change of the ConfigMap takes effect within a second, a feed dropped from its policy and named again is
read again; what the feed holds that the agent does not support is in the policy's status conditions and
the log while the rest applies; a missing ConfigMap is a condition, not a crash; the agent reads only the
ConfigMap the policy names."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rcode
import pytest

from tests.e2e.test_policy_agent import (
    SYNC_BOUND,
    ask,
    cluster_policy,
    forwarding_agent,
    labelled,
    put_tenants,
    twice,
    two_workers,
    wait_policed,
)
from tests.support import manifests as m
from tests.support.apiserver import FakeApiServer
from tests.support.helpers import PROPAGATION_BOUND, nodedns_cmd, rrset_values, running_agent, subprocess_env
from tests.support.status_http import get
from tests.support.upstream_double import UpstreamDouble

NODE = "node-a"
WEB, OTHER = "127.0.0.2", "127.0.0.4"  # team-a (tenant a, selected), team-b (not selected)
UPSTREAM = {"bad.example": "192.0.2.1", "x.bad.example": "192.0.2.2", "ok.bad.example": "192.0.2.3",
            "quiet.example": "192.0.2.4", "sink.example": "192.0.2.5", "walled.example": "192.0.2.6",
            "moved.example": "192.0.2.7", "www.example.net": "192.0.2.8", "fine.example": "192.0.2.9",
            "late.example": "192.0.2.10", "allowed.example": "192.0.2.11"}
STATUS_BOUND = 20.0  # seconds: the writer's random delay (at most 10 s) and the watch on top

FEED = """$TTL 300
$ORIGIN rpz.example.org.
@ SOA localhost. hostmaster.localhost. ( 1 3600 600 86400 60 )
  NS localhost.
; a threat feed
bad.example            CNAME .
*.bad.example          CNAME .
ok.bad.example         CNAME rpz-passthru.
quiet.example          CNAME *.
sink.example           CNAME rpz-drop.
walled.example         A 192.0.2.66
                       TXT "blocked by the platform team"
moved.example          CNAME www.example.net.
allowed.example        CNAME .
32.1.2.0.192.rpz-ip    CNAME .
mx.example             MX 10 mail.example.
"""

THREAT_FEED = cluster_policy("threat-feed", {
    "namespaceSelector": {"matchLabels": {"tenant": "a"}},
    "rpz": {"configMapRef": {"namespace": "kube-system", "name": "rpz-feed", "key": "feed.rpz"}},
    "rules": [{"names": ["allowed.example"], "action": "allow"}]})


def config_map(ns: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        put_tenants(server)
        server.put("Pod", m.pod("web-1", "team-a", ip=WEB, node_name=NODE, labels={"app": "web"}))
        server.put("Pod", m.pod("app-1", "team-b", ip=OTHER, node_name=NODE, labels={"app": "web"}))
        server.put("ConfigMap", config_map("kube-system", "rpz-feed", {"feed.rpz": FEED}))
        server.put("ConfigMap", config_map("kube-system", "unrelated", {"secret-ish": "not for the agent"}))
        server.put("ClusterDNSPolicy", THREAT_FEED)
        yield server


def full(agent: Any, source: str, name: str, rdtype: str = "A") -> dns.message.Message:
    q = dns.message.make_query(name, rdtype)
    return dns.query.udp(q, agent.host, port=agent.port, source=source, timeout=3)


def conditions(api: FakeApiServer, kind: str, ns: str, name: str) -> dict[str, dict[str, Any]]:
    obj = api.get(kind, ns, name)
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def wait_conditions(api: FakeApiServer, kind: str, ns: str, name: str, check: Any) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + STATUS_BOUND
    while True:
        got = conditions(api, kind, ns, name)
        if check(got):
            return got
        assert time.monotonic() < deadline, got
        time.sleep(0.1)


def test_a_feed_denies_nodatas_local_datas_passthrus_and_drops_for_the_pods_it_selects(
        api: FakeApiServer, kubeconfig: str, caplog: pytest.LogCaptureFixture) -> None:
    with forwarding_agent(kubeconfig, UPSTREAM, **{"debug-listen": "127.0.0.1:0",
                                                   "status-listen": "127.0.0.1:0"}) as agent:
        wait_policed(agent, WEB, "bad.example.", ("NXDOMAIN", []), within=SYNC_BOUND)
        for name, ip in UPSTREAM.items():  # the neighbour of another tenant first: stored answers exist
            assert twice(agent, OTHER, name + ".") == ("NOERROR", [ip])
        assert twice(agent, WEB, "bad.example.") == ("NXDOMAIN", [])
        assert twice(agent, WEB, "x.bad.example.") == ("NXDOMAIN", [])  # the wildcard
        assert twice(agent, WEB, "ok.bad.example.") == ("NOERROR", ["192.0.2.3"])  # passthru beats the wildcard
        assert twice(agent, WEB, "quiet.example.") == ("NOERROR", [])  # NODATA
        assert twice(agent, WEB, "walled.example.") == ("NOERROR", ["192.0.2.66"])  # local data
        assert twice(agent, WEB, "walled.example.", "TXT") == ("NOERROR", ['"blocked by the platform team"'])
        assert twice(agent, WEB, "walled.example.", "AAAA") == ("NOERROR", [])  # local data: NODATA for others
        moved = full(agent, WEB, "moved.example.")  # a CNAME to another name, followed
        assert rrset_values(moved, rdtype="CNAME") == ["www.example.net."]
        assert rrset_values(moved, rdtype="A") == ["192.0.2.8"]
        assert twice(agent, WEB, "allowed.example.") == ("NOERROR", ["192.0.2.11"])  # the policy's own rule first
        assert twice(agent, WEB, "fine.example.") == ("NOERROR", ["192.0.2.9"])  # not in the feed
        with pytest.raises(dns.exception.Timeout):  # rpz-drop: no answer at all
            ask(agent, WEB, "sink.example.")
        code, _, body = get(agent.debug_url + "/status")
        section = json.loads(body)["policy"]
        feed = section["policies"][0]["rpz"]
        assert feed["state"] == "applied" and feed["origin"] == "rpz.example.org"
        assert feed["left_out"] == {"rpz-ip triggers (not supported)": 1,
                                    "local data of type MX (not supported)": 1}
        denied = {(d["pod"], d["policy"], d["rule"]) for d in section["denied"]}
        assert denied == {("team-a/web-1", "threat-feed", "rpz")}
        decisions = {(d["action"], d["policy"]): d["count"] for d in section["decisions"]}
        assert decisions[("local", "threat-feed")] >= 6
        # insight and `nodedns top`: the denials per Pod and rule (policy and rule names, never the names asked)
        code, _, body = get(agent.debug_url + "/debug/top")
        pods = {p["pod"]: p for p in json.loads(body)["pods"]}
        assert pods["team-a/web-1"]["denied"] == [{"policy": "threat-feed", "rule": "rpz",
                                                   "count": pods["team-a/web-1"]["denied_total"]}]
        assert pods["team-a/web-1"]["denied_total"] >= 8 and pods["team-b/app-1"]["denied"] == []
        r = subprocess.run(nodedns_cmd("top", "--debug", agent.debug_url), env=subprocess_env(), capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        header = lines[1].split()
        web = next(line.split() for line in lines if "web-1" in line and line.startswith("team-a"))
        assert web[header.index("DENIED")] == str(pods["team-a/web-1"]["denied_total"])
        rows = lines[lines.index("denied by DNS policies (audit: would have been denied):") + 2:]
        assert rows[0].split()[:3] == ["team-a/web-1", "threat-feed", "rpz"]
        # the agent read the one ConfigMap the policy names, in its namespace, by name
        lists = api.requests_for("configmaps")
        assert lists and all(r.query.get("fieldSelector") == "metadata.name=rpz-feed,metadata.namespace=kube-system"
                             for r in lists)
        # a feed change takes effect within a second, no restart
        api.put("ConfigMap", config_map("kube-system", "rpz-feed", {"feed.rpz": FEED + "late.example CNAME .\n"}))
        assert wait_policed(agent, WEB, "late.example.", ("NXDOMAIN", []), within=PROPAGATION_BOUND) < 1.0
        assert twice(agent, OTHER, "late.example.") == ("NOERROR", ["192.0.2.10"])
        dropped = FEED.replace("\nbad.example            CNAME .\n", "\n")  # the exact trigger goes, its wildcard stays
        assert dropped != FEED
        api.put("ConfigMap", config_map("kube-system", "rpz-feed", {"feed.rpz": dropped}))
        assert wait_policed(agent, WEB, "bad.example.", ("NOERROR", ["192.0.2.1"]), within=PROPAGATION_BOUND) < 1.0
        assert twice(agent, WEB, "x.bad.example.") == ("NXDOMAIN", [])
        # the unsupported records: in the policy's status (written once) and the log; the rest applied
        got = wait_conditions(api, "ClusterDNSPolicy", "", "threat-feed",
                              lambda c: "FeedLoaded" in c and "triggers applied" in c["FeedLoaded"]["message"])
        assert (got["Accepted"]["status"], got["Accepted"]["reason"]) == ("False", "PartsLeftOut")
        assert "rpz-ip triggers" in got["Accepted"]["message"] and "MX" in got["Accepted"]["message"]
        assert (got["FeedLoaded"]["status"], got["FeedLoaded"]["reason"]) == ("True", "Loaded")
        assert "1 rpz-ip triggers (not supported)" in got["FeedLoaded"]["message"]
        assert api.get("ClusterDNSPolicy", "", "threat-feed")["spec"] == THREAT_FEED["spec"]  # spec untouched
    said = [r.getMessage() for r in caplog.records if r.name == "nodedns.policy"]
    assert any("rpz-ip triggers (not supported)" in s and "threat-feed" in s for s in said), said


def test_a_missing_configmap_or_key_is_a_condition_and_the_rules_still_apply(
        api: FakeApiServer, kubeconfig: str, caplog: pytest.LogCaptureFixture) -> None:
    api.delete("ConfigMap", "kube-system", "rpz-feed")
    with forwarding_agent(kubeconfig, UPSTREAM) as agent:
        got = wait_conditions(api, "ClusterDNSPolicy", "", "threat-feed", lambda c: "FeedLoaded" in c)
        assert (got["FeedLoaded"]["status"], got["FeedLoaded"]["reason"]) == ("False", "ConfigMapNotFound")
        assert "kube-system/rpz-feed does not exist" in got["FeedLoaded"]["message"]
        assert got["Accepted"]["status"] == "False"
        # nothing of the feed applies, nothing else is denied: neither "deny all" nor a crash
        assert twice(agent, WEB, "bad.example.") == ("NOERROR", ["192.0.2.1"])
        assert twice(agent, WEB, "fine.example.") == ("NOERROR", ["192.0.2.9"])
        # the ConfigMap appears without its key: another reason
        api.put("ConfigMap", config_map("kube-system", "rpz-feed", {"other": FEED}))
        got = wait_conditions(api, "ClusterDNSPolicy", "", "threat-feed",
                              lambda c: c.get("FeedLoaded", {}).get("reason") == "KeyNotFound")
        assert "no key 'feed.rpz'" in got["FeedLoaded"]["message"]
        # and with it: applied, the condition follows
        api.put("ConfigMap", config_map("kube-system", "rpz-feed", {"feed.rpz": FEED}))
        assert wait_policed(agent, WEB, "bad.example.", ("NXDOMAIN", []), within=PROPAGATION_BOUND) < 1.0
        wait_conditions(api, "ClusterDNSPolicy", "", "threat-feed",
                        lambda c: c.get("FeedLoaded", {}).get("status") == "True")
    said = [r.getMessage() for r in caplog.records if r.name == "nodedns.policy"]
    assert any("rpz-feed does not exist" in s for s in said), said


def test_a_status_write_refused_is_logged_once_and_not_retried(api: FakeApiServer, kubeconfig: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    api.deny("clusterdnspolicies/status", 403, verbs=("patch",))
    with running_agent({"kubeconfig": kubeconfig, "node-name": NODE, "host-resolv-conf": ""}):
        deadline = time.monotonic() + STATUS_BOUND
        while not api.requests_for("clusterdnspolicies/status"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(5.0)  # the upkeep looks again every 2 s: no second try for the same version of the object
        assert len(api.requests_for("clusterdnspolicies/status")) == 1
    said = [r.getMessage() for r in caplog.records if "status could not be written" in r.getMessage()]
    assert len(said) == 1 and "403" in said[0]


@pytest.mark.parametrize("hit_path", ["c", "python"])
def test_the_feed_applies_on_both_hit_paths(api: FakeApiServer, kubeconfig: str, hit_path: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    if hit_path == "python":
        monkeypatch.setenv("NODEDNS_HIT_PATH", "python")
    with forwarding_agent(kubeconfig, UPSTREAM) as agent:
        wait_policed(agent, WEB, "bad.example.", ("NXDOMAIN", []), within=SYNC_BOUND)
        for name in ("bad.example.", "quiet.example.", "walled.example.", "fine.example."):
            twice(agent, OTHER, name)  # stored answers for the hit path
        assert twice(agent, WEB, "bad.example.") == ("NXDOMAIN", [])
        assert twice(agent, WEB, "quiet.example.") == ("NOERROR", [])
        assert twice(agent, WEB, "walled.example.") == ("NOERROR", ["192.0.2.66"])
        assert twice(agent, WEB, "fine.example.") == ("NOERROR", ["192.0.2.9"])
        assert twice(agent, OTHER, "walled.example.") == ("NOERROR", ["192.0.2.6"])


def test_every_worker_applies_the_feed_and_its_changes(api: FakeApiServer, kubeconfig: str, tmp_path: Any) -> None:
    with two_workers(tmp_path, kubeconfig, UPSTREAM) as (_, agent):
        wait_policed(agent, WEB, "bad.example.", ("NXDOMAIN", []), within=SYNC_BOUND)
        for _ in range(6):  # each from a fresh source port: SO_REUSEPORT spreads them over both workers
            assert ask(agent, WEB, "bad.example.") == ("NXDOMAIN", [])
            assert ask(agent, WEB, "walled.example.") == ("NOERROR", ["192.0.2.66"])
            assert ask(agent, WEB, "quiet.example.") == ("NOERROR", [])
            assert ask(agent, OTHER, "bad.example.") == ("NOERROR", ["192.0.2.1"])
        api.put("ConfigMap", config_map("kube-system", "rpz-feed", {"feed.rpz": FEED + "late.example CNAME .\n"}))
        wait_policed(agent, WEB, "late.example.", ("NXDOMAIN", []), within=PROPAGATION_BOUND)
        for _ in range(6):
            assert ask(agent, WEB, "late.example.") == ("NXDOMAIN", [])


EXTRA_FEED = """$TTL 300
$ORIGIN rpz.example.org.
@ SOA localhost. hostmaster.localhost. ( 1 3600 600 86400 60 )
  NS localhost.
late.example           CNAME .
"""


def test_a_feed_no_policy_names_any_more_is_read_again_when_a_policy_names_it_again(
        api: FakeApiServer, kubeconfig: str) -> None:
    """Two policies name two keys of one ConfigMap: the second policy deleted, its feed stops applying (the
    ConfigMap still watched for the first); the policy created again, its feed is read again and applies."""
    extra = cluster_policy("extra-feed", {
        "namespaceSelector": {"matchLabels": {"tenant": "a"}},
        "rpz": {"configMapRef": {"namespace": "kube-system", "name": "rpz-feed", "key": "extra.rpz"}}})
    api.put("ConfigMap", config_map("kube-system", "rpz-feed", {"feed.rpz": FEED, "extra.rpz": EXTRA_FEED}))
    api.put("ClusterDNSPolicy", extra)
    with forwarding_agent(kubeconfig, UPSTREAM) as agent:
        wait_policed(agent, WEB, "late.example.", ("NXDOMAIN", []), within=SYNC_BOUND)
        api.delete("ClusterDNSPolicy", "", "extra-feed")
        wait_policed(agent, WEB, "late.example.", ("NOERROR", ["192.0.2.10"]), within=PROPAGATION_BOUND)
        assert ask(agent, WEB, "bad.example.") == ("NXDOMAIN", [])  # the first policy's feed still applies
        api.put("ClusterDNSPolicy", extra)
        wait_policed(agent, WEB, "late.example.", ("NXDOMAIN", []), within=PROPAGATION_BOUND)


def test_a_feed_dropped_from_its_only_policy_and_named_again_unchanged_is_read_again_and_applies(
        api: FakeApiServer, kubeconfig: str) -> None:
    """The policy's spec.rpz removed (its ConfigMap no longer watched, the feed no longer applied), then put
    back naming the same ConfigMap, whose text has not changed: the feed is read again and applies; twice
    round, as a policy edited back and forth."""
    no_feed = cluster_policy("threat-feed", {k: v for k, v in THREAT_FEED["spec"].items() if k != "rpz"})
    with forwarding_agent(kubeconfig, UPSTREAM) as agent:
        wait_policed(agent, WEB, "bad.example.", ("NXDOMAIN", []), within=SYNC_BOUND)
        for _ in range(2):
            api.put("ClusterDNSPolicy", no_feed)
            wait_policed(agent, WEB, "bad.example.", ("NOERROR", ["192.0.2.1"]), within=PROPAGATION_BOUND)
            api.put("ClusterDNSPolicy", THREAT_FEED)
            wait_policed(agent, WEB, "bad.example.", ("NXDOMAIN", []), within=PROPAGATION_BOUND)
            assert ask(agent, WEB, "walled.example.") == ("NOERROR", ["192.0.2.66"])  # all of the feed, again


def test_a_feed_deleted_while_the_watch_was_cut_is_dropped_on_the_relist(api: FakeApiServer, kubeconfig: str) -> None:
    """The ConfigMap goes while the agent cannot see it (an outage, the history compacted meanwhile): its
    relist finds it gone, and its feed stops applying (nothing denied on a stale copy)."""
    with forwarding_agent(kubeconfig, UPSTREAM) as agent:
        wait_policed(agent, WEB, "bad.example.", ("NXDOMAIN", []), within=SYNC_BOUND)
        api.go_down()
        api.delete("ConfigMap", "kube-system", "rpz-feed")
        api.compact()
        api.come_back()
        wait_policed(agent, WEB, "bad.example.", ("NOERROR", ["192.0.2.1"]), within=SYNC_BOUND)
        got = wait_conditions(api, "ClusterDNSPolicy", "", "threat-feed",
                              lambda c: c.get("FeedLoaded", {}).get("reason") == "ConfigMapNotFound")
        assert got["FeedLoaded"]["status"] == "False"


def test_an_agent_of_manifests_says_it_cannot_read_a_feed_and_applies_the_rules(tmp_path: Any) -> None:
    objs = [labelled(m.namespace("team-a"), tenant="a"), m.node(NODE),
            m.pod("web-1", "team-a", ip=WEB, node_name=NODE, labels={"app": "web"}), THREAT_FEED,
            config_map("kube-system", "rpz-feed", {"feed.rpz": FEED})]
    path = m.write(tmp_path / "cluster.yaml", objs)
    with UpstreamDouble({name: {"A": [ip]} for name, ip in UPSTREAM.items()}) as up, \
            running_agent({"manifests": str(path), "node-name": NODE, "upstream": up.address,
                           "debug-listen": "127.0.0.1:0", "host-resolv-conf": ""}) as agent:
        assert twice(agent, WEB, "bad.example.") == ("NOERROR", ["192.0.2.1"])  # the feed: not applied
        assert twice(agent, WEB, "allowed.example.") == ("NOERROR", ["192.0.2.11"])
        code, _, body = get(agent.debug_url + "/status")
        (p,) = json.loads(body)["policy"]["policies"]
        assert p["rpz"]["state"] == "not applied" and "API server only" in p["rpz"]["problem"]
        assert any("API server only" in x for x in p["problems"])


def test_explain_says_the_feed_and_its_trigger_decide(api: FakeApiServer, kubeconfig: str) -> None:
    with forwarding_agent(kubeconfig, UPSTREAM, **{"debug-listen": "127.0.0.1:0"}) as agent:
        wait_policed(agent, WEB, "bad.example.", ("NXDOMAIN", []), within=SYNC_BOUND)
        for name, said in (("x.bad.example.", "deny (NXDOMAIN) by threat-feed rpz (*.bad.example)"),
                           ("walled.example.", "local by threat-feed rpz (walled.example)")):
            r = subprocess.run(nodedns_cmd("explain", name, "--pod-ref", "team-a/web-1", "--debug", agent.debug_url),
                               env=subprocess_env(), capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            assert said in r.stdout, r.stdout
        assert "192.0.2.66" in r.stdout


def test_a_dns_policy_with_a_name_the_agent_cannot_use_says_so_in_its_status(api: FakeApiServer,
                                                                             kubeconfig: str) -> None:
    api.put("DNSPolicy", {"apiVersion": "nodedns.io/v1alpha1", "kind": "DNSPolicy",
                          "metadata": {"name": "no-ads", "namespace": "team-a"},
                          "spec": {"rules": [{"names": ["a..example", "bad.example"], "action": "deny"}]}})
    with forwarding_agent(kubeconfig, UPSTREAM) as agent:
        got = wait_conditions(api, "DNSPolicy", "team-a", "no-ads", lambda c: "Accepted" in c)
        assert (got["Accepted"]["status"], got["Accepted"]["reason"]) == ("False", "PartsLeftOut")
        assert "'a..example' cannot be used" in got["Accepted"]["message"] and "FeedLoaded" not in got
        assert twice(agent, WEB, "bad.example.") == ("NXDOMAIN", [])  # the rest of the rule applies
        assert twice(agent, WEB, "fine.example.") == ("NOERROR", ["192.0.2.9"])
        feed = wait_conditions(api, "ClusterDNSPolicy", "", "threat-feed", lambda c: "Accepted" in c)
        assert feed["Accepted"]["status"] == "False" and feed["FeedLoaded"]["status"] == "True"
