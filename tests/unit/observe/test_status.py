"""The status endpoint over real HTTP: every route, readiness transitions, metrics moving with traffic."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.app.parts import IndexOwner
from nodedns.cluster.index import Index
from nodedns.observe.httpgate import HttpLimits
from nodedns.observe.status import DEBUG, STATUS, StatusServer
from tests.support.helpers import EXAMPLE, RunningAgent, agent_with_timing, query, running_agent
from tests.support.status_http import get, samples, value


def fresh_renders(config: cfgmod.Config) -> Agent:
    """An agent whose /metrics and /status are rendered for every request: these tests read counters
    right after the traffic that moves them (the shipped limits share a rendering under load: below)."""
    agent = Agent(config)
    agent.http_limits = HttpLimits(render_burst=1_000_000, rate=1000, burst=1000)
    return agent


HTTP = {"status-listen": "127.0.0.1:0", "debug-listen": "127.0.0.1:0"}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAgent]:
    host = tmp_path_factory.mktemp("host") / "resolv.conf"
    host.write_text("nameserver 192.0.2.53\nsearch corp.example\noptions timeout:2\n")
    with running_agent({"manifests": str(EXAMPLE), **HTTP, "cluster-dns": "169.254.20.10",
                        "host-resolv-conf": str(host)}, agent_factory=fresh_renders) as a:
        yield a


ROUTES = [
    (STATUS, "/healthz", "text/plain"),
    (STATUS, "/readyz", "text/plain"),
    (STATUS, "/metrics", "text/plain; version=0.0.4"),
    (DEBUG, "/", "text/html"),
    (DEBUG, "/status", "application/json"),
    (DEBUG, "/debug/lookup?name=web.default.svc.cluster.local&type=A", "application/json"),
]


def url(agent: RunningAgent, listener: str) -> str:
    return agent.status_url if listener == STATUS else agent.debug_url


@pytest.mark.parametrize(("listener", "path", "ctype"), ROUTES, ids=[f"{r[0]} {r[1]}" for r in ROUTES])
def test_every_route_answers_over_http_on_its_own_listener(agent: RunningAgent, listener: str, path: str,
                                                           ctype: str) -> None:
    code, content_type, body = get(url(agent, listener) + path)
    assert code == 200, body
    assert content_type.startswith(ctype)
    assert body
    other = DEBUG if listener == STATUS else STATUS
    code, _, body = get(url(agent, other) + path)
    assert code == 404
    if listener == DEBUG:  # the status listener says where the debug routes are
        assert "served on the debug listener (--debug-listen" in body


def test_the_resolv_conf_route_is_a_debug_route(agent: RunningAgent) -> None:
    code, _, body = get(agent.status_url + "/v1/resolv-conf", method="POST")
    assert code == 404 and "debug listener" in body


def test_healthz_and_readyz_say_ok_when_serving(agent: RunningAgent) -> None:
    assert get(agent.status_url + "/healthz")[2] == "ok\n"
    assert get(agent.status_url + "/readyz")[2] == "ready\n"


def _traffic(agent: RunningAgent) -> None:
    for _ in range(3):
        agent.query("web.default.svc.cluster.local", "A")
    for _ in range(2):
        agent.query("nope.default.svc.cluster.local", "A")
    agent.query("web.default.svc.cluster.local", "AAAA", tcp=True)
    agent.query("nope.default.svc.cluster.local", "SRV", tcp=True)
    agent.query("example.com", "A")


COUNTER_DELTAS = [
    ("udp A", "coredns_dns_requests_total", {"zone": "cluster.local.", "proto": "udp", "family": "1", "type": "A"},
     5),
    ("tcp AAAA", "coredns_dns_requests_total",
     {"zone": "cluster.local.", "proto": "tcp", "family": "1", "type": "AAAA"}, 1),
    ("tcp SRV", "coredns_dns_requests_total",
     {"zone": "cluster.local.", "proto": "tcp", "family": "1", "type": "SRV"}, 1),
    ("outside the zone", "coredns_dns_requests_total", {"zone": ".", "proto": "udp", "family": "1", "type": "A"},
     1),
    ("NOERROR", "coredns_dns_responses_total", {"zone": "cluster.local.", "rcode": "NOERROR", "plugin": "kubernetes"},
     4),
    ("NXDOMAIN", "coredns_dns_responses_total",
     {"zone": "cluster.local.", "rcode": "NXDOMAIN", "plugin": "kubernetes"}, 3),
    ("REFUSED", "coredns_dns_responses_total", {"zone": ".", "rcode": "REFUSED", "plugin": ""}, 1),
]


def test_metrics_counters_move_with_udp_and_tcp_traffic_per_rcode(agent: RunningAgent) -> None:
    server = agent.agent.server.stats[0].server
    before = samples(agent)
    _traffic(agent)
    after = samples(agent)
    for what, name, labels, delta in COUNTER_DELTAS:
        full = {"server": server, "view": "", **labels}
        assert value(after, name, **full) - value(before, name, **full) == delta, what


def test_repeated_udp_queries_are_counted_on_the_hit_path(agent: RunningAgent) -> None:
    server = agent.agent.server.stats[0].server
    agent.query("db.prod.svc.cluster.local", "A")  # builds and stores the answer
    before = samples(agent)
    for _ in range(5):
        agent.query("db.prod.svc.cluster.local", "A")
    after = samples(agent)
    name = "nodedns_hit_path_answers_total"
    assert value(after, name, server=server) - value(before, name, server=server) == 5
    hits = "coredns_cache_hits_total"
    lab = {"server": server, "type": "success", "zones": "cluster.local.,in-addr.arpa.,ip6.arpa.", "view": ""}
    assert value(after, hits, **lab) - value(before, hits, **lab) == 5


def test_slow_path_answers_are_timed(agent: RunningAgent) -> None:
    server = agent.agent.server.stats[0].server
    lab = {"server": server, "zone": "cluster.local.", "view": ""}
    before = value(samples(agent), "coredns_dns_request_duration_seconds_count", **lab)
    agent.query("api.prod.svc.cluster.local", "SRV", tcp=True)
    after = value(samples(agent), "coredns_dns_request_duration_seconds_count", **lab)
    assert after - before == 1


def test_tcp_connections_are_counted_while_open(agent: RunningAgent) -> None:
    server = agent.agent.server.stats[0].server
    with socket.create_connection((agent.host, agent.port), timeout=5):
        deadline = time.monotonic() + 5
        while value(samples(agent), "nodedns_tcp_connections_open", server=server) != 1:
            assert time.monotonic() < deadline, "open connection never counted"
            time.sleep(0.02)
    deadline = time.monotonic() + 5
    while value(samples(agent), "nodedns_tcp_connections_open", server=server) != 0:
        assert time.monotonic() < deadline, "closed connection still counted"
        time.sleep(0.02)


def test_status_json_reports_every_section(agent: RunningAgent) -> None:
    agent.query("web.default.svc.cluster.local", "A")
    code, _, body = get(agent.debug_url + "/status")
    st = json.loads(body)
    assert st["ready"] is True and st["state"] == "running"
    assert st["config"]["status-listen"] == "127.0.0.1:0"
    assert st["index"]["synced"] is True and st["index"]["counts"]["services"] == 13
    assert st["source"]["kind"] == "manifests"
    assert st["queries"]["total"] >= 1 and st["queries"]["by_rcode"]["NOERROR"] >= 1
    assert st["cluster_answers"]["entries"] >= 1
    for section in ("sync", "cache", "upstream", "node"):
        assert st[section]["present"] is False and st[section]["note"]


def test_a_provider_shows_up_in_status_and_can_hold_readiness(agent: RunningAgent) -> None:
    class Sync:
        def __init__(self) -> None:
            self.unready: list[str] = ["services not listed yet"]

        def status(self) -> Mapping[str, Any]:
            return {"resources": {"services": {"resourceVersion": "42", "synced": not self.unready}},
                    "unready": list(self.unready)}

    sync = Sync()
    agent.call(lambda: agent.agent.add_provider("sync", sync))
    try:
        code, _, body = get(agent.status_url + "/readyz")
        assert code == 503 and "sync: services not listed yet" in body
        st = json.loads(get(agent.debug_url + "/status")[2])
        assert st["sync"]["resources"]["services"]["resourceVersion"] == "42"
        assert value(samples(agent), "nodedns_sync_synced", resource="services") == 0
        sync.unready.clear()
        assert get(agent.status_url + "/readyz")[0] == 200
    finally:
        agent.call(lambda: agent.agent.observer.providers.pop("sync"))


def test_a_broken_provider_costs_its_section_not_the_endpoint(agent: RunningAgent) -> None:
    class Broken:
        def status(self) -> Mapping[str, Any]:
            raise RuntimeError("boom")

    agent.call(lambda: agent.agent.add_provider("node", Broken()))
    try:
        code, _, body = get(agent.debug_url + "/status")
        assert code == 200
        assert json.loads(body)["node"]["error"] == "RuntimeError: boom"
        code, _, body = get(agent.status_url + "/readyz")
        assert code == 503 and "node: status unavailable" in body
    finally:
        agent.call(lambda: agent.agent.observer.providers.pop("node"))


BAD_LOOKUPS = [
    ("missing name", {"type": "A"}, "name is required"),
    ("unknown type", {"name": "web.default.svc.cluster.local", "type": "BOGUS"}, "unknown record type"),
    ("client not an IP", {"name": "web", "client": "10.0.0"}, "is not an IP address"),
    ("unknown parameter", {"name": "web", "clinet": "10.0.0.1"}, "unknown parameter 'clinet'"),
    ("empty label", {"name": "web..default"}, "empty label"),
    ("label too long", {"name": "a" * 64 + ".default"}, "longer than 63"),
    ("name too long", {"name": "a." * 200}, "longer than 255"),
]


@pytest.mark.parametrize(("params", "reason"), [b[1:] for b in BAD_LOOKUPS], ids=[b[0] for b in BAD_LOOKUPS])
def test_bad_lookup_parameters_are_a_400_with_the_reason(agent: RunningAgent, params: dict[str, str],
                                                         reason: str) -> None:
    code, ctype, body = get(agent.debug_url + "/debug/lookup?" + urllib.parse.urlencode(params))
    assert code == 400
    assert reason in body
    assert "Traceback" not in body


UNKNOWN = [(STATUS, "/nope", "GET", 404), (DEBUG, "/nope", "GET", 404), (STATUS, "/metrics", "POST", 405),
           (DEBUG, "/status", "POST", 405)]


@pytest.mark.parametrize(("listener", "path", "method", "code"), UNKNOWN,
                         ids=["unknown path, status", "unknown path, debug", "wrong method, status",
                              "wrong method, debug"])
def test_unknown_routes_and_methods(agent: RunningAgent, listener: str, path: str, method: str, code: int) -> None:
    assert get(url(agent, listener) + path, method=method)[0] == code


def test_no_debug_turns_the_explainer_off_and_keeps_the_rest_of_the_debug_listener() -> None:
    with running_agent({"manifests": str(EXAMPLE), **HTTP, "no-debug": True}) as a:
        assert get(a.debug_url + "/debug/lookup?name=web.default.svc.cluster.local")[0] == 404
        assert get(a.debug_url + "/status")[0] == 200
        assert get(a.status_url + "/metrics")[0] == 200


def test_html_page_shows_the_key_figures(agent: RunningAgent) -> None:
    _traffic(agent)
    st = json.loads(get(agent.debug_url + "/status")[2])
    code, ctype, page = get(agent.debug_url + "/")
    assert code == 200 and ctype.startswith("text/html")
    total = st["queries"]["total"]
    assert f"<p class=big>{total:,}</p>" in page  # answers since the start
    assert '<b class="badge ok">ready</b> answering DNS' in page
    assert "<td>NXDOMAIN</td>" not in page  # rcodes carry what they mean
    assert ">NXDOMAIN</span></td>" in page and ">REFUSED</span></td>" in page
    assert "<b class=ok>synced</b> from the file" in page
    for chart in ("qps", "latency", "hits", "rcodes", "sources", "upstreams"):
        assert f'<figure class=chart id="chart-{chart}">' in page
    assert "setInterval(refresh" in page and "fetch(location.pathname" in page
    assert "http://" not in page and "https://" not in page  # self-contained: no external assets
    assert 'href="metrics"' not in page  # /metrics is not on this (the debug) listener
    assert "wired" not in page


def test_the_history_route_serves_the_charts_points(agent: RunningAgent) -> None:
    code, ctype, body = get(agent.debug_url + "/debug/history")
    assert code == 200 and ctype.startswith("application/json")
    doc = json.loads(body)
    assert doc["interval_seconds"] == 5.0 and doc["window_seconds"] == 900.0
    assert isinstance(doc["points"], list) and set(doc["window"]) >= {"qps", "latency_ms", "hit_ratio", "rcodes"}


def test_no_debug_turns_the_history_route_off_and_keeps_the_page() -> None:
    with running_agent({"manifests": str(EXAMPLE), **HTTP, "no-debug": True}) as a:
        assert get(a.debug_url + "/debug/history")[0] == 404
        code, _, page = get(a.debug_url + "/")
        assert code == 200 and 'id="chart-qps"' in page


# ----------------------------------------------------------------------------------------------
# The explainer over HTTP


def lookup(agent: RunningAgent, **params: str) -> dict[str, Any]:
    code, _, body = get(agent.debug_url + "/debug/lookup?" + urllib.parse.urlencode(params))
    assert code == 200, body
    result: dict[str, Any] = json.loads(body)
    return result


def test_lookup_explains_a_cluster_answer_with_records_and_ttl(agent: RunningAgent) -> None:
    r = lookup(agent, name="web.default.svc.cluster.local", type="AAAA")
    assert r["path"] == "cluster" and r["rcode"] == "NOERROR"
    assert [a["data"] for a in r["answer"]] == ["fd00:10:96::1234"]
    assert r["ttl_left"] == 5
    again = lookup(agent, name="web.default.svc.cluster.local", type="AAAA")
    assert again["stored"] is True and "hit path" in again["how"]


def test_lookup_says_why_a_name_outside_the_zone_is_refused(agent: RunningAgent) -> None:
    r = lookup(agent, name="example.com")
    assert r["path"] == "refused" and r["rcode"] == "REFUSED"
    assert "no upstream is configured" in r["how"]


EXPANSIONS = [
    ("ClusterFirst pod, short name", "10.244.0.21", "web",
     ["web.default.svc.cluster.local."], "answered by query 1"),
    ("ClusterFirst pod, other namespace", "10.244.0.21", "db.prod",
     ["db.prod.default.svc.cluster.local.", "db.prod.svc.cluster.local."], "answered by query 2"),
    ("dnsConfig ndots 2 and an extra search domain", "10.244.0.80", "nothing",
     ["nothing.prod.svc.cluster.local.", "nothing.svc.cluster.local.", "nothing.cluster.local.",
      "nothing.corp.example.", "nothing.corp.example.com."], "stopped at query 4: REFUSED"),
    ("enough dots: as is first", "10.244.0.80", "web.default.svc",
     ["web.default.svc.", "web.default.svc.prod.svc.cluster.local."], "stopped at query 1: REFUSED"),
    ("hostNetwork ClusterFirstWithHostNet pod", "192.168.10.11", "prometheus",
     ["prometheus.monitoring.svc.cluster.local."], "answered by query 1"),
]


@pytest.mark.parametrize(("client", "name", "tried", "result"), [e[1:] for e in EXPANSIONS],
                         ids=[e[0] for e in EXPANSIONS])
def test_lookup_walks_the_clients_search_list(agent: RunningAgent, client: str, name: str, tried: list[str],
                                              result: str) -> None:
    c = lookup(agent, name=name, type="A", client=client)["client"]
    assert [q["question"]["name"] for q in c["queries"]] == tried[: len(c["queries"])]
    assert c["result"].startswith(result)


def test_lookup_shows_the_clients_resolv_conf_from_the_renderer(agent: RunningAgent) -> None:
    c = lookup(agent, name="web", client="10.244.0.80")["client"]
    assert c["pod"] == "prod/batch-28460115-x7x7x"
    assert c["nameservers"] == ["169.254.20.10"]
    assert c["search"] == ["prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example",
                           "corp.example.com"]
    assert c["ndots"] == 2 and "pod_dns_for" in c["search_source"]


def test_resolv_conf_route_renders_a_pod(agent: RunningAgent) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}, "spec": {}}
    req = urllib.request.Request(agent.debug_url + "/v1/resolv-conf", data=json.dumps(pod).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
        assert resp.read().decode() == (
            "nameserver 169.254.20.10\nsearch shop.svc.cluster.local svc.cluster.local cluster.local corp.example\n"
            "options ndots:5\n")
    bad = urllib.request.Request(agent.debug_url + "/v1/resolv-conf", data=b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(bad, timeout=10)
    with err.value:
        assert err.value.code == 400


def test_lookup_for_an_unknown_client_says_so(agent: RunningAgent) -> None:
    c = lookup(agent, name="web", client="192.0.2.99")["client"]
    assert c["pod"] is None and "no running Pod" in c["note"]


# ----------------------------------------------------------------------------------------------
# Readiness transitions and the error middleware, in the test's own event loop


class GatedSource(IndexOwner):
    """The agent's own cluster source, loading only when the test opens the gate."""

    def __init__(self, *, config: cfgmod.Config, index: Index, add_provider: Any) -> None:
        super().__init__(config=config, index=index, add_provider=add_provider)
        self.gate = asyncio.Event()

    async def load(self) -> None:
        await self.gate.wait()
        await super().load()


