"""The forwarder as a process: a detected loop keeps the agent up (the looping route answers SERVFAIL,
/readyz says why, the cluster zone is answered), and --workers N runs N processes on one address,
restarting one that dies."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import dns.rcode
import pytest

from tests.support.helpers import EXAMPLE, free_port, nodedns_cmd, query, rrset_values, subprocess_env
from tests.support.upstream_double import UpstreamDouble

pytestmark = pytest.mark.usefixtures("hit_path")  # every test on the C and on the Python hit path


@pytest.fixture
def upstream() -> Iterator[UpstreamDouble]:
    with UpstreamDouble({"www.example.com": {"A": ["192.0.2.1"]}}) as up:
        yield up


def serve(port: int, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}", "--status-listen",
                    "none", *args),
        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def wait_answer(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if rrset_values(query("127.0.0.1", port, "www.example.com", timeout=0.5)) == ["192.0.2.1"]:
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        if time.monotonic() > deadline:
            raise AssertionError("no answer in time")
        time.sleep(0.1)


def readyz(status_port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{status_port}/readyz", timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


@pytest.mark.parametrize("workers", ["1", "2"], ids=["one-process", "two-workers"])
def test_a_forwarding_loop_keeps_the_agent_up_unready_and_the_cluster_zone_answered(
        upstream: UpstreamDouble, workers: str) -> None:
    port, status = free_port(), free_port()
    upstream.mode = "forward"
    upstream.forward_to = ("127.0.0.1", port)
    proc = serve(port, "--upstream", upstream.address, "--workers", workers, "--upstream-timeout", "500ms",
                 "--status-listen", f"127.0.0.1:{status}")
    lines: list[str] = []
    pump = read_lines(proc, lines)
    try:
        wait_lines(lines, "forwarding loop detected")
        deadline = time.monotonic() + 15  # the supervisor gathers its workers' state every few seconds
        while "forwarding loop through the upstreams" not in readyz(status)[1]:
            assert proc.poll() is None and time.monotonic() < deadline, (readyz(status), lines)
            time.sleep(0.2)
        assert readyz(status)[0] == 503
        assert rrset_values(query("127.0.0.1", port, "web.default.svc.cluster.local")) == ["10.96.12.34"]
        assert query("127.0.0.1", port, "www.example.com").rcode() == dns.rcode.SERVFAIL
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        pump.join(5)
        assert proc.stdout is not None
        proc.stdout.close()
    assert any("HINFO" in line for line in lines)


def test_forwarding_to_itself_is_a_config_error() -> None:
    port = free_port()
    proc = serve(port, "--upstream", f"127.0.0.1:{port}")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "own listen address" in out


def read_lines(proc: subprocess.Popen[str], into: list[str]) -> threading.Thread:
    """Collect the process's output lines in a thread (reads never block the test)."""

    def pump() -> None:
        assert proc.stdout is not None
        into.extend(line.rstrip("\n") for line in proc.stdout)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def wait_lines(lines: list[str], pattern: str, count: int = 1, timeout: float = 20.0) -> list[re.Match[str]]:
    deadline = time.monotonic() + timeout
    while True:
        found = [m for line in list(lines) if (m := re.search(pattern, line))]
        if len(found) >= count:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{pattern!r} not seen {count} times in: {lines}")
        time.sleep(0.05)


def test_workers_share_the_address_and_a_dead_one_is_restarted(upstream: UpstreamDouble) -> None:
    port = free_port()
    proc = serve(port, "--upstream", upstream.address, "--workers", "2", "--log-level", "info")
    lines: list[str] = []
    pump = read_lines(proc, lines)
    try:
        wait_answer(port)
        pids = {int(m.group(1)) for m in wait_lines(lines, r"worker \d+: pid (\d+)", 2)}
        assert len(pids) == 2
        os.kill(min(pids), signal.SIGKILL)
        wait_lines(lines, r"died .* restarting")
        wait_lines(lines, r"worker \d+: pid (\d+)", 3)
        for _ in range(20):  # queries spread over both sockets keep being answered
            wait_answer(port, timeout=10)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        pump.join(5)
        assert proc.stdout is not None
        proc.stdout.close()
