"""The two UDP hit paths send the same bytes and count the same: a differential test through the listener.

Two agents, alike but for the hit path (`NODEDNS_HIT_PATH=python` for one: nodedns/serve/hitpath.py's `serve`
through `UDPListener.readable`; the other the C one, nodedns/serve/_hitpath.c, through the same), hold
the same stored answers and get the same generated batches over real sockets on loopback: clients on
several addresses and ports interleaved (one of them outside the allow list), stored answers with
answer, authority and additional sections of random sizes (so the cut for a client's UDP size falls at
every section boundary), queries without EDNS, with a bare OPT of any payload size, with DO, with an
EDNS option, with the header's Z bit, with the name in odd case (0x20), with a byte flipped. Each
agent's event loop is held while a batch is sent, so the C hit path reads it in one recvmmsg, as under
load. Compared: every reply's bytes (by client and query ID), the agent's counters by label slot, and
with insight on what its tally handed on (the rows of /debug/top). Only the agents' public behaviour is
read: the comparison holds for any hit-path code that answers the same.

Independently of either path, every reply that came back must fit the client's UDP size (512 without
EDNS, else its payload size capped by ours) and parse, and a cut answer keeps whole records in order.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dns.flags
import dns.message
import dns.name
import dns.rdatatype
import dns.rrset
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nodedns.dns.keys import make_key
from nodedns.dns.wire import KF_DO, KF_EDNS, KF_RD
from nodedns.serve.tally import Row
from tests.support.helpers import EXAMPLE, RunningAgent, require_c_extension, wait_for

require_c_extension("nodedns.serve._hitpath")  # only whether it is built

ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")  # the last one is not in the allow list
ALLOW = "127.0.0.1/32,127.0.0.2/32"
PER_ADDRESS = 2  # client sockets (ports) per address
MAX_UDP = 1232  # the agents' --max-udp-size (the default)
TXT = dns.rdatatype.TXT
OPT_FLAGS = ("none", "bare", "do", "option", "z")


# ----------------------------------------------------------------------------------------------
# The agents and the clients


class Observed:
    """An agent, what its insight was handed (the tally's rows), and its counters."""

    def __init__(self, agent: RunningAgent) -> None:
        self.agent = agent
        self.rows: list[Row] = []
        insight = agent.agent.insight
        if insight is not None:
            take = insight.take

            def recording(rows: Any) -> None:
                rows = list(rows)
                self.rows.extend(rows)
                take(rows)

            insight.take = recording  # type: ignore[method-assign]

    def counts(self) -> tuple[list[int], list[int]]:
        """(hit-path answers, slow-path answers) by label slot, over every listener."""

        def read() -> tuple[list[int], list[int]]:
            hit, slow = [0] * 256, [0] * 256
            for s in self.agent.agent.server.stats:
                for i, n in enumerate(s.udp_hit):
                    hit[i] += n
                for i, n in enumerate(s.udp):
                    slow[i] += n
            return hit, slow

        return self.agent.call(read)

    def handed_on(self) -> collections.Counter[tuple[Any, ...]]:
        """What the tally counted since the last call: (client, name, type, rcode, source) -> (answers, cached)."""
        rows = self.rows + self.agent.call(self.agent.agent.insight_feed.rows)
        self.rows = []
        out: collections.Counter[tuple[Any, ...]] = collections.Counter()
        for r in rows:
            out[(r.gen, r.client, r.name, r.qtype, r.rcode, r.source, "answers")] += r.answers
            out[(r.gen, r.client, r.name, r.qtype, r.rcode, r.source, "cached")] += r.cached
        return out

    def store(self, entries: dict[bytes, bytes]) -> None:
        """Exactly these stored answers (key -> response), through the agent's own ClusterAnswers."""

        def put() -> None:
            answers = self.agent.agent.cluster_answers
            answers.clear()
            for key, wire in entries.items():
                answers.put(key, wire)

        self.agent.call(put)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The agent's event loop held (nothing read) while the block runs, then let go."""
        entered, gate = threading.Event(), threading.Event()

        def hold() -> None:
            entered.set()
            gate.wait(10)

        self.agent.loop.call_soon_threadsafe(hold)
        assert entered.wait(10)
        try:
            yield
        finally:
            gate.set()


def start(path: str, insight: str) -> RunningAgent:
    with pytest.MonkeyPatch.context() as mp:  # read when the agent's DNS server is made
        if path == "python":
            mp.setenv("NODEDNS_HIT_PATH", "python")
        else:
            mp.delenv("NODEDNS_HIT_PATH", raising=False)
        # a budget that keeps the thousands of stored answers these tests send (the cluster share: a quarter)
        return RunningAgent({"manifests": str(EXAMPLE), "allow-from": ALLOW, "insight": insight,
                             "cache-max-bytes": "128Mi"}).start()


@pytest.fixture(scope="module", params=["on", "off"], ids=["insight-on", "insight-off"])
def agents(request: pytest.FixtureRequest, clients: list[socket.socket]) -> Iterator[tuple[Observed, Observed]]:
    started = [start("c", request.param), start("python", request.param)]
    try:
        assert [a.agent.server.batch_serve is not None for a in started] == [True, False]
        for a in started:  # every client has asked once: the allow list admitted (or refused) its address
            for s in clients:
                s.sendto(query(Ask(0, 9, "none", 0, 0, True, None), 1, []), (a.host, a.port))
                wait_reply(s)
        yield Observed(started[0]), Observed(started[1])
    finally:
        for a in started:
            a.stop()


@pytest.fixture(scope="module")
def clients() -> Iterator[list[socket.socket]]:
    socks = []
    try:
        for address in ADDRESSES:
            for _ in range(PER_ADDRESS):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind((address, 0))
                s.setblocking(False)
                socks.append(s)
        yield socks
    finally:
        for s in socks:
            s.close()


# ----------------------------------------------------------------------------------------------
# What is stored, what is asked


@dataclass(frozen=True)
class Stored:
    """A stored answer's records: TXT records of these lengths of text in each section."""

    label: str
    answer: tuple[int, ...]
    authority: tuple[int, ...]
    additional: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.label}.example"