class GatedAgent(Agent):
    """An agent whose cluster source loads only when the test opens the gate."""

    def __init__(self, config: cfgmod.Config) -> None:
        super().__init__(config)
        self.source = source = GatedSource(config=config, index=self.index, add_provider=self.add_provider)
        self.gate = source.gate


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as r:
        return r.status, await r.text()


async def test_readiness_moves_from_starting_to_ready_to_shutting_down() -> None:
    config = cfgmod.build({"manifests": str(EXAMPLE), "listen": "127.0.0.1:0", **HTTP, "lameduck": "10s"},
                          environ={})
    agent = GatedAgent(config)
    start = asyncio.create_task(agent.start())
    stop: asyncio.Task[None] | None = None
    try:
        for _ in range(500):
            if agent.status_server is not None:
                break
            await asyncio.sleep(0.01)
        assert agent.status_server is not None
        url = agent.status_server.url
        async with aiohttp.ClientSession() as s:
            code, body = await _get(s, url + "/readyz")
            assert code == 503
            assert "the cluster index has not synced yet" in body and "starting" in body
            assert (await _get(s, url + "/healthz"))[0] == 200  # alive while syncing

            agent.gate.set()
            await asyncio.wait_for(start, 10)
            assert await _get(s, url + "/readyz") == (200, "ready\n")

            agent.request_stop()  # SIGTERM: unready at once
            code, body = await _get(s, url + "/readyz")
            assert code == 503 and "shutting down" in body
            stop = asyncio.create_task(agent.shutdown())  # the lameduck: unready, still answering
            await asyncio.sleep(0.1)
            assert agent.state == "stopping"
            code, body = await _get(s, url + "/readyz")
            assert code == 503 and "shutting down" in body
            assert (await _get(s, url + "/healthz"))[0] == 200
            host, port = agent.server.bound[0]
            answer = await asyncio.to_thread(query, host, port, "web.default.svc.cluster.local", "A")
            assert answer.answer
            st = json.loads((await _get(s, agent.status_server.debug_url + "/status"))[1])
            assert st["state"] == "stopping" and st["ready"] is False
        agent.force_stop()  # a second signal ends the lameduck
        await asyncio.wait_for(stop, 10)
        assert agent.state == "stopped"
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.ClientError):
                await _get(s, url + "/healthz")
    finally:
        agent.gate.set()
        if not start.done():
            start.cancel()
        if agent.state != "stopped":
            agent.force_stop()
            await agent.shutdown()


