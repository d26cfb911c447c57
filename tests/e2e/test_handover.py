"""Hand-over: what the kernel gives (measured here), the roster, and restarts that drop no query.

The kernel: a connected UDP socket leaves the SO_REUSEPORT hash selection and keeps its queue; a
plain close loses what is queued; a closing TCP listener hands its accept queue to the group only
with net.ipv4.tcp_migrate_req=1. The roster: predecessors, dead entries, the mutex, `serving`,
newer agents. Restarts: a second `nodedns serve` on the same address beside the first, the first
SIGTERMed, while a paced UDP load runs: every query answered.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodedns.errors import HandoverError
from nodedns.node.handover import Roster, read_warm, roster_key, tcp_migration, warm_limit, write_warm
from tests.support.helpers import (
    EXAMPLE,
    free_port,
    no_default_upstream,
    nodedns_cmd,
    query,
    rrset_values,
    running_agent,
    subprocess_env,
    wait_for,
)
from tests.support.loadgen import UdpLoad
from tests.support.netns import Netns, netns, requires_netns
from tests.support.upstream_double import UpstreamDouble

# ----------------------------------------------------------------------------------------------
# What the kernel gives


def reuseport_udp(port: int = 0) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", port))
    s.setblocking(False)
    return s


def send_from_many_ports(port: int, n: int) -> None:
    for i in range(n):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
            c.sendto(b"q%d" % i, ("127.0.0.1", port))


def read_all(s: socket.socket) -> int:
    n = 0
    while True:
        try:
            s.recv(100)
        except BlockingIOError:
            return n
        n += 1


@pytest.mark.parametrize("leave", ["connect", "close"], ids=["detached-by-connect", "plain-close"])
def test_only_a_connected_udp_socket_leaves_the_group_without_losing_its_queue(leave: str) -> None:
    old = reuseport_udp()
    port = old.getsockname()[1]
    new = reuseport_udp(port)
    try:
        send_from_many_ports(port, 200)
        queued_in_old = read_all(old)
        assert queued_in_old > 20 and read_all(new) > 20  # the hash spreads flows over both
        send_from_many_ports(port, 200)  # queued in both
        got = read_all(new)  # the new socket's share (the old one's stays queued)
        if leave == "connect":
            old.connect(("127.0.0.1", port))  # what server._Socket.detach does
            send_from_many_ports(port, 200)  # after leaving: all to the new socket
            got += read_all(new)
            kept = read_all(old)
            assert kept > 20, "the queue before connect() stays readable"
            assert kept + got == 400, "nothing lost: the old socket's queue plus everything after"
        else:
            old.close()
            send_from_many_ports(port, 200)
            got += read_all(new)
            assert 200 + 20 < got < 400, "a closed socket's queue is gone with it; the rest reach the new one"
    finally:
        old.close()
        new.close()


SO_ATTACH_REUSEPORT_CBPF = 51


def attach_cbpf_return(sock: socket.socket, index: int) -> ctypes.Array[ctypes.c_char]:
    """A classic BPF program for the socket's SO_REUSEPORT group: `ret #index` (the buffer must live on)."""
    insns = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, index))  # BPF_RET | BPF_K
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, struct.pack("HL", 1, ctypes.addressof(insns)))
    return insns


@pytest.mark.parametrize(("index", "connect_first", "to_first", "to_second"), [
    (1, False, 0, 100),  # an index in range: that socket gets everything
    (5, False, None, None),  # past the end: the hash again, over both
    (0, True, 0, 100),  # the first socket connected: the lookup passes it over, BPF or not
], ids=["index-in-range", "index-past-the-end-falls-back-to-the-hash", "index-of-a-connected-socket"])
def test_what_classic_bpf_steering_by_socket_index_does(index: int, connect_first: bool, to_first: int | None,
                                                         to_second: int | None) -> None:
    """The alternative to connect(): SO_ATTACH_REUSEPORT_CBPF returning a socket index (join order). It works
    while the group's layout is known, but indices shift when a socket leaves, and past the end it is the hash."""
    first = reuseport_udp()
    port = first.getsockname()[1]
    second = reuseport_udp(port)
    program = attach_cbpf_return(first, index)
    try:
        if connect_first:
            first.connect(("127.0.0.1", port))
        send_from_many_ports(port, 100)
        got = (read_all(first), read_all(second))
        if to_first is None:
            assert got[0] > 10 and got[1] > 10 and sum(got) == 100, got
        else:
            assert got == (to_first, to_second)
    finally:
        del program
        first.close()
        second.close()


