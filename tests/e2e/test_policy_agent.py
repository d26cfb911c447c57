"""DNS policies over real sockets: an agent synced from the API double, asked from several Pods' addresses
(127.0.0.x on loopback), each question twice so the second meets the hit path (C, then Python); each Pod
gets what its policies allow, the others are untouched; a policy change takes effect at once."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.reversename
import pytest

from tests.support import manifests as m
from tests.support import rawdns
from tests.support.apiserver import FakeApiServer
from tests.support.fuzzing import query
from tests.support.helpers import (
    PROPAGATION_BOUND,
    free_port,
    nodedns_cmd,
    rrset_values,
    running_agent,
    subprocess_env,
    wait_for,
)
from tests.support.status_http import get
from tests.support.upstream_double import UpstreamDouble

NODE = "node-a"
WEB, BATCH, OTHER = "127.0.0.2", "127.0.0.3", "127.0.0.4"  # team-a app=web, team-a app=batch, team-b
EXTERNAL = {"x.ads.example": "192.0.2.1", "tracker.example.net": "192.0.2.2", "api.example.com": "192.0.2.3"}
ZONE = "svc.cluster.local"
SYNC_BOUND = 30.0  # seconds from ready to the first policies in force (the optional Pod watch may list after
# ready; a full suite on 2 cores took over 10 s once); a change while running is held to a second (below)


def labelled(obj: dict[str, Any], **labels: str) -> dict[str, Any]:
    obj["metadata"]["labels"] = labels
    return obj


def policy(name: str, ns: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "nodedns.io/v1alpha1", "kind": "DNSPolicy", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def cluster_policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "nodedns.io/v1alpha1", "kind": "ClusterDNSPolicy", "metadata": {"name": name},
            "spec": spec}


TEAM_A_WEB = policy("web-only", "team-a", {
    "podSelector": {"matchLabels": {"app": "web"}},
    "clusterZone": {"namespaces": ["team-a", "kube-system"]},
    "rules": [{"names": ["*.ads.example"], "action": "deny"},
              {"names": ["tracker.example.net"], "action": "deny", "rcode": "NODATA"},
              {"names": ["api.example.com"], "action": "deny", "rcode": "REFUSED"}]})
AUDIT_B = cluster_policy("audit-b", {
    "namespaceSelector": {"matchLabels": {"tenant": "b"}}, "mode": "audit",
    "rules": [{"names": [".example.com"], "action": "deny"}]})


def put_tenants(server: FakeApiServer) -> None:
    """The namespaces team-a (tenant a), team-b (tenant b) and kube-system, and this node (NODE)."""
    for ns, tenant in (("team-a", "a"), ("team-b", "b"), ("kube-system", "")):
        server.put("Namespace", labelled(m.namespace(ns), tenant=tenant) if tenant else m.namespace(ns))
    server.put("Node", m.node(NODE))


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        put_tenants(server)
        server.put("Service", m.service("web", "team-a", cluster_ips=["10.96.0.10"]))
        server.put("Service", m.service("db", "team-b", cluster_ips=["10.96.0.11"]))
        server.put("Pod", m.pod("web-1", "team-a", ip=WEB, node_name=NODE, labels={"app": "web"}))
        server.put("Pod", m.pod("batch-1", "team-a", ip=BATCH, node_name=NODE, labels={"app": "batch"}))
        server.put("Pod", m.pod("app-1", "team-b", ip=OTHER, node_name=NODE, labels={"app": "web"}))
        server.put("DNSPolicy", TEAM_A_WEB)
        server.put("ClusterDNSPolicy", AUDIT_B)
        yield server


def ask(agent: Any, source: str, name: str, rdtype: str = "A") -> tuple[str, list[str]]:
    q = dns.message.make_query(name, rdtype)
    r = dns.query.udp(q, agent.host, port=agent.port, source=source, timeout=3)
    return dns.rcode.to_text(r.rcode()), rrset_values(r, rdtype=rdtype)


def twice(agent: Any, source: str, name: str, rdtype: str = "A") -> tuple[str, list[str]]:
    """The answer, asked twice: the second is what a stored answer would give on the hit path."""
    first = ask(agent, source, name, rdtype)
    second = ask(agent, source, name, rdtype)
    assert first == second, (source, name, first, second)
    return first


PTR_WEB = dns.reversename.from_address("10.96.0.10").to_text()
PTR_DB = dns.reversename.from_address("10.96.0.11").to_text()


def expectations() -> list[tuple[str, str, str, tuple[str, list[str]]]]:
    return [
        # the Pod under the policy: its cluster zone is team-a and kube-system, three names denied
        (WEB, f"web.team-a.{ZONE}.", "A", ("NOERROR", ["10.96.0.10"])),
        (WEB, f"db.team-b.{ZONE}.", "A", ("NXDOMAIN", [])),
        (WEB, f"db.team-b.{ZONE}.", "AAAA", ("NXDOMAIN", [])),
        (WEB, PTR_DB, "PTR", ("NXDOMAIN", [])),
        (WEB, PTR_WEB, "PTR", ("NOERROR", [f"web.team-a.{ZONE}."])),
        (WEB, "x.ads.example.", "A", ("NXDOMAIN", [])),
        (WEB, "tracker.example.net.", "A", ("NOERROR", [])),
        (WEB, "api.example.com.", "A", ("REFUSED", [])),
        # its neighbour in the same namespace, not selected: untouched
        (BATCH, f"db.team-b.{ZONE}.", "A", ("NOERROR", ["10.96.0.11"])),
        (BATCH, PTR_DB, "PTR", ("NOERROR", [f"db.team-b.{ZONE}."])),
        (BATCH, "x.ads.example.", "A", ("NOERROR", ["192.0.2.1"])),
        (BATCH, "api.example.com.", "A", ("NOERROR", ["192.0.2.3"])),
        # team-b under an audit policy: answered, counted
        (OTHER, "api.example.com.", "A", ("NOERROR", ["192.0.2.3"])),
        (OTHER, f"web.team-a.{ZONE}.", "A", ("NOERROR", ["10.96.0.10"])),
    ]


def wait_policed(agent: Any, source: str, name: str, expected: tuple[str, list[str]], rdtype: str = "A",
                 within: float = PROPAGATION_BOUND) -> float:
    started = time.monotonic()
    while (got := ask(agent, source, name, rdtype)) != expected:
        assert time.monotonic() - started < within, (source, name, got, expected)
        time.sleep(0.01)
    return time.monotonic() - started


@contextlib.contextmanager
def forwarding_agent(kubeconfig: str, names: Mapping[str, str], **flags: Any) -> Iterator[Any]:
    """An agent synced from the API double as the node NODE (no node resolv.conf), forwarding to an upstream
    double that answers `names` (name: its A record); `flags`, more of its options."""
    with UpstreamDouble({name: {"A": [ip]} for name, ip in names.items()}) as up, \
            running_agent({"kubeconfig": kubeconfig, "node-name": NODE, "upstream": up.address,
                           "host-resolv-conf": "", **flags}) as agent:
        yield agent


@pytest.mark.parametrize("hit_path", ["c", "python"])
def test_each_pod_gets_what_its_policies_allow_on_both_hit_paths(api: FakeApiServer, kubeconfig: str, hit_path: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if hit_path == "python":
        monkeypatch.setenv("NODEDNS_HIT_PATH", "python")
    with forwarding_agent(kubeconfig, EXTERNAL, **{"status-listen": "127.0.0.1:0",
                                                   "debug-listen": "127.0.0.1:0"}) as agent:
        wait_policed(agent, WEB, f"db.team-b.{ZONE}.", ("NXDOMAIN", []), within=SYNC_BOUND)
        # warm the stored answers from the unpoliced Pods first: the policed one must never get them
        for source, name, rdtype, _ in expectations():
            if source != WEB:
                twice(agent, source, name, rdtype)
        for source, name, rdtype, expected in expectations():
            assert twice(agent, source, name, rdtype) == expected, (source, name, rdtype)
        code, _, body = get(agent.debug_url + "/status")
        assert code == 200
        section = json.loads(body)["policy"]
        decisions = {(d["action"], d["policy"]): d["count"] for d in section["decisions"]}
        assert decisions[("deny", "team-a/web-only")] >= 13  # 6 denials, each asked twice, and the wait
        assert decisions[("audit", "audit-b")] == 4  # api.example.com, warmed and asked, twice each: answered
        denied = {(d["pod"], d["rule"]) for d in section["denied"]}
        assert ("team-a/web-1", "clusterZone") in denied and ("team-b/app-1", "rules[0] (audit)") in denied
        code, _, text = get(agent.status_url + "/metrics")
        assert 'nodedns_policy_decisions_total{action="deny",policy="team-a/web-only"}' in text
        # a policy change takes effect within a second, no restart: the policy goes, team-b is seen again
        api.delete("DNSPolicy", "team-a", "web-only")
        assert wait_policed(agent, WEB, f"db.team-b.{ZONE}.", ("NOERROR", ["10.96.0.11"])) < 1.0
        assert twice(agent, WEB, "x.ads.example.", "A") == ("NOERROR", ["192.0.2.1"])
        # and back: the stored answers it was given meanwhile are not served past the new policy
        api.put("DNSPolicy", TEAM_A_WEB)
        assert wait_policed(agent, WEB, f"db.team-b.{ZONE}.", ("NXDOMAIN", [])) < 1.0
        assert twice(agent, WEB, "x.ads.example.", "A") == ("NXDOMAIN", [])


def test_a_cluster_without_the_crds_runs_as_before_and_says_so(api: FakeApiServer, kubeconfig: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    api.remove_crd("dnspolicies")
    api.remove_crd("clusterdnspolicies")
    with forwarding_agent(kubeconfig, EXTERNAL) as agent:
        deadline = time.monotonic() + PROPAGATION_BOUND
        while ask(agent, WEB, f"db.team-b.{ZONE}.") != ("NOERROR", ["10.96.0.11"]):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert twice(agent, WEB, "x.ads.example.") == ("NOERROR", ["192.0.2.1"])
    said = [r.getMessage() for r in caplog.records if "no DNS policies" in r.getMessage()]
    assert said and all("404" in s for s in said)


class Supervisor:
    """`nodedns serve --workers 2` as a process: a supervisor and two workers on one port."""

    def __init__(self, tmp_path: Path, *flags: str) -> None:
        self.port, self.status, self.debug = free_port(), free_port(), free_port()
        self.log = tmp_path / "serve.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                nodedns_cmd("serve", "--listen", f"127.0.0.1:{self.port}", "--status-listen",
                            f"127.0.0.1:{self.status}", "--debug-listen", f"127.0.0.1:{self.debug}", "--workers", "2",
                            "--lameduck", "0s", *flags),
                env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)

    @property
    def debug_url(self) -> str:
        return f"http://127.0.0.1:{self.debug}"

    def ready(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{self.status}/readyz", timeout=2).status == 200
        except OSError:
            return False

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        finally:
            for w in re.findall(r"worker \d+: pid (\d+)", self.log.read_text()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(w), signal.SIGKILL)  # never leave a worker behind


@contextlib.contextmanager
def two_workers(tmp_path: Path, kubeconfig: str, names: Mapping[str, str]) -> Iterator[tuple[Supervisor, Any]]:
    """A `Supervisor` synced from the API double as the node NODE (no node resolv.conf), forwarding to an
    upstream double that answers `names`, once ready: (it, where to ask it); it must exit 0 when stopped."""
    with UpstreamDouble({name: {"A": [ip]} for name, ip in names.items()}) as up:
        sup = Supervisor(tmp_path, "--kubeconfig", kubeconfig, "--node-name", NODE, "--upstream", up.address,
                         "--host-resolv-conf", "")
        try:
            wait_for(sup.ready, what="ready", timeout=30.0)
            yield sup, SimpleNamespace(host="127.0.0.1", port=sup.port)
        finally:
            assert sup.stop() == 0


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=3) as resp:
        return json.load(resp)


def post(agent: Any, body: Any) -> tuple[int, Any]:
    req = urllib.request.Request(agent.debug_url + "/debug/explain", data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode()


def explain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(nodedns_cmd("explain", *args), env=subprocess_env(), capture_output=True, text=True,
                          timeout=60)


def test_every_worker_gives_each_pod_what_its_policies_allow(api: FakeApiServer, kubeconfig: str,
                                                             tmp_path: Path) -> None:
    with two_workers(tmp_path, kubeconfig, EXTERNAL) as (sup, agent):
        wait_policed(agent, WEB, f"db.team-b.{ZONE}.", ("NXDOMAIN", []), within=SYNC_BOUND)
        for _ in range(6):  # each from a fresh source port: SO_REUSEPORT spreads them over both workers
            for source, name, rdtype, expected in expectations():
                assert ask(agent, source, name, rdtype) == expected, (source, name, rdtype)

        def denials() -> int:
            section = get_json(sup.debug_url + "/status")["policy"]
            return sum(d["count"] for d in section["decisions"] if d["action"] == "deny")

        wait_for(lambda: denials() >= 36, what="the workers' denials summed (published once a second)",
                 timeout=5.0)
        section = get_json(sup.debug_url + "/status")["policy"]
        assert section["clients"] == 2 and [p["pods"] for p in section["policies"]] == [1, 1]
        api.delete("DNSPolicy", "team-a", "web-only")
        wait_policed(agent, WEB, f"db.team-b.{ZONE}.", ("NOERROR", ["10.96.0.11"]))
        for _ in range(6):
            assert ask(agent, WEB, "x.ads.example.") == ("NOERROR", ["192.0.2.1"])


def test_explain_walks_a_pods_search_list_under_its_policies_and_says_which_rule_decides(
        api: FakeApiServer, kubeconfig: str) -> None:
    with forwarding_agent(kubeconfig, EXTERNAL, **{"autopath": True, "debug-listen": "127.0.0.1:0"}) as agent:
        wait_policed(agent, WEB, f"db.team-b.{ZONE}.", ("NXDOMAIN", []), within=SYNC_BOUND)
        code, doc = post(agent, {"name": "db.team-b", "podRef": "team-a/web-1", "types": ["A"]})
        assert code == 200, doc
        assert doc["policies"] == [{"policy": "team-a/web-only", "kind": "DNSPolicy", "mode": "enforce"}]
        assert not doc["autopath"]["applies"]  # the Pod walks its search list itself, each name decided
        by_name = {q["question"]["name"]: q for q in doc["queries"]}
        hidden = by_name[f"db.team-b.{ZONE}."]
        assert (hidden["rcode"], hidden["path"], hidden["policy"]["rule"]) == ("NXDOMAIN", "policy", "clusterZone")
        assert doc["answered"] is None  # every candidate NXDOMAIN: as the Pod's own queries get
        code, neighbour = post(agent, {"name": "db.team-b", "podRef": "team-a/batch-1", "types": ["A"]})
        assert neighbour["policies"] == [] and neighbour["autopath"]["applies"]  # autopath answers its walk
        assert any(r["data"] == "10.96.0.11" for q in neighbour["queries"] for r in q["answer"])
        r = explain("tracker.example.net.", "--pod-ref", "team-a/web-1", "--debug", agent.debug_url)
        assert r.returncode == 0, r.stderr
        assert "deny (NODATA) by team-a/web-only rules[1]" in r.stdout
        assert "DNS policies: team-a/web-only (enforce)" in r.stdout
        r = explain("tracker.example.net.", "--pod-ref", "team-a/batch-1", "--debug", agent.debug_url)
        assert "DNS policies: none applies to this Pod" in r.stdout and "192.0.2.2" in r.stdout
        # as a client of /debug/lookup: the same decision
        code, _, body = get(agent.debug_url + f"/debug/lookup?name=x.ads.example&type=A&client={WEB}")
        client = json.loads(body)["client"]
        assert client["policies"] == ["team-a/web-only"]
        last = client["queries"][-1]  # after the search domains (ndots 5), the name as is
        assert (last["question"]["name"], last["rcode"], last["policy"]["rule"]) == ("x.ads.example.", "NXDOMAIN",
                                                                                     "rules[0]")


@contextlib.contextmanager
def miss_limited_agent(tmp_path: Path) -> Iterator[Any]:
    """An agent of manifests with --miss-limit 10: the Service web and the Pod web-1 at WEB of team-a, the Pod
    under TEAM_A_WEB."""
    objs = [m.namespace("team-a"), m.node(NODE),
            m.service("web", "team-a", cluster_ips=["10.96.0.10"]),
            m.pod("web-1", "team-a", ip=WEB, node_name=NODE, labels={"app": "web"}), TEAM_A_WEB]
    path = m.write(tmp_path / "cluster.yaml", objs)
    with running_agent({"manifests": str(path), "node-name": NODE, "miss-limit": "10",
                        "host-resolv-conf": ""}) as agent:
        yield agent


def early_in_a_new_second() -> None:
    """Wait until the next second has begun, and return within its first 0.3 s."""
    started = time.monotonic()
    while int(time.monotonic()) <= int(started) or time.monotonic() % 1 > 0.3:
        time.sleep(0.01)


def test_a_pod_under_a_policy_has_its_misses_budgeted_and_its_stored_answers_are_not_misses(
        tmp_path: Path) -> None:
    """--miss-limit 10, a Pod at 127.0.0.2 under a DNSPolicy (every query of it goes to the resolver): a burst
    of 30 names not stored, early in a second: 10 answered, 20 TC=1 before the slow path; its stored name
    still answered (a stored answer is no miss); a denied name is a miss like any (shed here: TC=1)."""
    with miss_limited_agent(tmp_path) as agent:
        stored = f"web.team-a.{ZONE}"
        assert twice(agent, WEB, stored + ".") == ("NOERROR", ["10.96.0.10"])
        early_in_a_new_second()  # the burst meets a fresh budget
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((WEB, 0))
            for i in range(30):
                s.sendto(query(f"n{i}-{random.getrandbits(32)}.team-a.{ZONE}", 1, qid=i), (agent.host, agent.port))
            s.sendto(query(stored, 1, qid=100), (agent.host, agent.port))
            s.sendto(query("x.ads.example", 1, qid=101), (agent.host, agent.port))
            got: dict[int, dns.message.Message] = {}
            s.settimeout(0.5)
            while True:
                try:
                    r = dns.message.from_wire(s.recv(65535))
                except TimeoutError:
                    break
                got[r.id] = r
        answered = [q for q, r in got.items() if q < 30 and r.rcode() == dns.rcode.NXDOMAIN]
        shed = [q for q, r in got.items() if q < 30 and r.flags & dns.flags.TC and not r.answer]
        assert sorted(answered) == list(range(10)) and sorted(shed) == list(range(10, 30))
        assert rrset_values(got[100]) == ["10.96.0.10"]  # stored: answered though over its miss budget
        assert got[101].flags & dns.flags.TC  # not stored: a miss like any, shed (over TCP the policy denies it)


def test_a_pod_under_a_policy_has_its_tcp_misses_refused_over_its_budget_but_never_its_stored_answers(
        tmp_path: Path) -> None:
    """The same over one TCP connection (TCP misses are budgeted before the resolver too, REFUSED over the
    budget): its stored name three times, 30 names not stored, then its stored name three times again,
    pipelined early in a second: 10 misses answered (the stored answers before them took none of the budget),
    20 REFUSED, the stored name answered each time, though the budget is spent (a stored answer is no miss)."""
    with miss_limited_agent(tmp_path) as agent:
        stored = f"web.team-a.{ZONE}"
        assert twice(agent, WEB, stored + ".") == ("NOERROR", ["10.96.0.10"])
        assert tcp_ask(agent, WEB, stored + ".") == ("NOERROR", ["10.96.0.10"])
        early_in_a_new_second()  # the burst meets a fresh budget
        frames = [rawdns.frame(query(stored, 1, qid=200 + i)) for i in range(3)]
        frames += [rawdns.frame(query(f"n{i}-{random.getrandbits(32)}.team-a.{ZONE}", 1, qid=i)) for i in range(30)]
        frames += [rawdns.frame(query(stored, 1, qid=100 + i)) for i in range(3)]
        with socket.create_connection((agent.host, agent.port), timeout=3, source_address=(WEB, 0)) as s:
            s.sendall(b"".join(frames))
            got: dict[int, dns.message.Message] = {}
            while len(got) < len(frames):
                out = rawdns.recv_frame(s)
                assert out is not None, sorted(got)
                r = dns.message.from_wire(out)
                got[r.id] = r
        answered = [q for q, r in got.items() if q < 30 and r.rcode() == dns.rcode.NXDOMAIN]
        refused = [q for q, r in got.items() if q < 30 and r.rcode() == dns.rcode.REFUSED]
        assert sorted(answered) == list(range(10)) and sorted(refused) == list(range(10, 30))
        for qid in (200, 201, 202, 100, 101, 102):  # stored: answered, before the misses and over the budget
            assert got[qid].rcode() == dns.rcode.NOERROR and rrset_values(got[qid]) == ["10.96.0.10"], qid


# -- the memo: a Pod under a policy answered on the hit paths, never past a rule ------------------------------

ALLOWED_NAME = "www.example.org."  # no rule of any policy here matches it: allowed for every Pod
PTR_API = dns.reversename.from_address("10.96.0.12").to_text()


def tcp_ask(agent: Any, source: str, name: str, rdtype: str = "A") -> tuple[str, list[str]]:
    q = dns.message.make_query(name, rdtype)
    r = dns.query.tcp(q, agent.host, port=agent.port, source=source, timeout=3)
    return dns.rcode.to_text(r.rcode()), rrset_values(r, rdtype=rdtype)


def count_decisions(agent: Any) -> list[int]:
    """A counter of the questions the resolver decides (`PolicyBook.check` wrapped on the agent's book)."""
    book, seen = agent.agent.policy, [0]
    check = book.check

    def counted(client: str, qname: str) -> Any:
        seen[0] += 1
        return check(client, qname)

    book.check = counted
    return seen


def hit_path_answers(agent: Any) -> int:
    return agent.call(lambda: sum(sum(ls.udp_hit) for ls in agent.agent.server.stats))


def repeat(agent: Any, source: str, name: str, rdtype: str, expected: tuple[str, list[str]], times: int = 5,
           *, tcp: bool = False) -> None:
    for _ in range(times):
        got = (tcp_ask if tcp else ask)(agent, source, name, rdtype)
        assert got == expected, (source, name, rdtype, got, expected, "tcp" if tcp else "udp")


@pytest.mark.parametrize("hit_path", ["c", "python"])
def test_a_policed_pods_repeat_questions_are_answered_without_the_resolver_and_never_past_a_rule(
        api: FakeApiServer, kubeconfig: str, hit_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Pod under a policy: its first question of a stored answer is decided by the resolver, its repeats
    are answered by the hit path (UDP) or the resolver's first look (TCP) from its group's memo, counted as
    decisions all the same. Then (a) a policy change, (b) the Pod moving to another policy, (c) the cluster
    zone changing so that the same PTR key names another namespace, (d) an audit policy's would-be denials:
    no stored answer is ever served past a rule, and audit's counts stay exact."""
    if hit_path == "python":
        monkeypatch.setenv("NODEDNS_HIT_PATH", "python")
    api.put("Service", m.service("api", "team-a", cluster_ips=["10.96.0.12"]))
    names = {**EXTERNAL, ALLOWED_NAME.rstrip("."): "192.0.2.9"}
    with forwarding_agent(kubeconfig, names) as agent:
        wait_policed(agent, WEB, f"db.team-b.{ZONE}.", ("NXDOMAIN", []), within=SYNC_BOUND)
        book = agent.agent.policy
        decided = count_decisions(agent)
        cases = [(ALLOWED_NAME, "A", ("NOERROR", ["192.0.2.9"])),  # forwarded: decided on its name alone
                 (f"web.team-a.{ZONE}.", "A", ("NOERROR", ["10.96.0.10"])),  # the cluster zone, clusterZone
                 (PTR_API, "PTR", ("NOERROR", [f"api.team-a.{ZONE}."]))]  # decided on its answer too
        for name, rdtype, expected in cases:
            ask(agent, WEB, name, rdtype)  # stored (a forwarded answer: by this first question)
            before, hits = decided[0], hit_path_answers(agent)
            repeat(agent, WEB, name, rdtype, expected)  # decided once more (stored now), then from the memo
            assert decided[0] - before <= 1, name
            assert hit_path_answers(agent) - hits >= 4, name
            before = decided[0]
            repeat(agent, WEB, name, rdtype, expected, tcp=True)
            assert decided[0] == before, name  # TCP: the resolver's first look answers from the memo
            before, hits = decided[0], hit_path_answers(agent)
            repeat(agent, WEB, name.upper(), rdtype, expected, times=2)  # 0x20: by the canonical key (`general`)
            assert decided[0] == before and hit_path_answers(agent) - hits == 2, name
        assert agent.call(book.memo_status)["keys"] >= 3
        folded = agent.call(book.status)  # what the memo answered is counted under the deciding policy
        allowed = {d["policy"]: d["count"] for d in folded["decisions"] if d["action"] == "allow"}
        assert allowed["team-a/web-only"] >= 3 * 13

        # (c) the cluster zone changes: the same PTR key now names a team-b Service (the new one first, so the
        # address is never without a Service: its PTR never forwarded). An unpoliced Pod asks first, so the
        # new answer is stored when the policed Pod asks: it must not get it from the memo
        api.put("Service", m.service("api2", "team-b", cluster_ips=["10.96.0.12"]))
        api.delete("Service", "team-a", "api")
        wait_policed(agent, BATCH, PTR_API, ("NOERROR", [f"api2.team-b.{ZONE}."]), "PTR")
        repeat(agent, BATCH, PTR_API, "PTR", ("NOERROR", [f"api2.team-b.{ZONE}."]))
        repeat(agent, WEB, PTR_API, "PTR", ("NXDOMAIN", []))
        repeat(agent, WEB, PTR_API, "PTR", ("NXDOMAIN", []), tcp=True)

        # (a) a policy change: the allowed name denied from now on, on every path
        repeat(agent, WEB, ALLOWED_NAME, "A", ("NOERROR", ["192.0.2.9"]))
        changed = json.loads(json.dumps(TEAM_A_WEB))
        changed["spec"]["rules"].append({"names": [ALLOWED_NAME], "action": "deny"})
        api.put("DNSPolicy", changed)
        assert wait_policed(agent, WEB, ALLOWED_NAME, ("NXDOMAIN", [])) < 1.0
        repeat(agent, WEB, ALLOWED_NAME, "A", ("NXDOMAIN", []))
        repeat(agent, WEB, ALLOWED_NAME, "A", ("NXDOMAIN", []), tcp=True)
        api.put("DNSPolicy", TEAM_A_WEB)
        wait_policed(agent, WEB, ALLOWED_NAME, ("NOERROR", ["192.0.2.9"]))
        repeat(agent, WEB, ALLOWED_NAME, "A", ("NOERROR", ["192.0.2.9"]))

        # (b) the Pod moves to another policy (its label changes): the old group's memo is not its any more
        api.put("DNSPolicy", policy("batch-no-www", "team-a", {
            "podSelector": {"matchLabels": {"app": "batch"}},
            "rules": [{"names": [ALLOWED_NAME], "action": "deny", "rcode": "REFUSED"}]}))
        wait_policed(agent, BATCH, ALLOWED_NAME, ("REFUSED", []))
        api.put("Pod", m.pod("web-1", "team-a", ip=WEB, node_name=NODE, labels={"app": "batch"}))
        assert wait_policed(agent, WEB, ALLOWED_NAME, ("REFUSED", [])) < 1.0
        repeat(agent, WEB, ALLOWED_NAME, "A", ("REFUSED", []))
        repeat(agent, WEB, ALLOWED_NAME, "A", ("REFUSED", []), tcp=True)
        repeat(agent, WEB, f"db.team-b.{ZONE}.", "A", ("NOERROR", ["10.96.0.11"]))  # no clusterZone now

        # (d) audit: every would-be denial counted and listed, however often asked; its allowed names memoed
        def audit_counts() -> tuple[int, int]:
            section = agent.call(book.status)
            audits = sum(d["count"] for d in section["decisions"] if d["action"] == "audit")
            rows = sum(d["count"] for d in section["denied"] if d["pod"] == "team-b/app-1")
            return audits, rows

        ask(agent, OTHER, "api.example.com.")
        audits, rows = audit_counts()
        repeat(agent, OTHER, "api.example.com.", "A", ("NOERROR", ["192.0.2.3"]), times=7)
        repeat(agent, OTHER, "api.example.com.", "A", ("NOERROR", ["192.0.2.3"]), times=3, tcp=True)
        assert audit_counts() == (audits + 10, rows + 10)
        ask(agent, OTHER, ALLOWED_NAME)
        ask(agent, OTHER, ALLOWED_NAME)
        before, hits = decided[0], hit_path_answers(agent)
        repeat(agent, OTHER, ALLOWED_NAME, "A", ("NOERROR", ["192.0.2.9"]))
        assert decided[0] == before and hit_path_answers(agent) - hits == 5


@pytest.mark.parametrize("hit_path", ["c", "python"])
def test_a_policed_pods_memo_answers_count_its_own_questions_only_when_other_pods_share_the_batch(
        api: FakeApiServer, kubeconfig: str, hit_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hit path reads the datagrams waiting on its socket in one batch: a policed Pod's memo answers
    interleaved with an unpoliced Pod's stored answers are counted as decisions of the policed Pod's
    policy once each, and the unpoliced Pod's answers under none."""
    if hit_path == "python":
        monkeypatch.setenv("NODEDNS_HIT_PATH", "python")
    names = {**EXTERNAL, ALLOWED_NAME.rstrip("."): "192.0.2.9"}
    with forwarding_agent(kubeconfig, names) as agent:
        wait_policed(agent, WEB, f"db.team-b.{ZONE}.", ("NXDOMAIN", []), within=SYNC_BOUND)
        book = agent.agent.policy
        for source in (WEB, BATCH):
            repeat(agent, source, ALLOWED_NAME, "A", ("NOERROR", ["192.0.2.9"]), times=3)  # stored, memoed

        def allowed() -> int:
            section = agent.call(book.status)
            return sum(d["count"] for d in section["decisions"]
                       if d["action"] == "allow" and d["policy"] == "team-a/web-only")

        before, hits = allowed(), hit_path_answers(agent)
        rounds = 5
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as web, \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as batch:
            web.bind((WEB, 0))
            batch.bind((BATCH, 0))
            for n in range(rounds):
                hold = threading.Thread(target=agent.call, args=(lambda: time.sleep(0.2),))
                hold.start()  # the loop busy: the datagrams below wait on the socket and are read in one batch
                time.sleep(0.05)
                web.sendto(query(ALLOWED_NAME, 1, qid=n), (agent.host, agent.port))
                for i in range(8):
                    batch.sendto(query(ALLOWED_NAME, 1, qid=100 + i), (agent.host, agent.port))
                hold.join()
                for sock, count in ((web, 1), (batch, 8)):
                    sock.settimeout(3)
                    for _ in range(count):
                        r = dns.message.from_wire(sock.recv(65535))
                        assert rrset_values(r) == ["192.0.2.9"]
        assert hit_path_answers(agent) - hits == 9 * rounds  # every one answered on the hit path
        assert allowed() - before == rounds  # the policed Pod's questions, each once


def test_every_worker_answers_a_policed_pods_repeats_from_its_memo_and_never_past_a_changed_policy(
        api: FakeApiServer, kubeconfig: str, tmp_path: Path) -> None:
    """--workers 2: each worker keeps its own memo; a policed Pod's repeats are answered by the hit paths
    (the workers' hit-path answers grow with them), every question is counted once as a decision, and a
    policy change is never answered past by either worker."""
    names = {**EXTERNAL, ALLOWED_NAME.rstrip("."): "192.0.2.9"}
    with two_workers(tmp_path, kubeconfig, names) as (sup, agent):
        wait_policed(agent, WEB, f"db.team-b.{ZONE}.", ("NXDOMAIN", []), within=SYNC_BOUND)

        def hit_path() -> int:
            return int(get_json(sup.debug_url + "/status")["queries"]["hit_path"])

        def allowed() -> int:
            section = get_json(sup.debug_url + "/status")["policy"]
            return sum(d["count"] for d in section["decisions"]
                       if d["action"] == "allow" and d["policy"] == "team-a/web-only")

        before = hit_path()
        for _ in range(40):  # each from a fresh source port: SO_REUSEPORT spreads them over both workers
            assert ask(agent, WEB, ALLOWED_NAME) == ("NOERROR", ["192.0.2.9"])
        wait_for(lambda: allowed() == 40, what="every question counted once (published once a second)",
                 timeout=5.0)
        # at most the first two questions of each worker take its resolver (forwarded, then remembered)
        wait_for(lambda: hit_path() - before >= 36, what="the repeats answered on the hit paths", timeout=5.0)
        changed = json.loads(json.dumps(TEAM_A_WEB))
        changed["spec"]["rules"].append({"names": [ALLOWED_NAME], "action": "deny"})
        api.put("DNSPolicy", changed)
        assert wait_policed(agent, WEB, ALLOWED_NAME, ("NXDOMAIN", [])) < 1.0
        for _ in range(40):
            assert ask(agent, WEB, ALLOWED_NAME) == ("NXDOMAIN", [])
