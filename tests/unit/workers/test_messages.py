"""The worker protocol: every message crosses the channel whole, each side has one handler per message it can
be sent, an unknown message is logged and ignored, and the answers message stays as compact as a bare tuple."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import pickle
import socket
import typing
from typing import Any

import dnslib
import pytest

from nodedns import config as cfgmod
from nodedns.cluster import objects as k8s
from nodedns.cluster.existence import State as NamesState
from nodedns.dns.message import parse_query
from nodedns.metrics.counters import Scrape
from nodedns.metrics.slots import Slots
from nodedns.podconf.searchpath import Plan
from nodedns.policy.book import Applied
from nodedns.policy.model import parse
from nodedns.serve.resolver import ANSWER
from nodedns.serve.tally import Row
from nodedns.workers import messages as m
from nodedns.workers import modes
from nodedns.workers.channel import HEADER, Channel, decode
from nodedns.workers.supervisor import Fleet, Worker
from nodedns.workers.worker import DISPATCH
from tests.support.helpers import EXAMPLE


def answers(n: int) -> list[m.Answer]:
    out: list[m.Answer] = []
    for i in range(n):
        q = dnslib.DNSRecord.question(f"svc-{i}.default.svc.cluster.local", "A")
        r = q.reply()
        r.add_answer(dnslib.RR(q.q.qname, rdata=dnslib.A(f"10.96.0.{i}"), ttl=5))
        out.append((parse_query(q.pack()).key, (ANSWER, bytes(r.pack()), frozenset({f"s:default/svc-{i}"}), "hot"),
                    True))
    return out


def one_of_each() -> list[m.Message]:
    config = cfgmod.build({"manifests": str(EXAMPLE), "upstream": "none"}, environ={})
    slots = Slots(("cluster.local",))
    scrape = Scrape(version="test", slots=slots, listeners=[], alive=True, ready=True, index={}, cluster_cache=None,
                    panics=0, errors={})
    plan = Plan(("default.svc.cluster.local", "svc.cluster.local", "cluster.local"), 5, True)
    return [
        m.Start(config, 1, True, 1 << 20), m.Answers(answers(2)), m.Names(NamesState(serial=3.0, bits=b"\x01")),
        m.Invalidate(frozenset({"s:default/web"})), m.Invalidate(None), m.Synced(),
        m.Allow(("10.244.0.0/24",), False, ("10.244.0.0/24",), frozenset({"10.9.0.7"})),
        m.Plans({"10.244.0.7": plan}, frozenset({"default"})), m.Who({"10.244.0.7": 4}),
        m.Tenants({"10.244.0.7": "default"}),
        m.FilterAaaa(True, "no IPv6 route"), m.Retire(False), m.Reload(), m.Warm([b"C...", b"E..."]), m.Export(),
        m.Hosts(1480, 1),
        m.State(True, True, True, ("aiohttp",)), m.Beat(), m.Ask([b"k1", b"k2"]), m.Counters(scrape),
        m.InsightRows([Row(4, "", "web.default.svc.cluster.local", 1, "NOERROR", "cluster", 3, 1, 0, 0.0)]),
        m.Fatal(2, "nodedns: error: bad config"),
        m.Policies({"10.244.0.7": applied()}),
    ]


def applied() -> Applied:
    """A Pod's DNS policies, as the owner pushes them (every part of a parsed policy crosses)."""
    spec = {"podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
            "clusterZone": {"namespaces": ["default"]}, "mode": "audit",
            "rules": [{"names": ["*.ads.example", ".zone.example", "x.example"], "action": "deny", "rcode": "NODATA"}]}
    p = parse(k8s.Policy(k8s.DNS_POLICY, "default", "p", json.dumps(spec)))
    return Applied("default/web-1", (p,), None, frozenset({"default"}))


@pytest.mark.parametrize("how", ["channel", "pickle"])
def test_every_message_crosses_the_channel_as_the_same_message(how: str) -> None:
    """As the channel frames it (its code and its values), and as a plain pickle (a message is a dataclass)."""
    for message in one_of_each():
        read = decode(Channel.encode(message)[4:]) if how == "channel" else pickle.loads(pickle.dumps(message))
        assert type(read) is type(message), message
        if isinstance(read, m.Counters) and isinstance(message, m.Counters):  # Slots compare by their labels
            assert read.scrape.slots.labels == message.scrape.slots.labels
            read = m.Counters(dataclasses.replace(read.scrape, slots=message.scrape.slots))
        assert read == message, message


def test_a_frame_names_no_class_and_anything_else_goes_as_a_plain_pickle() -> None:
    frame = Channel.encode(m.Retire(True))
    assert b"Retire" not in frame and b"nodedns" not in frame and frame[4] == m.CODED.index(m.Retire) + 1
    assert decode(Channel.encode(("inv", None))[4:]) == ("inv", None)
    assert len(set(m.CODED)) == len(m.CODED)


def test_every_message_type_is_one_of_each_and_has_a_code() -> None:
    """The list above is the protocol: a new message joins it (and so the round trip), and CODED."""
    assert {type(x) for x in one_of_each()} == set(typing.get_args(m.Message)) == set(m.CODED)


def fleet() -> Fleet:
    """The workers part of a supervisor of two, built as `nodedns serve --workers 2` builds it."""
    part = modes.supervisor(cfgmod.build({"manifests": str(EXAMPLE), "upstream": "none"}, environ={}),
                            count=2).listeners
    assert isinstance(part, Fleet)
    return part


class Proc:
    pid = 4242
    returncode: int | None = None


