"""TCP clients that never read, in the shipped configuration (tests/support/shipped.py: the ConfigMap's two workers
and allow list): pipelined queries wait in the kernel, not in the agent; a connection that does not take its
answers is reset at the idle timeout; one address holds a bounded share of the connections.

The attacker is 127.0.0.2, the good Pod 127.0.0.1 (tests/support/tenant.py); the 60 KB answer is a TXT name of
an attacker's domain, which the upstream truncates over UDP (the agent fetches and caches it over TCP).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support import rawdns
from tests.support.apiserver import FakeApiServer
from tests.support.fuzzing import query
from tests.support.helpers import EXAMPLE, running_agent, wait_for
from tests.support.shipped import ShippedAgent, cluster
from tests.support.tenant import BIG_TXT, EVIL, GOOD, Flood, Prober, RssSampler, pipelined, tcp_ask
from tests.support.upstream_double import UpstreamDouble

BIG = "big.attacker.example"
WEB = "web.default.svc.cluster.local"
MB = 1 << 20
TCP_CLOSE = 7  # TCP_INFO's tcpi_state after a reset (a FIN would leave CLOSE_WAIT, 8)


@contextlib.contextmanager
def shipped(tmp_path: Path, **override: Any) -> Iterator[ShippedAgent]:
    with FakeApiServer() as api, UpstreamDouble({BIG: {"TXT": BIG_TXT}}) as up:
        up.per_name[BIG] = "truncate"  # TC=1 over UDP: the agent asks again over TCP and caches the 60 KB
        cluster(api)
        with ShippedAgent(tmp_path, api, up, **override) as agent:
            agent.wait_ready()
            warm(agent.port)
            # the workers publish their counters a moment later: a test's "before" must include the warm-up's
            wait_for(lambda: tcp_answers(agent, "TXT") >= WARM, timeout=10, what="the warm-up's answers counted")
            yield agent


WARM = 20  # TCP queries of the big TXT name before a test begins


def warm(port: int) -> None:
    """The 61 KB answer cached in every worker (each has its own forward cache; the kernel picks the worker
    of a connection by its port: twenty new connections miss one of them once in 500,000 runs)."""
    for _ in range(WARM):
        answer = tcp_ask(port, BIG, "TXT", timeout=10)
        assert answer is not None and len(answer) > 60_000


def tcp_answers(agent: ShippedAgent, rdtype: str) -> float:
    text = agent.get("/metrics")[1]
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("coredns_dns_requests_total{") and 'proto="tcp"' in line
               and f'type="{rdtype}"' in line)


def settled(read: Any, quiet: float = 0.5, timeout: float = 15.0) -> float:
    """Poll `read()` until it stays the same for `quiet` seconds; its value."""
    value, since = read(), time.monotonic()
    deadline = since + timeout
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return float(value)
    raise AssertionError(f"still changing after {timeout}s: {value}")


def test_a_pipelining_client_that_never_reads_stays_within_a_bound_and_other_pods_udp_is_all_answered(
        tmp_path: Path) -> None:
    with shipped(tmp_path) as agent:
        sampler = RssSampler(agent.proc.pid)  # type: ignore[union-attr]
        sampler.start()
        probes = Prober(agent.port)
        probes.start()
        try:
            before = settled(lambda: tcp_answers(agent, "TXT"))  # warm()'s, published by the workers once a second
            sampler.reset()
            started = time.monotonic()
            flood = Flood(agent.port)
            flood.open(16, pipelined(BIG, "TXT", 2000))  # 32,000 queries for 61 KB each: 1.9 GB of answers
            answered = settled(lambda: tcp_answers(agent, "TXT")) - before
            growth = sampler.peak() - sampler.base
            assert flood.alive() == 16  # open and stalled, not yet reset (the idle timeout is 10 s)
            flood.close()
            ended = time.monotonic()
        finally:
            probes.stop()
            sampler.stop()
        # a frame is taken only while little is owed: the answer is not kept (over 16 KiB), so each connection's
        # first four queries are worked on together (the in-flight cap), and no further one is taken
        assert answered <= 16 * 4, answered
        assert growth < 32 * MB, f"the agent grew {growth / MB:.1f} MB"
        sent = probes.window(started, ended)
        assert len(sent) > 10 and probes.lost(started, ended) == [], f"{len(probes.lost(started, ended))} lost"


def test_a_connection_that_never_reads_is_reset_at_the_idle_timeout_even_with_a_full_send_buffer(
        tmp_path: Path) -> None:
    with shipped(tmp_path, **{"tcp-idle-timeout": "1s"}) as agent:
        flood = Flood(agent.port)
        flood.open(1, pipelined(BIG, "TXT", 50))
        opened = time.monotonic()
        settled(lambda: tcp_answers(agent, "TXT"), quiet=0.3)  # its answers stalled: both kernels' buffers full
        sock = flood.socks[0]
        assert len(sock.recv(65536, socket.MSG_PEEK)) > 1000  # answers waiting, unread
        wait_for(lambda: flood.alive() == 0, timeout=10, what="the connection reset")
        gone = time.monotonic() - opened
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_CLOSE  # a reset, not a FIN
        assert gone >= 0.9  # not before the idle timeout
        # the workers publish their counters once a second
        wait_for(lambda: agent.metric("nodedns_tcp_aborted_total", reason="not_reading") == 1, timeout=5,
                 what="the reset counted")
        wait_for(lambda: agent.metric("nodedns_tcp_connections_open") == 0, timeout=5, what="counted closed")
        flood.close()
        assert tcp_ask(agent.port, WEB) is not None  # and TCP still serves


def test_a_slow_reader_gets_every_pipelined_answer_in_order(tmp_path: Path) -> None:
    """The bounds cost a well-behaved client nothing: 200 pipelined queries for the 61 KB answer, read slowly
    (with pauses), all answered, each with its own ID."""
    with shipped(tmp_path) as agent:
        with socket.create_connection(("127.0.0.1", agent.port), timeout=10) as s:
            s.sendall(pipelined(BIG, "TXT", 200))
            ids = []
            for i in range(200):
                frame = rawdns.recv_frame(s)
                assert frame is not None and len(frame) > 60_000
                ids.append(struct.unpack("!H", frame[:2])[0])
                if i % 50 == 0:
                    time.sleep(0.3)
        assert sorted(ids) == list(range(200))


def test_a_connection_has_at_most_four_queries_worked_on_at_once_and_every_answer_comes() -> None:
    """Queries being worked on count towards what a connection is owed, so at most four of one connection's are
    worked on at once: their answers land together, and four answers of 64 KiB at most are what a client that
    takes none can make the agent hold beyond the 4 KiB (not the answers to all it pipelined). 40 pipelined
    questions for 40 names the upstream answers after 0.5 s: at most four asked at a time, all 40 answered."""
    names = [f"n{i}.slow.example" for i in range(40)]
    with UpstreamDouble() as up:
        up.mode = "delay"
        up.delay = 0.5
        raw = {"manifests": str(EXAMPLE), "upstream": up.address, "status-listen": "127.0.0.1:0"}
        with running_agent(raw) as agent:
            with socket.create_connection(("127.0.0.1", agent.port), timeout=10) as s:
                s.sendall(b"".join(rawdns.frame(rawdns.wire_query(n, "A", qid=i)) for i, n in enumerate(names)))
                time.sleep(0.3)  # within the upstream's first delay
                asked = sum(up.seen[(n, "A")] for n in names)
                assert 1 <= asked <= 4, f"{asked} of one connection's queries worked on at once"
                ids = set()
                for _ in names:
                    frame = rawdns.recv_frame(s, timeout=10)
                    assert frame is not None
                    ids.add(struct.unpack("!H", frame[:2])[0])
                assert ids == set(range(40))


def test_past_the_process_bound_on_answers_unsent_the_largest_holders_are_reset_and_the_rest_kept() -> None:
    """45 connections that never read, each four 61 KB answers landing together (the upstream answers after
    0.5 s): 11 MB unsent in one process, more than its 8 MiB. The largest holders are reset (reason owed)
    until what is left fits; the others are kept (held until the idle timeout), ten connections holding one
    answer each among them, and TCP still answers."""
    with UpstreamDouble({BIG: {"TXT": BIG_TXT}}) as up:
        up.per_name[BIG] = "delay"
        up.delay = 0.5
        raw = {"manifests": str(EXAMPLE), "upstream": up.address, "status-listen": "127.0.0.1:0",
               "tcp-idle-timeout": "30s"}
        with running_agent(raw) as agent:
            small = Flood(agent.port, source=GOOD)  # one query each: they hold one answer, and are not reset
            small.open(10, pipelined(BIG, "TXT", 1))
            flood = Flood(agent.port)
            flood.open(45, pipelined(BIG, "TXT", 8))
            assert len(flood.socks) == 45 and len(small.socks) == 10

            def owed() -> int:
                return int(agent.call(lambda: agent.agent.limits.status())["tcp"]["aborted_owed"])

            wait_for(lambda: owed() >= 1, timeout=15, what="the largest holders reset")
            time.sleep(0.5)  # every answer has landed
            reset, alive = owed(), flood.alive()
            assert 1 <= reset <= 45 - 30, f"{reset} reset"
            assert alive == 45 - reset
            # 45 x 4 x 61 KB = 11 MB, less what the kernel took: what is kept fits in 8 MiB, and no more
            # connections were reset than that needed (one more holder of four answers would not fit)
            held = agent.call(lambda: sum(c.unsent_here() for c in agent.agent.server.tcp.clients))
            assert (8 << 20) - 4 * 62_000 < held <= 8 << 20, held
            assert small.alive() == 10
            assert tcp_ask(agent.port, WEB, timeout=5) is not None
            flood.close()
            small.close()


def held_connections(port: int, count: int, source: str) -> tuple[list[socket.socket], int]:
    """`count` connections from `source`, each asked one query; (the sockets, how many were answered)."""
    socks, answered = [], 0
    for i in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((source, 0))
        s.settimeout(3.0)
        socks.append(s)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(rawdns.frame(rawdns.wire_query(WEB, "A", qid=i)))
            answered += rawdns.recv_frame(s) is not None
        except OSError:
            pass
    return socks, answered


def test_the_per_client_cap_refuses_the_connection_after_the_nth_from_one_address_while_another_address_connects(
        ) -> None:
    with running_agent({"manifests": str(EXAMPLE), "tcp-max-connections-per-client": "3",
                        "status-listen": "127.0.0.1:0"}) as agent:
        socks, answered = held_connections(agent.port, 4, EVIL)
        try:
            assert answered == 3  # the 4th from 127.0.0.2 was reset
            assert tcp_ask(agent.port, WEB, source=GOOD) is not None  # 127.0.0.1 still connects
            limits = agent.call(lambda: agent.agent.limits.status())["tcp"]
            assert limits["refused_per_client"] == 1 and limits["refused"] == 0
            assert limits["max_connections_per_client"] == 3
        finally:
            for s in socks:
                s.close()
        # once one of them is closed, the address may connect again
        wait_for(lambda: agent.call(lambda: len(agent.agent.server.tcp.by_client.get(EVIL, {}))) == 0, timeout=5,
                 what="the closed connections counted off")
        assert tcp_ask(agent.port, WEB, source=EVIL) is not None


def test_at_the_connection_cap_a_client_holding_fewer_gets_in_and_the_largest_holder_loses_its_oldest() -> None:
    """Many attacker Pods together can fill --tcp-max-connections: a newcomer from an address holding fewer
    connections than the largest holder still connects (that holder's oldest connection is reset); one
    holding as many is refused."""
    with running_agent({"manifests": str(EXAMPLE), "tcp-max-connections": "4",
                        "status-listen": "127.0.0.1:0"}) as agent:
        socks, answered = held_connections(agent.port, 4, EVIL)
        try:
            assert answered == 4
            good, answered = held_connections(agent.port, 1, GOOD)  # evicts EVIL's oldest: EVIL 3, GOOD 1
            socks += good
            assert answered == 1
            wait_for(lambda: sum(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_CLOSE for s in socks)
                     == 1, timeout=5, what="the oldest reset")
            assert socks[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_CLOSE
            more, again = held_connections(agent.port, 1, EVIL)  # EVIL holds 3, the most: refused
            socks += more
            assert again == 0
            other, answered = held_connections(agent.port, 1, "127.0.0.3")  # holds none: in, EVIL loses one more
            socks += other
            assert answered == 1
            tcp = agent.call(lambda: agent.agent.limits.status())["tcp"]
            assert tcp["aborted_evicted"] == 2 and tcp["refused"] == 1 and tcp["refused_per_client"] == 0
        finally:
            for s in socks:
                s.close()


def test_with_the_shipped_workers_one_address_holds_at_most_the_cap_per_worker(tmp_path: Path) -> None:
    with shipped(tmp_path, **{"tcp-max-connections-per-client": 3}) as agent:
        socks, answered = held_connections(agent.port, 7, EVIL)  # 7 > 2 workers x 3
        try:
            assert 3 <= answered <= 6, answered
            assert tcp_ask(agent.port, WEB, source=GOOD) is not None
            wait_for(lambda: agent.metric("nodedns_tcp_refused_total", reason="per_client") == 7 - answered,
                     timeout=5, what="the refusals counted")  # the workers publish once a second
        finally:
            for s in socks:
                s.close()


def test_a_query_whose_upstream_is_slower_than_the_idle_timeout_still_gets_its_answer() -> None:
    """--tcp-idle-timeout closes a connection with nothing owed: one waiting on its upstream is owed an
    answer, so the timer waits for it (RFC 7766 section 6.2: the server closes idle connections). An upstream
    three times slower than the timeout, one query: its answer comes on the connection, which then closes
    at the idle timeout."""
    with UpstreamDouble() as up:
        up.mode = "delay"
        up.delay = 1.5
        raw = {"manifests": str(EXAMPLE), "upstream": up.address, "status-listen": "127.0.0.1:0",
               "tcp-idle-timeout": "0.5s"}
        with running_agent(raw) as agent, socket.create_connection(("127.0.0.1", agent.port), timeout=10) as s:
            s.sendall(rawdns.frame(rawdns.wire_query("slow.example", "A", qid=7)))
            frame = rawdns.recv_frame(s, timeout=10)
            assert frame is not None, "the connection closed while its query waited on the upstream"
            assert struct.unpack("!H", frame[:2])[0] == 7
            assert frame[3] & 0xF != 2  # the upstream's answer, not SERVFAIL
            s.settimeout(5)
            assert s.recv(1) == b""  # then, owed nothing, it is closed at the idle timeout


def test_a_connection_reset_while_it_held_unsent_answers_is_no_holder_any_more() -> None:
    """Clients that stop reading and then reset their connections: each is counted off everything it was
    counted in, the holders of unsent answers included (which the process's bound on answers owed walks
    at every write), so what the agent keeps does not grow with every such client."""
    with UpstreamDouble({BIG: {"TXT": BIG_TXT}}) as up:
        up.per_name[BIG] = "truncate"  # TC=1 over UDP: the agent asks again over TCP and caches the 60 KB
        raw = {"manifests": str(EXAMPLE), "upstream": up.address, "status-listen": "127.0.0.1:0",
               "tcp-idle-timeout": "30s"}
        with running_agent(raw) as agent:
            server = agent.agent.server
            assert tcp_ask(agent.port, BIG, "TXT", timeout=10) is not None
            flood = Flood(agent.port)
            flood.open(3, pipelined(BIG, "TXT", 20))
            wait_for(lambda: agent.call(lambda: len(server.tcp.holding)) == 3, timeout=10,
                     what="three connections holding answers they do not take")
            flood.close()  # SO_LINGER 0: a reset each
            wait_for(lambda: agent.call(lambda: len(server.tcp.clients)) == 0, timeout=5, what="the resets seen")
            assert agent.call(lambda: len(server.tcp.holding)) == 0, "reset connections still counted as holders"
            assert tcp_ask(agent.port, WEB) is not None


def test_leaving_closes_an_answered_idle_client_after_the_quiet_time_not_the_idle_timeout() -> None:
    """The listeners leave (a stop, a hand-over): a TCP client that has its answers and sends nothing more is
    closed once idle for the quiet time (50 ms), not after --tcp-idle-timeout (10 s here), so leaving takes
    a moment, not the whole drain."""
    with running_agent({"manifests": str(EXAMPLE), "tcp-idle-timeout": "10s"}) as agent, \
            rawdns.tcp_connection(agent.host, agent.port) as s:
        s.sendall(rawdns.frame(query("web.default.svc.cluster.local", 1, qid=1)))
        assert rawdns.recv_frame(s) is not None
        started = time.monotonic()
        agent.run(agent.agent.server.retire(drain=5.0, quiet=0.05))
        took = time.monotonic() - started
        assert took < 1.0, took
        assert rawdns.closed_by_peer(s, timeout=0.5)