def test_a_detached_udp_socket_still_answers_any_client() -> None:
    s = reuseport_udp()
    port = s.getsockname()[1]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
        client.settimeout(2)
        client.sendto(b"query", ("127.0.0.1", port))
        time.sleep(0.05)
        s.connect(("127.0.0.1", port))
        data, addr = s.recvfrom(100)
        s.sendto(b"answer", addr)
        assert (data, client.recv(100)) == (b"query", b"answer")
    s.close()


TCP_PROBE = r"""
import socket, sys, time
def listener(port=0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", port)); s.listen(128); s.setblocking(False)
    return s
old = listener(); port = old.getsockname()[1]; new = listener(port)
clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(40)]
time.sleep(0.1)
old.close()  # nothing accepted yet: about half the connections wait in its accept queue
time.sleep(0.1)
accepted = 0
while True:
    try:
        new.accept()[0].close()
    except BlockingIOError:
        break
    accepted += 1
print(accepted)
"""


@requires_netns
@pytest.mark.parametrize(("migrate", "all_accepted"), [("0", False), ("1", True)],
                         ids=["tcp_migrate_req=0-resets", "tcp_migrate_req=1-moves"])
def test_a_closing_listener_hands_its_accept_queue_over_only_with_tcp_migrate_req(migrate: str,
                                                                                 all_accepted: bool) -> None:
    with netns("tcpmig", prefix="nd9b") as ns:
        ns.run("sysctl", "-qw", f"net.ipv4.tcp_migrate_req={migrate}")
        accepted = int(ns.run(sys.executable, "-c", TCP_PROBE).stdout)
    assert (accepted == 40) is all_accepted, accepted


@pytest.mark.parametrize(("content", "write", "on", "note"), [
    ("1\n", True, True, "is 1"),
    ("0\n", True, True, "set net.ipv4"),
    ("0\n", False, False, "only when it manages"),
    (None, True, False, "cannot read"),
], ids=["already-on", "switched-on", "left-alone-unless-managing-the-node", "missing"])
def test_tcp_migration_is_switched_on_when_it_may_be(tmp_path: Path, content: str | None, write: bool, on: bool,
                                                     note: str) -> None:
    path = tmp_path / "tcp_migrate_req"
    if content is not None:
        path.write_text(content)
    result, said = tcp_migration(write=write, path=str(path))
    assert (result, note in said) == (on, True), said
    if content is not None:
        assert path.read_text().strip() == ("1" if on else "0")


# ----------------------------------------------------------------------------------------------
# The roster


def in_other_process(directory: Path, code: str) -> subprocess.Popen[str]:
    """A process that joins the roster, runs `code` (with `roster` bound), prints READY and waits."""
    script = (f"import sys, time\nfrom nodedns.node.handover import Roster\nroster = Roster({str(directory)!r})\n"
              f"roster.join()\n{code}\nprint('READY', roster.seq, flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], env=subprocess_env(), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY"), line
    return proc


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)
        if p.stdout is not None:
            p.stdout.close()


def test_a_warm_file_over_the_cache_budget_or_not_a_regular_file_is_refused_unread(tmp_path: Path) -> None:
    path = str(tmp_path / "agent-1.warm")
    write_warm(path, [b"x" * 1000, b"y" * 10])
    assert read_warm(path, 2000) == [b"x" * 1000, b"y" * 10]
    with pytest.raises(HandoverError, match="1046 bytes, over 500 bytes: refused"):
        read_warm(path, 500)
    assert warm_limit(32 << 20) == (32 << 20) + (1 << 20)  # the budget and 1 MiB of framing and EDNS memory
    fifo = str(tmp_path / "agent-2.warm")
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(HandoverError, match="not a regular file"):
        read_warm(fifo)  # no writer: opened without waiting for one
    assert time.monotonic() - started < 1.0


