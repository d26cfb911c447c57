"""A TCP client connection as a state machine, checked against a small reference model after every step.

The real connections of a real `DNSServer` are driven through the transport protocol asyncio gives
them (connection made, bytes read, end of file, writing paused and resumed, connection lost), on an
event loop whose clock the test moves, by a transport double that plays the kernel: what a client
sent waits there while reading is paused, what we wrote waits there until the client reads it. The
resolver is a double too: a query is answered at once (a stored answer) or waits on its "upstream"
until the test answers it (or the upstream fails).

The model is written from docs/hardening.md ("TCP and pending work", the flags' table), not from the
code: a connection takes the next whole frame only while it is owed under 4 KiB (its unsent bytes plus
1 KiB per query being worked on: so four in flight); `--tcp-idle-timeout` after the last whole query
(bytes of a frame do not count) a connection owed nothing is closed, one with answers unsent is reset,
one still waiting on its upstream is looked at again one timeout later (so a slow upstream's answer
still comes); a client that half-closes gets every answer it is owed, then the close; a connection
reset by its client is counted off at once (open connections, its address's, the holders of unsent
answers); `--tcp-max-connections-per-client` refuses the next connection of an address at the cap,
`--tcp-max-connections` refuses a newcomer unless the address holding the most holds two more than
its own, whose oldest is then reset. Every deadline is reached exactly (and a microsecond before).
"""

from __future__ import annotations

import asyncio
import selectors
import struct
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from nodedns.metrics.counters import ListenerStats
from nodedns.serve.server import DNSServer
from nodedns.serve.tcp import TCPConnection

IDLE = 5.0  # --tcp-idle-timeout
MAX_CONNECTIONS = 4  # --tcp-max-connections
PER_CLIENT = 2  # --tcp-max-connections-per-client
OWED_PAUSE = 4096  # docs/hardening.md: under 4 KiB owed to take the next frame
QUERY_COST = 1024  # of it per query worked on
ADDRESSES = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
SIZES = [40, 300, 1500, 3000]  # answer sizes: small ones, and large ones a few of which fill 4 KiB


RESOLUTION = 1e-9  # the fake clock's resolution


class FakeClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock only moves when the test moves it. Like every asyncio loop it runs each
    timer due within its clock's resolution of now (BaseEventLoop._run_once): a deadline a rounding error
    past the time reached (1020 - 1e-6 + 5 against 1025 - 1e-6) is reached, in the model too (`_advance_to`)."""

    def __init__(self) -> None:
        super().__init__(selectors.DefaultSelector())
        self.now = 1000.0
        self._clock_resolution = RESOLUTION  # what _run_once reads (the monotonic clock's, by default)

    def time(self) -> float:
        return self.now


def settle(loop: FakeClockLoop, action: Callable[[], object] | None = None) -> None:
    """Do `action` in the loop, then run everything runnable at this instant (callbacks, tasks, timers
    now due)."""

    async def spins() -> None:
        if action is not None:
            action()
        for _ in range(30):
            await asyncio.sleep(0)

    loop.run_until_complete(spins())


def query(qid: int) -> bytes:
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + b"\x01q\x01t\x00\x00\x01\x00\x01"


def answer(qid: int, size: int) -> bytes:
    return struct.pack("!HHHHHH", qid, 0x8180, 0, 0, 0, 0) + bytes(size - 12)


def frame(msg: bytes) -> bytes:
    return struct.pack("!H", len(msg)) + msg


class Resolver:
    """The resolver double: `plan[qid]` says whether a query is answered at once or by its upstream."""

    def __init__(self, loop: FakeClockLoop) -> None:
        self.loop = loop
        self.plan: dict[int, tuple[bool, int]] = {}  # qid -> (slow, answer size)
        self.asked: list[int] = []
        self.upstream: dict[int, asyncio.Future[bytes | None]] = {}

    def handle(self, msg: bytes, peer: str) -> bytes | Coroutine[Any, Any, bytes | None]:
        qid = struct.unpack("!H", msg[:2])[0]
        self.asked.append(qid)
        slow, size = self.plan[qid]
        if not slow:
            return answer(qid, size)
        fut: asyncio.Future[bytes | None] = self.loop.create_future()
        self.upstream[qid] = fut

        async def wait() -> bytes | None:
            return await fut

        return wait()


class Transport(asyncio.Transport):
    """The kernel's side of one connection: the bytes the client sent wait here while reading is
    paused; what we wrote waits here until the client reads it (our buffer and the send queue in one)."""

    def __init__(self, loop: FakeClockLoop, peer: str, protocol: TCPConnection) -> None:
        super().__init__()
        self.loop = loop
        self.peer = peer
        self.protocol = protocol
        self.inbound = bytearray()
        self.eof = False  # the client half-closed
        self.eof_told = False
        self.out = bytearray()
        self.read_by_client = bytearray()
        self.reading = True
        self.high = 64 * 1024
        self.low = 16 * 1024
        self.write_paused = False
        self.closing = False
        self.aborted = False
        self.lost = False

    # what the protocol calls
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": (self.peer, 40000)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        assert high is not None and low is not None
        self.high, self.low = high, low

    def get_write_buffer_size(self) -> int:
        return len(self.out)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closing:
            return
        self.out += data
        if not self.write_paused and len(self.out) > self.high:
            self.write_paused = True
            self.protocol.pause_writing()

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True
        self.loop.call_soon(self.deliver)

    def is_reading(self) -> bool:
        return self.reading

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            if not self.out:
                self.loop.call_soon(self._lost, None)

    def abort(self) -> None:
        self.closing = True
        self.aborted = True
        self.out.clear()
        self.loop.call_soon(self._lost, None)

    def _lost(self, exc: Exception | None) -> None:
        if not self.lost:
            self.lost = True
            self.protocol.connection_lost(exc)

    # what the client does
    def deliver(self) -> None:
        while self.reading and self.inbound and not self.closing:
            buf = self.protocol.get_buffer(len(self.inbound))
            n = min(len(buf), len(self.inbound))
            buf[:n] = self.inbound[:n]
            del self.inbound[:n]
            self.protocol.buffer_updated(n)
        if self.reading and self.eof and not self.inbound and not self.eof_told and not self.closing:
            self.eof_told = True
            if not self.protocol.eof_received():
                self.close()

    def client_sends(self, data: bytes) -> None:
        self.inbound += data
        self.loop.call_soon(self.deliver)

    def client_half_closes(self) -> None:
        self.eof = True
        self.loop.call_soon(self.deliver)

    def client_reads(self) -> None:
        self.read_by_client += self.out
        self.out.clear()
        if self.write_paused:
            self.write_paused = False
            self.protocol.resume_writing()
        if self.closing and not self.lost:
            self.loop.call_soon(self._lost, None)

    def client_resets(self) -> None:
        self.closing = True
        self.out.clear()
        self.loop.call_soon(self._lost, ConnectionResetError())

    def answers_read(self) -> list[int]:
        got, data = [], bytes(self.read_by_client)
        while data:
            (n,) = struct.unpack("!H", data[:2])
            got.append(struct.unpack("!H", data[2:4])[0])
            data = data[2 + n:]
        return got


@dataclass
class Conn:
    """The model of one connection."""

    n: int
    addr: str
    deadline: float
    waiting: list[int] = field(default_factory=list)  # whole frames sent, not taken yet
    partial: int = 0  # bytes of the next frame sent so far
    taken: list[int] = field(default_factory=list)
    pending: set[int] = field(default_factory=set)  # taken, waiting on the upstream
    unsent: list[int] = field(default_factory=list)  # answers written, not read by the client
    read: list[int] = field(default_factory=list)
    state: str = "open"  # open, closing (closed by us, answers still unsent), closed, reset
    reading: bool = True  # reading from the client (the kernel holds what it sends while not)
    eof_sent: bool = False  # the client half-closed
    eof: bool = False  # ... and we saw it (the end of file comes after the bytes, read while reading)
    reset_by_client: bool = False

    def counted(self) -> bool:
        return self.state in ("open", "closing")


class Model:
    def __init__(self, plan: dict[int, tuple[bool, int]]) -> None:
        self.plan = plan
        self.conns: list[Conn] = []
        self.refused = 0
        self.refused_client = 0
        self.unread = 0
        self.evicted = 0

    def owed(self, c: Conn) -> int:
        return sum(2 + self.plan[q][1] for q in c.unsent) + QUERY_COST * len(c.pending)

    def take(self, c: Conn, now: float) -> None:
        took = False
        while c.state == "open" and c.waiting and self.owed(c) < OWED_PAUSE:
            q = c.waiting.pop(0)
            c.taken.append(q)
            took = True
            if self.plan[q][0]:
                c.pending.add(q)
            else:
                c.unsent.append(q)
        if took:
            c.deadline = now + IDLE
        c.reading = self.owed(c) < OWED_PAUSE
        if c.state == "open" and c.eof_sent and c.reading:
            c.eof = True
        if c.state == "open" and c.eof and not c.waiting and not c.pending:
            self.close(c)

    def close(self, c: Conn) -> None:
        c.state = "closing" if c.unsent else "closed"

    def reads(self, c: Conn) -> None:
        c.read += c.unsent
        c.unsent = []
        if c.state == "closing":
            c.state = "closed"

    def held(self, addr: str) -> list[Conn]:
        return [c for c in self.conns if c.addr == addr and c.counted()]


class TCPMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = FakeClockLoop()
        asyncio.set_event_loop(self.loop)
        self.resolver = Resolver(self.loop)
        self.server = DNSServer(resolver=self.resolver, cluster_answers=None, addresses=(),  # type: ignore[arg-type]
                                tcp_idle_timeout=IDLE, tcp_max_connections=MAX_CONNECTIONS,
                                tcp_max_per_client=PER_CLIENT)
        self.stats = ListenerStats("dns://127.0.0.1:53", "1")
        self.model = Model(self.resolver.plan)
        self.transports: list[Transport] = []
        self.next_qid = 1
        self._partial_rest: dict[int, bytes] = {}  # the last byte of a frame sent short, by connection
        self._partial_qid: dict[int, int] = {}

    def teardown(self) -> None:
        for f in self.resolver.upstream.values():
            if not f.done():
                f.set_result(None)
        for t in self.transports:
            if not t.lost:
                t.abort()
        settle(self.loop)
        for task in asyncio.all_tasks(self.loop):
            task.cancel()
        settle(self.loop)
        asyncio.set_event_loop(None)
        self.loop.close()

    # -- events ------------------------------------------------------------------------------

    def _tick(self) -> None:
        settle(self.loop)

    @rule(addr=st.sampled_from(ADDRESSES))
    def connect(self, addr: str) -> None:
        m = self.model
        n = len(self.transports)
        proto = self.server.tcp.connection(self.stats)
        t = Transport(self.loop, addr, proto)
        self.transports.append(t)
        held = len(m.held(addr))
        evictable = [a for a in ADDRESSES if len(m.held(a)) >= held + 2
                     and any(c.state == "open" for c in m.held(a))]
        biggest = max((len(m.held(a)) for a in ADDRESSES), default=0)
        total = sum(len(m.held(a)) for a in ADDRESSES)
        settle(self.loop, lambda: proto.connection_made(t))
        c = Conn(n, addr, self.loop.now + IDLE)
        m.conns.append(c)
        if held >= PER_CLIENT:
            c.state = "reset"
            m.refused_client += 1
        elif total >= MAX_CONNECTIONS:
            top = [a for a in evictable if len(m.held(a)) == biggest]
            if not top:
                c.state = "reset"
                m.refused += 1
            else:
                # the address holding the most loses its oldest open connection: which one of equals the
                # server picks is its own, the model takes the one it reset if it was a valid choice
                victims = [next(x for x in m.held(a) if x.state == "open") for a in top]
                chosen = [v for v in victims if self.transports[v.n].aborted]
                assert len(chosen) == 1, f"expected one of {[v.n for v in victims]} evicted"
                chosen[0].state = "reset"
                chosen[0].unsent = []
                m.evicted += 1

    def _open_conns(self) -> list[Conn]:
        return [c for c in self.model.conns if c.state == "open" and not c.eof_sent]

    @precondition(lambda self: any(c.state == "open" and not c.eof_sent for c in self.model.conns))
    @rule(data=st.data(), slow=st.lists(st.booleans(), min_size=1, max_size=6),
          size=st.sampled_from(SIZES), split=st.booleans())
    def client_sends_queries(self, data: st.DataObject, slow: list[bool], size: int, split: bool) -> None:
        """One write of several whole frames (pipelining); split: the last one's final byte comes later."""
        c = data.draw(st.sampled_from(self._open_conns()))
        t = self.transports[c.n]
        payload = bytearray()
        qids = []
        for s in slow:
            qid = self.next_qid
            self.next_qid += 1
            self.resolver.plan[qid] = (s, size)
            qids.append(qid)
            payload += frame(query(qid))
        if c.partial:  # finish the frame left partial before
            payload = bytearray(self._partial_rest.pop(c.n)) + payload
            c.waiting.append(self._partial_qid.pop(c.n))
            c.partial = 0
        if split:
            first, last = bytes(payload[:-1]), bytes(payload[-1:])
            settle(self.loop, lambda: t.client_sends(first))
            c.partial = 1
            self._partial_rest[c.n] = last
            self._partial_qid[c.n] = qids.pop()
        else:
            whole = bytes(payload)
            settle(self.loop, lambda: t.client_sends(whole))
        c.waiting += qids
        if c.reading:  # else the bytes wait in the kernel
            self.model.take(c, self.loop.now)

    @rule(data=st.data())
    @precondition(lambda self: any(c.state in ("open", "closing") and c.unsent for c in self.model.conns))
    def client_reads(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from([c for c in self.model.conns if c.state in ("open", "closing") and c.unsent]))
        told = sum(2 + self.model.plan[q][1] for q in c.unsent) >= OWED_PAUSE  # writing paused: resumed
        settle(self.loop, self.transports[c.n].client_reads)
        self.model.reads(c)
        if told or c.reading:
            self.model.take(c, self.loop.now)

    @rule(data=st.data(), fails=st.booleans())
    @precondition(lambda self: bool(self._asked_pending()))
    def upstream_answers(self, data: st.DataObject, fails: bool) -> None:
        qid = data.draw(st.sampled_from(sorted(self._asked_pending())))
        self.resolver.upstream.pop(qid).set_result(None if fails else answer(qid, self.resolver.plan[qid][1]))
        self._tick()
        c = next(c for c in self.model.conns if qid in c.pending)
        c.pending.discard(qid)
        if not fails and c.state == "open":
            c.unsent.append(qid)
        self.model.take(c, self.loop.now)

    def _asked_pending(self) -> set[int]:
        return {q for q, f in self.resolver.upstream.items() if not f.done()}

    @rule(data=st.data())
    @precondition(lambda self: any(c.state == "open" and not c.eof_sent for c in self.model.conns))
    def client_half_closes(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from(self._open_conns()))
        settle(self.loop, self.transports[c.n].client_half_closes)
        c.eof_sent = True
        if c.reading:
            self.model.take(c, self.loop.now)

    @rule(data=st.data())
    @precondition(lambda self: any(c.state in ("open", "closing") for c in self.model.conns))
    def client_resets(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from([c for c in self.model.conns if c.state in ("open", "closing")]))
        settle(self.loop, self.transports[c.n].client_resets)
        c.state = "reset"
        c.reset_by_client = True
        c.unsent = []

    def _idle_fires(self, c: Conn) -> None:
        """The idle timeout: owed answers unsent (however the connection is closing), a reset; waiting on
        the upstream, a look again a timeout later; owed nothing, a close."""
        m = self.model
        if c.unsent:
            c.state = "reset"
            c.unsent = []
            m.unread += 1
        elif c.pending:
            c.deadline = self.loop.now + IDLE
        else:
            m.close(c)

    def _advance_to(self, target: float) -> None:
        """Move the clock to `target`, stopping at every idle deadline on the way (each reached exactly;
        those within the clock's resolution of one another fire together, as the loop runs them)."""
        while True:
            due = [c.deadline for c in self.model.conns
                   if c.state in ("open", "closing") and c.deadline <= target + RESOLUTION]
            if not due:
                break
            at = min(min(due), target)
            self.loop.now = at
            self._tick()
            for c in self.model.conns:
                if c.state in ("open", "closing") and c.deadline <= at + RESOLUTION:
                    self._idle_fires(c)
        self.loop.now = target
        self._tick()

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, 4.999, 7.0]))
    def time_passes(self, seconds: float) -> None:
        self._advance_to(self.loop.now + seconds)

    @rule(data=st.data(), exactly=st.booleans())
    @precondition(lambda self: any(c.state in ("open", "closing") for c in self.model.conns))
    def time_reaches_a_deadline(self, data: st.DataObject, exactly: bool) -> None:
        """To the next idle deadline exactly, or a microsecond before it."""
        at = min(c.deadline for c in self.model.conns if c.state in ("open", "closing"))
        self._advance_to(at if exactly else at - 1e-6)

    # -- after every step ------------------------------------------------------------------------

    @invariant()
    def agrees_with_the_model(self) -> None:
        m = self.model
        asked = set(self.resolver.asked)
        for c in m.conns:
            t = self.transports[c.n]
            what = f"connection {c.n} from {c.addr} ({c.state} in the model)"
            if c.state == "open":
                assert not t.closing, f"{what}: closed"
            elif c.state == "closing":
                assert t.closing and not t.aborted and not t.lost, f"{what}: not closing gracefully"
            elif c.state == "closed":
                assert t.closing and not t.aborted and t.lost, f"{what}: not closed gracefully"
            else:
                assert t.lost and (t.aborted or c.reset_by_client), f"{what}: not reset"
            assert set(c.taken) <= asked and not (set(c.waiting) & asked), f"{what}: frames taken {c.taken}"
            assert sorted(t.answers_read()) == sorted(c.read), f"{what}: answers read"
            if c.state == "open" and not c.eof:
                assert t.reading == c.reading, f"{what}: reading {t.reading}, owed {m.owed(c)}"
            in_flight = len(c.pending)
            assert in_flight <= OWED_PAUSE // QUERY_COST
        assert len(asked) == len(self.resolver.asked), "a query asked twice"
        assert self.stats.tcp_open == sum(c.counted() for c in m.conns)
        assert self.stats.tcp_refused == m.refused
        assert self.stats.tcp_refused_client == m.refused_client
        assert self.stats.tcp_aborted_unread == m.unread
        assert self.stats.tcp_aborted_evicted == m.evicted
        holders = {self.transports[c.n].protocol for c in m.conns
                   if c.counted() and self.transports[c.n].write_paused}
        assert self.server.tcp.holding == holders, "holders of unsent answers"
        per_addr = {a: len(m.held(a)) for a in ADDRESSES if m.held(a)}
        assert {a: len(v) for a, v in self.server.tcp.by_client.items()} == per_addr
        assert len(self.server.tcp.clients) == sum(c.counted() for c in m.conns)
        assert all(n <= PER_CLIENT for n in per_addr.values())
        assert sum(per_addr.values()) <= MAX_CONNECTIONS


