"""dnstap: the agent's frames captured by a real collector (`fstrm_capture`, Frame Streams) and decoded by a real
reader (`dnstap-read` from BIND); each zone's share of queries tapped; a slow or absent collector costs
dropped frames (counted), never a delayed answer."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodedns.runtime import dnstap
from tests.support.helpers import EXAMPLE, IN_CI, free_port, rrset_values, running_agent, wait_for
from tests.support.upstream_double import UpstreamDouble

NAMES = {"www.example.com": {"A": ["192.0.2.1"]}, "db.corp.example": {"A": ["10.1.0.1"]},
         **{f"n{i}.example.com": {"A": [f"192.0.2.{i + 10}"]} for i in range(40)}}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if IN_CI:
            raise AssertionError(f"{name} is not installed (.ci/run installs it)")
        pytest.skip(f"{name} is not installed (Debian: bind9-dnsutils, fstrm-bin)")
    return path


@pytest.fixture
def upstream() -> Iterator[UpstreamDouble]:
    with UpstreamDouble(NAMES, ttl=300) as up:
        yield up


def agent_for(raw: dict[str, Any]) -> Any:
    return running_agent({"manifests": str(EXAMPLE), "health-check": "50ms", "upstream-timeout": "500ms", **raw})


def read_frames(path: Path) -> list[str]:
    """dnstap-read's lines for a capture file: `... CQ 127.0.0.1:PORT -> ... UDP 45b db.corp.example/IN/A`."""
    out = subprocess.run([tool("dnstap-read"), str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_a_real_collector_and_reader_decode_the_frames_of_each_zones_share(tmp_path: Path, upstream: UpstreamDouble,
                                                                           transport: str) -> None:
    sock, capture = tmp_path / "dnstap.sock", tmp_path / "capture.fstrm"
    port = free_port()
    where = ["-u", str(sock)] if transport == "unix" else ["-a", "127.0.0.1", "-p", str(port)]
    collector = subprocess.Popen([tool("fstrm_capture"), "-t", "protobuf:dnstap.Dnstap", *where, "-w", str(capture)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if transport == "unix":
            wait_for(sock.exists, 10, "fstrm_capture listening")
        else:
            wait_for(lambda: listening(port), 10, "fstrm_capture listening")
        endpoint = f"unix:{sock}" if transport == "unix" else f"tcp:127.0.0.1:{port}"
        zones = {".": {"upstreams": [upstream.address], "dnstap": "0%"},
                 "corp.example": {"upstreams": [upstream.address], "dnstap": "100%"}}
        with agent_for({"zones": zones, "dnstap": endpoint, "node-name": "node-a"}) as agent:
            wait_for(lambda: agent.agent.dnstap.connected, 10, "the agent connected to the collector")
            assert rrset_values(agent.query("db.corp.example")) == ["10.1.0.1"]
            assert rrset_values(agent.query("db.corp.example", tcp=True)) == ["10.1.0.1"]  # from the cache
            assert rrset_values(agent.query("www.example.com")) == ["192.0.2.1"]
            tap = agent.agent.dnstap
            wait_for(lambda: tap.frames >= 6 and not tap.queue, 10, "the frames written")
            status = tap.status()
            assert status["dropped"] == 0 and status["messages"]["forwarder_query"] >= 1
        # the agent stopped: it sent STOP, the collector FINISH; fstrm_capture closes its file on SIGTERM
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(10)
    every = read_frames(capture)
    lines = [line for line in every if "/IN/A" in line]  # the start-up loop probes (HINFO) are corp's too
    kinds = [line.split()[2] for line in lines]
    assert kinds.count("CQ") == 2 and kinds.count("CR") == 2, lines  # both of corp's client queries
    assert kinds.count("FQ") == 1 and kinds.count("FR") == 1, lines  # one asked upstream
    assert all("db.corp.example/IN/A" in line for line in every if "/IN/HINFO" not in line), every  # `.` taps none
    assert any(" TCP " in line for line in lines if line.split()[2] == "CQ")
    assert [line.split()[5] for line in lines if line.split()[2] == "FQ"] == [upstream.address]
    yaml_out = subprocess.run([tool("dnstap-read"), "-y", str(capture)], capture_output=True, text=True, timeout=30)
    assert "identity: node-a" in yaml_out.stdout and "query_zone: corp.example." in yaml_out.stdout


def metric(agent: Any, name: str) -> float:
    with urllib.request.urlopen(agent.status_url + "/metrics", timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


class MuteCollector:
    """A collector that accepts connections and then never answers the handshake nor reads (a slow one)."""

    def __init__(self, path: Path) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def connections(self) -> int:
        return len(self.held)

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # the listener closed: the test is over
            while True:
                self.held.append(self.listener.accept()[0])

    def __enter__(self) -> MuteCollector:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(5)
        for conn in self.held:
            conn.close()


@pytest.mark.parametrize("collector", ["absent", "mute"])
def test_a_slow_or_absent_collector_costs_counted_frames_never_a_delayed_answer(
        tmp_path: Path, upstream: UpstreamDouble, collector: str) -> None:
    sock = tmp_path / "dnstap.sock"
    mute = MuteCollector(sock) if collector == "mute" else None
    if mute is not None:
        mute.__enter__()
    try:
        raw = {"upstream": upstream.address, "dnstap": f"unix:{sock}", "status-listen": "127.0.0.1:0"}
        with agent_for(raw) as agent:
            agent.call(lambda: setattr(agent.agent.dnstap, "queue_frames", 20))
            slowest = 0.0
            for i in range(40):
                t0 = time.monotonic()
                assert rrset_values(agent.query(f"n{i}.example.com")) == [f"192.0.2.{i + 10}"]
                slowest = max(slowest, time.monotonic() - t0)
            assert slowest < 0.25, f"an answer waited {slowest * 1000:.0f} ms on the collector"
            status = agent.agent.dnstap.status()
            assert not status["connected"] and status["frames"] == 0
            assert status["dropped"] >= 40 * 4 - 20  # four frames a query (client and forwarder), 20 kept
            assert metric(agent, "nodedns_dnstap_dropped_total") >= status["dropped"]
            assert metric(agent, "nodedns_dnstap_connected") == 0.0
            if mute is not None:
                assert mute.connections >= 1
            else:
                assert status["errors"] >= 1 and status["last_error"]
    finally:
        if mute is not None:
            mute.__exit__()


def test_the_frames_follow_the_dnstap_schema_and_frame_streams_handshake(tmp_path: Path) -> None:
    """The bytes themselves, independently of a reader: the Dnstap message's fields (dnstap.proto numbers) and
    the bidirectional handshake a collector sees (READY with the content type, then START, data, STOP)."""
    frame = dnstap.encode(dnstap.CLIENT_QUERY, identity=b"n", version=b"v", proto="udp",
                          query_addr=("10.0.0.7", 5353), response_addr=None, query_time=1700000000.5,
                          query_message=b"\x12\x34", zone="corp.example")
    assert frame.startswith(b"\x0a\x01n\x12\x01v\x72")  # identity (1), version (2), message (14)
    assert frame.endswith(b"\x78\x01")  # type (15) MESSAGE
    assert b"\x08\x05\x10\x01\x18\x01\x22\x04\x0a\x00\x00\x07\x30\xe9\x29" in frame  # CQ, INET, UDP, addr, port
    assert b"\x5a\x0e\x04corp\x07example\x00" in frame  # query_zone (11) in wire form
    assert b"\x4d\x00\x65\xcd\x1d" in frame  # query_time_nsec (9): fixed32 500,000,000
    got: list[bytes] = []
    path = tmp_path / "c.sock"

    async def main() -> None:
        async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            got.append(await reader.readexactly(8 + 4 + 8 + len(dnstap.CONTENT_TYPE)))  # READY
            writer.write(dnstap.control(dnstap.FSTRM_ACCEPT))
            got.append(await reader.readexactly(8 + 4 + 8 + len(dnstap.CONTENT_TYPE)))  # START
            size = struct.unpack("!I", await reader.readexactly(4))[0]
            got.append(await reader.readexactly(size))
            got.append(await reader.readexactly(12))  # STOP
            writer.write(dnstap.control(dnstap.FSTRM_FINISH, content_type=False))
            await writer.drain()
            writer.close()
            await writer.wait_closed()

        server = await asyncio.start_unix_server(client, str(path))
        tap = dnstap.Dnstap(f"unix:{path}", identity="n", version="v")
        tap.start()
        tap.put(frame)
        await asyncio.sleep(0.3)
        await tap.close()
        server.close()
        await server.wait_closed()
        assert tap.frames == 1 and tap.dropped == 0

    asyncio.run(main())
    ready, start, data, stop = got
    assert ready[8:12] == struct.pack("!I", dnstap.FSTRM_READY) and ready.endswith(dnstap.CONTENT_TYPE)
    assert start[8:12] == struct.pack("!I", dnstap.FSTRM_START) and data == frame
    assert stop == struct.pack("!III", 0, 4, dnstap.FSTRM_STOP)