def test_the_first_agent_is_alone_and_a_second_one_sees_it(tmp_path: Path,
                                                           processes: list[subprocess.Popen[str]]) -> None:
    roster = tmp_path / "nodelocaldns.netns-1"
    first = Roster(str(roster))
    assert first.join() == [] and first.seq == 1
    first.set_serving(True)
    second = Roster(str(roster), pid=4242)
    (peer,) = second.join()
    assert (peer.seq, peer.pid, peer.serving) == (1, os.getpid(), True) and second.seq == 2
    assert [p.seq for p in first.newer() or []] == [2]
    assert second.newer() == []
    second.leave()
    assert first.others() == [] and first.newer() == []
    first.leave()
    assert os.listdir(tmp_path) == []  # the last one out leaves nothing behind: no entry, no mutex, no directory


def test_a_newcomer_is_numbered_after_every_live_entry_even_when_an_older_one_left(tmp_path: Path) -> None:
    first, second, third = (Roster(str(tmp_path), pid=pid) for pid in (101, 102, 103))
    first.join()
    second.join()
    first.leave()  # the oldest goes first: the second is alone, with number 2
    (peer,) = third.join()
    assert (peer.seq, peer.pid, third.seq) == (2, 102, 3)
    assert [p.seq for p in second.newer() or []] == [3] and third.newer() == []
    second.leave()
    third.leave()


def test_a_killed_agents_entry_is_found_dead_and_removed(tmp_path: Path,
                                                         processes: list[subprocess.Popen[str]]) -> None:
    proc = in_other_process(tmp_path, "roster.set_serving(True)")
    processes.append(proc)
    me = Roster(str(tmp_path))
    (peer,) = me.join()
    assert (peer.pid, peer.serving) == (proc.pid, True)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert me.others() == []  # its flock died with it
    assert not any(name.startswith(f"agent-{peer.seq:08d}") for name in os.listdir(tmp_path))
    me.leave()


def test_the_mutex_is_exclusive_across_processes(tmp_path: Path, processes: list[subprocess.Popen[str]]) -> None:
    processes.append(in_other_process(tmp_path, "roster.acquire()"))
    me = Roster(str(tmp_path), mutex_timeout=0.3)
    os.makedirs(tmp_path, exist_ok=True)
    assert me.acquire(wait=False) is False
    assert me.newer() is None  # busy: ask again later
    with pytest.raises(Exception, match="held for more than"):
        me.others()


@pytest.mark.parametrize(("interface", "firewall", "listen", "name"), [
    ("nodelocaldns", "iptables", (("169.254.20.10", 53),), "nodelocaldns"),
    (None, "nftables", (("169.254.20.10", 53),), "firewall-nftables"),
    (None, "none", (("::1", 5353),), "dns-__1-5353"),
], ids=["interface", "firewall-only", "address-only"])
def test_the_roster_key_names_what_is_shared_and_the_network_namespace(
        interface: str | None, firewall: str, listen: tuple[tuple[str, int], ...], name: str) -> None:
    key = roster_key(interface=interface, firewall=firewall, listen=listen)
    assert key == f"{name}.netns-{os.stat('/proc/self/ns/net').st_ino}"


