"""Optional inputs degrade, never block: the API server answering 403 or 404 for a watched resource.

Required (Services, EndpointSlices, Namespaces; Pods with `--pods verified`): no sync, /readyz 503
naming the resource and the verb. Optional (this node's Node and Pods): the zone is synced without
it, one log line names the missing RBAC rule, `nodedns_sync_resource_forbidden{resource}` is 1 and
/status has a condition; it is asked for again with back-off, so a fixed ClusterRole is picked up
without a restart. Against the API server double (tests/support/apiserver.py `deny` / `allow`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import dns.rcode
import pytest

from nodedns.cluster import apisync, watcher
from tests.support.apiserver import FakeApiServer, endpoint_slice, namespace, pod, service
from tests.support.helpers import RunningAgent, agent_with_timing, running_agent
from tests.support.kube_sync import eventually, syncing
from tests.support.manifests import node

FAST = watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5, connect_timeout=2, backoff_initial=0.05,
                   backoff_max=0.2, forbidden_initial=0.05, forbidden_max=0.2)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.put("Namespace", namespace("default"))
        server.put("Service", service("default", "web", ["10.96.0.50"]))
        server.put("EndpointSlice", endpoint_slice("default", "web-1", "web", ["10.244.0.5"]))
        server.put("Pod", pod("default", "client", "10.244.0.9", "node-a"))
        server.put("Node", node("node-a", zone="zone-1", pod_cidrs=["10.244.0.0/24"]))
        yield server


def resource(sync: apisync.KubeSync, name: str) -> dict[str, Any]:
    out: dict[str, Any] = sync.status()["resources"][name]
    return out


def test_each_watched_resource_is_classified() -> None:
    classes = {r.name: r.required for r in apisync.resources(pods="insecure", node_name="node-a")}
    assert classes == {"services": True, "endpointslices": True, "namespaces": True, "pods": False, "nodes": False,
                       "dnspolicies": False, "clusterdnspolicies": False}
    verified = {r.name: r.required for r in apisync.resources(pods="verified", node_name="node-a")}
    assert verified["pods"] is True  # a pod A record is checked against the Pods: they are the zone's data


@pytest.mark.parametrize(("name", "code", "kind"), [
    ("nodes", 403, "ResourceForbidden"),
    ("nodes", 404, "ResourceNotServed"),
    ("pods", 403, "ResourceForbidden"),
    ("pods", 404, "ResourceNotServed"),
], ids=["nodes-403", "nodes-404", "pods-403", "pods-404"])
async def test_an_optional_resource_refused_leaves_the_zone_synced_and_a_fixed_clusterrole_is_picked_up(
        api: FakeApiServer, kubeconfig: str, name: str, code: int, kind: str) -> None:
    api.deny(name, code)
    async with syncing(kubeconfig, timing=FAST, wait=False) as (index, sync):
        async with asyncio.timeout(5):
            await sync.wait_synced()
        assert index.synced and ("default", "web") in index.services
        st = resource(sync, name)
        got = (st["forbidden"], st["forbidden_code"], st["forbidden_verb"], st["synced"])
        assert got == (True, code, "list", False)
        (cond,) = sync.status()["conditions"]
        assert (cond["type"], cond["resource"], cond["required"], cond["verb"]) == (kind, name, False, "list")
        assert "unready" not in sync.status()
        await eventually(lambda: len(api.requests_for(name)) >= 3, what="asked again")  # back-off, not given up

        api.allow(name)  # the ClusterRole fixed: no restart
        await eventually(lambda: resource(sync, name)["synced"] and not resource(sync, name)["forbidden"],
                         within=5, what=f"{name} listed")
        assert sync.status()["conditions"] == []
        expected = ("node-a" in index.nodes) if name == "nodes" else (("default", "client") in index.pods)
        assert expected


@pytest.mark.parametrize(("name", "code", "reason"), [
    ("endpointslices", 403, "endpointslices: 403 Forbidden: the agent may not list endpointslices (missing RBAC "
                            "verb 'list'; the rule it needs: {apiGroups: [\"discovery.k8s.io\"], resources: "
                            "[\"endpointslices\"], verbs: [\"list\", \"watch\"]})"),
    ("endpointslices", 404, "endpointslices: 404 Not Found: the API server does not serve "
                            "/apis/discovery.k8s.io/v1/endpointslices (list failed)"),
    ("services", 403, "services: 403 Forbidden: the agent may not list services (missing RBAC verb 'list'; the "
                      "rule it needs: {apiGroups: [\"\"], resources: [\"services\"], verbs: [\"list\", \"watch\"]})"),
    ("namespaces", 403, "namespaces: 403 Forbidden: the agent may not list namespaces"),
], ids=["endpointslices-403", "endpointslices-404", "services-403", "namespaces-403"])
async def test_a_required_resource_refused_keeps_the_index_unsynced_with_a_reason_naming_it_and_the_verb(
        api: FakeApiServer, kubeconfig: str, name: str, code: int, reason: str) -> None:
    api.deny(name, code)
    async with syncing(kubeconfig, timing=FAST, wait=False) as (index, sync):
        await eventually(lambda: "unready" in sync.status(), what="the reason")
        (why,) = sync.status()["unready"]
        assert why.startswith(reason), why
        await asyncio.sleep(0.3)
        assert not index.synced and not sync.synced.is_set()
        api.allow(name)
        async with asyncio.timeout(5):
            await sync.wait_synced()
        assert "unready" not in sync.status()


async def test_pods_are_required_in_verified_mode(api: FakeApiServer, kubeconfig: str) -> None:
    api.deny("pods")
    async with syncing(kubeconfig, pods="verified", timing=FAST, wait=False) as (index, sync):
        await eventually(lambda: "unready" in sync.status(), what="the reason")
        assert sync.status()["unready"][0].startswith("pods: 403 Forbidden")
        assert not index.synced


async def test_a_refused_watch_after_a_good_list_is_reported_with_its_verb(api: FakeApiServer, kubeconfig: str) -> None:
    api.deny("nodes", 403, verbs=("watch",))
    async with syncing(kubeconfig, timing=FAST, wait=False) as (index, sync):
        async with asyncio.timeout(5):
            await sync.wait_synced()
        assert "node-a" in index.nodes  # listed: the data is there, only updates are refused
        await eventually(lambda: resource(sync, "nodes")["forbidden"], what="the refused watch")
        assert resource(sync, "nodes")["forbidden_verb"] == "watch"


async def test_a_lasting_refusal_is_one_log_line_naming_the_rule(
        api: FakeApiServer, kubeconfig: str, caplog: pytest.LogCaptureFixture) -> None:
    api.deny("nodes")
    with caplog.at_level(logging.INFO, "nodedns.kube"):
        async with syncing(kubeconfig, timing=FAST, wait=False) as (_, sync):
            await eventually(lambda: len(api.requests_for("nodes")) >= 5, what="several retries")
            assert sync.synced.is_set()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("nodes:")]
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "nodes: the API server refuses to let this agent list nodes (403 Forbidden: nodes is forbidden: User "
        "\"system:serviceaccount:kube-system:nodedns\" cannot list resource \"nodes\" in API group \"\" at the "
        "cluster scope): missing RBAC rule {apiGroups: [\"\"], resources: [\"nodes\"], verbs: [\"list\", \"watch\"]} "
        "in the agent's ClusterRole; the cluster zone is synced without it (this node's Node is unknown")
    assert caplog.records[[r.getMessage() for r in caplog.records].index(lines[0])].levelno == logging.WARNING


def test_the_retries_back_off() -> None:
    backoff = watcher.Backoff(watcher.Timing().forbidden_initial, watcher.Timing().forbidden_max, rng=lambda: 1.0)
    delays = [backoff.next() for _ in range(10)]
    assert delays[0] == 1.0 and delays[-1] == 60.0 and delays == sorted(delays)


# ----------------------------------------------------------------------------------------------
# The agent: readiness, answers, /metrics, /status


fast_agent = agent_with_timing(FAST)


def get(agent: RunningAgent, path: str) -> tuple[int, str]:
    """A route of the status listener (/readyz, /metrics) or, for /status, of the debug listener."""
    base = agent.debug_url if path == "/status" else agent.status_url
    try:
        with urllib.request.urlopen(base + path, timeout=3) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_until(pred: Callable[[], bool], within: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not pred():
        assert time.monotonic() < deadline, f"no {what} in {within}s"
        time.sleep(0.05)


@pytest.mark.parametrize("name", ["nodes", "pods"])
def test_an_agent_without_its_node_or_pods_is_ready_and_answers_nxdomain(
        api: FakeApiServer, kubeconfig: str, name: str) -> None:
    api.deny(name)
    raw = {"kubeconfig": kubeconfig, "node-name": "node-a", "status-listen": "127.0.0.1:0",
           "debug-listen": "127.0.0.1:0"}
    with running_agent(raw, agent_factory=fast_agent) as agent:
        wait_until(lambda: get(agent, "/readyz")[0] == 200, what="readiness")
        assert dns.rcode.to_text(agent.query("nope.default.svc.cluster.local").rcode()) == "NXDOMAIN"
        assert agent.query("web.default.svc.cluster.local").answer
        metrics = get(agent, "/metrics")[1]
        assert f'nodedns_sync_resource_forbidden{{resource="{name}"}} 1.0' in metrics
        assert 'nodedns_sync_resource_forbidden{resource="services"} 0.0' in metrics
        status = json.loads(get(agent, "/status")[1])
        assert [(c["type"], c["resource"]) for c in status["sync"]["conditions"]] == [("ResourceForbidden", name)]
        api.allow(name)
        wait_until(lambda: f'nodedns_sync_resource_forbidden{{resource="{name}"}} 0.0' in get(agent, "/metrics")[1],
                   what="the gauge back to 0")


def test_an_agent_refused_endpointslices_is_not_ready_and_says_why(api: FakeApiServer, kubeconfig: str) -> None:
    api.deny("endpointslices")
    raw = {"kubeconfig": kubeconfig, "node-name": "node-a", "status-listen": "127.0.0.1:0"}
    with running_agent(raw, agent_factory=fast_agent) as agent:
        wait_until(lambda: "endpointslices: 403 Forbidden" in get(agent, "/readyz")[1], what="the reason")
        code, body = get(agent, "/readyz")
        assert code == 503
        assert "sync: endpointslices: 403 Forbidden: the agent may not list endpointslices (missing RBAC verb " \
               "'list'" in body
        assert dns.rcode.to_text(agent.query("nope.default.svc.cluster.local").rcode()) == "SERVFAIL"
        api.allow("endpointslices")
        wait_until(lambda: get(agent, "/readyz")[0] == 200, what="readiness once allowed")