def test_each_side_has_one_handler_for_every_message_it_can_be_sent() -> None:
    assert set(DISPATCH.handlers) == set(typing.get_args(m.ToWorker))
    assert set(fleet()._dispatch.handlers) == set(typing.get_args(m.ToSupervisor))
    assert m.Start not in DISPATCH.handlers  # read before the loop runs, by worker_main


def test_a_message_is_handed_to_the_handler_of_its_own_type_only() -> None:
    seen: list[tuple[str, Any]] = []
    table = (m.Dispatch[str]()
             .on(m.Synced, lambda ctx, msg: seen.append((ctx, msg)))
             .on(m.Retire, lambda ctx, msg: seen.append((ctx, msg.forced))))
    assert table("a", m.Retire(True)) is True
    assert table("b", m.Synced()) is True
    assert table("c", m.Reload()) is False
    assert table("d", ("retire", True)) is False  # the tagged tuples of old: not a message
    assert seen == [("a", True), ("b", m.Synced())]


@pytest.mark.parametrize("message", [("beat",), "junk", m.Reload()], ids=["old-tuple", "not-a-message", "other-side"])
def test_a_message_the_supervisor_does_not_know_is_logged_and_ignored_and_counts_as_heard(
        message: object, caplog: pytest.LogCaptureFixture) -> None:
    f = fleet()
    worker = Worker(0, Proc(), started=1.0, heard=1.0)  # type: ignore[arg-type]
    f.clock = lambda: 50.0
    with caplog.at_level(logging.WARNING, logger="nodedns.fleet"):
        f._received(worker, message)
    assert worker.heard == 50.0 and not worker.bound
    assert [r.getMessage() for r in caplog.records] == \
        [f"worker 0: a message of unknown type {type(message).__name__}: ignored"]


def test_a_known_message_is_handled_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    f = fleet()
    worker = Worker(0, Proc(), started=1.0, heard=1.0)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="nodedns.fleet"):
        f._received(worker, m.State(bound=True, synced=True, live=True, heavy_imports=()))
        f._received(worker, m.Fatal(2, "first"))
        f._received(worker, m.Fatal(2, "second"))
    assert worker.serving and worker.served and f.fatal_report == "first"
    assert caplog.records == []


def test_the_answers_frame_is_as_compact_as_the_bare_tagged_tuple() -> None:
    """64 answers (one ask's worth): the typed message costs no byte more than the tagged tuple it replaced
    (its code instead of a tag, no class name), and nothing per answer."""
    batch = answers(64)
    typed, bare = len(Channel.encode(m.Answers(batch))), len(Channel.encode(("ans", batch)))
    assert typed <= bare, (typed, bare)
    assert len(Channel.encode(m.Answers(batch[:1]))) - len(Channel.encode(("ans", batch[:1]))) == typed - bare


@pytest.mark.parametrize("body", [bytes((len(m.CODED) + 1,)) + pickle.dumps(()), b"\x00", b"\x80garbage"],
                         ids=["unknown-code", "code-zero", "not-a-pickle"])
def test_a_frame_that_cannot_be_decoded_closes_the_channel_and_is_logged(
        body: bytes, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> tuple[list[object], bool]:
        a, b = socket.socketpair()
        got: list[object] = []
        receiver = await Channel.open(a, got.append)
        sender = await Channel.open(b, lambda _m: None)
        sender.send_encoded(Channel.encode(m.Beat()) + HEADER.pack(len(body)) + body + Channel.encode(m.Beat()))
        for _ in range(200):
            if receiver.is_closing():
                break
            await asyncio.sleep(0.01)
        closing = receiver.is_closing()
        receiver.close()
        sender.close()
        return got, closing

    with caplog.at_level(logging.ERROR, logger="nodedns.fleet"):
        got, closing = asyncio.run(main())
    assert got == [m.Beat()] and closing  # what came before is delivered; the stream after it is lost
    assert any("unreadable message on the supervisor channel" in r.getMessage() for r in caplog.records)


def test_a_worker_is_told_the_namespaces_of_this_nodes_pods_with_the_rest_of_the_derived_data() -> None:
    """Tenants goes with what every worker is sent (a new worker, a Pod moved): the shares per namespace."""
    sent = fleet()._derived(changed_only=False)
    assert [type(x) for x in sent].count(m.Tenants) == 1


async def test_the_supervisor_drops_the_handed_over_parts_once_the_agent_runs() -> None:
    """The running agent's forward caches are kept only for workers started while the agent starts."""
    part = fleet()
    part._warm_offer = [b"C" + b"x" * 1000]
    part.agent.state = "starting"
    task = asyncio.ensure_future(part._supervise())
    try:
        await asyncio.sleep(0.3)
        assert part._warm_offer is not None  # a worker started now still gets them
        part.agent.state = "running"
        await asyncio.sleep(0.3)
        assert part._warm_offer is None
    finally:
        part.retiring = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_policy_book_changed_after_the_turns_flush_was_queued_gets_a_flush_of_its_own() -> None:
    """The book is rebuilt on the first Pod or policy change of a turn, the flush queued on the first change of
    any kind: when the flush ran first, the workers must still be told the new clients under a policy (not with
    the next unrelated change, which may never come)."""
    part = fleet()
    flushed: list[int] = []
    part._flush = lambda: (flushed.append(len(flushed)), setattr(part, "_flush_due", False))  # type: ignore[method-assign]
    part.workers = {0: object()}  # type: ignore[assignment, dict-item]
    part.flush_soon()  # this turn's changes
    await asyncio.sleep(0)
    assert flushed == [0]
    part.agent.policy._set({"10.244.0.5": object()})  # type: ignore[dict-item]  # the book, rebuilt after it
    await asyncio.sleep(0)
    assert flushed == [0, 1]
