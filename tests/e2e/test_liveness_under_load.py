"""The status listener under a tenant's HTTP load: malformed requests are counted and logged once a minute
(never a traceback each), and the kubelet's liveness probe is answered through a flood of GET /healthz
and of the other routes, from the very address the kubelet probes from (a host-network Pod shares it)."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from tests.support.agentproc import metric_value
from tests.support.apiserver import FakeApiServer
from tests.support.helpers import EXAMPLE, running_agent
from tests.support.shipped import ShippedAgent, cluster
from tests.support.upstream_double import UpstreamDouble

SMUGGLE = (b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"
           b"0\r\n\r\n")


def _host_port(url: str) -> tuple[str, int]:
    u = urllib.parse.urlsplit(url)
    assert u.hostname is not None and u.port is not None
    return u.hostname, u.port


def _send_malformed(host: str, port: int, n: int) -> list[bytes]:
    replies = []
    for _ in range(n):
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(SMUGGLE)
            replies.append(s.recv(64))
    return replies


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - our own loopback URL
        return str(resp.read().decode())


def test_malformed_requests_are_counted_and_logged_once_never_a_traceback_each(
        caplog: pytest.LogCaptureFixture) -> None:
    with running_agent({"manifests": str(EXAMPLE), "status-listen": "127.0.0.1:0"}) as agent:
        host, port = _host_port(agent.status_url)
        with caplog.at_level(logging.DEBUG):
            replies = _send_malformed(host, port, 300)
        assert all(re.match(rb"HTTP/1\.[01] 400 ", r) for r in replies), {r[:20] for r in replies}
        ours = [r for r in caplog.records if "malformed HTTP request" in r.getMessage()]
        assert len(ours) == 1 and ours[0].exc_info is None, [r.getMessage() for r in ours]
        assert "Transfer-Encoding" in ours[0].getMessage() or "Content-Length" in ours[0].getMessage()
        assert not [r for r in caplog.records if r.exc_info and r.levelno >= logging.ERROR]
        assert not [r for r in caplog.records if r.name.startswith("aiohttp")]
        text = _get(agent.status_url + "/metrics")
        assert metric_value(text, "nodedns_http_rejected_total", listener="status", reason="malformed") == 300
        assert (metric_value(text, "nodedns_errors_total", kind="malformed HTTP request on the status listener")
                == 300)


def test_the_shipped_agents_log_holds_no_traceback_after_a_flood_of_malformed_requests(tmp_path: Path) -> None:
    with FakeApiServer() as api, UpstreamDouble() as up:
        cluster(api)
        with ShippedAgent(tmp_path, api, up) as agent:
            agent.wait_ready()
            replies = _send_malformed("127.0.0.1", agent.status_port, 500)
            assert all(re.match(rb"HTTP/1\.[01] 400 ", r) for r in replies), {r[:20] for r in replies}
            assert agent.metric("nodedns_http_rejected_total", listener="status", reason="malformed") == 500
            log = agent.log.read_text()
            assert "Traceback" not in log
            assert len(re.findall("malformed HTTP request on the status listener", log)) == 1, log[-2000:]


class Flood:
    """From 127.0.0.1 (the address the kubelet probes from here): `keepalive` connections asking GET /healthz
    back to back, `scrapers` asking GET /metrics back to back, `idle` connections that send nothing; every
    connection cut is opened again at once."""

    def __init__(self, host: str, port: int, *, keepalive: int, scrapers: int, idle: int) -> None:
        self.host, self.port = host, port
        self.plan = [b"/healthz"] * keepalive + [b"/metrics"] * scrapers + [b""] * idle
        self.answered = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        tasks = [asyncio.create_task(self._one(path)) for path in self.plan]
        await asyncio.to_thread(self.stop.wait)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _one(self, path: bytes) -> None:
        while True:
            try:
                reader, writer = await asyncio.open_connection(self.host, self.port)
            except OSError:
                await asyncio.sleep(0.01)
                continue
            try:
                if not path:
                    await reader.read()  # hold the slot until the server gives up on it
                    continue
                while True:
                    writer.write(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = int(re.search(rb"Content-Length: (\d+)", head, re.I)[1])  # type: ignore[index]
                    await reader.readexactly(length)
                    self.answered += 1
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TypeError):
                pass
            finally:
                writer.close()

    def __enter__(self) -> Flood:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def _probe(host: str, port: int, timeout: float) -> tuple[int, float]:
    """The kubelet's httpGet probe: a new connection, GET /healthz, the status within `timeout` (0: none)."""
    started = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(max(0.01, timeout - (time.monotonic() - started)))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 169.254.20.10:9253\r\nUser-Agent: kube-probe/1.31\r\n"
                      b"Accept: */*\r\nConnection: close\r\n\r\n")
            head = s.recv(64)
    except OSError:
        return 0, time.monotonic() - started
    m = re.match(rb"HTTP/1\.1 (\d{3})", head)
    return (int(m[1]) if m else 0), time.monotonic() - started


@pytest.mark.parametrize(("keepalive", "scrapers", "idle", "going"), [(100, 40, 60, 2000), (12, 2, 0, 40)],
                         ids=["over-the-connection-caps", "within-the-caps-over-the-pace"])
def test_the_liveness_probe_is_answered_through_a_flood_of_healthz_scrapes_and_idle_connections(
        keepalive: int, scrapers: int, idle: int, going: int) -> None:
    with running_agent({"manifests": str(EXAMPLE), "status-listen": "127.0.0.1:0"}) as agent:
        host, port = _host_port(agent.status_url)
        with Flood(host, port, keepalive=keepalive, scrapers=scrapers, idle=idle) as flood:
            deadline = time.monotonic() + 10
            while flood.answered < going:  # the flood under way
                assert time.monotonic() < deadline, "the flood never got going"
                time.sleep(0.05)
            results = []
            for _ in range(25):  # 5 s of probes, each with a 1 s timeout (the DaemonSet allows 5)
                results.append(_probe(host, port, 1.0))
                time.sleep(0.2)
        assert all(code == 200 for code, _ in results), results
        http = agent.call(lambda: agent.agent.status_server.status())  # type: ignore[union-attr]
        status = next(ls for ls in http["listeners"] if ls["listener"] == "status")
        if idle:
            assert status["refused"] > 0 and status["probes_over_cap"] >= 1  # the caps held; the probe got through