async def test_healthz_fails_when_a_listener_dies() -> None:
    config = cfgmod.build({"manifests": str(EXAMPLE), "listen": "127.0.0.1:0", "status-listen": "127.0.0.1:0",
                           "debug-listen": "none", "lameduck": "0s"}, environ={})
    agent = Agent(config)
    await agent.start()
    try:
        assert agent.status_server is not None
        url = agent.status_server.url
        agent.server.udp[0][0].close()
        await asyncio.sleep(0.05)
        async with aiohttp.ClientSession() as s:
            code, body = await _get(s, url + "/healthz")
            assert code == 503 and "the DNS listeners are not serving" in body
            code, body = await _get(s, url + "/readyz")
            assert code == 503 and "the DNS listeners are not serving" in body
    finally:
        await agent.shutdown()


class _FailingSource:
    def liveness(self) -> list[str]:
        return []

    def readiness(self) -> list[str]:
        return []

    def status(self) -> dict[str, Any]:
        raise RuntimeError("secret internal detail")

    def metrics(self) -> bytes:
        return b""


async def test_an_unexpected_exception_is_a_short_500_and_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    server = StatusServer(_FailingSource())
    async with TestClient(TestServer(server.app(DEBUG))) as client:
        for _ in range(3):
            r = await client.get("/status")
            body = await r.text()
            assert r.status == 500
            assert body == "internal error (logged by the agent)\n"
    errors = [rec for rec in caplog.records if rec.name == "nodedns.status" and rec.levelname == "ERROR"]
    assert len(errors) <= 1  # consolidated: repeats are counted, not logged one by one