def test_readyz_says_ready_only_once_the_roster_says_serving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A successor is started once its predecessor is ready; if it joined the roster before the predecessor's
    entry said "serving", it would think itself alone and answer unsynced beside it. So readiness waits for
    the entry to be written (here slowed down to make the window wide)."""
    write = Roster.set_serving

    def slowly(self: Roster, serving: bool) -> None:
        time.sleep(0.5)
        write(self, serving)

    monkeypatch.setattr(Roster, "set_serving", slowly)
    with running_agent({"manifests": str(EXAMPLE), "lock-dir": str(tmp_path)}) as agent:
        (directory,) = tmp_path.iterdir()
        onlooker = Roster(str(directory))  # never joins: only reads the roster
        said: list[list[str]] = []

        def ready() -> bool:
            reasons = agent.call(agent.agent.observer.readiness)
            said.append(reasons)
            if not reasons:
                assert [p.serving for p in onlooker.others()] == [True], "ready before the roster says serving"
            return not reasons

        wait_for(ready, timeout=10, what="ready")
        assert ["hand-over: not yet marked serving in the roster"] in said


# ----------------------------------------------------------------------------------------------
# Restarts under load (unprivileged: 127.0.0.1, a roster in a temporary directory)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc)


class Serve:
    """`nodedns serve` on one DNS port with its own status port, the roster in a temporary directory
    (in a network namespace when `ns` is given)."""

    def __init__(self, port: int, lock_dir: Path, log: Path, *flags: str, ns: Netns | None = None,
                 status: int | None = None, debug: int | None = None,
                 source: tuple[str, ...] = ("--manifests", str(EXAMPLE)), listen: bool = True) -> None:
        self.status = status or free_port()
        self.debug = debug or free_port()
        self.log = log
        self.ns = ns
        where = ("--listen", f"127.0.0.1:{port}") if listen else ()  # else the local IPs' port 53 (--local-ip)
        argv = nodedns_cmd("serve", *source, *where, "--status-listen",
                           f"127.0.0.1:{self.status}", "--debug-listen", f"127.0.0.1:{self.debug}", "--lock-dir",
                           str(lock_dir), "--lameduck", "0.5s", *no_default_upstream(flags), *flags)
        with log.open("ab") as out:
            self.proc = subprocess.Popen([*(ns.exec_prefix if ns else []), *argv], env=subprocess_env(), stdout=out,
                                         stderr=subprocess.STDOUT)

    def ready(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()
        url = f"http://127.0.0.1:{self.status}/readyz"
        if self.ns is None:
            return get(url)[0] == 200
        code = f"import urllib.request; urllib.request.urlopen({url!r}, timeout=1)"
        return self.ns.run(sys.executable, "-c", code, check=False).returncode == 0

    def status_doc(self) -> dict[str, object]:
        code, body = get(f"http://127.0.0.1:{self.debug}/status")
        assert code == 200, body
        doc: dict[str, object] = json.loads(body)
        return doc

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def agents() -> Iterator[list[Serve]]:
    started: list[Serve] = []
    yield started
    for a in started:
        a.kill()


@pytest.mark.parametrize("workers", ["1", "2"], ids=["one-process", "two-workers"])
def test_a_restart_beside_the_running_agent_drops_no_query(tmp_path: Path, agents: list[Serve],
                                                           workers: str) -> None:
    port = free_port()
    old = Serve(port, tmp_path / "locks", tmp_path / "old.log", "--workers", workers)
    agents.append(old)
    wait_for(old.ready, timeout=30, what="the first agent ready")
    with UdpLoad("127.0.0.1", port, qps=1500, sockets=64,
                 names=("web.default.svc.cluster.local", "nope.default.svc.cluster.local")) as load:
        wait_for(lambda: load.answered >= 500, timeout=20, what="the load answered by the first agent")
        new = Serve(port, tmp_path / "locks", tmp_path / "new.log", "--workers", workers)
        agents.append(new)
        wait_for(new.ready, timeout=30, what="the second agent ready")
        wait_for(lambda: not old.ready(), timeout=5, what="the old agent superseded")
        assert old.stop() == 0, old.log.read_text()
        answered = load.answered
        wait_for(lambda: load.answered >= answered + 500, timeout=20, what="the load answered by the second agent")
    assert load.sent > 1000
    assert load.lost() == 0, f"lost {load.lost()} of {load.sent} (sent at {load.lost_at[:10]}s)\n" + \
        old.log.read_text()
    assert set(load.rcodes) == {0, 3}  # NOERROR and NXDOMAIN: never a SERVFAIL from an unsynced index
    handover = new.status_doc()["handover"]
    assert isinstance(handover, dict) and handover["joined_with"] == [{"pid": old.proc.pid, "serving": True}]
    assert "binding once the index has synced" in new.log.read_text()
    assert new.stop() == 0


@pytest.mark.parametrize("workers", ["1", "2"], ids=["one-process", "two-workers"])
def test_the_successor_answers_from_the_predecessors_forward_cache(tmp_path: Path, agents: list[Serve],
                                                                   workers: str) -> None:
    """A restart during an upstream outage loses no cached answer: the successor loads the running agent's
    forward cache (and its EDNS memory) before it binds, so names cached before are not asked again and are
    answered while the upstream is down."""
    names = [f"n{i}.example.com" for i in range(40)]
    with UpstreamDouble({n: {"A": [f"192.0.2.{i + 1}"]} for i, n in enumerate(names)}, ttl=300) as up:
        port = free_port()
        old = Serve(port, tmp_path / "locks", tmp_path / "old.log", "--workers", workers, "--upstream", up.address)
        agents.append(old)
        wait_for(old.ready, timeout=30, what="the first agent ready")
        for n in names:  # --workers 2: the kernel spreads the client ports, so both workers cache some
            for _ in range(3):
                assert rrset_values(query("127.0.0.1", port, n)) == [f"192.0.2.{names.index(n) + 1}"]
        asked = {n: up.count(n) for n in names}
        assert all(asked.values())
        new = Serve(port, tmp_path / "locks", tmp_path / "new.log", "--workers", workers, "--upstream", up.address)
        agents.append(new)
        wait_for(new.ready, timeout=30, what="the second agent ready")
        assert old.stop() == 0, old.log.read_text()
        up.mode = "drop"  # the upstream stops answering: only a cache answers now
        for n in names:
            for _ in range(3):  # new client ports: any worker of the successor
                r = query("127.0.0.1", port, n, timeout=3)
                assert rrset_values(r) == [f"192.0.2.{names.index(n) + 1}"], new.log.read_text()
        assert {n: up.count(n) for n in names} == asked  # not asked again
        handover = new.status_doc()["handover"]
        assert isinstance(handover, dict)
        taken = handover["forward_cache"]["taken"]
        assert taken["entries"] >= len(names) and taken["from_pid"] == old.proc.pid
        log = new.log.read_text()
        loaded = [log.index(f"worker {n}: ") for n in range(int(workers))] if workers != "1" else []
        loaded = [log.index("forward cache entries", at) for at in loaded] or [log.index("forward cache entries")]
        assert max(loaded) < log.index("listening on"), log  # loaded before any of its sockets answers
        assert "left the forward cache for the newer agent" in old.log.read_text()
        assert not list((tmp_path / "locks").rglob("*.warm*"))  # read and removed
        assert new.stop() == 0


TCP_CLIENTS = r"""
import sys, threading, time
import dns.message, dns.query
port, seconds = int(sys.argv[1]), float(sys.argv[2])
ok, failed = [0], []
def client():
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            r = dns.query.tcp(dns.message.make_query("web.default.svc.cluster.local", "A"), "127.0.0.1", port=port,
                              timeout=3)
            assert r.answer
            ok[0] += 1
        except Exception as exc:
            failed.append(f"{time.monotonic():.3f} {exc!r}")
