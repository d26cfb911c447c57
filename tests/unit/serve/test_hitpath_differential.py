"""The two production hit paths decide alike: nodedns/serve/_hitpath.c's `serve` and nodedns.serve.hitpath.serve
(the Python one every listener without the C extension calls), over the same datagrams and the same state.

Each case sends the same datagrams, from the same client sockets, to two server sockets; the C function
reads one, the Python function the other, each with its own copy of the same hot dict, allow list memo,
counters, insight tally and rate limit. Compared: what each returns (datagrams read, those handed back
with their addresses, replies not sent), the bytes every client got (by client and query ID), the
counters by label slot, the tally, the rate limit's counts and the datagrams left to the limiter.
Cases: hits without EDNS and with a bare OPT of any payload size, answers cut for the client's UDP size,
DO, EDNS options, the Z bit, odd case, flipped and short (malformed) datagrams, a client outside the allow
list, clients over their rate limit and new ones while its table is full, a client whose tally piece is
full, more clients than the tally counts one by one.
"""

from __future__ import annotations

import collections
import copy
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dns.message
import dns.rrset
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nodedns.dns.keys import make_key
from nodedns.dns.wire import KF_DO, KF_EDNS, KF_RD
from nodedns.serve import hitpath
from nodedns.serve.tally import MAX_ANSWERS, Tally
from tests.support.helpers import require_c_extension

_hitpath = require_c_extension("nodedns.serve._hitpath")

ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")  # the last one is not in the allow list
ALLOWED = {"127.0.0.1", "127.0.0.2"}
MAX_UDP = 1232
NAMES = ("web", "big", "db", "api")
OPTS = ("none", "bare", "do", "option", "z")


def wire_question(name: str, qtype: int = 16) -> bytes:
    return b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00" + struct.pack("!HH", qtype, 1)


def response(name: str, records: int, kflags: int, slot: int) -> bytes:
    """A stored answer (byte 0 its label slot, the ID 0) with `records` TXT records of 100 bytes, by dnspython."""
    q = dns.message.make_query(name, "TXT", use_edns=0 if kflags & KF_EDNS else False, payload=MAX_UDP)
    q.id = 0
    r = dns.message.make_response(q, recursion_available=True, our_payload=MAX_UDP)
    if kflags & KF_DO:
        r.want_dnssec(True)
    for i in range(records):
        r.answer.append(dns.rrset.from_text(f"{name}.", 30, "IN", "TXT", f'"{i:02d}{"x" * 98}"'))
    wire = r.to_wire(max_size=65535)
    return bytes([slot]) + wire[1:]


def table() -> dict[bytes, bytes]:
    """Each name stored under the keys of an RD query without EDNS, with EDNS, and with EDNS and DO; `big`
    larger than any client's UDP size."""
    out = {}
    for i, label in enumerate(NAMES):
        name = f"{label}.example"
        for kflags in (KF_RD, KF_RD | KF_EDNS, KF_RD | KF_EDNS | KF_DO):
            out[make_key(wire_question(name), kflags)] = response(name, 14 if label == "big" else 1 + i, kflags,
                                                                  3 + i)
    return out


@dataclass(frozen=True)
class Ask:
    client: int  # index into the client sockets (two per address)
    name: int  # index into NAMES; past the end: a name not stored
    opt: str
    payload: int
    upper: bool  # the name in upper case (0x20): not a byte-for-byte hit
    flip: tuple[int, int] | None  # (position from byte 2 on, new value): malformed or just different
    short: int = 0  # > 0: only the first `short` bytes


