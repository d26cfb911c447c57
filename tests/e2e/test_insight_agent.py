"""Where insight shows: GET /debug/top, `nodedns top`, the status page, the nodedns_namespace_* metrics and
`nodedns explain`; `--insight off` turns all of it off."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import pytest

from nodedns.app.agent import Agent
from nodedns.podconf.resolvconf import KubeletDNS
from nodedns.podconf.searchpath import expansion, renderer_search_list
from tests.support import manifests as m
from tests.support.agentproc import metric_value
from tests.support.helpers import free_port, nodedns_cmd, running_agent, subprocess_env
from tests.support.upstream_double import UpstreamDouble

NODE = "node-a"
EXTERNAL = {"api.example.com": "192.0.2.80", "cdn.example.net": "192.0.2.81"}
WASTEFUL, CAREFUL, STS = "127.0.0.2", "127.0.0.3", "127.0.0.4"


def objects() -> list[dict[str, Any]]:
    return [
        m.namespace("default"), m.namespace("orders"), m.node(NODE), m.service("web", cluster_ips=["10.96.0.10"]),
        m.pod("checkout-7d9f8-abcde", "orders", ip=WASTEFUL, node_name=NODE, uid="u1",
              owner=("ReplicaSet", "checkout-7d9f8")),
        m.pod("batch", "default", ip=CAREFUL, node_name=NODE, uid="u2",
              dns_config={"options": [{"name": "ndots", "value": "1"}]}),
        m.pod("db-0", "orders", ip=STS, node_name=NODE, uid="u3", owner=("StatefulSet", "db")),
    ]


def getaddrinfo(agent: Any, source: str, name: str, searches: tuple[str, ...], ndots: int) -> None:
    """What glibc sends for `name` (A, then AAAA, per name of the expansion, until one is found)."""
    for candidate in expansion(name, searches, ndots):
        found = False
        for rdtype in ("A", "AAAA"):
            q = dns.message.make_query(candidate + ".", rdtype)
            r = dns.query.udp(q, agent.host, port=agent.port, source=source, timeout=3)
            found = found or r.rcode() == 0
        if found:
            return


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("insight")
    path = m.write(tmp / "cluster.yaml", objects())
    with UpstreamDouble({name: {"A": [ip]} for name, ip in EXTERNAL.items()}) as up, \
            running_agent({"manifests": str(path), "node-name": NODE, "upstream": up.address,
                           "debug-listen": "127.0.0.1:0", "status-listen": "127.0.0.1:0", "host-resolv-conf": ""}) \
            as running:
        search = renderer_search_list(KubeletDNS(cluster_dns=("127.0.0.1",), cluster_domain="cluster.local"), None)
        for source, pod in ((WASTEFUL, objects()[4]), (CAREFUL, objects()[5])):
            sl = search(running.call(lambda p=pod: running.agent.index.pods[(p["metadata"]["namespace"],
                                                                              p["metadata"]["name"])]))
            for _ in range(4):
                for name in EXTERNAL:
                    getaddrinfo(running, source, name, sl.searches, sl.ndots)
        for _ in range(3):
            getaddrinfo(running, STS, "web.default", ("orders.svc.cluster.local", "svc.cluster.local",
                                                      "cluster.local"), 5)
        # one process: /debug/top hands what the listeners counted to the insight at once (else once a second)
        assert get(running.debug_url + "/debug/top")[0] == 200
        yield running


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - our own loopback agent
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read().decode()


def top_cmd(agent: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(nodedns_cmd("top", "--debug", agent.debug_url, *args), env=subprocess_env(),
                          capture_output=True, text=True, timeout=60)


def test_debug_top_has_each_pod_its_figures_and_the_advice(agent: Any) -> None:
    code, body = get(agent.debug_url + "/debug/top?sort=waste")
    assert code == 200
    doc = json.loads(body)
    assert doc["insight"] == "on" and doc["sort"] == "waste"
    pods = {p["pod"]: p for p in doc["pods"]}
    wasteful, careful = pods["orders/checkout-7d9f8-abcde"], pods["default/batch"]
    assert doc["pods"][0]["pod"] == "orders/checkout-7d9f8-abcde"  # the most waste first
    assert (wasteful["queries"], wasteful["search_misses"]) == (4 * 2 * 8, 4 * 2 * 6)  # 8 queries, 6 wasted
    assert (careful["queries"], careful["search_misses"]) == (4 * 2 * 2, 0)
    assert wasteful["owner"] == {"kind": "Deployment", "name": "checkout"}
    assert wasteful["upstream"]["queries"] >= 2 and wasteful["forwarded"] == 4 * 2 * 2
    assert wasteful["resolv_conf"]["ndots"] == 5 and careful["resolv_conf"]["ndots"] == 1
    assert {w["name"] for w in wasteful["wasted_names"]} == set(EXTERNAL)
    assert any(a.startswith("orders/checkout-7d9f8-abcde: 75% of its queries are search-list misses for external "
                            "names") for a in doc["advice"]), doc["advice"]
    assert not any(a.startswith("default/batch") for a in doc["advice"])


@pytest.mark.parametrize(
    ("query", "reason"),
    [("sort=loudest", "sort must be one of queries, nxdomain, waste"), ("limit=0", "limit must be a whole number"),
     ("namespace=Not_A_Namespace", "is not a namespace name"), ("colour=red", "unknown parameter 'colour'")],
    ids=["bad-sort", "bad-limit", "bad-namespace", "unknown-parameter"],
)
def test_debug_top_says_what_is_wrong_with_a_request(agent: Any, query: str, reason: str) -> None:
    code, body = get(f"{agent.debug_url}/debug/top?{query}")
    assert code == 400 and reason in body


def test_debug_top_is_no_route_of_the_status_listener(agent: Any) -> None:
    code, body = get(agent.status_url + "/debug/top")
    assert code == 404 and "debug listener" in body


def test_nodedns_top_prints_a_table_like_kubectl_top_and_the_advice(agent: Any) -> None:
    r = top_cmd(agent, "--sort", "waste")
    assert r.returncode == 0, r.stderr
    agent_line, *lines = r.stdout.splitlines()
    assert agent_line.startswith("agent:    node ") and f"pid {os.getpid()}," in agent_line  # in this process
    assert lines[0].split() == ["NAMESPACE", "POD", "OWNER", "QPS", "QUERIES", "NXDOMAIN", "SEARCH-MISSES", "WASTE",
                                "CLUSTER", "FORWARDED", "CACHED", "UPSTREAM", "DENIED", "TOP", "NAME"]
    rows = {line.split()[1]: line.split() for line in lines[1:] if line and not line.startswith(("advice", "  "))}
    assert rows["checkout-7d9f8-abcde"][:3] == ["orders", "checkout-7d9f8-abcde", "Deployment/checkout"]
    assert rows["checkout-7d9f8-abcde"][4:8] == ["64", "48", "48", "75%"]
    assert rows["batch"][6:8] == ["0", "0%"]
    assert lines[1].split()[1] == "checkout-7d9f8-abcde"  # the most waste first
    table_rows = lines[1:lines.index("")] if "" in lines else lines[1:]
    for column in ("POD", "OWNER", "QUERIES", "WASTE", "TOP"):  # every column starts where its heading does
        at = lines[0].index(column)
        assert all(row[at - 3:at] == "   " and row[at] != " " for row in table_rows), (column, table_rows)
    assert "advice:" in lines
    assert any(line.startswith("  - orders/checkout-7d9f8-abcde: 75% of its queries are search-list misses")
               for line in lines)


def test_nodedns_top_keeps_to_a_namespace(agent: Any) -> None:
    r = top_cmd(agent, "--namespace", "default")
    assert r.returncode == 0, r.stderr
    pods = [line.split()[1] for line in r.stdout.splitlines()[2:] if line and not line.startswith(("advice", "  "))]
    assert pods == ["batch"]


def test_nodedns_top_json_is_the_agents_document(agent: Any) -> None:
    r = top_cmd(agent, "--json", "--sort", "nxdomain")
    assert r.returncode == 0 and json.loads(r.stdout)["sort"] == "nxdomain"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [(("--namespace", "Bad_NS"), 2, "the agent rejected the question"),
     (("--limit", "0"), 2, "--limit must be at least 1")],
    ids=["bad-namespace", "bad-limit"],
)
def test_nodedns_top_rejects_bad_input(agent: Any, args: tuple[str, ...], code: int, message: str) -> None:
    r = top_cmd(agent, *args)
    assert r.returncode == code and message in r.stderr


def test_nodedns_top_says_when_the_agent_cannot_be_reached() -> None:
    r = subprocess.run(nodedns_cmd("top", "--debug", "http://127.0.0.1:1"), env=subprocess_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "cannot reach the agent's debug listener" in r.stderr


def test_the_namespace_metrics_count_by_rcode_and_search_misses(agent: Any) -> None:
    _, text = get(agent.status_url + "/metrics")
    assert metric_value(text, "nodedns_namespace_search_misses_total", namespace="orders") == 48 + 6
    assert metric_value(text, "nodedns_namespace_search_misses_total", namespace="default") == 0
    assert metric_value(text, "nodedns_namespace_queries_total", namespace="default", rcode="NOERROR") == 16
    assert metric_value(text, "nodedns_namespace_queries_total", namespace="orders", rcode="NXDOMAIN") == 48 + 6
    namespaces = {line.split('namespace="')[1].split('"')[0] for line in text.splitlines()
                  if line.startswith("nodedns_namespace_queries_total{")}
    assert namespaces <= {"default", "orders", "(host-network)", "(unknown)"}  # never a name, never more


def test_the_status_page_has_an_insight_section(agent: Any) -> None:
    code, page = get(agent.debug_url + "/")
    assert code == 200
    start = page.index("<section id=insight>")
    section = page[start:page.index("</section>", start)]
    assert "Pods asking (insight)" in section and "orders/checkout-7d9f8-abcde" in section
    assert "search-list misses for external names" in section
    assert "debug/top" in section


def test_explain_shows_what_the_pod_was_seen_to_send(agent: Any) -> None:
    r = subprocess.run(nodedns_cmd("explain", "api.example.com", "--pod-ref", "orders/checkout-7d9f8-abcde",
                                   "--debug", agent.debug_url), env=subprocess_env(), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    seen = r.stdout[r.stdout.index("seen by this agent:"):]
    assert seen.startswith("seen by this agent: ") and "search-list misses (75%)" in seen
    assert "nodedns top --namespace orders" in seen
    assert "  - orders/checkout-7d9f8-abcde: 75% of its queries are search-list misses" in seen


@pytest.mark.parametrize(
    ("config", "expect"),
    [({"insight": "off"}, "off"), ({"no-debug": True}, "no route")],
    ids=["insight-off", "no-debug"],
)
def test_insight_off_and_no_debug(tmp_path: Path, config: dict[str, Any], expect: str) -> None:
    path = m.write(tmp_path / "cluster.yaml", objects())
    with running_agent({"manifests": str(path), "node-name": NODE, "debug-listen": "127.0.0.1:0",
                        "status-listen": "127.0.0.1:0", **config}) as running:
        dns.query.udp(dns.message.make_query("web.default.svc.cluster.local.", "A"), running.host, port=running.port,
                      source=WASTEFUL, timeout=3)
        r = top_cmd(running)
        code, body = get(running.debug_url + "/debug/top")
        _, metrics = get(running.status_url + "/metrics")
        _, page = get(running.debug_url + "/")
        _, status = get(running.debug_url + "/status")
    assert r.returncode == 1
    if expect == "off":
        assert "insight is off on this agent" in r.stderr
        assert code == 200 and json.loads(body)["insight"] == "off"
        assert "nodedns_namespace_queries_total" not in metrics
        assert "--insight off" in page
        assert "insight" not in json.loads(status)
        assert running.agent.tally is None and running.agent.server.tally is None
    else:
        assert "has no /debug/top" in r.stderr and code == 404
        assert "nodedns_namespace_queries_total" in metrics  # counted still: only the route is off


@pytest.mark.parametrize("workers", [1, 2], ids=["one-process", "workers-2"])
def test_a_new_pod_on_the_address_of_a_gone_one_gets_figures_of_its_own(tmp_path: Path, workers: int) -> None:
    """With --workers the workers count and the supervisor knows the Pods: the address map it pushes cuts
    what the workers counted, so the old Pod's queries never land on the new one, nor the new one's on
    the old."""
    from nodedns.workers import modes

    path = m.write(tmp_path / "cluster.yaml", objects())
    port = free_port()
    factory: Any = (lambda c: modes.supervisor(c, count=workers)) if workers > 1 else Agent
    with running_agent({"manifests": str(path), "node-name": NODE, "debug-listen": "127.0.0.1:0",
                        "listen": f"127.0.0.1:{port}"}, agent_factory=factory) as running:
        running.run(running.agent.wait_serving(), timeout=30)  # every worker bound and synced

        def ask_web() -> None:
            dns.query.udp(dns.message.make_query("web.default.svc.cluster.local.", "A"), "127.0.0.1", port=port,
                          source=STS, timeout=3)

        def queries() -> dict[str, int]:
            return {p["pod"]: p["queries"] for p in json.loads(get(running.debug_url + "/debug/top")[1])["pods"]}

        def wait(done: Callable[[dict[str, int]], bool]) -> dict[str, int]:
            deadline = time.monotonic() + 15
            while not done(got := queries()):
                assert time.monotonic() < deadline, got
                time.sleep(0.1)
            return got

        for _ in range(5):
            ask_web()
        wait(lambda q: q.get("orders/db-0") == 5)
        index = running.agent.index
        running.call(lambda: index.apply("Pod", "DELETED", objects()[6]))
        running.call(lambda: index.apply("Pod", "ADDED", m.pod("web-2", "default", ip=STS, node_name=NODE,
                                                                  uid="u-new")))
        sent = 5
        deadline = time.monotonic() + 15
        while not queries().get("default/web-2"):  # until the new map reached whoever answers
            assert time.monotonic() < deadline
            ask_web()
            sent += 1
        switched = wait(lambda q: q.get("orders/db-0", 0) + q.get("default/web-2", 0) == sent)
        for _ in range(3):
            ask_web()
        after = wait(lambda q: q.get("default/web-2") == switched["default/web-2"] + 3)
        old = {p["pod"]: p for p in json.loads(get(running.debug_url + "/debug/top")[1])["pods"]}["orders/db-0"]
    assert after["orders/db-0"] == switched["orders/db-0"] >= 5  # nothing more for the gone Pod
    assert old["state"] == "gone"


@pytest.mark.parametrize("terminating_first", [True, False], ids=["terminating-pod-first", "running-pod-first"])
def test_a_running_and_a_terminating_pod_sharing_an_address_the_running_one_gets_its_queries(
        tmp_path: Path, terminating_first: bool) -> None:
    """A Pod being deleted keeps its address until it is gone, and its replacement may already have it
    (a StatefulSet's Pod, a reused address): the queries from the address are the running Pod's, whichever
    of the two the index holds first (the older or the newer)."""
    shared = "127.0.0.6"
    leaving = m.pod("web-0", "orders", ip=shared, node_name=NODE, uid="old", owner=("StatefulSet", "web"))
    leaving["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z"
    staying = m.pod("web-1", "orders", ip=shared, node_name=NODE, uid="new", owner=("StatefulSet", "web"))
    pods = [leaving, staying] if terminating_first else [staying, leaving]
    path = m.write(tmp_path / "cluster.yaml", [m.namespace("default"), m.namespace("orders"), m.node(NODE),
                                               m.service("web", cluster_ips=["10.96.0.10"]), *pods])
    with running_agent({"manifests": str(path), "node-name": NODE, "debug-listen": "127.0.0.1:0",
                        "host-resolv-conf": ""}) as agent:
        for _ in range(5):
            q = dns.message.make_query("web.default.svc.cluster.local.", "A")
            assert dns.query.udp(q, agent.host, port=agent.port, source=shared, timeout=3).rcode() == 0
        code, body = get(agent.debug_url + "/debug/top")
    assert code == 200
    pods_seen = {p["pod"]: p for p in json.loads(body)["pods"]}
    assert pods_seen["orders/web-1"]["queries"] == 5
    assert pods_seen.get("orders/web-0", {"queries": 0})["queries"] == 0