threads = [threading.Thread(target=client) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(ok[0], len(failed), failed[:5])
"""


@requires_netns
def test_a_restart_drops_no_tcp_query(tmp_path: Path) -> None:
    """New connections every few milliseconds while the agent is replaced (net.ipv4.tcp_migrate_req=1, as the
    agent sets it when it manages the node): connections the old agent accepted are answered, then closed.
    A connection still in the old listener's accept queue at close is the rare case; what the sysctl does for
    it is shown by the kernel test above, not here."""
    with netns("tcprestart", prefix="nd9b") as ns:
        ns.run("sysctl", "-qw", "net.ipv4.tcp_migrate_req=1")
        port = 5353
        old = Serve(port, tmp_path / "locks", tmp_path / "old.log", "--workers", "2", ns=ns, status=9301)
        new: Serve | None = None
        try:
            wait_for(old.ready, timeout=30, what="the first agent ready")
            load = subprocess.Popen([*ns.exec_prefix, sys.executable, "-c", TCP_CLIENTS, str(port), "8"],
                                    env=subprocess_env(), stdout=subprocess.PIPE, text=True)
            time.sleep(1.0)
            new = Serve(port, tmp_path / "locks", tmp_path / "new.log", "--workers", "2", ns=ns, status=9302)
            wait_for(new.ready, timeout=30, what="the second agent ready")
            assert old.stop() == 0
            out, _ = load.communicate(timeout=60)
        finally:
            old.kill()
            if new is not None:
                new.kill()
    answered, failed, examples = out.split(" ", 2)
    assert int(answered) > 200 and int(failed) == 0, f"{out}\n{old.log.read_text()}"


NODE_FLAGS = ("--setup-interface", "nodelocaldns", "--local-ip", "169.254.20.10", "--firewall", "iptables",
              "--workers", "1")
ASK_LOCAL_IP = ("import dns.message, dns.query; r = dns.query.udp(dns.message.make_query("
                "'web.default.svc.cluster.local', 'A'), '169.254.20.10', timeout=2); print(r.answer[0][0])")


def node_state(ns: Netns) -> tuple[bool, list[str]]:
    """(the interface is there, our conntrack-bypass rules) in the namespace."""
    from nodedns.node.firewall import ALLOW_COMMENT, SKIP_COMMENT

    rules = [r for r in ns.rules() if SKIP_COMMENT in r or ALLOW_COMMENT in r]
    return "nodelocaldns" in ns.links(), rules


@requires_netns
def test_a_restart_keeps_the_interface_and_the_rules_the_successor_uses(tmp_path: Path) -> None:
    """The node as the DaemonSet sets it up (interface, local IP, iptables rules): the old agent, stopped once its
    successor serves, leaves the interface and the rules in place (the successor answers through them); the
    last agent out removes both."""
    with netns("keepnode", prefix="nd9b") as ns:
        old = Serve(53, tmp_path / "locks", tmp_path / "old.log", *NODE_FLAGS, ns=ns, listen=False)
        new: Serve | None = None
        try:
            wait_for(old.ready, timeout=30, what="the first agent ready")
            wait_for(lambda: len(node_state(ns)[1]) > 0, timeout=10, what="the rules installed")
            before = node_state(ns)
            assert before[0] and any("port 53 " in r for r in before[1]), before
            new = Serve(53, tmp_path / "locks", tmp_path / "new.log", *NODE_FLAGS, ns=ns, listen=False)
            wait_for(new.ready, timeout=30, what="the second agent ready")
            wait_for(lambda: not old.ready() if old.proc.poll() is None else True, timeout=10,
                     what="the old agent superseded")
            assert old.stop() == 0, old.log.read_text()
            assert "leaving the interface and the rules to the other agent" in old.log.read_text()
            up, rules = node_state(ns)
            dns_rules = [r for r in before[1] if "port 53 " in r]
            assert up and dns_rules and set(dns_rules) <= set(rules), (rules, old.log.read_text())
            assert any(str(new.status) in r for r in rules), rules  # the successor's health port: its own rules
            answer = ns.run(sys.executable, "-c", ASK_LOCAL_IP, env=subprocess_env(), check=False)
            assert answer.stdout.strip() == "10.96.12.34", answer.stderr + new.log.read_text()
            assert new.stop() == 0, new.log.read_text()
            assert node_state(ns) == (False, []), new.log.read_text()  # the last one out cleans up
        finally:
            old.kill()
            if new is not None:
                new.kill()


@pytest.fixture
def agent_and_successor(tmp_path: Path, agents: list[Serve]) -> Iterator[tuple[Serve, int, Roster]]:
    """A running agent (one process, roster in tmp_path) and a newer agent's roster entry, held by this
    test process and not serving yet."""
    port = free_port()
    old = Serve(port, tmp_path / "locks", tmp_path / "old.log", "--workers", "1")
    agents.append(old)
    wait_for(old.ready, timeout=30, what="ready")
    key = roster_key(interface=None, firewall="none", listen=(("127.0.0.1", port),))
    newer = Roster(str(tmp_path / "locks" / key))
    assert [p.serving for p in newer.join()] == [True]  # the running agent: /readyz says 200 once it says so
    yield old, port, newer
    newer.leave()


def answers(port: int) -> bool:
    try:
        return bool(rrset_values(query("127.0.0.1", port, "web.default.svc.cluster.local", timeout=1)))
    except Exception:  # noqa: BLE001 - any failure means "not answering"
        return False


def test_an_agent_stays_ready_beside_a_newcomer_until_it_serves_then_yields_the_status_port(
        agent_and_successor: tuple[Serve, int, Roster]) -> None:
    old, port, newer = agent_and_successor
    wait_for(lambda: "a newer nodedns" in old.log.read_text(), timeout=5, what="the newcomer noticed")
    assert get(f"http://127.0.0.1:{old.status}/readyz")[0] == 200 and answers(port)  # not ready yet: old serves
    newer.set_serving(True)
    wait_for(lambda: get(f"http://127.0.0.1:{old.status}/readyz")[0] == 0, timeout=5,
             what="the status listener closed")
    assert "the newer nodedns (pid" in old.log.read_text() and "serves: not ready any more" in old.log.read_text()
    assert get(f"http://127.0.0.1:{old.debug}/status")[0] == 0  # the debug listener went with it
    assert answers(port)  # DNS goes on until it is told to stop
    assert old.stop() == 0


def test_a_stopping_agent_answers_until_its_starting_successor_serves(
        agent_and_successor: tuple[Serve, int, Roster]) -> None:
    old, port, newer = agent_and_successor
    old.proc.send_signal(signal.SIGTERM)  # lameduck 0.5 s, then it would leave
    wait_for(lambda: "does not serve yet; answering until it does" in old.log.read_text(), timeout=10,
             what="the stopping agent waiting for its successor")  # after its lameduck
    assert old.proc.poll() is None and answers(port), old.log.read_text()
    newer.set_serving(True)
    assert old.proc.wait(10) == 0


@pytest.mark.parametrize("workers", ["1", "2"], ids=["one-process", "two-workers"])
def test_an_agent_whose_successor_was_killed_takes_the_status_port_back_and_is_ready_again(
        tmp_path: Path, agents: list[Serve], workers: str) -> None:
    """The successor took over (the old agent unready, its status listener closed), then was SIGKILLed:
    its flock went with it. The old agent, still answering DNS, listens on the shared status port again
    and is ready; the kubelet's probes and the scrapes reach it."""
    port = free_port()
    old = Serve(port, tmp_path / "locks", tmp_path / "old.log", "--workers", workers)
    agents.append(old)
    wait_for(old.ready, timeout=30, what="the old agent ready")
    new = Serve(port, tmp_path / "locks", tmp_path / "new.log", "--workers", workers, status=old.status,
                debug=old.debug)  # the shared status and debug ports, as in the DaemonSet
    agents.append(new)
    wait_for(lambda: "closing our status and debug listeners" in old.log.read_text(), timeout=30,
             what="the old agent superseded")

    def debug_port_is_the_new_ones() -> bool:
        code, body = get(f"http://127.0.0.1:{old.debug}/status")
        return code == 200 and json.loads(body)["handover"]["seq"] == 2

    wait_for(debug_port_is_the_new_ones, timeout=10, what="the shared ports answered by the new agent")
    new_workers = [int(p) for p in re.findall(r"worker \d+: pid (\d+)", new.log.read_text())]
    new.proc.kill()  # SIGKILL: no teardown, no roster update; the kernel drops its flock
    new.proc.wait(10)
    try:
        wait_for(lambda: "serves no more" in old.log.read_text(), timeout=10, what="the old agent noticed")
        wait_for(lambda: readyz(old)[0] == 200, timeout=15, what="the old agent ready again on the shared port")
        # the debug listener is opened again just after the status one (readiness is the status port's)
        wait_for(lambda: get(f"http://127.0.0.1:{old.debug}/status")[0] == 200, timeout=15,
                 what="the old agent's debug listener open again")
        handover = old.status_doc()["handover"]
        assert isinstance(handover, dict)
        assert handover["superseded_by"] is None and handover["taken_back"] == 1 and handover["seq"] == 1
        assert answers(port)
        assert "listeners open again" in old.log.read_text()
        code, text = get(f"http://127.0.0.1:{old.status}/metrics")
        assert code == 200 and "coredns_dns_requests_total" in text
    finally:
        for pid in new_workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert old.stop() == 0


# ----------------------------------------------------------------------------------------------
# Upgrades: a new agent with a bad config never takes over


def readyz(agent: Serve) -> tuple[int, str]:
    return get(f"http://127.0.0.1:{agent.status}/readyz")


@pytest.mark.parametrize("bad", ["config-error-at-start", "clusterrole-without-endpointslices"])
def test_a_new_agent_with_a_bad_config_never_gets_ready_and_the_old_one_keeps_serving(
        tmp_path: Path, agents: list[Serve], bad: str) -> None:
    """The surge rollout's case: the new Pod starts beside the old one with a config that cannot work. It
    fails its readiness (or exits), the old agent keeps answering every query and stays ready."""
    from tests.support.apiserver import FakeApiServer, namespace

    port = free_port()
    old = Serve(port, tmp_path / "locks", tmp_path / "old.log", "--workers", "1")
    agents.append(old)
    wait_for(old.ready, timeout=30, what="the old agent ready")
    with FakeApiServer() as api, UdpLoad("127.0.0.1", port, qps=800, sockets=32,
                                         names=("web.default.svc.cluster.local",
                                                "nope.default.svc.cluster.local")) as load:
        api.put("Namespace", namespace("default"))
        api.deny("endpointslices")  # an older ClusterRole
        if bad == "config-error-at-start":  # forwarding to its own address: found once it starts
            new = Serve(port, tmp_path / "locks", tmp_path / "new.log", "--workers", "1", "--upstream",
                        f"127.0.0.1:{port}")
        else:
            kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
            new = Serve(port, tmp_path / "locks", tmp_path / "new.log", "--workers", "1",
                        source=("--kubeconfig", kubeconfig))
        agents.append(new)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            assert readyz(old)[0] == 200, readyz(old)  # the old one stays ready throughout
            if new.proc.poll() is None:
                assert readyz(new)[0] != 200, readyz(new)
            time.sleep(0.2)
        if bad == "config-error-at-start":
            assert new.proc.poll() == 2 and "own listen address" in new.log.read_text()
        else:
            code, body = readyz(new)
            assert code == 503 and "sync: endpointslices: 403 Forbidden" in body, body
            assert "binding once the index has synced" in new.log.read_text()  # so it never answers
    assert load.sent > 4000 and load.lost() == 0, f"lost {load.lost()} of {load.sent}"
    assert set(load.rcodes) == {0, 3}  # the old agent's answers only: never a SERVFAIL
    handover = old.status_doc()["handover"]
    assert isinstance(handover, dict) and handover["superseded_by"] is None
    new.kill()
    assert old.stop() == 0


@requires_netns
@pytest.mark.parametrize(("args", "after", "said"), [
    ((), "0", "no --setup-interface: this agent changes no interface and no host sysctl"),
    (("--firewall", "iptables", "--local-ip", "127.0.0.53"), "0",
     "net.ipv4.tcp_migrate_req is 0: TCP connections still in the accept queue when a listener closes are reset "
     "(the agent sets it only when it manages a node interface, --setup-interface)"),
    (("--setup-interface", "nodelocaldns", "--local-ip", "169.254.20.10"), "1",
     "hand-over: set net.ipv4.tcp_migrate_req to 1"),
], ids=["quick-start", "rules-without-an-interface", "managing-a-node-interface"])
def test_only_an_agent_managing_a_node_interface_changes_a_host_sysctl(tmp_path: Path, args: tuple[str, ...],
                                                                       after: str, said: str) -> None:
    """The quick start run as root on a developer's machine leaves net.ipv4.tcp_migrate_req as it found it,
    and says why; the DaemonSet's agent (which manages the node's interface) switches it on."""
    log = tmp_path / "agent.log"
    with netns("sysctl", prefix="nd9d") as ns:
        ns.run("sysctl", "-qw", "net.ipv4.tcp_migrate_req=0")
        argv = nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen", "127.0.0.1:5353", "--upstream", "none",
                           "--lameduck", "0s", "--lock-dir", str(tmp_path / "locks"), *args)
        with log.open("w") as out:
            proc = subprocess.Popen([*ns.exec_prefix, *argv], env=subprocess_env(), stdout=out,
                                    stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: " ready: " in log.read_text() or proc.poll() is not None, timeout=30,
                     what="the agent to be ready")
            assert proc.poll() is None, log.read_text()
            assert ns.run("sysctl", "-n", "net.ipv4.tcp_migrate_req").stdout.strip() == after
        finally:
            proc.terminate()
            proc.wait(20)
    assert said in log.read_text(), log.read_text()
