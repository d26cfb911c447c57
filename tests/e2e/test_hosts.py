"""--hosts: hosts(5) files answered authoritatively before forwarding, re-read as they change, on real sockets."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import dns.flags
import dns.message
import dns.query
import dns.rcode
import pytest

from tests.support import manifests as m
from tests.support.agentproc import AgentProcess, proc_kib
from tests.support.apiserver import FakeApiServer
from tests.support.helpers import (
    EXAMPLE,
    RunningAgent,
    nodedns_cmd,
    query,
    rrset_values,
    running_agent,
    subprocess_env,
    wait_for,
)
from tests.support.shipped import ShippedAgent, cluster
from tests.support.upstream_double import UpstreamDouble

pytestmark = pytest.mark.usefixtures("hit_path")

HOSTS = """\
# the node's local names
10.1.2.3   db.corp.example   db   # a comment after the names
10.1.2.4   Cache.Corp.Example.
2001:db8::7 db.corp.example
not-an-ip  broken.corp.example
10.1.2.9   bad..name
10.1.2.5   ghost.default.svc.cluster.local
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[UpstreamDouble]:
    with UpstreamDouble() as up:
        up.set("moved.example", "A", ["192.0.2.99"], ttl=300)
        yield up


@pytest.fixture(scope="module")
def hosts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hosts") / "hosts"
    path.write_text(HOSTS)
    return path


@pytest.fixture(scope="module")
def agent(hosts_file: Path, upstream: UpstreamDouble) -> Iterator[RunningAgent]:
    raw = {"manifests": str(EXAMPLE), "hosts": [str(hosts_file)], "upstream": [upstream.address],
           "kube-dns-config-period": "50ms", "debug-listen": "127.0.0.1:0", "status-listen": "127.0.0.1:0",
           "ttl": "7s"}
    with running_agent(raw) as a:
        yield a


def ask_twice(agent: RunningAgent, name: str, rdtype: str) -> dns.message.Message:
    """The answer, asked twice (a second ask would meet anything stored for the hit path); both the same."""
    first = agent.query(name, rdtype)
    second = agent.query(name, rdtype)
    assert rrset_values(first) == rrset_values(second) and first.rcode() == second.rcode()
    return second


def test_a_hosts_name_answers_its_ipv4_address_authoritatively(agent: RunningAgent, upstream: UpstreamDouble) -> None:
    r = ask_twice(agent, "db.corp.example", "A")
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    assert rrset_values(r) == ["10.1.2.3"]
    assert r.answer[0].ttl == 7  # --ttl
    assert upstream.count("db.corp.example") == 0


def test_a_hosts_name_answers_its_ipv6_address_to_aaaa(agent: RunningAgent) -> None:
    r = ask_twice(agent, "db.corp.example", "AAAA")
    assert r.flags & dns.flags.AA and rrset_values(r) == ["2001:db8::7"]


def test_an_alias_answers_like_the_canonical_name(agent: RunningAgent) -> None:
    assert rrset_values(ask_twice(agent, "db", "A")) == ["10.1.2.3"]


def test_names_match_whatever_their_case(agent: RunningAgent) -> None:
    assert rrset_values(ask_twice(agent, "CACHE.corp.EXAMPLE", "A")) == ["10.1.2.4"]


def test_ptr_answers_every_name_of_the_address(agent: RunningAgent) -> None:
    r = ask_twice(agent, "3.2.1.10.in-addr.arpa", "PTR")
    assert r.flags & dns.flags.AA and rrset_values(r) == ["db.", "db.corp.example."]
    r6 = ask_twice(agent, "7.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa", "PTR")
    assert rrset_values(r6) == ["db.corp.example."]


def test_another_type_or_family_of_a_hosts_name_is_nodata(agent: RunningAgent, upstream: UpstreamDouble) -> None:
    for name, rdtype in (("db.corp.example", "MX"), ("cache.corp.example", "AAAA")):
        r = ask_twice(agent, name, rdtype)
        assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA and not r.answer, (name, rdtype)
    assert upstream.count("cache.corp.example") == 0


def test_a_hosts_name_in_the_cluster_zone_is_left_to_the_cluster(agent: RunningAgent) -> None:
    r = agent.query("ghost.default.svc.cluster.local", "A")
    assert r.rcode() == dns.rcode.NXDOMAIN and not r.answer


def test_malformed_and_clashing_lines_are_logged_with_their_line_and_skipped(
        hosts_file: Path, upstream: UpstreamDouble, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="nodedns.hostswatch"), \
            running_agent({"manifests": str(EXAMPLE), "hosts": [str(hosts_file)], "upstream": [upstream.address]}) as a:
        assert rrset_values(a.query("db.corp.example", "A")) == ["10.1.2.3"]
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert f"{hosts_file}:5: 'not-an-ip' is not an IP address" in text
    assert f"{hosts_file}:6: the name 'bad..name'" in text
    assert f"{hosts_file}:7: ghost.default.svc.cluster.local is in a zone this agent serves" in text


