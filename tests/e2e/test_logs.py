"""Logs: JSON format, the sampled query log, and consolidation of repeated errors."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import time
from collections.abc import Callable

import dns.exception
import dns.rcode
import pytest

from nodedns.runtime.logutil import Consolidated, error_totals
from tests.support.helpers import EXAMPLE, free_port, nodedns_cmd, query, running_agent, subprocess_env


def _wait_answering(port: int, proc: subprocess.Popen[str], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, "the agent exited"
        try:
            if query("127.0.0.1", port, "web.default.svc.cluster.local", "A", timeout=0.5).answer:
                return  # synced (before the sync the listeners answer SERVFAIL)
        except (dns.exception.Timeout, OSError):
            pass
        assert time.monotonic() < deadline, "the agent never answered"
        time.sleep(0.05)


def test_json_logs_are_one_json_object_per_line_with_query_fields() -> None:
    port = free_port()
    proc = subprocess.Popen(
        nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}", "--status-listen",
                    "none", "--log-format", "json", "--query-log", "100%", "--lameduck", "0s", "--upstream", "none"),
        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait_answering(port, proc)
        query("127.0.0.1", port, "nope.default.svc.cluster.local", "AAAA", tcp=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert {"time", "level", "logger", "message"} <= set(lines[0])
    queries = [rec for rec in lines if rec["logger"] == "nodedns.query"]
    tcp = [q for q in queries if q["proto"] == "tcp"]
    assert tcp and tcp[0]["name"] == "nope.default.svc.cluster.local." and tcp[0]["type"] == "AAAA"
    assert tcp[0]["rcode"] == "NXDOMAIN" and tcp[0]["path"] == "cluster" and tcp[0]["client"] == "127.0.0.1"
    assert isinstance(tcp[0]["duration_ms"], float)
    assert any(rec["message"] == "stopped" for rec in lines)


def _query_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "nodedns.query"]


def test_query_log_at_100_percent_logs_hit_path_and_slow_path(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nodedns.query")
    with running_agent({"manifests": str(EXAMPLE), "query-log": "100%"}) as a:
        for _ in range(4):
            a.query("web.default.svc.cluster.local", "A")  # first builds, the rest are hit-path answers
        a.query("example.com", "A", tcp=True)
        assert a.agent.server.hits == 3
    lines = [r.getMessage() for r in _query_lines(caplog)]
    assert len(lines) == 5
    assert all("name=web.default.svc.cluster.local. type=A rcode=NOERROR" in m and "path=cluster proto=udp" in m
               for m in lines[:4])
    assert "name=example.com. type=A rcode=REFUSED" in lines[4] and "path=refused proto=tcp" in lines[4]


@pytest.mark.parametrize(("rate", "low", "high"), [("0", 0, 0), ("50%", 130, 270)], ids=["off", "half"])
def test_query_log_samples_the_configured_share(caplog: pytest.LogCaptureFixture, rate: str, low: int,
                                                high: int) -> None:
    caplog.set_level(logging.INFO, logger="nodedns.query")
    with running_agent({"manifests": str(EXAMPLE), "query-log": rate}) as a:
        for i in range(400):
            a.query("web.default.svc.cluster.local" if i % 2 else "db.prod.svc.cluster.local", "A")
    assert low <= len(_query_lines(caplog)) <= high


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _reporter(clock: Callable[[], float]) -> tuple[Consolidated, list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    log = logging.getLogger("tests.consolidated")
    log.handlers[:] = [Keep()]
    log.propagate = False
    return Consolidated(log, "DNS listener error", clock=clock), records


def test_repeated_errors_give_at_most_two_lines_a_minute() -> None:
    clock = FakeClock()
    errors, records = _reporter(clock)
    for i in range(1800):  # 10 errors a second for 3 minutes
        clock.now = 1000.0 + i * 0.1
        errors.report(RuntimeError(f"boom {i % 3}"))
    clock.now = 1000.0 + 181
    errors.flush_due()
    msgs = [r.getMessage() for r in records]
    assert len(msgs) <= 2 * 4
    assert msgs[0] == "DNS listener error: RuntimeError: boom 0" and records[0].exc_info is not None
    summaries = [m for m in msgs if "more in the last 60s" in m]
    assert sum(int(m.split(": ")[1].split()[0]) for m in summaries) + len(msgs) - len(summaries) == 1800
    assert errors.total == 1800


def test_the_summary_is_written_when_the_minute_ends_without_new_errors() -> None:
    clock = FakeClock()
    errors, records = _reporter(clock)
    for _ in range(5):
        errors.report("upstream timeout")
    assert len(records) == 1
    clock.now += 30
    errors.flush_due()
    assert len(records) == 1  # the minute is not over
    clock.now += 31
    errors.flush_due()
    assert [r.getMessage() for r in records][1] == (
        "DNS listener error: 4 more in the last 60s (latest: upstream timeout)")
    errors.flush_due()
    assert len(records) == 2


def test_a_failing_resolver_costs_servfail_and_one_log_line_not_one_per_query(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="nodedns.server")

    def boom(qname: str, qtype: int) -> None:
        raise RuntimeError("bug in the records")

    with running_agent({"manifests": str(EXAMPLE)}) as a:
        a.call(lambda: setattr(a.agent.records, "resolve", boom))
        for i in range(40):
            r = a.query(f"n{i}.default.svc.cluster.local", "A", tcp=bool(i % 2))
            assert r.rcode() == dns.rcode.SERVFAIL
        assert a.agent.server.panics == 40
        assert a.agent.observer.scrape().panics == 40
    lines = [r for r in caplog.records if r.name == "nodedns.server" and "bug in the records" in r.getMessage()]
    assert 1 <= len(lines) <= 2


def test_error_totals_add_up_the_reporters_of_one_kind() -> None:
    """nodedns_errors_total{kind}: every reporter of a kind counts (a module's and a listener's alike)."""
    first = Consolidated(logging.getLogger("test.totals"), "a kind only this test reports")
    second = Consolidated(logging.getLogger("test.totals"), "a kind only this test reports")
    for _ in range(3):
        first.report("boom")
    second.report("bang")
    assert error_totals()["a kind only this test reports"] == 4
