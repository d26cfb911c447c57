"""status.py's bounds: no HTTP client can hold the event loop, the memory or a listener (docs/hardening.md).

Bodies, heads and replies by size; slow heads, bodies and readers by time; connections by count;
requests by pace; renderings shared; the explainer by turns and by its per-request budget."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.observe.explain import MAX_QUESTIONS, MAX_TYPES, MAX_UPSTREAM
from nodedns.observe.httpgate import Gate, HttpLimits, from_this_node
from nodedns.observe.status import DEBUG, StatusServer
from nodedns.serve.limits import Pace
from tests.support import manifests as m
from tests.support.helpers import RunningAgent, running_agent, wait_for
from tests.support.upstream_double import UpstreamDouble

NODE = "node-a"
HTTP = {"status-listen": "127.0.0.1:0", "debug-listen": "127.0.0.1:0"}


def with_limits(questions: Pace | None = None, **limits: Any) -> Callable[[cfgmod.Config], Agent]:
    """Agents with these HTTP limits (and this pace of the explainer's questions)."""

    def make(config: cfgmod.Config) -> Agent:
        agent = Agent(config)
        agent.http_limits = HttpLimits(**limits)
        if questions is not None:
            agent.explainer.pace = questions
        return agent

    return make


def objects() -> list[dict[str, Any]]:
    return [m.namespace("default"), m.node(NODE, pod_cidrs=["10.244.0.0/24"]),
            m.service("web", cluster_ips=["10.96.0.10"]), m.pod("client", ip="10.244.0.5", node_name=NODE)]


@pytest.fixture(scope="module")
def upstream() -> Iterator[UpstreamDouble]:
    with UpstreamDouble({"api.example.com": {"A": ["192.0.2.80"]}}) as up:
        yield up


def raw_config(tmp: Path, upstream: UpstreamDouble, **extra: Any) -> dict[str, Any]:
    host = tmp / "resolv.conf"
    host.write_text("nameserver 192.0.2.53\n")
    return {"manifests": str(m.write(tmp / "c.yaml", objects())), "node-name": NODE, "upstream": upstream.address,
            "host-resolv-conf": str(host), **HTTP, **extra}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory, upstream: UpstreamDouble) -> Iterator[RunningAgent]:
    """The shipped limits, but a quick head/body timeout and paces the tests do not run into."""
    make = with_limits(Pace(10_000, 10_000), head_timeout=0.5, body_timeout=0.5, rate=10_000, burst=10_000)
    with running_agent(raw_config(tmp_path_factory.mktemp("limits"), upstream), agent_factory=make) as a:
        yield a


def request(url: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
            timeout: float = 20) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(exc.headers), exc.read().decode()


def explain(agent: RunningAgent, body: dict[str, Any]) -> tuple[int, Any]:
    code, _, text = request(agent.debug_url + "/debug/explain", body=json.dumps(body).encode(),
                            headers={"Content-Type": "application/json"})
    return code, (json.loads(text) if text.startswith("{") else text)


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


# ----------------------------------------------------------------------------------------------
# Sizes


BODIES = [
    ("explain, 64 KiB + 1", "/debug/explain", (64 << 10) + 1, 413),
    ("resolv-conf, 1 MiB", "/v1/resolv-conf", 1 << 20, 413),
    ("explain, exactly 64 KiB is read (and is no JSON)", "/debug/explain", 64 << 10, 400),
]


@pytest.mark.parametrize(("path", "size", "code"), [b[1:] for b in BODIES], ids=[b[0] for b in BODIES])
def test_request_bodies_over_64_kib_are_413(agent: RunningAgent, path: str, size: int, code: int) -> None:
    assert request(agent.debug_url + path, body=b" " * (size - 1) + b"x")[0] == code


def test_a_chunked_body_over_64_kib_is_413_too(agent: RunningAgent) -> None:
    host, port = host_port(agent.debug_url)
    chunk = b"x" * 8192
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /debug/explain HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        with pytest.raises(OSError):  # the server answers and hangs up before we are through
            for _ in range(16):
                s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                time.sleep(0.01)
            s.sendall(b"0\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 413"), "no 413"
            raise OSError("answered")


