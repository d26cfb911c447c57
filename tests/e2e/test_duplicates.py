"""One agent per DNS address, and nothing left behind.

A second `nodedns serve` on an address another process serves, that is not a hand-over successor
(not in the running agent's roster: the same --lock-dir and interface, or first listen address),
refuses to start: exit 2, naming the running agent's pid, before it touches the node. A successor
(the same roster) starts beside it as before (tests/e2e/test_handover.py). A clean stop leaves nothing
in the lock directory: no entry, no mutex, no roster directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodedns.node.handover import Occupant, Roster, udp_occupants
from tests.support.helpers import (
    EXAMPLE,
    free_port,
    no_default_upstream,
    nodedns_cmd,
    query,
    rrset_values,
    subprocess_env,
)
from tests.support.netns import Netns, netns, requires_netns


def serve(port: int, *flags: str) -> subprocess.Popen[str]:
    argv = nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}", "--status-listen",
                       "none", "--lameduck", "0s", *no_default_upstream(flags), *flags)
    return subprocess.Popen(argv, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def answers(port: int) -> bool:
    try:
        return rrset_values(query("127.0.0.1", port, "web.default.svc.cluster.local", timeout=0.5)) == ["10.96.12.34"]
    except Exception:  # noqa: BLE001 - not up (yet)
        return False


def wait_answering(port: int, proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not answers(port):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "not answering"
        time.sleep(0.05)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.communicate(timeout=10)


@pytest.mark.parametrize(("first_flags", "second_flags", "workers"), [
    ((), (), "1"),
    ((), (), "2"),
    (("--lock-dir", "{tmp}/a"), ("--lock-dir", "{tmp}/b"), "1"),
], ids=["no-roster", "first-runs-workers", "another-roster"])
def test_a_second_agent_on_the_same_address_refuses_to_start_naming_the_first(
        tmp_path: Path, procs: list[subprocess.Popen[str]], first_flags: tuple[str, ...],
        second_flags: tuple[str, ...], workers: str) -> None:
    port = free_port()
    first = serve(port, "--workers", workers, *(f.format(tmp=tmp_path) for f in first_flags))
    procs.append(first)
    wait_answering(port, first)
    second = serve(port, "--workers", "1", *(f.format(tmp=tmp_path) for f in second_flags))
    procs.append(second)
    out, _ = second.communicate(timeout=60)
    assert second.returncode == 2, out
    assert f"nodedns: refusing to start: 127.0.0.1:{port} is already served by pid {first.pid} (" in out, out
    assert "not a nodedns agent handing over to this one" in out
    if workers == "2":
        assert "whose worker pid" in out  # the socket's holder, named after the agent
    assert answers(port) and first.poll() is None  # the first one goes on, alone


def test_the_occupants_of_an_address_are_other_processes_unconnected_sockets() -> None:
    code = ("import socket, sys, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "s.bind(('127.0.0.1', 0))\nprint(s.getsockname()[1], flush=True)\ntime.sleep(30)\n")
    other = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None
        port = int(other.stdout.readline())
        (found,) = udp_occupants([("127.0.0.1", port), ("127.0.0.1", 0)])
        assert (found.address, found.pid, found.holder) == (("127.0.0.1", port), other.pid, None)
        assert found.command.startswith(sys.executable)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mine:
            mine.bind(("127.0.0.1", 0))
            assert udp_occupants([mine.getsockname()]) == []  # our own process is never a duplicate
            mine.connect(("127.0.0.1", port))
            assert udp_occupants([mine.getsockname()]) == []
    finally:
        other.kill()
        other.communicate(timeout=10)


# ----------------------------------------------------------------------------------------------
# Nothing left behind


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_clean_stop_leaves_nothing_in_the_lock_dir(tmp_path: Path, procs: list[subprocess.Popen[str]],
                                                      workers: str) -> None:
    locks = tmp_path / "locks"
    port = free_port()
    first = serve(port, "--lock-dir", str(locks), "--workers", workers)
    procs.append(first)
    wait_answering(port, first)
    (roster,) = os.listdir(locks)
    assert sorted(os.listdir(locks / roster)) == ["agent-00000001.json", "agent-00000001.lock", "mutex"]
    first.send_signal(signal.SIGTERM)
    out, _ = first.communicate(timeout=30)
    assert first.returncode == 0, out
    assert os.listdir(locks) == []


def test_a_waiter_on_a_mutex_the_last_agent_removed_takes_the_new_one(tmp_path: Path) -> None:
    """The last agent out unlinks the mutex while it holds it; a process that opened the old file meanwhile
    must not believe it holds the roster's mutex: it sees the file is gone and locks the new one."""
    directory = tmp_path / "roster"
    holder = Roster(str(directory))
    holder.acquire()
    code = (f"from nodedns.node.handover import Roster\nr = Roster({str(directory)!r})\nprint(r.join(), flush=True)\n"
            "import time; time.sleep(30)\n")
    joiner = subprocess.Popen([sys.executable, "-c", code], env=subprocess_env(), stdout=subprocess.PIPE, text=True)
    try:
        mutex = str(directory / "mutex")
        deadline = time.monotonic() + 10
        while not any(_link(joiner.pid, fd) == mutex for fd in _fds(joiner.pid)):
            assert time.monotonic() < deadline, "the joiner never opened the mutex"
            time.sleep(0.01)
        os.unlink(mutex)  # what the last agent's leave() does, under the mutex
        os.rmdir(directory)
        holder.release()
        assert joiner.stdout is not None
        assert joiner.stdout.readline().strip() == "[]"  # joined, alone
        assert sorted(os.listdir(directory)) == ["agent-00000001.json", "agent-00000001.lock", "mutex"]
        other = Roster(str(directory))
        assert [p.pid for p in other.others()] == [joiner.pid]  # the same roster, seen by everyone
    finally:
        joiner.kill()
        joiner.communicate(timeout=10)


