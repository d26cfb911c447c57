"""Readiness, liveness and the stop sequence: unready, lameduck (still answering), teardown, exit 0; twice = at once."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator

import dns.exception
import pytest

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from tests.support.helpers import (
    EXAMPLE,
    RunningAgent,
    free_port,
    no_default_upstream,
    nodedns_cmd,
    query,
    rrset_values,
    subprocess_env,
    wait_for,
)
from tests.support.node_fakes import Recorder, agent_with_fake_node

WEB = "web.default.svc.cluster.local"


def test_a_new_agent_is_not_ready_and_says_why() -> None:
    agent = Agent(cfgmod.build({"manifests": str(EXAMPLE), "listen": "127.0.0.1:0"}, environ={}))
    ok, reasons = agent.ready()
    assert not ok
    assert reasons == ["starting (new)", "the DNS listeners are not serving", "the cluster index has not synced yet"]
    assert agent.live() == (True, [])
    assert agent.node_state() is None


def test_readiness_goes_false_at_stop_while_the_lameduck_keeps_answering() -> None:
    agent = RunningAgent({"manifests": str(EXAMPLE), "lameduck": "1s"}).start()
    try:
        assert agent.call(agent.agent.ready) == (True, [])
        started = time.monotonic()
        agent.loop.call_soon_threadsafe(agent.agent.request_stop)
        wait_for(lambda: agent.agent.state == "stopping", timeout=5.0)
        assert agent.call(agent.agent.ready) == (False, ["shutting down"])
        assert agent.call(agent.agent.live) == (True, [])
        assert rrset_values(agent.query(WEB)) == ["10.96.12.34"]  # lameduck: still answering
    finally:
        agent.stop()
    assert time.monotonic() - started >= 0.9
    assert agent.agent.state == "stopped"
    assert agent.agent.ready()[0] is False


def test_rules_stay_through_the_lameduck_and_go_before_the_interface_and_the_listeners() -> None:
    rec = Recorder()
    agent = RunningAgent({"manifests": str(EXAMPLE), "lameduck": "500ms"}, agent_factory=agent_with_fake_node(rec))
    agent.start()
    try:
        wait_for(lambda: [c for c, _ in rec.calls].count("firewall.ensure") >= 1, timeout=5.0)
        assert agent.call(agent.agent.ready) == (True, [])
        agent.loop.call_soon_threadsafe(agent.agent.request_stop)
        wait_for(lambda: agent.agent.state == "stopping", timeout=5.0)
        during = len(rec.calls)
        time.sleep(0.3)  # several reconcile rounds inside the lameduck
        lameduck_calls = [c for c, _ in rec.calls[during:]]
        assert "firewall.ensure" in lameduck_calls and not any(c.startswith("firewall.remove") for c in
                                                                 lameduck_calls)
        assert rrset_values(agent.query(WEB)) == ["10.96.12.34"]
    finally:
        agent.stop()
    names = [c for c, _ in rec.calls]
    assert names[-2:] == ["firewall.remove retry=True", "link.remove"]
    assert not agent.agent.server.alive()


def test_dead_listeners_make_the_agent_not_live_and_not_ready() -> None:
    agent = RunningAgent({"manifests": str(EXAMPLE)}).start()
    try:
        agent.call(agent.agent.server.close)
        wait_for(lambda: not agent.agent.server.alive(), timeout=5.0)
        assert agent.call(agent.agent.live) == (False, ["the DNS listeners are not serving"])
        assert agent.call(agent.agent.ready) == (False, ["the DNS listeners are not serving"])
    finally:
        agent.stop()


# ----------------------------------------------------------------------------------------------
# The real process and real signals (no root needed: listeners on 127.0.0.1)


Serve = Callable[..., tuple["subprocess.Popen[str]", int]]


@pytest.fixture
def serve() -> Iterator[Serve]:
    procs: list[subprocess.Popen[str]] = []

    def start(*flags: str) -> tuple[subprocess.Popen[str], int]:
        port = free_port()
        proc = subprocess.Popen(
            nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}",
                        *no_default_upstream(flags), *flags),
            env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(proc)
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.communicate()[0]
            try:
                if rrset_values(query("127.0.0.1", port, WEB, timeout=0.3)) == ["10.96.12.34"]:
                    return proc, port
            except (dns.exception.Timeout, ConnectionRefusedError):
                pass
            assert time.monotonic() < deadline, "agent did not start"

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def test_sigterm_lameducks_then_exits_zero(serve: Serve) -> None:
    proc, port = serve("--lameduck", "1500ms")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert rrset_values(query("127.0.0.1", port, WEB, timeout=1)) == ["10.96.12.34"]
    out, _ = proc.communicate(timeout=15)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, out
    assert 1.4 <= elapsed < 10, out
    assert "SIGTERM: not ready any more; lameduck 1.5s" in out
    with pytest.raises((dns.exception.Timeout, ConnectionRefusedError)):
        query("127.0.0.1", port, WEB, timeout=0.3, tcp=True)


def test_a_second_sigterm_exits_at_once(serve: Serve) -> None:
    proc, port = serve("--lameduck", "30s")
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert rrset_values(query("127.0.0.1", port, WEB, timeout=1)) == ["10.96.12.34"]
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0, out
    assert time.monotonic() - t0 < 3, out
    assert "second SIGTERM: exiting at once" in out