async def test_body_routes_pass_the_reply_through() -> None:
    class Reply:
        status = 422
        content_type = "application/json"
        body = '{"errors": []}'
        warnings = ('299 - "Warn: x"',)

    seen: list[bytes] = []

    def handle(body: bytes) -> Reply:
        seen.append(body)
        return Reply()

    server = StatusServer(_FailingSource(), body_routes={"/v1/resolv-conf": handle})
    async with TestClient(TestServer(server.app(DEBUG))) as client:
        r = await client.post("/v1/resolv-conf", data=b'{"kind": "Pod"}')
        assert r.status == 422
        assert r.headers["Content-Type"] == "application/json"
        assert r.headers.getall("Warning") == ['299 - "Warn: x"']
        assert await r.text() == '{"errors": []}'
    assert seen == [b'{"kind": "Pod"}']


def test_status_listen_none_starts_no_http_server() -> None:
    with running_agent({"manifests": str(EXAMPLE), "status-listen": "none", "debug-listen": "none"}) as a:
        assert a.agent.status_server is None
        assert a.query("web.default.svc.cluster.local").answer


def test_the_api_watch_shows_up_as_the_sync_section(tmp_path: Path) -> None:
    from nodedns.cluster import watcher
    from tests.support.apiserver import FakeApiServer, namespace, service

    fast_agent = agent_with_timing(watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5,
                                                  connect_timeout=2, backoff_initial=0.05, backoff_max=0.2))

    with FakeApiServer() as api:
        api.put("Namespace", namespace("default"))
        api.put("Service", service("default", "web", ["10.96.0.20"]))
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        with running_agent({"kubeconfig": kubeconfig, **HTTP}, agent_factory=fast_agent) as a:
            a.run(a.agent.wait_synced(), timeout=10)
            st = json.loads(get(a.debug_url + "/status")[2])
            assert st["sync"]["synced"] is True
            assert st["sync"]["resources"]["services"]["synced"] is True
            assert st["source"]["kind"] == "kubernetes API"
            s = samples(a)
            assert value(s, "nodedns_sync_synced", resource="services") == 1
            assert value(s, "nodedns_index_objects", kind="services") == 1
            assert get(a.status_url + "/readyz")[0] == 200