def question(name: str) -> bytes:
    return dns.name.from_text(name).to_wire() + struct.pack("!HH", TXT, 1)


def response(entry: Stored, kflags: int) -> bytes:
    """The stored response for a query with these flags (ID 0, the question lowercase), built by dnspython."""
    q = dns.message.make_query(entry.name, TXT, use_edns=0 if kflags & KF_EDNS else False, payload=MAX_UDP)
    q.id = 0
    r = dns.message.make_response(q, recursion_available=True, our_payload=MAX_UDP)
    if kflags & KF_DO:
        r.want_dnssec(True)
    for section, lengths, owner in ((r.answer, entry.answer, entry.name), (r.authority, entry.authority, "example"),
                                    (r.additional, entry.additional, entry.name)):
        for i, n in enumerate(lengths):  # one record per RRset (kept in order), each text its own
            text = f"{i:02d}" + "x" * (n - 2)  # over 255 bytes: several strings in the one record
            strings = " ".join(f'"{text[at:at + 255]}"' for at in range(0, n, 255))
            section.append(dns.rrset.from_text(f"{owner}.", 30, "IN", "TXT", strings))
    return bytes(r.to_wire(max_size=65535))


def table(entries: list[Stored]) -> dict[bytes, bytes]:
    """Each entry stored under the keys of an RD query without EDNS, with EDNS, and with EDNS and DO."""
    return {make_key(question(e.name), kflags): response(e, kflags)
            for e in entries for kflags in (KF_RD, KF_RD | KF_EDNS, KF_RD | KF_EDNS | KF_DO)}


@dataclass(frozen=True)
class Ask:
    client: int  # index into the client sockets
    target: int  # index into the stored entries; past the end: a name that is not stored
    opt: str  # OPT_FLAGS
    payload: int
    case: int  # bit i set: letter i of the name in upper case (0x20)
    rd: bool
    flip: tuple[int, int] | None  # (position from byte 2 on, new value)


def query(ask: Ask, qid: int, entries: list[Stored]) -> bytes:
    name = entries[ask.target].name if ask.target < len(entries) else f"absent{ask.target}.example"
    cased = "".join(c.upper() if ask.case >> i & 1 else c for i, c in enumerate(name))
    flags = (0x0100 if ask.rd else 0) | (0x0040 if ask.opt == "z" else 0)
    edns = ask.opt != "none"
    wire = struct.pack("!HHHHHH", qid, flags, 1, 0, 0, 1 if edns else 0) + question(cased)
    if edns:
        options = struct.pack("!HH", 10, 8) + b"cookie!!" if ask.opt == "option" else b""
        wire += b"\x00\x00\x29" + struct.pack("!HBBHH", ask.payload, 0, 0, 0x8000 if ask.opt == "do" else 0,
                                              len(options)) + options
    if ask.flip is not None:
        at = 2 + ask.flip[0] % (len(wire) - 2)
        wire = wire[:at] + bytes([ask.flip[1]]) + wire[at + 1:]
    return wire


