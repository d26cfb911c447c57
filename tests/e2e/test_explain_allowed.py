"""The explainer in the shipped configuration (tests/support/shipped.py: the ConfigMap's allow list on, its workers):
it asks as a client that is allowed and is never counted as a refusal."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.apiserver import FakeApiServer
from tests.support.helpers import nodedns_cmd, subprocess_env
from tests.support.shipped import CLIENT_IP, HOST_POD_IP, NODE, POD_CIDR, ShippedAgent, cluster, configmap_config
from tests.support.upstream_double import UpstreamDouble

pytestmark = [pytest.mark.usefixtures("hit_path")]  # on the C and on the Python hit path
REFUSED = "nodedns_refused_by_acl_total"
WORKERS = [("the ConfigMap's workers", {}), ("one process", {"workers": 1})]


@pytest.fixture(scope="module", params=[w[1] for w in WORKERS], ids=[w[0] for w in WORKERS])
def agent(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
          hit_path: str) -> Iterator[ShippedAgent]:
    with FakeApiServer() as api, UpstreamDouble({"api.example.com": {"A": ["192.0.2.80"]}}) as up:
        cluster(api)
        with ShippedAgent(tmp_path_factory.mktemp("shipped"), api, up, **request.param) as a:
            a.wait_ready()
            yield a


def lookup(agent: ShippedAgent, query: str) -> dict[str, Any]:
    code, body = agent.get("/debug/lookup?" + query)
    assert code == 200, body
    result: dict[str, Any] = json.loads(body)
    return result


def test_the_allow_list_is_on_as_shipped(agent: ShippedAgent) -> None:
    assert configmap_config().get("allow-from") is None  # the default rules: this node and its pods
    limits = json.loads(agent.get("/status")[1])["limits"]["allow_from"]
    assert limits["mode"] == "default" and POD_CIDR in limits["networks"]  # not "open": strangers are refused


LOOKUPS = [
    ("a cluster name", "name=web.default.svc.cluster.local&type=A", "cluster", ["10.96.0.10"]),
    ("a forwarded name", "name=api.example.com&type=A", "upstream", ["192.0.2.80"]),
    ("a reverse name", "name=10.0.96.10.in-addr.arpa&type=PTR", "cluster", ["web.default.svc.cluster.local."]),
]


@pytest.mark.parametrize(("query", "path", "records"), [c[1:] for c in LOOKUPS], ids=[c[0] for c in LOOKUPS])
def test_a_lookup_is_answered_as_an_allowed_client_and_not_counted(agent: ShippedAgent, query: str, path: str,
                                                                    records: list[str]) -> None:
    before = agent.metric(REFUSED)
    r = lookup(agent, query)
    assert r["rcode"] == "NOERROR", r
    assert r["path"] in (path, "cache") and [a["data"] for a in r["answer"]][-len(records):] == records
    assert "allow list" not in r["how"]
    assert agent.metric(REFUSED) == before == 0


def test_a_lookup_as_a_pod_of_this_node_walks_its_search_list(agent: ShippedAgent) -> None:
    c = lookup(agent, f"name=web&type=A&client={CLIENT_IP}")["client"]
    assert c["pod"] == "default/client" and c["allowed"] is True
    assert c["result"].startswith("answered by query 1 (web.default.svc.cluster.local.)")
    assert all(q["rcode"] != "REFUSED" for q in c["queries"])
    assert agent.metric(REFUSED) == 0


def test_explaining_a_pod_of_this_node_is_answered_and_not_counted(agent: ShippedAgent) -> None:
    body = json.dumps({"name": "db.prod", "podRef": "default/client"}).encode()
    code, text = agent.get("/debug/explain", body=body)
    assert code == 200, text
    r = json.loads(text)
    assert r["allowed"] is True and r["pod"]["node"] == NODE
    assert r["answered"] == "db.prod.svc.cluster.local."
    assert {q["rcode"] for q in r["queries"]} <= {"NOERROR", "NXDOMAIN"}
    assert agent.metric(REFUSED) == 0


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(nodedns_cmd(*argv), env=subprocess_env(), capture_output=True, text=True, timeout=60)


COMMANDS = [
    ("nodedns lookup", ["lookup", "web.default.svc.cluster.local"], "path:     cluster index"),
    ("nodedns lookup --client", ["lookup", "db.prod", "--client", CLIENT_IP], "result:   answered by query 2"),
    ("nodedns explain", ["explain", "api.example.com", "--pod-ref", "default/client"],
     "result:   answered by queries 9-10 (api.example.com.)"),
]


@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
def test_the_commands_work_against_the_shipped_agent(agent: ShippedAgent, argv: list[str], expected: str,
                                                     tmp_path: Path) -> None:
    r = run(*argv, "--debug", agent.debug_url)
    assert r.returncode == 0, r.stderr
    assert expected in r.stdout and "REFUSED" not in r.stdout and "allow list" not in r.stdout
    assert agent.metric(REFUSED) == 0


def test_a_client_the_allow_list_refuses_is_reported_as_refused_without_counting(agent: ShippedAgent) -> None:
    """A host-network Pod on an address the Node record does not list: the agent refuses its queries, and
    the explainer says so without asking (and without counting a refusal)."""
    c = lookup(agent, f"name=web&type=A&client={HOST_POD_IP}")["client"]
    assert c["pod"] == "kube-system/hostnet" and c["allowed"] is False
    assert c["result"] == (f"every query is answered REFUSED: the client {HOST_POD_IP} is not in the allow list "
                           f"(127.0.0.0/8, ::1/128, {POD_CIDR}, and the Pods of this node)")
    assert c["queries"] == []
    assert agent.metric(REFUSED) == 0