def test_the_node_side_shows_up_as_the_node_section() -> None:
    from tests.support.node_fakes import Recorder, agent_with_fake_node

    with running_agent({"manifests": str(EXAMPLE), **HTTP}, agent_factory=agent_with_fake_node(Recorder())) as a:
        deadline = time.monotonic() + 5
        while not json.loads(get(a.debug_url + "/status")[2])["node"].get("rules_installed"):
            assert time.monotonic() < deadline, "rules never installed"
            time.sleep(0.02)
        st = json.loads(get(a.debug_url + "/status")[2])["node"]
        assert st["firewall"] == "iptables" and st["interface"]["name"] == "nodelocaldns"
        s = samples(a)
        assert value(s, "nodedns_rules_installed") == 1
        assert value(s, "nodedns_node_reconciles_total") >= 1


DEBUG_LISTEN = [
    ("default", {}, ("127.0.0.1", 9254)),
    ("a port", {"debug-listen": "127.0.0.1:9999"}, ("127.0.0.1", 9999)),
    ("IPv6", {"debug-listen": "[::1]:9254"}, ("::1", 9254)),
    ("a Unix socket", {"debug-listen": "unix:/run/nodedns/debug.sock"}, "unix:/run/nodedns/debug.sock"),
    ("none", {"debug-listen": "none"}, None),
    ("off", {"debug-listen": "off"}, None),
]