def udp_limit(ask: Ask) -> int:
    """The largest reply the client may get over UDP (RFC 6891: 512 without EDNS, else its payload size
    but never below 512, capped by ours)."""
    return 512 if ask.opt == "none" else min(max(ask.payload, 512), MAX_UDP)


lengths = st.integers(3, 255)  # of each record's text
stored = st.builds(Stored, label=st.from_regex(r"[a-z][a-z0-9]{0,9}", fullmatch=True),
                   answer=st.lists(lengths, max_size=8).map(tuple), authority=st.lists(lengths, max_size=4).map(tuple),
                   additional=st.lists(lengths, max_size=4).map(tuple))
asks = st.builds(Ask, client=st.integers(0, len(ADDRESSES) * PER_ADDRESS - 1), target=st.integers(0, 4),
                 opt=st.sampled_from(OPT_FLAGS), payload=st.sampled_from([0, 100, 512, 513, 700, 1232, 1500, 4096]),
                 case=st.one_of(st.just(0), st.integers(0, 1 << 16)), rd=st.sampled_from([True, True, True, False]),
                 flip=st.one_of(st.none(), st.none(), st.none(), st.tuples(st.integers(0, 80), st.integers(0, 255))))
# a batch: the stored answers and the queries, in the order they reach the agent (clients interleaved)
batches = st.tuples(st.lists(stored, min_size=1, max_size=4, unique_by=lambda e: e.label),
                    st.lists(asks, min_size=1, max_size=90))


# clients of both allowed addresses and the refused one interleaved, cuts in every section, EDNS or not
EXPLICIT = ([Stored("big", (250, 250, 250), (150, 150), (100, 100))],  # 1,400 bytes: more than our 1,232
            [Ask(c, 0, opt, p, case, True, None) for opt, p, case in
             (("none", 0, 0), ("bare", 512, 0), ("bare", 700, 0), ("do", 1232, 0), ("bare", 100, 0),
              ("option", 600, 0b101), ("option", 4096, 0)) for c in (0, 2, 1, 3, 4)])

# one client asking more distinct stored names than insight counts one by one (tally.MAX_ANSWERS: 64)
MANY = ([Stored(f"n{i}", (3,), (), ()) for i in range(70)], [Ask(0, i, "none", 0, 0, True, None) for i in range(70)])


# ----------------------------------------------------------------------------------------------
# One batch through one agent


def through(agent: Observed, clients: list[socket.socket], datagrams: list[tuple[int, bytes]]
            ) -> tuple[dict[tuple[int, int], list[bytes]], list[int], list[int]]:
    """Send the batch while the agent's loop is held; (replies by (client, query ID), hit-path and
    slow-path answers by slot, as counted meanwhile)."""
    hit0, slow0 = agent.counts()
    address = (agent.agent.host, agent.agent.port)
    with agent.held():
        for client, data in datagrams:
            clients[client].sendto(data, address)

    def processed() -> bool:
        hit, slow = agent.counts()
        return sum(hit) - sum(hit0) + sum(slow) - sum(slow0) >= len(datagrams)

    wait_for(processed, 10, "every datagram answered or dropped")
    replies: dict[tuple[int, int], list[bytes]] = collections.defaultdict(list)
    for n, s in enumerate(clients):
        while True:
            try:
                data, _ = s.recvfrom(65535)
            except BlockingIOError:
                break
            replies[(n, int.from_bytes(data[:2], "big"))].append(data)
    hit, slow = agent.counts()
    return dict(replies), [a - b for a, b in zip(hit, hit0, strict=True)], [a - b for a, b in zip(slow, slow0,
                                                                                                   strict=True)]


def drain(clients: list[socket.socket]) -> None:
    for s in clients:
        with contextlib.suppress(BlockingIOError):
            while True:
                s.recvfrom(65535)


def records(msg: dns.message.Message) -> list[list[str]]:
    return [[rd.to_text() for rrset in section for rd in rrset] for section in (msg.answer, msg.authority,
                                                                                msg.additional)]