TestTCPConnectionModel = TCPMachine.TestCase
TestTCPConnectionModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])


# -- the boundaries, as sequences of events checked against the same model after each ---------------------


class Pick:
    """A draw that picks the connection numbered `n` (the machine's rules draw the connection)."""

    def __init__(self, machine: TCPMachine, n: int) -> None:
        self.machine, self.n = machine, n

    def draw(self, strategy: object) -> Conn:
        return self.machine.model.conns[self.n]


class Fixed:
    """A draw that gives one value (the query whose upstream answers)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def draw(self, strategy: object) -> int:
        return self.value


def run(steps: list[tuple[str, dict[str, Any]]], sizes: list[int] | None = None) -> TCPMachine:
    """Play `steps` (a rule's name and its arguments; `conn=N` picks connection N) on a fresh machine,
    checking the model after each, and return it for the scenario's own checks."""
    m = TCPMachine()
    try:
        for name, args in steps:
            args = dict(args)
            if "conn" in args:
                args["data"] = Pick(m, args.pop("conn"))
            if name == "at":
                m._advance_to(args["t"])
            elif name == "upstream_answers":
                args["data"] = Fixed(args.pop("qid"))
                getattr(m, name)(**args)
            else:
                getattr(m, name)(**args)
            m.agrees_with_the_model()
    except BaseException:
        m.teardown()
        raise
    return m


T0 = 1000.0


@pytest.mark.parametrize("before", [True, False], ids=["a-microsecond-before", "exactly"])
def test_a_connection_owed_nothing_closes_exactly_at_the_idle_timeout_after_its_last_whole_query(before: bool) -> None:
    m = run([("connect", {"addr": ADDRESSES[0]}),
             ("at", {"t": T0 + 2}),
             ("client_sends_queries", {"conn": 0, "slow": [False], "size": 40, "split": True}),  # a frame short
             ("client_reads", {"conn": 0}),
             ("at", {"t": T0 + 3}),
             ("client_sends_queries", {"conn": 0, "slow": [False], "size": 40, "split": False}),  # completes it
             ("client_reads", {"conn": 0}),
             ("at", {"t": T0 + 3 + IDLE - (1e-6 if before else 0)})])
    try:
        assert m.transports[0].closing is not before
        assert not m.transports[0].aborted
        assert sorted(m.transports[0].answers_read()) == [1, 2]
    finally:
        m.teardown()


def test_an_idle_deadline_a_rounding_error_past_the_time_reached_closes_the_connection_then() -> None:
    """Its deadline is 1019.999999 + 5, which rounds a rounding error (far under the clock's resolution)
    past 1025 - 1e-6: the loop runs that timer at 1025 - 1e-6, and the connection is closed then, in the
    model as in the server (a model comparing deadlines exactly found an open connection closed)."""
    m = run([("connect", {"addr": ADDRESSES[0]}),
             ("at", {"t": T0 + 20 - 1e-6}),  # the first closes at T0 + IDLE
             ("connect", {"addr": ADDRESSES[0]}),
             ("at", {"t": T0 + 25 - 1e-6})])
    try:
        assert m.model.conns[1].deadline != m.loop.now, "the two times no longer round apart"
        assert m.transports[1].closing and not m.transports[1].aborted
        assert m.stats.tcp_open == 0
    finally:
        m.teardown()


def test_a_query_whose_upstream_is_slower_than_the_idle_timeout_gets_its_answer_then_the_close() -> None:
    m = run([("connect", {"addr": ADDRESSES[0]}),
             ("client_sends_queries", {"conn": 0, "slow": [True], "size": 300, "split": False}),
             ("at", {"t": T0 + IDLE}),  # waiting on its upstream: kept
             ("at", {"t": T0 + 2 * IDLE - 1e-6}),
             ("upstream_answers", {"qid": 1, "fails": False}),
             ("client_reads", {"conn": 0}),
             ("at", {"t": T0 + 3 * IDLE})])
    try:
        assert m.transports[0].answers_read() == [1]
        assert m.transports[0].closing and not m.transports[0].aborted
    finally:
        m.teardown()


def test_a_half_closed_client_that_never_takes_its_last_answer_is_reset_at_the_idle_timeout() -> None:
    """It half-closed while its query waited on the upstream; the answer came, the connection closes once
    written, but the client never reads it: at the idle timeout it is reset, its slot free (not held open
    for ever by a close waiting on a client that does not read)."""
    m = run([("connect", {"addr": ADDRESSES[0]}),
             ("client_sends_queries", {"conn": 0, "slow": [True, True], "size": 3000, "split": False}),
             ("client_half_closes", {"conn": 0}),
             ("upstream_answers", {"qid": 1, "fails": False}),
             ("upstream_answers", {"qid": 2, "fails": False}),
             ("at", {"t": T0 + IDLE - 1e-6}),
             ("at", {"t": T0 + IDLE})])
    try:
        assert m.transports[0].aborted
        assert m.stats.tcp_open == 0 and m.stats.tcp_aborted_unread == 1
        assert not m.server.tcp.by_client and not m.server.tcp.holding
    finally:
        m.teardown()


def test_a_connection_reset_by_its_client_while_holding_unsent_answers_is_counted_off_everywhere() -> None:
    m = run([("connect", {"addr": ADDRESSES[0]}),
             ("client_sends_queries", {"conn": 0, "slow": [False, False], "size": 3000, "split": False}),
             ("client_resets", {"conn": 0})])
    try:
        assert not m.server.tcp.holding and not m.server.tcp.clients and not m.server.tcp.by_client
        assert m.stats.tcp_open == 0
    finally:
        m.teardown()


def test_exactly_the_per_client_cap_is_held_and_the_next_from_that_address_refused() -> None:
    steps: list[tuple[str, dict[str, Any]]] = [("connect", {"addr": ADDRESSES[0]}) for _ in range(PER_CLIENT + 1)]
    m = run([*steps, ("connect", {"addr": ADDRESSES[1]})])
    try:
        assert [t.aborted for t in m.transports] == [False] * PER_CLIENT + [True, False]
        assert m.stats.tcp_refused_client == 1 and m.stats.tcp_refused == 0
    finally:
        m.teardown()


def test_at_exactly_the_connection_cap_a_newcomer_evicts_only_a_holder_of_two_more() -> None:
    # 10.0.0.1 holds 2, 10.0.0.2 holds 2: the cap (4) is reached; 10.0.0.3 holds 0, so the first address's
    # oldest goes; then 10.0.0.3 holds 1 and the largest 2: not two more, the next newcomer is refused
    m = run([("connect", {"addr": ADDRESSES[0]}), ("connect", {"addr": ADDRESSES[0]}),
             ("connect", {"addr": ADDRESSES[1]}), ("connect", {"addr": ADDRESSES[1]}),
             ("connect", {"addr": ADDRESSES[2]}), ("connect", {"addr": ADDRESSES[2]})])
    try:
        assert m.stats.tcp_aborted_evicted == 1 and m.stats.tcp_refused == 1
        assert m.transports[4].aborted is False and m.transports[5].aborted is True
        assert m.stats.tcp_open == MAX_CONNECTIONS
    finally:
        m.teardown()


def test_at_the_connection_cap_a_half_closed_connection_taking_its_last_answer_is_not_the_one_evicted() -> None:
    """Its client half-closed with nothing pending: the connection closes once its answer is sent (closing,
    as after our close), so the holder's oldest connection still open is reset to make room, and the
    closing one still delivers its answer (found by the state machine: the eviction took the closing one)."""
    m = run([("connect", {"addr": ADDRESSES[0]}),
             ("client_sends_queries", {"conn": 0, "slow": [False], "size": 40, "split": False}),
             ("client_half_closes", {"conn": 0}),
             ("connect", {"addr": ADDRESSES[0]}),
             ("connect", {"addr": ADDRESSES[1]}), ("connect", {"addr": ADDRESSES[1]}),
             ("connect", {"addr": ADDRESSES[2]}),
             ("client_reads", {"conn": 0})])
    try:
        assert [t.aborted for t in m.transports] == [False, True, False, False, False]
        assert m.transports[0].answers_read() == [1] and m.transports[0].lost
        assert m.stats.tcp_aborted_evicted == 1 and m.stats.tcp_refused == 0
    finally:
        m.teardown()


def test_at_the_cap_a_newcomer_evicts_from_an_equal_largest_holder_whose_connections_are_not_all_closing() -> None:
    """Two addresses hold the most (two each): the first's both half-closed and take their last answers
    (closing), the second's are open. A newcomer holding none is not refused: the second's oldest is reset
    (found by the state machine: the first holder alone was looked at, and the newcomer refused)."""
    half_closed: list[tuple[str, dict[str, Any]]] = []
    for n in (0, 1):
        half_closed += [("connect", {"addr": ADDRESSES[0]}),
                        ("client_sends_queries", {"conn": n, "slow": [False], "size": 40, "split": False}),
                        ("client_half_closes", {"conn": n})]
    m = run([*half_closed, ("connect", {"addr": ADDRESSES[1]}), ("connect", {"addr": ADDRESSES[1]}),
             ("connect", {"addr": ADDRESSES[2]})])
    try:
        assert [t.aborted for t in m.transports] == [False, False, True, False, False]
        assert m.stats.tcp_aborted_evicted == 1 and m.stats.tcp_refused == 0
    finally:
        m.teardown()


def test_answers_owed_of_exactly_the_pause_then_read_let_the_next_pipelined_query_in() -> None:
    """4 KiB owed exactly (an answer of 4,094 bytes and its length): the next frame waits; once the client
    has read it, the next query is taken and answered (not left in the kernel until the idle close)."""
    m = run([("connect", {"addr": ADDRESSES[0]}),
             ("client_sends_queries", {"conn": 0, "slow": [False], "size": OWED_PAUSE - 2, "split": False}),
             ("client_sends_queries", {"conn": 0, "slow": [False], "size": 40, "split": False})])
    try:
        assert m.resolver.asked == [1]
        settle(m.loop, m.transports[0].client_reads)
        assert m.resolver.asked == [1, 2], "the next query waits though nothing is owed"
    finally:
        m.teardown()
