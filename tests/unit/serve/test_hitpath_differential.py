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
full, more clients than the tally counts one by one, a client under a DNS policy (its group's memo: what it holds
answered, an answer rendered again since it was checked handed back, each answer counted in its entry, and
nothing else however its datagrams interleave with other Pods' in a batch), forwarded answers stored as
templates (their TTLs set for the second given, cut like any, one in its expiry second handed back).
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import socket
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dns.message
import dns.rrset
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nodedns.dns.hot import TTL_FLAG, with_ttls
from nodedns.dns.keys import make_key
from nodedns.dns.wire import KF_DO, KF_EDNS, KF_RD
from nodedns.forward.store import make_template
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


SECOND = 5000  # the forward cache's second both hit paths are given: `big` and `db` are templates fresh in it,
# `api` one whose expiry second it is (nodedns.dns.hot)
EXPIRES = {"big": SECOND + 17, "db": SECOND + 1, "api": SECOND}


def table() -> dict[bytes, bytes]:
    """Each name stored under the keys of an RD query without EDNS, with EDNS, and with EDNS and DO; `big`
    larger than any client's UDP size; `big`, `db` and `api` as forwarded answers are, templates whose TTLs
    the hit paths set (EXPIRES)."""
    out = {}
    for i, label in enumerate(NAMES):
        name = f"{label}.example"
        for kflags in (KF_RD, KF_RD | KF_EDNS, KF_RD | KF_EDNS | KF_DO):
            key = make_key(wire_question(name), kflags)
            wire = response(name, 14 if label == "big" else 1 + i, kflags, 3 + i)
            if label in EXPIRES:
                t = make_template(key, wire, udp_size=MAX_UDP)
                wire = with_ttls(wire[:1] + t.wire[1:], t.ttl_offsets, EXPIRES[label])
            out[key] = wire
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
    policed: dict[str, dict[bytes, tuple[object, list[int]]]] | None = None  # clients under a DNS policy: their memo


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
        asked: set[bytes] = set()
        if which == 0:
            result = _hitpath.serve(server.fileno(), mine.table, mine.allowed, mine.counts, MAX_UDP, mine.tally,
                                    mine.limit, on_full, mine.policed, SECOND, asked)
        else:
            result = hitpath.serve(server, mine.table, mine.allowed, mine.counts, MAX_UDP, mine.tally, mine.limit,
                                   on_full, mine.policed, SECOND, asked)
        assert all(w in mine.table.values() and w[1] == TTL_FLAG for w in asked)  # the stored templates themselves
        assert result[0] == len(datagrams)  # one batch: all of it read at once
        cells = None if mine.policed is None else {host: sorted({id(e[1]): e[1][0] for e in memo.values()}.values())
                                                    for host, memo in mine.policed.items()}
        seen.append((result, sockets.replies(), mine.counts, mine.tally, mine.limit, tally.sealed, cells,
                     sorted(asked)))
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


def policed_memo(stored: dict[bytes, bytes], held: list[tuple[int, str]]) -> dict[bytes, tuple[object, list[int]]]:
    """A policy group's memo over `stored`: for each (name index, how) the keys of that name, held as "any" (True),
    "this" (the stored answer itself) or "old" (an equal copy: an answer rendered again since it was checked)."""
    memo: dict[bytes, tuple[object, list[int]]] = {}
    cells: dict[str, list[int]] = {}
    for name, how in held:
        for kflags in (KF_RD, KF_RD | KF_EDNS, KF_RD | KF_EDNS | KF_DO):
            key = make_key(wire_question(f"{NAMES[name % len(NAMES)]}.example"), kflags)
            w = stored[key]
            answer: object = True if how == "any" else w if how == "this" else bytes(bytearray(w))
            memo[key] = (answer, cells.setdefault(how, [0]))
    return memo


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(asks=EVERY_KIND, held=[(0, "any"), (1, "this")], rate=1000, tally="sealing")
@example(asks=EVERY_KIND, held=[(0, "old"), (1, "any"), (2, "this")], rate=3, tally="handed-back")
@given(asks=st.lists(asks, min_size=1, max_size=hitpath.BATCH),
       held=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["any", "this", "old"])), max_size=4),
       rate=st.sampled_from([1, 3, 1000]), tally=st.sampled_from(["off", "handed-back", "sealing"]))
def test_a_client_under_a_dns_policy_gets_from_both_exactly_what_its_groups_memo_holds(
        sockets: Sockets, asks: list[Ask], held: list[tuple[int, str]], rate: int, tally: str) -> None:
    """127.0.0.3 is not in the allow list's memo and is under a DNS policy with a memo; 127.0.0.2's memo is
    there too but it is in `allowed` (the memo is never read for it). Both hit paths answer 127.0.0.3 only
    the keys its memo holds, the stored answer only when the entry says any answer or holds that very
    object (an equal copy is not it: rendered again, decided again), count each answer in the entry's cell,
    and hand back everything else."""
    stored = table()
    memo = policed_memo(stored, held)
    state = State(stored, set(ALLOWED), [0] * 256, None if tally == "off" else {}, ({}, rate, 100, []),
                  sealing=tally == "sealing", policed={"127.0.0.3": memo, "127.0.0.2": {}})
    c, py = both(sockets, asks, state)
    assert c == py
    _, replies, _, _, _, _, cells, _ = c
    answered = [qid - 0x100 for (client, qid) in replies if client >= 4]
    for i in answered:  # only what the memo lets through, as it was stored
        q = query(asks[i], 0x100 + i)
        entry = memo.get(q[2:]) or memo.get(q[2:-11])
        assert entry is not None and (entry[0] is True or entry[0] in stored.values()), asks[i]
        unflipped = query(dataclasses.replace(asks[i], flip=None), 0x100 + i)
        assert q == unflipped and not asks[i].upper and asks[i].opt in ("none", "bare"), asks[i]  # a flip to the
        # same byte is no flip
    assert cells is not None and cells["127.0.0.2"] == []  # in `allowed`: its memo never read
    assert sum(cells["127.0.0.3"]) == sum(len(v) for (client, _), v in replies.items() if client >= 4)