def query(ask: Ask, qid: int) -> bytes:
    name = f"{NAMES[ask.name]}.example" if ask.name < len(NAMES) else f"absent{ask.name}.example"
    if ask.upper:
        name = name.upper()
    edns = ask.opt != "none"
    flags = 0x0100 | (0x0040 if ask.opt == "z" else 0)
    wire = struct.pack("!HHHHHH", qid, flags, 1, 0, 0, 1 if edns else 0) + wire_question(name)
    if edns:
        options = struct.pack("!HH", 10, 8) + b"cookie!!" if ask.opt == "option" else b""
        wire += b"\x00\x00\x29" + struct.pack("!HBBHH", ask.payload, 0, 0, 0x8000 if ask.opt == "do" else 0,
                                              len(options)) + options
    if ask.flip is not None:
        at = 2 + ask.flip[0] % (len(wire) - 2)
        wire = wire[:at] + bytes([ask.flip[1]]) + wire[at + 1:]
    return wire[:ask.short] if ask.short else wire


@dataclass
class State:
    """What a hit path is given besides the socket: copied whole for each of the two."""

    table: dict[bytes, bytes]
    allowed: set[str]
    counts: list[int]
    tally: dict[str, dict[bytes | int, int]] | None
    limit: tuple[dict[str, int], int, int, list[tuple[bytes, Any]]] | None
    sealing: bool = False  # a hit that does not fit the client's tally piece goes to Tally.hit (as the listener has it)


class Sockets:
    """Two server sockets (C, Python) and client sockets on three loopback addresses."""

    def __init__(self) -> None:
        self.servers = []
        for _ in range(2):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            s.setblocking(False)
            self.servers.append(s)
        self.clients = []
        for address in ADDRESSES:
            for _ in range(2):
                c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                c.bind((address, 0))
                c.setblocking(False)
                self.clients.append(c)

    def replies(self) -> dict[tuple[int, int], list[bytes]]:
        got: dict[tuple[int, int], list[bytes]] = collections.defaultdict(list)
        for n, c in enumerate(self.clients):
            while True:
                try:
                    data = c.recv(65535)
                except BlockingIOError:
                    break
                got[(n, int.from_bytes(data[:2], "big"))].append(data)
        return dict(got)

    def close(self) -> None:
        for s in self.servers + self.clients:
            s.close()


@pytest.fixture(scope="module")
def sockets() -> Iterator[Sockets]:
    s = Sockets()
    yield s
    s.close()


def both(sockets: Sockets, asks: list[Ask], state: State) -> list[tuple[Any, ...]]:
    """The batch through the C hit path, then through the Python one: what each returned and changed."""
    datagrams = [(a.client, query(a, 0x100 + i)) for i, a in enumerate(asks)]
    seen = []
    for which, server in enumerate(sockets.servers):
        mine = copy.deepcopy(state)
        for client, data in datagrams:
            sockets.clients[client].sendto(data, server.getsockname())
        tally = Tally()
        on_full = None
        if mine.sealing and mine.tally is not None:
            tally.hits = mine.tally
            on_full = tally.hit
        if which == 0:
            result = _hitpath.serve(server.fileno(), mine.table, mine.allowed, mine.counts, MAX_UDP, mine.tally,
                                    mine.limit, on_full)
        else:
            result = hitpath.serve(server, mine.table, mine.allowed, mine.counts, MAX_UDP, mine.tally, mine.limit,
                                   on_full)
        assert result[0] == len(datagrams)  # one batch: all of it read at once
        seen.append((result, sockets.replies(), mine.counts, mine.tally, mine.limit, tally.sealed))
    return seen


asks = st.builds(Ask, client=st.integers(0, 5), name=st.integers(0, 5), opt=st.sampled_from(OPTS),
                 payload=st.sampled_from([0, 100, 512, 513, 700, 1232, 1500, 4096]), upper=st.booleans(),
                 flip=st.one_of(st.none(), st.none(), st.tuples(st.integers(0, 60), st.integers(0, 255))),
                 short=st.sampled_from([0, 0, 0, 0, 1, 12, 16, 17]))
EVERY_KIND = [Ask(c, 4, "none", 0, False, None) for c in (0, 2, 4)] + [  # not stored, then every kind of ask
    Ask(c, n, opt, p, up, None) for c in (0, 2, 4) for n in (0, 1) for opt, p, up in
              (("none", 0, False), ("bare", 512, False), ("bare", 4096, False), ("bare", 100, False),
               ("do", 1232, False), ("option", 1232, False), ("z", 1232, False), ("none", 0, True))]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(asks=EVERY_KIND, rate=1000, max_clients=100, tally="sealing")
