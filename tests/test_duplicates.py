"""One agent per DNS address, and nothing left behind.

A second `nodedns serve` on an address another process serves, that is not a hand-over successor
(not in the running agent's roster: the same --lock-dir and interface, or first listen address),
refuses to start: exit 2, naming the running agent's pid, before it touches the node. A successor
(the same roster) starts beside it as before (tests/test_handover.py). A clean stop leaves nothing
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

import pytest

from nodedns.handover import Roster, udp_occupants
from tests.helpers import EXAMPLE, free_port, no_default_upstream, nodedns_cmd, query, rrset_values, subprocess_env
from tests.netns import Netns, netns, requires_netns


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


@pytest.mark.slow
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


@pytest.mark.slow
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
    code = (f"from nodedns.handover import Roster\nr = Roster({str(directory)!r})\nprint(r.join(), flush=True)\n"
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


@pytest.mark.slow
@pytest.mark.netns
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