@pytest.mark.parametrize(("raw", "expected"), [c[1:] for c in DEBUG_LISTEN], ids=[c[0] for c in DEBUG_LISTEN])
def test_debug_listen_takes_an_address_a_unix_socket_or_none(raw: dict[str, str], expected: object) -> None:
    cfg = cfgmod.build(raw, environ={})
    assert cfg.debug_listen == expected
    assert cfg.status_listen == ("127.0.0.1", 9253)


def test_a_debug_listener_that_cannot_listen_costs_only_itself(tmp_path: Path) -> None:
    """DNS, probes and metrics go on; the reason is logged and in the http section."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with running_agent({"manifests": str(EXAMPLE), "status-listen": "127.0.0.1:0",
                        "debug-listen": f"unix:{blocker}/debug.sock"}) as a:
        assert a.query("web.default.svc.cluster.local").answer
        assert get(a.status_url + "/readyz")[0] == 200
        samples_text = get(a.status_url + "/metrics")[2]
        assert 'nodedns_http_listening{listener="debug"} 0.0' in samples_text
        http = a.call(lambda: a.agent.status_server.status())  # type: ignore[union-attr]
        debug = next(ls for ls in http["listeners"] if ls["listener"] == "debug")
        assert debug["listening"] is False and "Not a directory" in debug["error"]


def test_status_counts_stored_cluster_answers_by_kind_and_their_hit_ratio() -> None:
    """Two names asked: one that exists (3 times), one that does not (2 times): two stored answers, one
    of each kind (success, denial), built once each and sent from memory the other 3 times: 3/5."""
    with running_agent({"manifests": str(EXAMPLE), **HTTP}) as a:
        for name, times in (("web.default.svc.cluster.local", 3), ("nope.default.svc.cluster.local", 2)):
            for _ in range(times):
                a.query(name, "A")
        code, _, body = get(a.debug_url + "/status")
    assert code == 200
    stored = json.loads(body)["cluster_answers"]
    assert (stored["entries_success"], stored["entries_denial"]) == (1, 1)
    assert (stored["hits"], stored["misses"], stored["hit_ratio"]) == (3, 2, 0.6)