@example(asks=EVERY_KIND, rate=3, max_clients=100, tally="handed-back")
@example(asks=EVERY_KIND, rate=1000, max_clients=1, tally="off")
@given(asks=st.lists(asks, min_size=1, max_size=hitpath.BATCH), rate=st.sampled_from([1, 3, 1000]),
       max_clients=st.sampled_from([1, 2, 100]), tally=st.sampled_from(["off", "handed-back", "sealing"]))
def test_the_c_and_python_hit_paths_return_send_and_count_the_same(sockets: Sockets, asks: list[Ask], rate: int,
                                                                   max_clients: int, tally: str) -> None:
    state = State(table(), set(ALLOWED), [0] * 256, None if tally == "off" else {}, ({}, rate, max_clients, []),
                  sealing=tally == "sealing")
    c, py = both(sockets, asks, state)
    assert c == py


@pytest.mark.parametrize("limited", [False, True], ids=["no-rate-limit", "rate-limit"])
def test_a_client_whose_tally_piece_is_full_is_handed_back_by_both(sockets: Sockets, limited: bool) -> None:
    """Without Tally.hit to call, a hit of an answer new to a client whose piece already holds MAX_ANSWERS:
    not counted, not answered, handed back (the caller's Tally.hit sets the piece aside); a hit of an
    answer it holds is counted."""
    stored = table()
    full: dict[bytes | int, int] = {bytes([i]) * 20: 1 for i in range(MAX_ANSWERS)}
    web = stored[make_key(wire_question("web.example"), KF_RD)]
    full_with_web: dict[bytes | int, int] = {**dict(list(full.items())[1:]), web: 4}
    for piece, handed_back in ((full, True), (full_with_web, False)):
        state = State(stored, set(ALLOWED), [0] * 256, {"127.0.0.1": dict(piece)},
                      ({}, 100, 100, []) if limited else None)
        c, py = both(sockets, [Ask(0, 0, "none", 0, False, None)], state)
        assert c == py
        (received, misses, _), replies, counts, tally, _, _ = c
        assert (misses is not None) == handed_back and bool(replies) != handed_back
        assert counts[3] == (0 if handed_back else 1)
        assert tally is not None and tally["127.0.0.1"].get(web) == (None if handed_back else 5)


def test_a_client_whose_tally_piece_is_full_is_answered_by_both_and_the_piece_set_aside(sockets: Sockets) -> None:
    """With Tally.hit to call (as the listener gives it), the hit of an answer new to a full piece is
    answered at once: Tally.hit sets the full piece aside and starts a fresh one with it."""
    stored = table()
    web = stored[make_key(wire_question("web.example"), KF_RD)]
    db = stored[make_key(wire_question("db.example"), KF_RD)]  # in the full piece already
    full: dict[bytes | int, int] = {bytes([i]) * 20: 1 for i in range(MAX_ANSWERS - 1)} | {db: 1}
    state = State(stored, set(ALLOWED), [0] * 256, {"127.0.0.1": dict(full)}, None, sealing=True)
    c, py = both(sockets, [Ask(0, 0, "none", 0, False, None), Ask(0, 0, "none", 0, False, None),
                           Ask(0, 2, "none", 0, False, None)], state)
    assert c == py
    (received, misses, _), replies, counts, tally, _, sealed = c
    assert misses is None and len(replies) == 3 and counts[3] == 2 and counts[5] == 1
    # the fresh piece counts what came after: web twice, and db again (not in the piece set aside)
    assert tally == {"127.0.0.1": {web: 2, db: 1}} and sealed == [("127.0.0.1", full)]