def test_a_missing_file_is_logged_and_picked_up_once_it_appears(
        tmp_path: Path, upstream: UpstreamDouble, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "later.hosts"
    raw = {"manifests": str(EXAMPLE), "hosts": [str(path)], "upstream": [upstream.address],
           "kube-dns-config-period": "50ms", "debug-listen": "127.0.0.1:0", "status-listen": "127.0.0.1:0"}
    with caplog.at_level(logging.WARNING, logger="nodedns.hostswatch"), running_agent(raw) as a:
        assert any(f"cannot read {path}" in r.getMessage() for r in caplog.records)
        assert status(a)["files"][0]["error"].startswith(f"cannot read {path}")
        path.write_text("10.9.9.9 late.corp.example\n")
        wait_for(lambda: rrset_values(a.query("late.corp.example", "A")) == ["10.9.9.9"], what="the new file")
        path.unlink()  # gone again: the last good contents stay
        wait_for(lambda: status(a)["files"][0]["error"], what="the error")
        assert rrset_values(a.query("late.corp.example", "A")) == ["10.9.9.9"]


def status(agent: RunningAgent) -> dict[str, object]:
    with urllib.request.urlopen(agent.debug_url + "/status", timeout=5) as resp:  # noqa: S310 - loopback
        body: dict[str, dict[str, object]] = json.load(resp)
    return body["hosts"]


def metric(agent: RunningAgent, name: str) -> float:
    with urllib.request.urlopen(agent.status_url + "/metrics", timeout=5) as resp:  # noqa: S310 - loopback
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_a_changed_file_is_answered_without_a_restart_and_forwarded_answers_go(
        tmp_path: Path, upstream: UpstreamDouble) -> None:
    path = tmp_path / "hosts"
    path.write_text("10.1.1.1 first.corp.example\n")
    raw = {"manifests": str(EXAMPLE), "hosts": [str(path)], "upstream": [upstream.address],
           "kube-dns-config-period": "50ms", "debug-listen": "127.0.0.1:0", "status-listen": "127.0.0.1:0"}
    with running_agent(raw) as a:
        for _ in range(3):  # forwarded and cached (the hit path serves it now)
            assert rrset_values(a.query("moved.example", "A")) == ["192.0.2.99"]
        asked = upstream.count("moved.example")
        reloads = status(a)["reloads"]
        # whole at once (a write in place can be read half-written: a reading without the new line)
        path.with_name("hosts.new").write_text("10.1.1.1 first.corp.example\n10.2.2.2 moved.example\n")
        os.replace(path.with_name("hosts.new"), path)
        wait_for(lambda: status(a)["reloads"] != reloads, what="the reload")
        for _ in range(3):
            r = a.query("moved.example", "A")
            assert rrset_values(r) == ["10.2.2.2"] and r.flags & dns.flags.AA
        assert upstream.count("moved.example") == asked
        path.write_text("10.1.1.1 first.corp.example\n")  # the name leaves the file: forwarded again
        wait_for(lambda: rrset_values(a.query("moved.example", "A")) == ["192.0.2.99"], what="forwarded again")


@pytest.mark.parametrize("edited", [0, 1, 2], ids=["first-file", "middle-file", "last-file"])
def test_with_several_files_an_edit_of_any_one_is_answered(tmp_path: Path, upstream: UpstreamDouble,
                                                            edited: int) -> None:
    """--hosts may be given several times: each file is watched, and an edit of any of them (not only the
    last one given) is answered, the others' names kept."""
    paths = [tmp_path / f"hosts{i}" for i in range(3)]
    for i, path in enumerate(paths):
        path.write_text(f"10.1.1.{i + 1} file{i}.corp.example\n")
    raw = {"manifests": str(EXAMPLE), "hosts": [str(p) for p in paths], "upstream": [upstream.address],
           "kube-dns-config-period": "50ms", "debug-listen": "127.0.0.1:0", "status-listen": "127.0.0.1:0"}
    with running_agent(raw) as a:
        assert rrset_values(a.query("file0.corp.example", "A")) == ["10.1.1.1"]
        reloads = status(a)["reloads"]
        paths[edited].write_text(f"10.1.1.{edited + 1} file{edited}.corp.example\n10.3.3.3 added.corp.example\n")
        wait_for(lambda: status(a)["reloads"] != reloads, what="the reload")
        r = a.query("added.corp.example", "A")
        assert rrset_values(r) == ["10.3.3.3"] and r.flags & dns.flags.AA, f"the edit of file {edited} not answered"
        for i in range(3):
            assert rrset_values(a.query(f"file{i}.corp.example", "A")) == [f"10.1.1.{i + 1}"]


def test_hosts_answers_are_counted_under_the_hosts_plugin_and_chaos_under_chaos(agent: RunningAgent) -> None:
    """coredns_dns_responses_total's plugin label, as CoreDNS's hosts and chaos plugins count theirs: a hosts
    file's answer is not "forward" (nothing was forwarded), nor is a CH TXT id.server. answer."""
    from tests.support.agentproc import metric_value  # noqa: PLC0415

    def responses() -> tuple[float, float, float]:
        """(hosts, forward, chaos) answers, from one scrape (/metrics renders are paced: 5, then 4 a second)."""
        with urllib.request.urlopen(agent.status_url + "/metrics", timeout=5) as resp:  # noqa: S310 - loopback
            text = resp.read().decode()
        return tuple(sum(v for rcode in ("NOERROR", "NXDOMAIN") if (v := metric_value(
            text, "coredns_dns_responses_total", server=f"dns://127.0.0.1:{agent.port}", zone=".", rcode=rcode,
            plugin=plugin)) is not None) for plugin in ("hosts", "forward", "chaos"))  # type: ignore[return-value]

    hosts, forward, chaos = responses()
    for _ in range(3):
        assert agent.query("db.corp.example", "A").flags & dns.flags.AA
    agent.query("db.corp.example", "MX")  # NODATA from the file: still the file's
    q = dns.message.make_query("id.server", "TXT", rdclass="CH")
    assert dns.query.udp(q, agent.host, port=agent.port, timeout=3).answer
    wait_for(lambda: responses() == (hosts + 4, forward, chaos + 1), timeout=5, interval=0.3,
             what="the answers counted, none of them as forwarded")  # published at most once a second


def test_status_and_metrics_count_the_entries_and_the_answers(agent: RunningAgent) -> None:
    before = metric(agent, "nodedns_hosts_answers_total")
    for _ in range(4):
        agent.query("db.corp.example", "A")
    wait_for(lambda: metric(agent, "nodedns_hosts_answers_total") == before + 4, timeout=5, interval=0.3,
             what="the four answers counted")  # /metrics renders are paced (5, then 4 a second)
    assert metric(agent, "nodedns_hosts_entries") == 4  # db (v4, v6), its alias db, cache
    st = status(agent)
    assert st["entries"] == 4 and st["last_reload"] and st["errors"] == 2  # lines 5 and 6
    files = st["files"]
    assert isinstance(files, list) and files[0]["skipped"] == 2 and files[0]["ignored"] == 1


def test_lookup_names_the_file_and_line_that_answered(agent: RunningAgent, hosts_file: Path) -> None:
    r = subprocess.run(nodedns_cmd("lookup", "db", "--debug", agent.debug_url),
                       capture_output=True, text=True, env=subprocess_env(), timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    assert f"hosts file (answered from {hosts_file}:2 (--hosts))" in r.stdout
    assert "10.1.2.3" in r.stdout


def test_the_shipped_config_answers_from_the_file_in_every_worker_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text("10.5.5.5 shipped.corp.example\n")
    with FakeApiServer() as api, UpstreamDouble() as up:
        cluster(api)
        api.put("Service", m.service("clash", cluster_ips=["10.96.0.30"]))
        with ShippedAgent(tmp_path, api, up, **{"hosts": [str(path)], "kube-dns-config-period": "100ms"}) as agent:
            agent.wait_ready()
            assert agent.config["workers"] == 2

            def every_socket_says(value: str) -> bool:  # fresh sockets: SO_REUSEPORT spreads them over the workers
                return all(rrset_values(query("127.0.0.1", agent.port, "shipped.corp.example", "A")) == [value]
                           for _ in range(24))

            wait_for(lambda: every_socket_says("10.5.5.5"), what="every worker answering from the file")
            stat = os.stat(path)
            path.write_text("10.6.6.6 shipped.corp.example\n")
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
            wait_for(lambda: every_socket_says("10.6.6.6"), what="every worker reloading the file")
            wait_for(lambda: (agent.metric("nodedns_hosts_answers_total") or 0) >= 48, what="the workers' count")
            assert agent.metric("nodedns_hosts_entries") == 1


def blocklist(path: Path, size: int = 16 << 20) -> int:
    """A blocklist of `size` bytes (the most a file may hold): one name a line, all 0.0.0.0; its lines."""
    lines = written = 0
    with path.open("w") as out:
        while written < size - 64:
            line = f"0.0.0.0 ad{lines}.tracker-{lines % 977}.example.com\n"
            out.write(line)
            written += len(line)
            lines += 1
    return lines


def tree_pids(pid: int) -> list[int]:
    """A process and its descendants."""
    out = [pid]
    kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False).stdout.split()
    for kid in kids:
        out += tree_pids(int(kid))
    return out


def test_a_fifo_directory_or_device_neither_stops_the_start_nor_a_reload_nor_sigterm(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    good = tmp_path / "good"
    good.write_text("10.7.7.7 good.corp.example\n")
    args = ["--manifests", str(EXAMPLE), "--kube-dns-config-period", "100ms"]
    for path in (fifo, tmp_path, "/dev/zero", good):
        args += ["--hosts", str(path)]
    with AgentProcess(args, log=tmp_path / "agent.log") as agent:
        agent.wait_ready(timeout=20)
        assert rrset_values(query("127.0.0.1", agent.port, "good.corp.example", "A")) == ["10.7.7.7"]
        errors = [f["error"] for f in json.loads(agent.get("/status")[1])["hosts"]["files"]]
        assert "a FIFO, not a regular file" in errors[0] and "a directory" in errors[1]
        assert "a character device" in errors[2] and not errors[3]
        good.write_text("10.8.8.8 good.corp.example\n")
        wait_for(lambda: rrset_values(query("127.0.0.1", agent.port, "good.corp.example", "A")) == ["10.8.8.8"],
                 what="the other file reloaded")
        started = time.monotonic()
        assert agent.stop(grace=10) == 0
        assert time.monotonic() - started < 5.0  # SIGTERM honoured promptly


@pytest.mark.parametrize("workers", [1, 2])
def test_a_16_mib_blocklist_is_parsed_once_per_node_into_one_compact_table(tmp_path: Path, workers: int) -> None:
    """One process: the table and what the parse leaves, within 100 MB over the same agent without the file;
    with workers, the supervisor parses and the workers map its table (no worker holds a copy)."""
    path = tmp_path / "block.hosts"
    lines = blocklist(path)
    args = ["--manifests", str(EXAMPLE)] + (["--workers", str(workers)] if workers > 1 else [])

    def settled_rss(agent: AgentProcess) -> list[tuple[int, int, int]]:
        agent.wait_ready(timeout=90)
        time.sleep(1.0)
        return [(pid, proc_kib(pid, "RssAnon"), proc_kib(pid, "RssShmem")) for pid in tree_pids(agent.pid)]

    with AgentProcess(args, log=tmp_path / "plain.log") as plain:
        before = settled_rss(plain)
    with AgentProcess([*args, "--hosts", str(path)], log=tmp_path / "hosts.log") as agent:
        after = settled_rss(agent)
        for i in (0, lines // 2, lines - 1):
            r = query("127.0.0.1", agent.port, f"ad{i}.tracker-{i % 977}.example.com", "A")
            assert rrset_values(r) == ["0.0.0.0"]
        ptr = query("127.0.0.1", agent.port, "0.0.0.0.in-addr.arpa", "PTR", tcp=True)
        assert len(ptr.answer[0]) == 32  # the first names, not 400,000 of them
        st = json.loads(agent.get("/status")[1])["hosts"]
        assert st["entries"] == lines and st["names"] == lines and st["bytes"] < 80 * lines
        log_text = agent.log_text()
    assert log_text.count("hostswatch") < 10  # read once: no line per line, no reading per worker
    grown = (after[0][1] - before[0][1]) // 1024  # the supervisor (or the one process): private memory
    assert grown < 100, f"{grown} MB more private memory with the blocklist"
    for (_pid, anon, _shm), (_pid0, anon0, _shm0) in zip(after[1:], before[1:], strict=False):
        if anon0 and workers > 1:  # a worker (the zygote's children): no copy of its own
            assert (anon - anon0) // 1024 < 16, f"a worker grew {(anon - anon0) // 1024} MB"


def test_sigterm_while_a_blocklist_is_parsed_at_start_is_honoured_at_once(tmp_path: Path) -> None:
    path = tmp_path / "block.hosts"
    blocklist(path)
    log = tmp_path / "agent.log"
    with AgentProcess(["--manifests", str(EXAMPLE), "--hosts", str(path)], log=log) as agent:
        wait_for(lambda: "no --setup-interface" in agent.log_text(), what="the start under way")
        time.sleep(0.5)  # the parse (seconds of CPU) has begun
        assert "--hosts: read" not in agent.log_text()
        started = time.monotonic()
        assert agent.stop(grace=20) == 0
        assert time.monotonic() - started < 3.0
    text = log.read_text()
    assert "Traceback" not in text
    # the parse was left, not waited for: its result never reached the agent (a stop that waited for the
    # whole parse logs the reading before it stops)
    assert "--hosts: read" not in text