def test_a_memo_entry_is_counted_once_per_answer_and_a_stale_one_is_handed_back_by_both(sockets: Sockets) -> None:
    stored = table()
    memo = policed_memo(stored, [(0, "any"), (2, "this"), (3, "old")])
    state = State(stored, set(ALLOWED), [0] * 256, None, None, policed={"127.0.0.3": memo})
    asks = [Ask(4, 0, "none", 0, False, None), Ask(5, 0, "bare", 1232, False, None),  # any: answered
            Ask(4, 2, "none", 0, False, None),  # this very answer: answered
            Ask(4, 3, "none", 0, False, None),  # an equal copy (rendered again): handed back
            Ask(4, 1, "none", 0, False, None),  # not in the memo: handed back
            Ask(4, 0, "none", 0, True, None)]  # not a byte-for-byte key (0x20): handed back (general's)
    c, py = both(sockets, asks, state)
    assert c == py
    (received, misses, _), replies, counts, _, _, _, cells, _ = c
    assert received == 6 and misses is not None and len(misses) == 3
    assert sorted(qid - 0x100 for (_, qid) in replies) == [0, 1, 2]
    assert cells is not None and cells["127.0.0.3"] == [0, 1, 2]  # old: none; this: one; any: both its keys
    assert counts[3] == 2 and counts[5] == 1


# one batch: a Pod under a DNS policy (127.0.0.3, both its sockets) answered from its group's memo, between other
# Pods' hits and misses and its own question the memo does not hold
INTERLEAVED = [Ask(4, 0, "none", 0, False, None),  # policed, held as any answer: answered, counted
               Ask(0, 0, "none", 0, False, None),  # another Pod's hit right after it: not the policy's
               Ask(0, 4, "none", 0, False, None),  # that Pod's miss
               Ask(5, 2, "none", 0, False, None),  # policed, held as this very answer: answered, counted
               Ask(2, 1, "none", 0, False, None),  # 127.0.0.2's hit
               Ask(4, 1, "none", 0, False, None),  # policed, not held: handed back, uncounted
               Ask(0, 2, "bare", 1232, False, None),  # another Pod's hit
               Ask(4, 0, "bare", 1232, False, None),  # policed, any answer again: counted
               Ask(2, 0, "none", 0, False, None)]  # the batch's last: another Pod's hit


def test_a_policed_pods_answers_between_other_pods_in_one_batch_are_counted_exactly_and_hold_no_reference(
        sockets: Sockets) -> None:
    """The memo entries' cells are what nodedns_policy_decisions_total's allow count adds up
    (`PolicyBook.fold`): in a batch that interleaves a policed Pod's answers with other Pods' datagrams, both
    hit paths count exactly the policed Pod's answers (another Pod's hit after one of them is not the
    policy's decision), and the C one leaves each cell with the references it had (none kept from one
    datagram to the next)."""
    stored = table()
    memo = policed_memo(stored, [(0, "any"), (2, "this")])
    state = State(stored, set(ALLOWED), [0] * 256, None, None, policed={"127.0.0.3": memo})
    c, py = both(sockets, INTERLEAVED, state)
    assert c == py
    (received, misses, _), replies, _, _, _, _, cells, _ = c
    assert received == len(INTERLEAVED) and misses is not None and len(misses) == 2
    assert sorted(qid - 0x100 for (_, qid) in replies) == [0, 1, 3, 4, 6, 7, 8]
    assert cells is not None and cells["127.0.0.3"] == [1, 2]  # this very answer: one; any answer: two

    server = sockets.servers[0]
    unique = list({id(e[1]): e[1] for e in memo.values()}.values())
    refs = [sys.getrefcount(cell) for cell in unique]
    for i, a in enumerate(INTERLEAVED):
        sockets.clients[a.client].sendto(query(a, 0x200 + i), server.getsockname())
    result = _hitpath.serve(server.fileno(), stored, set(ALLOWED), [0] * 256, MAX_UDP, None, None, None,
                            {"127.0.0.3": memo})
    sockets.replies()
    assert result[0] == len(INTERLEAVED)
    assert sorted(cell[0] for cell in unique) == [1, 2]
    assert [sys.getrefcount(cell) for cell in unique] == refs, "a memo cell's reference kept by the C hit path"


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
        (received, misses, _), replies, counts, tally, _, _, _, _ = c
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
    (received, misses, _), replies, counts, tally, _, sealed, _, _ = c
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
                       None, None, sample=sample)
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
