"""Outages: the upstream down, the API server down. Answers go on, failures come fast, recovery is automatic.

Upstream down: cached names keep answering (fresh ones from the cache, expired ones stale at once
once the upstream is known down), uncached names get SERVFAIL within the configured timeout (two
tries while the failure is new, one once health checks have marked every upstream down), and the
health checks bring the upstream back without any query paying for it.

API server down: answers go on from the last index, /readyz stays 200, /status and /metrics show
the staleness growing; when the API server returns, what changed meanwhile arrives (by the resumed
watch, or by a relist when the history was compacted) and the relist holds no second copy of the
index. A real outage of more than a minute, with the agent as shipped (its real back-off), runs as
a subprocess and is measured from outside (RSS).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dns.rcode
import pytest

from nodedns.cluster import watcher
from nodedns.config import Config
from tests.support.agentproc import AgentProcess, metric_value, proc_kib
from tests.support.apiserver import FakeApiServer, namespace, service
from tests.support.helpers import EXAMPLE, RunningAgent, agent_with_timing, query, rrset_values, running_agent, wait_for
from tests.support.upstream_double import UpstreamDouble

ZONE = {"cached.example.com": {"A": ["192.0.2.1"]}, "short.example.com": {"A": ["192.0.2.2"]},
        "later.example.com": {"A": ["192.0.2.3"]}}
TIMEOUT = 0.5  # --upstream-timeout in these tests
SLACK = 0.35  # scheduling noise allowed on a shared 2-core machine
MEMORY = 0.4  # bound for an answer from memory: under one upstream try (TIMEOUT), whatever the load; the
#               milliseconds it really takes are scripts/bench-outage's figures, not a unit test's


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    out = fn()
    return out, time.monotonic() - started


# -- upstream down ------------------------------------------------------------------------------------


@pytest.fixture
def upstream() -> Iterator[UpstreamDouble]:
    with UpstreamDouble(ZONE) as up:
        up.ttls["short.example.com"] = 1
        yield up


@pytest.mark.usefixtures("hit_path")
def test_upstream_down_cached_names_answer_uncached_fail_fast_and_recovery_is_automatic(
    upstream: UpstreamDouble,
) -> None:
    raw = {"manifests": str(EXAMPLE), "upstream": upstream.address, "upstream-timeout": f"{TIMEOUT}s",
           "health-check": "100ms", "prefetch": "false"}
    with running_agent(raw) as agent:
        fw = agent.agent.forwarder
        assert fw is not None
        wait_for(lambda: any(t == "HINFO" for _, t in upstream.seen) and fw.inflight == 0, 5, "the loop probe")
        ask = agent.query
        assert rrset_values(ask("cached.example.com")) == ["192.0.2.1"]
        assert rrset_values(ask("short.example.com")) == ["192.0.2.2"]  # TTL 1: expires during the outage
        upstream.mode = "drop"

        # a cached name: answered from the cache, at once
        r, took = timed(lambda: ask("cached.example.com"))
        assert rrset_values(r) == ["192.0.2.1"] and took < MEMORY, took

        # an uncached name while the failure is new: two tries (try + retry), each bounded by the timeout
        r, took = timed(lambda: ask("new1.example.com", timeout=5))
        assert r.rcode() == dns.rcode.SERVFAIL
        assert 2 * TIMEOUT - 0.05 <= took <= 2 * TIMEOUT + SLACK, took
        wait_for(lambda: fw.status()["upstreams"][0]["healthy"] is False, 2, "the upstream marked down")

        # known down: no try (fail fast), so SERVFAIL at once; the SERVFAIL is remembered briefly
        asked = upstream.count("new2.example.com")
        r, took = timed(lambda: ask("new2.example.com", timeout=5))
        assert r.rcode() == dns.rcode.SERVFAIL and took < MEMORY, took
        assert upstream.count("new2.example.com") == asked
        r, took = timed(lambda: ask("new2.example.com", timeout=5))
        assert r.rcode() == dns.rcode.SERVFAIL and took < MEMORY, took  # --cache-servfail-ttl

        # an expired name while the upstream is known down: the stale answer (TTL 30) at once
        time.sleep(1.2)
        r, took = timed(lambda: ask("short.example.com", timeout=5))
        assert rrset_values(r) == ["192.0.2.2"] and r.answer[0].ttl == 30 and took < MEMORY, took
        assert agent.agent.resolver.stats["stale"] >= 1

        # the upstream returns: the health checks bring it back without a query waiting for it
        upstream.mode = "answer"
        back = wait_for(lambda: fw.status()["upstreams"][0]["healthy"] is True, 2, "the upstream back")
        # one --health-check interval, plus the timeout of a probe lost just before the upstream returned
        assert back <= 0.1 + TIMEOUT + SLACK
        r, took = timed(lambda: ask("later.example.com"))
        assert rrset_values(r) == ["192.0.2.3"] and took < TIMEOUT


# -- API server down ----------------------------------------------------------------------------------

FAST = watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5, connect_timeout=2, backoff_initial=0.05,
                   backoff_max=0.2)
SVC = "svc.cluster.local"
BULK = 2000  # services, so that the relist's object count says something


fast_agent = agent_with_timing(FAST)


def bulk_services(n: int) -> list[dict[str, Any]]:
    return [service("default", f"bulk-{i}", [f"10.97.{i // 250}.{i % 250 + 1}"]) for i in range(n)]


def http_get(base: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(base + path, timeout=5) as resp:  # noqa: S310 - our own loopback URL
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def answer(agent: RunningAgent, name: str) -> tuple[str, list[str]]:
    r = agent.query(f"{name}.default.{SVC}")
    return dns.rcode.to_text(r.rcode()), rrset_values(r, rdtype="A")


@pytest.mark.parametrize("compacted", [False, True], ids=["watch-resumes", "history-compacted-relist"])
def test_api_server_outage_answers_from_the_last_index_and_catches_up_on_return(
    tmp_path: Path, compacted: bool
) -> None:
    with FakeApiServer() as api:
        api.put("Namespace", namespace("default"))
        api.load("Service", bulk_services(BULK))
        for name, ip in (("web", "10.96.0.50"), ("gone", "10.96.0.53")):
            api.put("Service", service("default", name, [ip]))
        kc = api.write_kubeconfig(tmp_path / "kc")
        raw = {"kubeconfig": kc, "node-name": "node-a", "status-listen": "127.0.0.1:0", "debug-listen": "127.0.0.1:0"}
        with running_agent(raw, agent_factory=fast_agent) as agent:
            agent.run(agent.agent.wait_synced(), timeout=20)
            index = agent.agent.index
            most = [0]
            agent.call(lambda: agent.agent.changes.add(
                lambda _: most.__setitem__(0, max(most[0], len(index.services)))))
            before = agent.call(lambda: len(index.services))
            base, debug = agent.status_url, agent.debug_url

            api.go_down()
            stale: list[float] = []
            for _ in range(6):
                time.sleep(0.25)
                assert answer(agent, "web") == ("NOERROR", ["10.96.0.50"])
                assert answer(agent, "nothing")[0] == "NXDOMAIN"
                assert http_get(base, "/readyz")[0] == 200
                status = json.loads(http_get(debug, "/status")[1])
                assert status["ready"] is True
                stale.append(status["sync"]["stale_seconds"])
                metric = metric_value(http_get(base, "/metrics")[1], "nodedns_sync_stale_seconds")
                assert metric is not None and metric >= stale[-1]
            assert stale == sorted(stale) and stale[-1] >= 1.0, stale

            # changes while the agent cannot see them
            api.put("Service", service("default", "web", ["10.96.0.51"]))
            api.put("Service", service("default", "new", ["10.96.0.60"]))
            api.delete("Service", "default", "gone")
            for i in range(0, BULK, 2):
                api.delete("Service", "default", f"bulk-{i}")
            if compacted:
                api.compact()  # the watch position is gone: the agent must relist
            assert answer(agent, "new")[0] == "NXDOMAIN" and answer(agent, "gone")[1] == ["10.96.0.53"]

            api.come_back()
            wait_for(lambda: answer(agent, "new") == ("NOERROR", ["10.96.0.60"]), 10, "the new service")
            wait_for(lambda: answer(agent, "gone")[0] == "NXDOMAIN", 5, "the deleted service gone")
            assert answer(agent, "web") == ("NOERROR", ["10.96.0.51"])
            wait_for(lambda: agent.call(lambda: len(index.services)) == before - BULK // 2, 5, "the bulk deletes")
            status = json.loads(http_get(debug, "/status")[1])
            services = status["sync"]["resources"]["services"]
            assert services["relists"] == (1 if compacted else 0)
            assert status["ready"] is True
            wait_for(lambda: json.loads(http_get(debug, "/status")[1])["sync"]["stale_seconds"] == 0, 5,
                     "staleness back to 0")
            # mark and sweep: never the old and the new index side by side (+1: the one new service)
            assert most[0] <= before + 1, (most[0], before)


def test_a_real_api_outage_of_over_a_minute_with_the_shipped_back_off(tmp_path: Path) -> None:
    """`nodedns serve` as shipped (real back-off, up to 30 s), 20,000 services, 65 s without an API server."""
    outage = 65.0
    n = 20_000
    with FakeApiServer() as api:
        api.put("Namespace", namespace("default"))
        api.load("Service", bulk_services(n))
        api.put("Service", service("default", "web", ["10.96.0.50"]))
        kc = api.write_kubeconfig(tmp_path / "kc")
        with AgentProcess(["--kubeconfig", kc, "--node-name", "node-a"], log=tmp_path / "agent.log") as agent:
            agent.wait_ready(60)

            def ask(name: str) -> tuple[str, list[str]]:
                r = query("127.0.0.1", agent.port, f"{name}.default.{SVC}", timeout=2)
                return dns.rcode.to_text(r.rcode()), rrset_values(r, rdtype="A")

            time.sleep(2)
            rss_before = agent.rss_kib()
            peak_before = proc_kib(agent.pid, "VmHWM")
            api.go_down()
            started = time.monotonic()
            stale = []
            while time.monotonic() - started < outage:
                assert ask("web") == ("NOERROR", ["10.96.0.50"])
                assert agent.get("/readyz")[0] == 200
                stale.append(agent.metric("nodedns_sync_stale_seconds") or 0.0)
                time.sleep(5)
            assert stale == sorted(stale) and stale[-1] >= outage - 10, stale
            api.put("Service", service("default", "web", ["10.96.0.51"]))
            for i in range(0, n, 2):
                api.delete("Service", "default", f"bulk-{i}")
            api.compact()
            api.come_back()
            back = time.monotonic()
            # the reconnect waits its back-off (30 s at most) or a share of the relist window, then the 410 of
            # the compaction another share of that window (--kube-relist-spread, 30 s as shipped, scaled to the
            # cluster: the fleet's relists spread out), then the relist itself
            bound = watcher.Timing().backoff_max + Config().kube_relist_spread + 15
            while ask("web") != ("NOERROR", ["10.96.0.51"]):
                assert time.monotonic() - back < bound, "no relist within the back-off and the relist window + 15 s"
                time.sleep(0.5)
            caught_up = time.monotonic() - back
            assert ask("bulk-0")[0] == "NXDOMAIN" and ask("bulk-1")[0] == "NOERROR"
            assert agent.get("/readyz")[0] == 200
            time.sleep(2)
            rss_after = agent.rss_kib()
            peak_after = proc_kib(agent.pid, "VmHWM")
            print(f"outage {outage:.0f}s: caught up {caught_up:.1f}s after the API returned; RSS before "
                  f"{rss_before} KiB, after the relist {rss_after} KiB; peak before {peak_before} KiB, "
                  f"after {peak_after} KiB")
            assert rss_after <= rss_before * 1.25, (rss_before, rss_after)
            assert peak_after <= peak_before * 1.25, (peak_before, peak_after)
            assert "Traceback" not in agent.log_text()
