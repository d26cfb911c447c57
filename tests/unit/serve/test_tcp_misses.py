"""--miss-limit over TCP: a stored answer is never a miss (nodedns/serve/tcp.py `TCPMisses`, docs/hardening.md).

Each query of an admitted client is looked up by its canonical key before the slow path: what is stored (in the
hot table, or a forwarded answer that left it at the turn of a second, re-rendered: `ForwardPath.rehit`) is
answered at once, or, for a Pod under a DNS policy, left to the resolver, which asks the policy and answers the
stored answer; anything else is a miss, counted by `MissBudget.take_tcp` and REFUSED over the client's budget.
None of the stored answers takes from that budget: asked before its misses, the misses still get the whole
budget; asked once it is spent, they are never REFUSED. Driven with the real budget, allow list and keys.
"""

from __future__ import annotations

import ipaddress

import dns.message
import dns.rcode
import dns.rrset

from nodedns.dns.hot import HotTable, with_ttls
from nodedns.dns.keys import fast_key
from nodedns.forward.store import make_template
from nodedns.serve.limits import AllowList, Capacity, MissBudget
from nodedns.serve.tcp import TCPMisses

RATE = 3  # --miss-limit: misses a second per client
ALLOWED, POLICED = "10.0.0.1", "10.0.0.2"  # an admitted Pod, and an admitted Pod under a DNS policy
HOT, TURNED = "hot.example.", "turned.example."  # in the hot table; a forwarded answer left it at a second's turn


def query(name: str, qid: int) -> bytes:
    q = dns.message.make_query(name, "A")
    q.id = qid
    return q.to_wire()


def stored(name: str, address: str) -> tuple[bytes, bytes]:
    """(the key of a plain query for `name`, the stored answer: ID 0, as the hot table holds it)."""
    q = dns.message.make_query(name, "A")
    q.id = 0
    r = dns.message.make_response(q)
    r.answer.append(dns.rrset.from_text(name, 30, "IN", "A", address))
    fk = fast_key(query(name, 0))
    assert fk is not None
    return fk[0], r.to_wire()


class Clock:
    now = 1000.25  # one second's window throughout

    def __call__(self) -> float:
        return self.now


def misses() -> tuple[TCPMisses, MissBudget]:
    clock = Clock()
    budget = MissBudget(RATE, 0, capacity=Capacity(1000, clock=clock), clock=clock)
    allow = AllowList(explicit=(ipaddress.ip_network("10.0.0.0/8"),))
    allow.set_policed(frozenset({POLICED}))
    assert allow.admit(ALLOWED) and allow.admit(POLICED)  # as the resolver admits each at its first query
    hot_key, hot_wire = stored(HOT, "192.0.2.1")
    turned_key, turned_wire = stored(TURNED, "192.0.2.2")
    rehits = {turned_key: turned_wire}  # what the forward cache re-renders for this second
    hot = HotTable(clock=clock)
    hot.put(hot_key, hot_wire)
    return TCPMisses(budget, allow=allow, hot=hot, rehit=rehits.get, max_udp_size=1232), budget


def answer(out: bytes | None) -> tuple[int, str, list[str]] | None:
    """(ID, rcode, addresses) of what `budgeted` wrote at once; None: on to the resolver."""
    if out is None:
        return None
    r = dns.message.from_wire(out)
    return r.id, dns.rcode.to_text(r.rcode()), [rr.to_text() for rrset in r.answer for rr in rrset]


def test_a_policed_pods_stored_answers_never_take_from_its_tcp_miss_budget() -> None:
    """A Pod under a DNS policy: its stored name goes to the resolver (the policy decides, then the stored
    answer) however often it is asked, before its misses and after its budget is spent; its misses get the
    whole budget, then REFUSED."""
    m, budget = misses()
    qid = iter(range(1, 100))
    assert [m.budgeted(query(HOT, next(qid)), POLICED) for _ in range(2 * RATE)] == [None] * (2 * RATE)
    assert [m.budgeted(query(f"miss{i}.example.", next(qid)), POLICED) for i in range(RATE)] == [None] * RATE
    refused = answer(m.budgeted(query("one-more.example.", 50), POLICED))
    assert refused == (50, "REFUSED", [])  # the budget, whole for the misses, now spent
    assert [m.budgeted(query(HOT, next(qid)), POLICED) for _ in range(RATE)] == [None] * RATE  # stored: no miss
    assert budget.refused == 1 and budget.shed == {"client": 1, "namespace": 0}


def test_an_admitted_pods_stored_and_re_rendered_answers_are_written_at_once_and_never_take_from_its_budget() -> None:
    """An admitted Pod: its name in the hot table and its forwarded name re-rendered at the turn of a second are
    answered at once (its query's ID), as often as asked, before its misses and after its budget is spent;
    its misses get the whole budget, then REFUSED."""
    m, budget = misses()
    for qid in range(1, 2 * RATE + 1):
        assert answer(m.budgeted(query(HOT, qid), ALLOWED)) == (qid, "NOERROR", ["192.0.2.1"])
        assert answer(m.budgeted(query(TURNED, 100 + qid), ALLOWED)) == (100 + qid, "NOERROR", ["192.0.2.2"])
    assert [m.budgeted(query(f"miss{i}.example.", 200 + i), ALLOWED) for i in range(RATE)] == [None] * RATE
    assert answer(m.budgeted(query("one-more.example.", 300), ALLOWED)) == (300, "REFUSED", [])
    assert answer(m.budgeted(query(HOT, 301), ALLOWED)) == (301, "NOERROR", ["192.0.2.1"])
    assert answer(m.budgeted(query(TURNED, 302), ALLOWED)) == (302, "NOERROR", ["192.0.2.2"])
    assert budget.refused == 1


def test_a_forwarded_answer_in_the_hot_table_is_written_as_sent_now_its_ttl_counted_down() -> None:
    """The hot table holds a forwarded answer as a template (nodedns.dns.hot): over TCP it is written as the hit
    paths send it, the seconds it has left in every TTL and nothing after the message; in its expiry second it
    is no answer here (on to the resolver, which refreshes it or serves it stale)."""
    clock = Clock()
    m, _ = misses()
    key, wire = stored("fwd.example.", "192.0.2.9")
    t = make_template(key, wire, udp_size=1232)
    m.hot.clock = clock
    m.hot.put(key, with_ttls(t.wire, t.ttl_offsets, 1030))
    out = m.budgeted(query("fwd.example.", 7), ALLOWED)
    assert out is not None
    r = dns.message.from_wire(out)  # strict: trailing bytes raise
    assert r.id == 7 and [rrset.ttl for rrset in r.answer] == [30] and len(out) == len(wire)
    clock.now = 1029.9
    r = dns.message.from_wire(m.budgeted(query("fwd.example.", 8), ALLOWED) or b"")
    assert [rrset.ttl for rrset in r.answer] == [1]
    clock.now = 1030.0
    assert m.budgeted(query("fwd.example.", 9), ALLOWED) is None  # expired: the resolver's

