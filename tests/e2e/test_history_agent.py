"""The history a running agent keeps: every answer counted once, by rcode, from memory or not, its
upstreams' health over time; with --workers, the supervisor's points are its workers' counters summed."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import dns.exception

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.observe.history import History
from tests.support.helpers import EXAMPLE, RunningAgent, free_port, nodedns_cmd, query, running_agent, subprocess_env
from tests.support.upstream_double import UpstreamDouble

INTERVAL = 0.2


def fast_history(config: cfgmod.Config) -> Agent:
    agent = Agent(config)
    agent.history = History(interval=INTERVAL)
    return agent


def points(agent: RunningAgent) -> list[dict[str, Any]]:
    doc: dict[str, Any] = agent.call(agent.agent.history.document)
    return list(doc["points"])


def settle(read: Callable[[], list[dict[str, Any]]], sent: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    """The points once they hold every answer sent (polled)."""
    deadline = time.monotonic() + timeout
    while True:
        ps = read()
        if sum(p["queries"] for p in ps) >= sent:
            return ps
        assert time.monotonic() < deadline, f"{sum(p['queries'] for p in ps)} of {sent} answers in the history: {ps}"
        time.sleep(INTERVAL)


def test_every_answer_is_counted_once_by_rcode_and_by_where_it_came_from() -> None:
    with running_agent({"manifests": str(EXAMPLE), "debug-listen": "127.0.0.1:0"},
                       agent_factory=fast_history) as agent:
        for _ in range(20):
            agent.query("web.default.svc.cluster.local")  # the first built, then stored
        for _ in range(5):
            agent.query("nope.default.svc.cluster.local")
        agent.query("example.com")  # no upstream: REFUSED, neither from memory nor worked out
        ps = settle(lambda: points(agent), 26)
        rcodes: dict[str, int] = {}
        for p in ps:
            for k, n in p["rcodes"].items():
                rcodes[k] = rcodes.get(k, 0) + n
        assert sum(p["queries"] for p in ps) == 26
        assert rcodes == {"NOERROR": 20, "NXDOMAIN": 5, "REFUSED": 1}
        paths: dict[str, int] = {}
        for p in ps:
            for k, n in p["paths"].items():
                paths[k] = paths.get(k, 0) + n
        assert paths == {"cluster": 25, "refused": 1}
        memory = sum(p["from_memory"] for p in ps)
        worked = sum(p["worked_out"] for p in ps)
        assert (memory, worked) == (23, 2)  # web and nope built once each, asked again from memory
        assert all(p["latency_ms"]["p50"] is not None for p in ps if p["queries"])


def test_upstream_health_is_recorded_as_it_changes() -> None:
    with UpstreamDouble({"example.com": {"A": ["192.0.2.1"]}}) as up, \
            running_agent({"manifests": str(EXAMPLE), "debug-listen": "127.0.0.1:0", "upstream": up.address,
                           "health-check": "0.2s", "upstream-timeout": "0.3s"},
                          agent_factory=fast_history) as agent:
        agent.query("example.com")
        deadline = time.monotonic() + 20
        while not any(p["upstreams"].get(up.address) is True for p in points(agent)):
            assert time.monotonic() < deadline, points(agent)
            time.sleep(INTERVAL)
        up.mode = "drop"
        for i in range(3):  # names not cached: the upstream's silence is seen (SERVFAIL, or no answer in time)
            with contextlib.suppress(dns.exception.Timeout):
                agent.query(f"gone{i}.example.com", timeout=1.5)
        while not any(p["upstreams"].get(up.address) is False for p in points(agent)):
            assert time.monotonic() < deadline + 20, points(agent)
            time.sleep(INTERVAL)
        up.mode = "answer"
        while points(agent)[-1]["upstreams"].get(up.address) is not True:
            assert time.monotonic() < deadline + 40, points(agent)
            time.sleep(INTERVAL)
        states = [p["upstreams"][up.address] for p in points(agent) if up.address in p["upstreams"]]
        first_down = states.index(False)
        assert True in states[:first_down] and True in states[first_down:]


def test_with_workers_the_supervisor_s_points_sum_its_workers(tmp_path: Any) -> None:
    port, status, debug = free_port(), free_port(), free_port()
    log = tmp_path / "agent.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}",
                                            "--status-listen", f"127.0.0.1:{status}", "--debug-listen",
                                            f"127.0.0.1:{debug}", "--upstream", "none", "--workers", "2",
                                            "--lameduck", "0s"),
                                env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{status}/readyz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)

        def read() -> list[dict[str, Any]]:
            with urllib.request.urlopen(f"http://127.0.0.1:{debug}/debug/history", timeout=5) as r:
                return list(json.loads(r.read())["points"])

        sent = 300
        for i in range(sent):  # a socket each, so many source ports: SO_REUSEPORT spreads them over both workers
            query("127.0.0.1", port, "web.default.svc.cluster.local" if i % 3 else "nope.default.svc.cluster.local")
        ps = settle(read, sent, timeout=30)
        assert sum(p["queries"] for p in ps) == sent
        assert sum(p["rcodes"].get("NXDOMAIN", 0) for p in ps) == 100
        assert "worker 0 serving" in log.read_text() and "worker 1 serving" in log.read_text()
    finally:
        proc.terminate()
        proc.wait(20)