@pytest.mark.parametrize("path", ["/debug/explain", "/v1/resolv-conf"])
def test_a_content_length_over_64_kib_is_413_at_once_without_the_body(agent: RunningAgent, path: str) -> None:
    """The head says 1 MiB follows and no byte of it ever comes: 413 from the head alone (not 408 after the
    body timeout, not a connection held while waiting for the body)."""
    host, port = host_port(agent.debug_url)
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {1 << 20}\r\n\r\n".encode())
        s.settimeout(5)
        head = s.recv(200)
    assert head.startswith(b"HTTP/1.1 413"), head


def test_more_than_8_types_per_explain_is_a_400(agent: RunningAgent) -> None:
    types = ["A", "AAAA", "MX", "TXT", "SRV", "NS", "SOA", "PTR", "CAA"]
    code, body = explain(agent, {"name": "web", "podRef": "default/client", "types": types})
    assert code == 400 and f"at most {MAX_TYPES} types" in body
    code, _ = explain(agent, {"name": "web", "podRef": "default/client", "types": types[:MAX_TYPES]})
    assert code == 200


def test_a_pod_beyond_the_kubelets_search_limits_is_rejected(agent: RunningAgent) -> None:
    searches = [f"s{i}.example" for i in range(33)]
    pod = m.pod("p", ip="10.244.0.9", node_name=NODE, dns_config={"searches": searches})
    code, body = explain(agent, {"name": "web", "pod": pod})
    assert code == 422 and "search paths" in json.dumps(body)


async def test_a_reply_over_the_limit_is_a_500_that_says_so() -> None:
    from aiohttp.test_utils import TestClient, TestServer

    class Big:
        def liveness(self) -> list[str]:
            return []

        def readiness(self) -> list[str]:
            return []

        def status(self) -> dict[str, Any]:
            return {"blob": "x" * 5000}

        def metrics(self) -> bytes:
            return b""

    server = StatusServer(Big(), limits=HttpLimits(max_reply=4096))
    async with TestClient(TestServer(server.app(DEBUG))) as client:
        r = await client.get("/status")
        assert r.status == 500 and "over 4096 bytes" in await r.text()


# ----------------------------------------------------------------------------------------------
# Time: slowloris, a body that does not come


def test_a_request_head_dripping_in_is_cut_at_the_head_timeout(agent: RunningAgent) -> None:
    host, port = host_port(agent.status_url)
    with socket.create_connection((host, port), timeout=10) as s:
        start = time.monotonic()
        closed = None
        for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200:
            try:
                s.sendall(bytes([byte]))
                # meanwhile the listener answers everyone else
                assert request(agent.status_url + "/healthz", timeout=2)[0] == 200
                if s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b"":
                    closed = time.monotonic() - start
                    break
            except BlockingIOError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                closed = time.monotonic() - start
                break
            time.sleep(0.05)
    assert closed is not None, "a dripping head was never cut"
    assert 0.4 <= closed <= 3.0, closed  # head_timeout 0.5 s (+ the keep-alive timer's granularity)


def test_a_body_that_does_not_arrive_is_408(agent: RunningAgent) -> None:
    host, port = host_port(agent.debug_url)
    with socket.create_connection((host, port), timeout=10) as s:
        start = time.monotonic()
        s.sendall(b"POST /debug/explain HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"name\"")
        reply = s.recv(200)
        took = time.monotonic() - start
    assert reply.startswith(b"HTTP/1.1 408"), reply
    assert 0.4 <= took <= 3.0, took


# ----------------------------------------------------------------------------------------------
# Connections