def check_reply(reply: bytes, ask: Ask, asked: bytes, entries: list[Stored]) -> bool:
    """What any hit path must send, whichever it is: within the client's UDP size, parseable, the question
    as asked; a stored answer whole or cut to whole records in order (answer, authority, additional),
    TC=1 when one was left out. True when it was a stored answer."""
    if ask.flip is not None:
        return False  # a flipped byte (the payload size too): whatever becomes of it (compared between the paths)
    assert len(reply) <= udp_limit(ask), (len(reply), ask)
    msg = dns.message.from_wire(reply, ignore_trailing=False)
    assert msg.question[0].to_text() == dns.message.from_wire(asked).question[0].to_text()
    if msg.rcode() != 0 or ask.target >= len(entries) or not ask.rd:
        return False
    kflags = KF_RD | (KF_EDNS if ask.opt != "none" else 0) | (KF_DO if ask.opt == "do" else 0)
    whole = records(dns.message.from_wire(response(entries[ask.target], kflags)))
    got = records(msg)
    assert all(g == w[:len(g)] for g, w in zip(got, whole, strict=True)), (got, whole)
    cut = [len(g) for g in got] != [len(w) for w in whole]
    assert bool(msg.flags & dns.flags.TC) == cut
    if cut:  # nothing after the first record left out
        first_short = next(i for i, (g, w) in enumerate(zip(got, whole, strict=True)) if len(g) < len(w))
        assert not any(got[first_short + 1:])
    assert (msg.edns == 0) == (ask.opt != "none")
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow, HealthCheck.data_too_large])
@example(batch=EXPLICIT)
@example(batch=MANY)
@given(batch=batches)
def test_the_c_and_python_hit_paths_send_the_same_bytes_and_count_the_same(
        agents: tuple[Observed, Observed], clients: list[socket.socket],
        batch: tuple[list[Stored], list[Ask]]) -> None:
    entries, asked = batch
    datagrams = [(a.client, query(a, 0x1000 + i, entries)) for i, a in enumerate(asked)]
    seen = []
    for agent in agents:
        drain(clients)
        agent.store(table(entries))
        agent.handed_on()  # what came before this batch
        replies, hits, slow = through(agent, clients, datagrams)
        seen.append((replies, hits, slow, agent.handed_on()))
    (c_replies, c_hits, c_slow, c_tally), (py_replies, py_hits, py_slow, py_tally) = seen
    assert c_replies == py_replies
    assert (c_hits, c_slow) == (py_hits, py_slow)
    assert c_tally == py_tally
    answered_stored = 0
    for i, (a, (client, data)) in enumerate(zip(asked, datagrams, strict=True)):
        for reply in c_replies.get((client, 0x1000 + i), []):
            answered_stored += check_reply(reply, a, data, entries)
    refused = sum(1 for a in asked if ADDRESSES[a.client // PER_ADDRESS] == "127.0.0.3")
    assert sum(c_slow) >= refused  # the client outside the allow list never reaches a stored answer
    if batch == EXPLICIT:  # not a comparison of two paths that answer nothing: all but the refused are hits
        assert sum(c_hits) == 28 and answered_stored == 28, (c_hits, answered_stored)


# ----------------------------------------------------------------------------------------------
# The cut, section by section: the header's counts (both paths, through the listener)


def sections(reply: bytes) -> tuple[int, int, int, int]:
    return struct.unpack("!HHHH", reply[4:12])


@pytest.mark.parametrize("opt", ["none", "bare"])
def test_a_cut_at_each_section_boundary_counts_the_records_kept_in_the_header(
        agents: tuple[Observed, Observed], clients: list[socket.socket], opt: str) -> None:
    """Records of 100 bytes of text (the owner a pointer: 2 + 10 + 101 = 113 bytes each): as many whole ones
    as fit, the answer section first, then authority, then additional (the OPT kept), and the counts
    in the header say how many of each; TC=1 whenever one was left out."""
    record = 113
    cases = [(Stored(f"cut{an}{ns}{ar}", (100,) * an, (100,) * ns, (100,) * ar), payload)
             for an, ns, ar in ((3, 0, 0), (3, 3, 0), (3, 3, 3), (0, 3, 3), (0, 0, 6))
             for payload in (512, 608, 700, 721, 800, 834, 900, 1000)]  # 608, 721, 834: 5, 6, 7 records fit exactly
    for agent in agents:
        drain(clients)
        agent.store(table([e for e, _ in cases]))
        entries = [e for e, _ in cases]
        for n, (entry, payload) in enumerate(cases):
            ask = Ask(0, entries.index(entry), opt, payload, 0, True, None)
            data = query(ask, n, entries)
            full = response(entry, KF_RD | (KF_EDNS if opt != "none" else 0))
            head_and_question = len(data) - (11 if opt != "none" else 0)
            limit = udp_limit(ask)
            budget = limit - head_and_question - (11 if opt != "none" else 0)
            fits = max(0, budget // record) if len(full) > limit else len(entry.answer + entry.authority
                                                                             + entry.additional)
            wanted = [len(entry.answer), len(entry.authority), len(entry.additional)]
            kept = []
            for have in wanted:
                kept.append(min(have, fits))
                fits -= kept[-1]
            ar = kept[2] + (1 if opt != "none" else 0)
            clients[0].sendto(data, (agent.agent.host, agent.agent.port))
            reply = wait_reply(clients[0])
            assert len(reply) <= limit
            assert sections(reply) == (1, kept[0], kept[1], ar), (entry, payload, opt)
            assert bool(reply[2] & 0x02) == (sum(kept) < sum(wanted)), (entry, payload, opt)
            msg = dns.message.from_wire(reply)
            assert [sum(len(rrset) for rrset in section) for section in (msg.answer, msg.authority,
                                                                          msg.additional)] == kept
            assert (msg.edns == 0) == (opt != "none")


def test_a_record_too_big_for_a_client_without_edns_leaves_an_empty_answer_with_tc(
        agents: tuple[Observed, Observed], clients: list[socket.socket]) -> None:
    """One answer record of 600 bytes, asked without EDNS (512 bytes at most): the header and the
    question, no record, TC=1 (the client asks again over TCP, where the whole answer comes)."""
    entry = Stored("onebig", (600,), (), ())
    for agent in agents:
        drain(clients)
        agent.store(table([entry]))
        ask = Ask(2, 0, "none", 0, 0b1010, True, None)  # odd case too
        data = query(ask, 0x4242, [entry])
        clients[2].sendto(data, (agent.agent.host, agent.agent.port))
        reply = wait_reply(clients[2])
        assert reply[:2] == b"\x42\x42" and reply[2] & 0x02  # TC
        assert sections(reply) == (1, 0, 0, 0) and reply[12:] == data[12:]  # the client's question, as asked


def wait_reply(sock: socket.socket, timeout: float = 3.0) -> bytes:
    got: list[bytes] = []

    def arrived() -> bool:
        try:
            got.append(sock.recv(65535))
        except BlockingIOError:
            return False
        return True

    wait_for(arrived, timeout, "a reply")
    return got[0]


def test_a_client_asking_more_names_than_an_interval_counts_by_name_is_counted_alike_on_both_paths(
        agents: tuple[Observed, Observed], clients: list[socket.socket]) -> None:
    """One client asks 4,300 distinct stored names in one insight interval: more than the tally counts by name
    ((MAX_SEALED + 1) x MAX_ANSWERS), so the rest are counted by their label slot alone, on both paths alike
    (the C one hands a hit that does not fit to Tally.hit; the Python one counts it inline). A client spraying
    names costs the tally a fixed amount."""
    from nodedns.serve.tally import MAX_ANSWERS, MAX_SEALED
    named_max = (MAX_SEALED + 1) * MAX_ANSWERS
    entries = [Stored(f"w{i}", (3,), (), ()) for i in range(named_max + 140)]
    seen = []
    hits = []
    for agent in agents:
        drain(clients)
        agent.store(table(entries))
        agent.handed_on()
        feed = agent.agent.agent.insight_feed
        flush, sliced = feed.rows, feed.rows_sliced

        async def held() -> list[object]:
            return []

        # the once-a-second hand-over held (whole or in slices): one interval
        feed.rows, feed.rows_sliced = list, held  # type: ignore[method-assign,assignment]
        answered = 0
        try:
            for at in range(0, len(entries), 200):
                datagrams = [(0, query(Ask(0, i, "none", 0, 0, True, None), i, entries))
                             for i in range(at, min(at + 200, len(entries)))]
                answered += sum(through(agent, clients, datagrams)[1])
        finally:
            feed.rows, feed.rows_sliced = flush, sliced  # type: ignore[method-assign]
        hits.append(answered)
        seen.append(agent.handed_on())
    assert hits == [len(entries), len(entries)]  # every one a hit, on both paths
    c_tally, py_tally = seen
    assert c_tally == py_tally
    if agents[0].agent.agent.insight is None:
        assert not c_tally  # no tally at all
        return
    named = {key[2] for key in c_tally if key[2]}
    assert len(named) == named_max  # counted by name up to the bound, the rest by label slot
    assert sum(n for key, n in c_tally.items() if key[-1] == "answers") == len(entries)