def test_more_clients_than_the_tally_counts_share_its_overflow_entry_on_both(sockets: Sockets) -> None:
    from nodedns.serve.tally import MAX_CLIENTS, OVERFLOW
    crowd: dict[str, dict[bytes | int, int]] = {f"10.1.{i // 250}.{i % 250}": {} for i in range(MAX_CLIENTS)}
    state = State(table(), set(ALLOWED), [0] * 256, crowd, None)
    c, py = both(sockets, [Ask(0, 0, "none", 0, False, None), Ask(2, 2, "bare", 1232, False, None)], state)
    assert c == py
    tally = c[3]
    assert tally is not None and sum(tally[OVERFLOW].values()) == 2 and "127.0.0.1" not in tally


def test_an_ipv6_client_is_handed_back_with_the_four_part_address_by_both() -> None:
    try:
        servers = [socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) for _ in range(2)]
        for s in servers:
            s.bind(("::1", 0))
            s.setblocking(False)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    cli = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        cli.bind(("::1", 0))
        got = []
        for which, s in enumerate(servers):
            cli.sendto(query(Ask(0, 4, "none", 0, False, None), 7), s.getsockname())
            serve = _hitpath.serve if which == 0 else None
            got.append(serve(s.fileno(), table(), {"::1"}, [0] * 256, MAX_UDP) if serve is not None
                       else hitpath.serve(s, table(), {"::1"}, [0] * 256, MAX_UDP))
        assert got[0] == got[1] and got[0][1] is not None and got[0][1][0][1] == cli.getsockname()
    finally:
        cli.close()
        for s in servers:
            s.close()


@pytest.mark.parametrize("rate", [0.3, 1.0], ids=["some-sampled", "all-sampled"])
def test_the_query_log_s_samples_are_handed_back_and_the_rest_decided_as_the_c_hit_path_decides(
        sockets: Sockets, rate: float) -> None:
    """With the query log on, the listener calls the Python hit path with its sampling (the C one does not
    sample): the datagrams whose numbers the sampler picks are handed back in `sample.picked`, in order,
    untouched; every other one is decided as the C hit path decides it (same replies, counters, tally,
    datagrams handed back)."""
    from nodedns.metrics.counters import Sampler

    draws = iter([0.9, 0.05, 0.5, 0.2, 0.7, 0.01] * 20)
    sampler = Sampler(rate, rng=lambda: next(draws))
    expected_at, at = [], sampler.first()
    asks = EVERY_KIND
    while at <= len(asks):
        expected_at.append(at)
        at = sampler.next(at)
    draws = iter([0.9, 0.05, 0.5, 0.2, 0.7, 0.01] * 20)  # the same draws again for the listener's sampler
    sample = hitpath.Sample(Sampler(rate, rng=lambda: next(draws)))
    datagrams = [(a.client, query(a, 0x100 + i)) for i, a in enumerate(asks)]
    state = State(table(), set(ALLOWED), [0] * 256, {}, None)
    py_state, c_state = copy.deepcopy(state), copy.deepcopy(state)
    c_server, py_server = sockets.servers
    for client, data in datagrams:
        sockets.clients[client].sendto(data, py_server.getsockname())
    py = hitpath.serve(py_server, py_state.table, py_state.allowed, py_state.counts, MAX_UDP, py_state.tally, None,
                       None, sample)
    py_replies = sockets.replies()
    assert [d for d, _ in sample.picked] == [datagrams[n - 1][1] for n in expected_at] and expected_at
    assert [a[1] for a in sample.picked] == [sockets.clients[datagrams[n - 1][0]].getsockname() for n in expected_at]
    rest = [d for n, d in enumerate(datagrams, 1) if n not in expected_at]
    for client, data in rest:
        sockets.clients[client].sendto(data, c_server.getsockname())
    c = _hitpath.serve(c_server.fileno(), c_state.table, c_state.allowed, c_state.counts, MAX_UDP, c_state.tally)
    assert (py[0], py[1], py[2]) == (len(datagrams), c[1], c[2]) and c[0] == len(rest)
    assert py_replies == sockets.replies()
    assert (py_state.counts, py_state.tally) == (c_state.counts, c_state.tally)
