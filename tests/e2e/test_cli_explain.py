"""`nodedns explain` and its route, POST /debug/explain: a Pod's glibc resolver simulated by the agent."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import manifests as m
from tests.support.helpers import RunningAgent, free_port, nodedns_cmd, running_agent, subprocess_env
from tests.support.upstream_double import UpstreamDouble

NODE = "node-a"
CLIENT = m.pod("client", ip="127.0.0.1", node_name=NODE)


def objects() -> list[dict[str, Any]]:
    return [m.namespace("default"), m.namespace("other"), m.node(NODE),
            m.service("web", cluster_ips=["10.96.0.10"]), m.service("db", "other", cluster_ips=["10.96.0.20"]),
            CLIENT, m.pod("hostnet", "other", ip="127.0.0.2", node_name=NODE, host_network=True)]


@pytest.fixture(scope="module")
def upstream() -> Iterator[UpstreamDouble]:
    with UpstreamDouble({"api.example.com": {"A": ["192.0.2.80"]}}) as up:
        yield up


def agent_config(tmp: Path, upstream: UpstreamDouble, **extra: Any) -> dict[str, Any]:
    host = tmp / "resolv.conf"
    host.write_text("nameserver 192.0.2.53\n")  # no host search domains: ClusterFirst gets the cluster's three
    return {"manifests": str(m.write(tmp / "c.yaml", objects())), "node-name": NODE, "upstream": upstream.address,
            "host-resolv-conf": str(host), "debug-listen": "127.0.0.1:0", **extra}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory, upstream: UpstreamDouble) -> Iterator[RunningAgent]:
    with running_agent(agent_config(tmp_path_factory.mktemp("explain"), upstream, autopath=True)) as a:
        yield a


def post(agent: RunningAgent, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(agent.debug_url + "/debug/explain", data=data, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            text = exc.read().decode()
        try:
            return exc.code, json.loads(text)
        except json.JSONDecodeError:
            return exc.code, text


def asked(result: dict[str, Any]) -> list[str]:
    return [f"{q['question']['name']} {q['question']['type']}" for q in result["queries"]]


# -- the route ----------------------------------------------------------------------------------

PLAIN_WALK = ["api.example.com.default.svc.cluster.local. A", "api.example.com.default.svc.cluster.local. AAAA",
              "api.example.com.svc.cluster.local. A", "api.example.com.svc.cluster.local. AAAA",
              "api.example.com.cluster.local. A", "api.example.com.cluster.local. AAAA",
              "api.example.com. A", "api.example.com. AAAA"]


def test_a_pod_of_the_index_gets_the_autopath_short_cut_and_the_plain_figure(agent: RunningAgent) -> None:
    code, r = post(agent, {"name": "api.example.com", "podRef": "default/client"})
    assert code == 200
    assert r["pod"] == {"ref": "default/client", "source": "index", "ip": "127.0.0.1", "node": NODE,
                        "dns_policy": "ClusterFirst", "host_network": False}
    assert r["resolv_conf"].splitlines()[1:] == ["search default.svc.cluster.local svc.cluster.local cluster.local",
                                                 "options ndots:5"]
    assert asked(r) == PLAIN_WALK[:2] and r["total"] == 2
    assert [q["autopath"]["result"] for q in r["queries"]] == ["searched", "searched"]
    assert r["queries"][0]["answer"][-1]["data"] == "192.0.2.80"
    assert r["without_autopath"]["total"] == 8 and r["autopath"]["applies"] is True
    assert any("with 2 queries on the wire instead of 8" in a for a in r["advice"])


def test_explaining_does_not_count_as_autopath_traffic(agent: RunningAgent) -> None:
    before = agent.call(lambda: dict(agent.agent.autopath.walks))  # type: ignore[union-attr]
    post(agent, {"name": "api.example.com", "podRef": "default/client"})
    assert agent.call(lambda: dict(agent.agent.autopath.walks)) == before  # type: ignore[union-attr]


EXPLAINED = [
    ("a manifest is explained as if it ran here", {"name": "api.example.com", "pod": m.pod(
        "new", "other", ip="10.9.9.9", node_name="node-z")}, 2, "as if it ran on this node"),
    ("a host-network Pod gets plain answers", {"name": "web", "podRef": "other/hostnet"}, 0, "host-network"),
    ("one type, as gethostbyname", {"name": "db.other", "podRef": "default/client", "types": ["A"]}, 1, ""),
    ("an absolute name is asked as is", {"name": "api.example.com.", "podRef": "default/client"}, 2, ""),
]


@pytest.mark.parametrize(("body", "total", "reason"), [e[1:] for e in EXPLAINED], ids=[e[0] for e in EXPLAINED])
def test_pods_are_explained_from_the_index_or_a_manifest(agent: RunningAgent, body: dict[str, Any], total: int,
                                                         reason: str) -> None:
    code, r = post(agent, body)
    assert code == 200
    if total:
        assert r["total"] == total
    assert reason in r["autopath"]["reason"]


def test_a_host_network_pod_walks_the_hosts_search_list_by_itself(agent: RunningAgent) -> None:
    # ClusterFirst on the host network is Default: the host resolv.conf, no search domain, ndots 1
    code, r = post(agent, {"name": "web", "podRef": "other/hostnet"})
    assert code == 200 and r["search"] == [] and r["ndots"] == 1
    assert asked(r) == ["web. A", "web. AAAA"]


ERRORS = [
    ("unknown pod", {"name": "web", "podRef": "default/ghost"}, 404, "PodNotFound"),
    ("not namespace/name", {"name": "web", "podRef": "ghost"}, 400, "not namespace/name"),
    ("no pod at all", {"name": "web"}, 400, "exactly one of"),
    ("both pod and podRef", {"name": "web", "podRef": "default/client", "pod": CLIENT}, 400, "exactly one of"),
    ("not a Pod", {"name": "web", "pod": m.service("web")}, 400, "not a Pod"),
    ("a Pod the API server rejects", {"name": "web", "pod": m.pod("p", ip="10.0.0.1", dns_policy="Sometimes")},
     422, "spec.dnsPolicy"),
    ("a bad name", {"name": "a..b", "podRef": "default/client"}, 400, "empty label"),
    ("a bad type", {"name": "web", "podRef": "default/client", "types": ["BOGUS"]}, 400, "unknown record type"),
    ("an unknown key", {"name": "web", "podRef": "default/client", "client": "x"}, 400, "unknown key 'client'"),
    ("not JSON", b"{nope", 400, "not JSON"),
]


@pytest.mark.parametrize(("body", "status", "text"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_bad_requests_get_clear_errors(agent: RunningAgent, body: Any, status: int, text: str) -> None:
    code, r = post(agent, body)
    assert code == status
    assert text in (r if isinstance(r, str) else json.dumps(r))


def test_no_debug_turns_the_route_off(tmp_path: Path, upstream: UpstreamDouble) -> None:
    with running_agent(agent_config(tmp_path, upstream, **{"no-debug": True})) as agent:
        code, _ = post(agent, {"name": "web", "podRef": "default/client"})
        assert code == 404


# -- the command --------------------------------------------------------------------------------


def explain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(nodedns_cmd("explain", *args), env=subprocess_env(), capture_output=True, text=True,
                          timeout=60)


def test_the_command_prints_the_walk_the_total_and_the_advice(agent: RunningAgent) -> None:
    r = explain("api.example.com", "--pod-ref", "default/client", "--debug", agent.debug_url)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "pod default/client (from the agent's index; IP 127.0.0.1, node node-a), dnsPolicy ClusterFirst" in out
    assert "    search default.svc.cluster.local svc.cluster.local cluster.local" in out
    assert "api.example.com has 2 dots, fewer than ndots 5" in out
    assert "autopath, answered for api.example.com.: CNAME api.example.com., A 192.0.2.80" in out
    assert "total:    2 queries (8 without autopath)" in out
    assert 'dnsConfig: {options: [{name: ndots, value: "2"}]}' in out


def test_the_command_sends_a_manifest_from_a_file(agent: RunningAgent, tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: fresh, namespace: other}\n"
                   "spec:\n  containers: [{name: c, image: busybox}]\n  dnsConfig:\n"
                   "    options: [{name: ndots, value: '2'}]\n")
    r = explain("api.example.com", "--pod", str(pod), "--type", "A", "--debug", agent.debug_url, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["pod"]["source"] == "request" and data["ndots"] == 2
    assert asked(data) == ["api.example.com. A"] and data["total"] == 1  # ndots 2: the name as is first


def test_a_name_with_as_many_dots_as_ndots_is_said_to_go_as_is_first_for_each_type(agent: RunningAgent,
                                                                                    tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: fresh, namespace: other}\n"
                   "spec:\n  containers: [{name: c, image: busybox}]\n  dnsConfig:\n"
                   "    options: [{name: ndots, value: '2'}]\n")
    r = explain("api.example.com", "--pod", str(pod), "--type", "A,AAAA", "--debug", agent.debug_url)
    assert r.returncode == 0, r.stderr
    assert "api.example.com has 2 dots, at least ndots 2: the name as is first, then the search domains" in r.stdout
    assert "queries its resolver sends, in order (A and AAAA per name):" in r.stdout


def test_without_autopath_the_command_shows_every_query(tmp_path: Path, upstream: UpstreamDouble) -> None:
    with running_agent(agent_config(tmp_path, upstream)) as agent:
        r = explain("api.example.com", "--pod-ref", "default/client", "--debug", agent.debug_url)
        assert r.returncode == 0, r.stderr
        assert "total:    8 queries\n" in r.stdout
        assert "autopath: off (this agent runs without --autopath)" in r.stdout
        assert r.stdout.count(" NXDOMAIN ") == 6


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["web", "--pod-ref", "default/ghost"], 3, "pod default/ghost is not in this agent's index"),
        (["web", "--pod", "/nonexistent/pod.yaml"], 2, "cannot read"),
        (["web", "--pod-ref", "default/client", "--type", "BOGUS"], 2, "unknown record type"),
        (["a..b", "--pod-ref", "default/client"], 2, "empty label"),
    ],
    ids=["unknown-pod", "unreadable-file", "bad-type", "bad-name"],
)
def test_the_command_exit_codes(agent: RunningAgent, args: list[str], code: int, message: str) -> None:
    r = explain(*args, "--debug", agent.debug_url)
    assert (r.returncode, r.stdout) == (code, "")
    assert message in r.stderr


def test_an_invalid_pod_file_lists_the_api_servers_errors(agent: RunningAgent, tmp_path: Path) -> None:
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps(m.pod("p", ip="10.0.0.1", dns_policy="None")))  # None needs dnsConfig nameservers
    r = explain("web", "--pod", str(pod), "--debug", agent.debug_url)
    assert r.returncode == 2
    assert "the API server would reject this Pod:" in r.stderr and "spec.dnsConfig" in r.stderr


def test_an_unreachable_agent_is_exit_1() -> None:
    r = explain("web", "--pod-ref", "default/client", "--debug", f"http://127.0.0.1:{free_port()}")
    assert r.returncode == 1 and "cannot reach the agent" in r.stderr


def test_a_status_endpoint_without_debug_routes_is_exit_1(tmp_path: Path, upstream: UpstreamDouble) -> None:
    with running_agent(agent_config(tmp_path, upstream, **{"no-debug": True})) as agent:
        r = explain("web", "--pod-ref", "default/client", "--debug", agent.debug_url)
        assert r.returncode == 1 and "--no-debug" in r.stderr