def _fds(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return []


def _link(pid: int, fd: str) -> str:
    """Where a descriptor points, or "" when it closed since it was listed (the interpreter opens and
    closes files while it starts)."""
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except FileNotFoundError:
        return ""


# ----------------------------------------------------------------------------------------------
# A refused duplicate touches nothing on the node


def our_rules(ns: Netns) -> list[str]:
    return [r for r in ns.rules("iptables") if "nodedns:" in r]


@requires_netns
def test_a_refused_duplicate_leaves_the_running_agents_interface_and_rules_alone(tmp_path: Path) -> None:
    with netns("dup", prefix="ndfs") as ns:
        locks = tmp_path / "locks"
        node = ("--local-ip", "169.254.20.10", "--firewall", "iptables", "--lock-dir", str(locks), "--workers", "1",
                "--upstream", "none")
        first = subprocess.Popen([*ns.exec_prefix, *nodedns_cmd(
            "serve", "--manifests", str(EXAMPLE), "--setup-interface", "nd-first", *node, "--lameduck", "0s")],
            env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 30
            while len(our_rules(ns)) < 12:
                assert first.poll() is None and time.monotonic() < deadline, "the first agent never captured"
                time.sleep(0.1)
            before = sorted(our_rules(ns))
            second = subprocess.run([*ns.exec_prefix, *nodedns_cmd(
                "serve", "--manifests", str(EXAMPLE), "--setup-interface", "nd-second", *node)],
                env=subprocess_env(), capture_output=True, text=True, timeout=60)
            assert second.returncode == 2, second.stdout + second.stderr
            assert f"169.254.20.10:53 is already served by pid {first.pid}" in second.stderr
            assert sorted(our_rules(ns)) == before  # not "cleaned up" as a crashed predecessor's
            assert "nd-first" in ns.links() and "nd-second" not in ns.links()
            assert len(os.listdir(locks)) == 1  # the refused one's roster entry is gone with it
        finally:
            first.send_signal(signal.SIGTERM)
            first.communicate(timeout=30)
        assert first.returncode == 0 and our_rules(ns) == [] and os.listdir(locks) == []


# ----------------------------------------------------------------------------------------------
# A migration from NodeLocal DNSCache: node-cache's Pod still terminating as this one starts


def node_agent(**extra: str) -> Any:
    from nodedns import config as cfgmod
    from nodedns.app.agent import Agent

    raw = {"manifests": str(EXAMPLE), "local-ip": "169.254.20.10", "upstream": "none", "status-listen": "none",
           "debug-listen": "none", **extra}
    return Agent(cfgmod.build(raw, environ={}))


NODE_CACHE = Occupant(("169.254.20.10", 53), 4242, "/node-cache -localip 169.254.20.10,10.96.0.10 -conf /etc/Corefile")
OTHER_AGENT = Occupant(("169.254.20.10", 53), 4343, "/usr/bin/python3 /usr/local/bin/nodedns serve --config x")


@pytest.mark.parametrize(("managing", "holders", "waits", "refused"), [
    (True, [[NODE_CACHE], [NODE_CACHE], [NODE_CACHE], []], True, False),
    (True, [[NODE_CACHE]] * 1000, True, True),
    (True, [[OTHER_AGENT]] * 1000, False, True),
    (False, [[NODE_CACHE]] * 1000, False, True),
], ids=["node-cache-lets-go", "node-cache-never-lets-go", "another-nodedns-agent", "not-managing-the-node"])
def test_an_agent_managing_the_node_waits_for_a_foreign_holder_of_its_address_to_let_go(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, managing: bool,
        holders: list[list[Occupant]], waits: bool, refused: bool) -> None:
    import asyncio
    import logging

    from nodedns.errors import DuplicateAgent
    from nodedns.node import handover

    agent = node_agent(**({"setup-interface": "nodelocaldns"} if managing else {"listen": "169.254.20.10:53"}))
    agent.HOLDER_WAIT = 2.0
    looks = iter(holders)
    monkeypatch.setattr(handover, "udp_occupants", lambda addresses: next(looks))
    monkeypatch.setattr("nodedns.app.succession.HOLDER_POLL", 0.01)
    caplog.set_level(logging.INFO, logger="nodedns.app")
    started = time.monotonic()
    if refused:
        with pytest.raises(DuplicateAgent, match="169.254.20.10:53 is already served by pid"):
            asyncio.run(agent.succession.refuse_duplicates())
    else:
        asyncio.run(agent.succession.refuse_duplicates())
    took = time.monotonic() - started
    said = [r.getMessage() for r in caplog.records]
    assert any("waiting up to 2s for it to let go" in m for m in said) == waits, said
    if waits and refused:
        assert took >= 2.0  # the whole wait, then the refusal
    if not waits:
        assert took < 1.0 and len(holders) - sum(1 for _ in looks) == 1  # refused on the first look
    if waits and not refused:
        assert any(m.startswith("the other process let go of our DNS address after") for m in said), said


NODE_CACHE_STAND_IN = """
import socket, subprocess, sys, time
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("169.254.20.10", 53))
metrics = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
metrics.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
metrics.bind(("0.0.0.0", 9253))
metrics.listen()
print("holding", flush=True)
time.sleep(float(sys.argv[1]))
subprocess.run(["ip", "link", "del", "nodelocaldns"], check=True)  # node-cache's teardown, then its exit
udp.close()
time.sleep(float(sys.argv[2]))
metrics.close()
print("let go", flush=True)
time.sleep(60)
"""


@requires_netns
def test_nodedns_starting_while_node_caches_pod_still_terminates_waits_for_its_ports(tmp_path: Path) -> None:
    """docs/migrate-from-nodelocaldns.md: node-cache's Pod still holds 169.254.20.10:53 and :9253 while the
    nodedns Pod starts on the node (nothing holds a Pod without ports back). nodedns says so, waits for the
    stand-in to remove its interface and let go, then sets up its own and serves: no exit, no restart."""
    with netns("migrate", prefix="nd9d") as ns:
        ns.run("ip", "link", "add", "nodelocaldns", "type", "bridge")  # node-cache makes a dummy; no module here
        ns.run("ip", "addr", "add", "169.254.20.10/32", "dev", "nodelocaldns")
        ns.run("ip", "link", "set", "nodelocaldns", "up")
        holder = subprocess.Popen([*ns.exec_prefix, sys.executable, "-c", NODE_CACHE_STAND_IN, "3", "2"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log = tmp_path / "nodedns.log"
        agent = None
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
            with log.open("w") as out:
                agent = subprocess.Popen([*ns.exec_prefix, *nodedns_cmd(
                    "serve", "--manifests", str(EXAMPLE), "--setup-interface", "nodelocaldns", "--local-ip",
                    "169.254.20.10", "--firewall", "iptables", "--status-listen", "0.0.0.0:9253", "--debug-listen",
                    "127.0.0.1:9254", "--workers", "1", "--lameduck", "0s", "--upstream", "none", "--lock-dir",
                    str(tmp_path / "locks"))], env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 60
            while " ready: " not in log.read_text():
                assert agent.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            text = log.read_text()
            assert f"169.254.20.10:53 is already served by pid {holder.pid} (" in text, text
            assert "waiting up to 60s for it to let go" in text and "let go of our DNS address after" in text
            assert "--status-listen 0.0.0.0:9253 is in use by another process" in text
            assert "0.0.0.0:9253 came free after" in text
            assert "169.254.20.10/32" in ns.run("ip", "-o", "addr", "show", "nodelocaldns").stdout
            r = ns.run(sys.executable, "-c", "import dns.message, dns.query; print(dns.query.udp(dns.message."
                       "make_query('web.default.svc.cluster.local', 'A'), '169.254.20.10', timeout=3).answer[0][0])")
            assert r.stdout.strip() == "10.96.12.34"
        finally:
            if agent is not None and agent.poll() is None:
                agent.send_signal(signal.SIGTERM)
                agent.wait(30)
            holder.kill()
            holder.wait(10)
            if holder.stdout is not None:
                holder.stdout.close()
    assert agent is not None and agent.returncode == 0, log.read_text()


NODE_CACHE_BESIDE = """
import socket, time
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # as CoreDNS binds; this command line must not name the agent
udp.bind(("169.254.20.10", 53))
print("serving", flush=True)
time.sleep(120)
"""


@requires_netns
def test_on_the_way_back_a_leaving_agent_leaves_the_interface_to_node_cache(tmp_path: Path) -> None:
    """docs/migrate-from-nodelocaldns.md, "The way back": node-cache's new Pod starts while nodedns's is still
    in its lameduck and serves the same addresses beside it. nodedns, leaving, removes its own rules but
    leaves the interface and its addresses to node-cache, which would otherwise answer nothing until its
    next -syncinterval."""
    with netns("back", prefix="nd9d") as ns:
        log = tmp_path / "nodedns.log"
        with log.open("w") as out:
            agent = subprocess.Popen([*ns.exec_prefix, *nodedns_cmd(
                "serve", "--manifests", str(EXAMPLE), "--setup-interface", "nodelocaldns", "--local-ip",
                "169.254.20.10", "--firewall", "iptables", "--status-listen", "none", "--debug-listen", "none",
                "--workers", "1", "--lameduck", "0s", "--upstream", "none", "--lock-dir", str(tmp_path / "locks"))],
                env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)
        beside = None
        try:
            deadline = time.monotonic() + 60
            while len(our_rules(ns)) < 10:  # 10 rules for one local IP without a status port
                assert agent.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            beside = subprocess.Popen([*ns.exec_prefix, sys.executable, "-c", NODE_CACHE_BESIDE],
                                      stdout=subprocess.PIPE, text=True)
            assert beside.stdout is not None and beside.stdout.readline().strip() == "serving"
            agent.send_signal(signal.SIGTERM)
            assert agent.wait(30) == 0, log.read_text()
            text = log.read_text()
            assert f"leaving interface nodelocaldns and its addresses to pid {beside.pid} (" in text, text
            assert our_rules(ns) == []  # its own rules went
            assert "169.254.20.10/32" in ns.run("ip", "-o", "addr", "show", "nodelocaldns").stdout
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait(10)
            if beside is not None:
                beside.kill()
                beside.wait(10)
                if beside.stdout is not None:
                    beside.stdout.close()