def test_connections_over_the_clients_cap_are_closed_at_once_and_counted(tmp_path: Path,
                                                                          upstream: UpstreamDouble) -> None:
    """Over the cap, a connection gets no route but liveness: GET /healthz answered by hand and closed
    (a host-network flood shares the kubelet's address), anything else closed before a byte of reply."""
    make = with_limits(max_per_client=4, head_timeout=30)
    with running_agent(raw_config(tmp_path, upstream), agent_factory=make) as agent:
        host, port = host_port(agent.status_url)
        held = [socket.create_connection((host, port), timeout=5) for _ in range(4)]
        try:
            with socket.create_connection((host, port), timeout=5) as extra:
                extra.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                try:
                    assert extra.recv(100) == b""  # closed before a byte of reply
                except ConnectionResetError:
                    pass
            with socket.create_connection((host, port), timeout=5) as probe:
                probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nUser-Agent: kube-probe/1.31\r\n\r\n")
                reply = b""
                while chunk := probe.recv(4096):
                    reply += chunk
                assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and reply.endswith(b"\r\n\r\nok\n"), reply
            held.pop().close()
            deadline = time.monotonic() + 5
            while True:  # the slot comes back once the server has seen the close
                try:
                    code = request(agent.status_url + "/healthz", timeout=2)[0]
                except OSError:
                    code = 0
                if code == 200:
                    break
                assert time.monotonic() < deadline, "the freed slot never came back"
                time.sleep(0.05)
            http = agent.call(lambda: agent.agent.status_server.status())  # type: ignore[union-attr]
            status = next(ls for ls in http["listeners"] if ls["listener"] == "status")
            assert status["refused"] >= 2 and status["probes_over_cap"] == 1
        finally:
            for s in held:
                s.close()


def served(sock: socket.socket, path: str = "/metrics") -> bool:
    """Whether a request on this connection gets a 200 (False: the connection was closed without a reply)."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head = b""
    try:
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                return False
            head += chunk
    except ConnectionResetError:
        return False
    return head.startswith(b"HTTP/1.1 200 ")


def test_the_local_pool_turns_away_this_nodes_connection_over_max_local_connections(
        tmp_path: Path, upstream: UpstreamDouble) -> None:
    """Every connection from 127.0.0.1 is this node's: with the per-client cap above both pools, the
    next one after `max_local_connections` is closed without a reply (the other hosts' cap, smaller
    here, turns none away), and a closed one gives its slot back."""
    make = with_limits(max_connections=2, max_local_connections=4, max_per_client=100, head_timeout=30)
    with running_agent(raw_config(tmp_path, upstream), agent_factory=make) as agent:
        host, port = host_port(agent.status_url)

        def status_listener() -> dict[str, Any]:
            http = agent.call(lambda: agent.agent.status_server.status())  # type: ignore[union-attr]
            return next(ls for ls in http["listeners"] if ls["listener"] == "status")  # type: ignore[no-any-return]

        held = [socket.create_connection((host, port), timeout=5) for _ in range(4)]
        try:
            assert [served(s) for s in held] == [True] * 4  # each stays open (keep-alive): 4 local slots held
            with socket.create_connection((host, port), timeout=5) as extra:
                assert not served(extra)
            listener = status_listener()
            assert listener["open_local"] == 4 and listener["open"] == 4 and listener["refused"] == 1

            held.pop(0).close()

            def one_more() -> bool:  # the slot comes back once the server has seen the close
                s = socket.create_connection((host, port), timeout=5)
                if served(s):
                    held.append(s)
                    return True
                s.close()
                return False

            wait_for(one_more, timeout=5, what="the freed local slot")
            with socket.create_connection((host, port), timeout=5) as extra:
                assert not served(extra)
            assert status_listener()["open_local"] == 4
        finally:
            for s in held:
                s.close()


@dataclass(eq=False)
class FakeTransport:
    peer: Any
    sock: Any
    buffered: int = 0
    aborted: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self.peer, "sockname": self.sock}.get(name, default)

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def abort(self) -> None:
        self.aborted = True


NODE_ADDR = ("169.254.20.10", 9253)
CLIENTS = [
    ("a Unix socket", "", "/run/nodedns/debug.sock", True),
    ("loopback", ("127.0.0.1", 40000), ("127.0.0.1", 9254), True),
    ("IPv6 loopback", ("::1", 40000, 0, 0), ("::1", 9254, 0, 0), True),
    ("the kubelet probing the local IP", ("169.254.20.10", 40000), NODE_ADDR, True),
    ("a Pod", ("10.244.0.5", 40000), NODE_ADDR, False),
    ("another node", ("192.168.10.12", 40000), ("192.168.10.11", 9253), False),
]


@pytest.mark.parametrize(("peer", "sock", "local"), [c[1:] for c in CLIENTS], ids=[c[0] for c in CLIENTS])
def test_who_counts_as_this_node(peer: Any, sock: Any, local: bool) -> None:
    assert from_this_node(FakeTransport(peer, sock))[1] is local  # type: ignore[arg-type]


async def test_pods_filling_the_status_port_cannot_lock_the_kubelet_out() -> None:
    gate = Gate("status", HttpLimits(max_connections=3, max_local_connections=2, max_per_client=2))
    pods = [FakeTransport((f"10.244.0.{i // 2}", 40000 + i), NODE_ADDR) for i in range(10)]
    admitted = [gate.admit(t) for t in pods]  # type: ignore[arg-type]
    assert admitted.count(True) == 3  # the cap for other hosts (and at most 2 per Pod)
    assert gate.counts["refused"] == 7
    kubelet = [FakeTransport(("169.254.20.10", 50000 + i), NODE_ADDR) for i in range(3)]
    assert [gate.admit(t) for t in kubelet] == [True, True, False]  # its own allowance (per client: 2)
    gate.release(kubelet[0])  # type: ignore[arg-type]
    assert gate.admit(kubelet[2])  # type: ignore[arg-type]
    gate.close()


@pytest.mark.parametrize(("others", "own"), [(3, 5), (5, 3)], ids=["own pool larger", "own pool smaller"])
async def test_this_nodes_connections_have_a_pool_of_exactly_max_local_connections(others: int, own: int) -> None:
    """The per-client cap out of the way: this node gets `max_local_connections`, other hosts
    `max_connections`, and neither pool takes or frees a slot of the other."""
    gate = Gate("status", HttpLimits(max_connections=others, max_local_connections=own, max_per_client=100))
    kubelet = [FakeTransport(("169.254.20.10", 50000 + i), NODE_ADDR) for i in range(own + 2)]
    pods = [FakeTransport((f"10.244.0.{i + 2}", 40000), NODE_ADDR) for i in range(others + 2)]

    assert [gate.admit(t) for t in kubelet] == [True] * own + [False] * 2  # type: ignore[arg-type]
    assert gate.state()["open_local"] == own and gate.state()["refused"] == 2
    assert [gate.admit(t) for t in pods] == [True] * others + [False] * 2  # type: ignore[arg-type]
    assert gate.state()["open"] == own + others and gate.state()["open_local"] == own
    assert gate.state()["refused"] == 4

    gate.release(pods[0])  # type: ignore[arg-type]  # another host's slot: not one for this node
    assert not gate.admit(kubelet[own])  # type: ignore[arg-type]
    assert gate.admit(pods[others])  # type: ignore[arg-type]
    gate.release(kubelet[0])  # type: ignore[arg-type]  # this node's slot: not one for other hosts
    assert not gate.admit(pods[others + 1])  # type: ignore[arg-type]
    assert gate.admit(kubelet[own])  # type: ignore[arg-type]
    assert not gate.admit(kubelet[own + 1])  # type: ignore[arg-type]
    assert gate.state()["open_local"] == own and gate.state()["open"] == own + others
    gate.close()


async def test_a_reply_nobody_reads_is_aborted_after_the_send_timeout() -> None:
    now = [100.0]
    gate = Gate("debug", HttpLimits(send_timeout=10), clock=lambda: now[0])
    stuck = FakeTransport(("127.0.0.1", 1), ("127.0.0.1", 9254), buffered=300_000)
    slow = FakeTransport(("127.0.0.1", 2), ("127.0.0.1", 9254), buffered=300_000)
    assert gate.admit(stuck) and gate.admit(slow)  # type: ignore[arg-type]
    for _ in range(12):
        gate._watch()
        now[0] += 1.0
        slow.buffered -= 1000  # a reader that keeps reading, slowly
    assert stuck.aborted and not slow.aborted
    assert gate.counts["stalled"] == 1 and gate.open[True] == 1
    gate.close()


# ----------------------------------------------------------------------------------------------
# Pace, shared renderings, the explainer's turns


def test_the_pace_lets_a_burst_through_then_one_request_per_interval() -> None:
    now = [0.0]
    pace = Pace(10, 5, clock=lambda: now[0])
    waits = [pace.reserve(0.25) for _ in range(9)]
    assert waits[:5] == [0.0] * 5  # the burst
    assert waits[5:7] == pytest.approx([0.1, 0.2])  # then one per 0.1 s, waiting for its turn
    assert waits[7:] == [None, None]  # a turn 0.3 s away is beyond max_wait: 503 (and takes no turn)
    now[0] = 0.15
    assert pace.reserve(0.25) == pytest.approx(0.15)
    now[0] = 10.0
    assert pace.reserve(0.25) == 0.0


def test_requests_over_the_pace_wait_their_turn_or_get_503(tmp_path: Path, upstream: UpstreamDouble) -> None:
    make = with_limits(rate=20, burst=5, max_wait=0.3, max_per_client=100)
    with running_agent(raw_config(tmp_path, upstream), agent_factory=make) as agent:
        results: list[tuple[int, dict[str, str]]] = []
        refused_after: list[float] = []

        def one() -> None:
            asked = time.monotonic()
            code, headers, _ = request(agent.status_url + "/readyz", timeout=10)
            results.append((code, headers))
            if code == 503:
                refused_after.append(time.monotonic() - asked)

        start = time.monotonic()
        threads = [threading.Thread(target=one) for _ in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - start
        served = [c for c, _ in results if c == 200]
        busy = [h for c, h in results if c == 503]
        assert len(served) + len(busy) == 40 and busy
        assert all(h.get("Retry-After") == "1" for h in busy)
        assert min(refused_after) >= 0.29  # a 503 comes after the longest wait: asking again at once gains nothing
        assert len(served) <= 5 + 20 * (took + 0.3) + 1
        http = agent.call(lambda: agent.agent.status_server.status())  # type: ignore[union-attr]
        assert next(ls for ls in http["listeners"] if ls["listener"] == "status")["busy"] == len(busy)


def test_a_flood_of_scrapes_shares_renderings(tmp_path: Path, upstream: UpstreamDouble) -> None:
    with running_agent(raw_config(tmp_path, upstream)) as agent:  # the shipped limits
        start = time.monotonic()
        bodies = {request(agent.status_url + "/metrics")[2].split("nodedns_http_requests_total")[0]
                  for _ in range(60)}
        took = time.monotonic() - start
        renders = agent.call(lambda: agent.agent.status_server.status())["renders"]  # type: ignore[union-attr]
        limits = HttpLimits()
        assert 1 <= renders["metrics"] <= limits.render_burst + took / limits.render_interval + 1, (renders, took)
        assert len(bodies) <= renders["metrics"]


def test_explanations_take_turns(tmp_path: Path) -> None:
    with UpstreamDouble({"slow.example": {"A": ["192.0.2.1"]}}) as slow:
        slow.mode = "delay"
        slow.delay = 1.5
        make = with_limits(max_explains=1, max_wait=0.3)
        with running_agent(raw_config(tmp_path, slow), agent_factory=make) as agent:
            first: list[int] = []
            t = threading.Thread(target=lambda: first.append(
                explain(agent, {"name": "slow.example.", "podRef": "default/client", "types": ["A"]})[0]))
            t.start()
            time.sleep(0.3)
            code, body = explain(agent, {"name": "web", "podRef": "default/client"})
            t.join()
            assert code == 503 and "busy" in body
            assert first == [200]
            assert explain(agent, {"name": "web", "podRef": "default/client"})[0] == 200


# ----------------------------------------------------------------------------------------------
# The explainer's budget and its walk


def hostile_pod(searches: int = 29) -> dict[str, Any]:
    """A Pod (as a manifest) whose search list reaches the kubelet's limit with external domains."""
    return m.pod("p", ip="10.244.0.9", node_name=NODE, dns_config={
        "searches": [f"d{i}.attacker.example" for i in range(searches)]})


def test_one_explain_makes_a_bounded_number_of_upstream_queries(agent: RunningAgent,
                                                                upstream: UpstreamDouble) -> None:
    def asked() -> int:  # this request's questions (not the agent's own loop probe, which may come meanwhile)
        return sum(n for (name, _), n in upstream.seen.items() if "x-7f3a9c" in name)

    before = asked()
    types = ["A", "AAAA", "MX", "TXT", "SRV", "NS", "CAA", "HINFO"]
    code, r = explain(agent, {"name": "x-7f3a9c", "pod": hostile_pod(), "types": types})
    sent = asked() - before
    assert code == 200
    assert 0 < sent <= MAX_UPSTREAM  # not 32 search domains x 8 types
    assert r["budget"]["upstream"] <= MAX_UPSTREAM and r["budget"]["cut"]
    assert r["result"].startswith(f"cut short after {len(r['queries'])} queries: this request's budget")
    assert len(json.dumps(r)) < 1 << 20


def test_one_request_asks_a_bounded_number_of_questions(agent: RunningAgent) -> None:
    searches = [f"n{i}.default.svc.cluster.local" for i in range(29)]  # answered at once, from the index
    pod = m.pod("p", ip="10.244.0.9", node_name=NODE, dns_config={"searches": searches})
    types = ["A", "AAAA", "MX", "TXT", "SRV", "NS", "CAA", "HINFO"]
    code, r = explain(agent, {"name": "nothing", "pod": pod, "types": types})
    assert code == 200
    assert r["budget"]["questions"] == MAX_QUESTIONS and len(r["queries"]) <= MAX_QUESTIONS
    assert "budget of 128 questions is spent" in r["result"]


def test_the_walk_yields_to_the_event_loop_between_questions(agent: RunningAgent) -> None:
    """The questions of a walk are answered at once (index): the loop still turns between them, so DNS
    is answered during a long explanation instead of after it."""
    searches = [f"n{i}.default.svc.cluster.local" for i in range(29)]
    pod = m.pod("p", ip="10.244.0.9", node_name=NODE, dns_config={"searches": searches})
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.run_coroutine_threadsafe(ticker(), agent.loop)
    try:
        start = time.perf_counter()
        code, r = explain(agent, {"name": "nothing", "pod": pod, "types": ["A", "AAAA", "MX", "TXT"]})
        took = time.perf_counter() - start
    finally:
        agent.loop.call_soon_threadsafe(stop.set)
        task.result(5)
    assert code == 200 and len(r["queries"]) >= 100
    # no single stretch holds the loop for the walk: a walk that never yields is one gap of nearly all of it;
    # half leaves room for this process being descheduled once on a loaded machine (a gap of a quarter seen)
    assert max(gaps) < took / 2, (max(gaps), took)


def test_the_questions_of_every_explanation_together_are_paced(tmp_path: Path, upstream: UpstreamDouble) -> None:
    """One explanation within the burst is not slowed; beyond it, questions wait their turn, and an
    explanation that would wait past its time gets the rest of its questions unasked."""
    make = with_limits(Pace(20, 10))
    with running_agent(raw_config(tmp_path, upstream), agent_factory=make) as agent:
        body = {"name": "nothing", "podRef": "default/client", "types": ["A", "AAAA"]}  # 4 names x 2 types
        start = time.monotonic()
        assert explain(agent, body)[0] == 200  # 8 questions: within the burst
        assert time.monotonic() - start < 0.3
        start = time.monotonic()
        code, r = explain(agent, body)  # 2 left in the burst, then 6 at 20 a second
        took = time.monotonic() - start
        assert code == 200 and r["budget"]["questions"] == 8 and "cut" not in r["budget"]
        assert 0.2 <= took <= 3.0, took
        agent.call(lambda: setattr(agent.agent.explainer, "max_seconds", 0.2))
        code, r = explain(agent, body)
        assert code == 200 and "this request's time is up" in r["result"]


async def test_the_workers_are_asked_for_their_counters_at_most_once_a_second_after_a_burst() -> None:
    """The --workers supervisor's `refresh()` (each worker builds and sends its counters) is not per request."""
    from aiohttp.test_utils import TestClient, TestServer

    class Supervisor:
        def __init__(self) -> None:
            self.gathers = 0

        async def refresh(self) -> None:
            self.gathers += 1
            await asyncio.sleep(0.01)

        def liveness(self) -> list[str]:
            return []

        def readiness(self) -> list[str]:
            return []

        def status(self) -> dict[str, Any]:
            return {"gathers": self.gathers}

        def metrics(self) -> bytes:
            return b"gathers %d\n" % self.gathers

    source = Supervisor()
    limits = HttpLimits(rate=1000, burst=1000)
    server = StatusServer(source, limits=limits)
    async with TestClient(TestServer(server.app())) as client:
        start = time.monotonic()
        for i in range(60):
            r = await client.get("/metrics" if i % 2 else "/status")
            assert r.status == 200
            await asyncio.sleep(0.01)
        together = await asyncio.gather(*(client.get("/metrics") for _ in range(20)))
        assert {r.status for r in together} == {200}
        took = time.monotonic() - start
    assert 1 <= source.gathers <= limits.render_burst + took / limits.refresh_interval + 1, (source.gathers, took)
