"""The cluster answers: the index owner's decision for a cluster-zone or reverse name, kept for the hit path.

`ClusterReplies.cluster_reply(q)` -> a `Reply` (the index owner decides):

    FORWARD        not ours (a reverse name the index has no PTR for): forwarded
    ANSWER         the answer's template, its tags, hot or aside
    BEFORE_SYNC    a would-be NXDOMAIN before the first sync, with a `before_sync` hook
    CHASE          an ExternalName leaving the cluster: the CNAME-only template, the chain, the target

Cluster answers are stored in `ClusterAnswers` for the hit path with the dependency tags `records`
reports; an index change drops only the answers of the tags it touches (`records.change_tags`; the
first sync and a new federation map drop every cluster answer). The hot dict is read by question
alone, so with --autopath an NXDOMAIN that a walk may replace (`Autopathing.covers`) is stored aside
(`ClusterAnswers.aside`, never read by the hit path) with its tags and `a:<namespace>`, the tag of
the Pods that decide `covers`. An NXDOMAIN stored hot carries that tag too, so a Pod that makes its
namespace walk-eligible drops it.

One process calls `cluster_reply` directly. A `--workers` process holds no index: it asks the owner
over the local channel and `keep`s the reply the moment it arrives, before any invalidation the
owner sent after it (one ordered stream); `invalidate(tags)` is then called with the owner's tags.
Its NXDOMAINs decided from what the owner pushed of what exists are `absent`. A `Reply` pickles (a
NamedTuple of plain values): it crosses the channel as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from nodedns.cluster.changes import Change
from nodedns.cluster.existence import Existence
from nodedns.cluster.index import Index
from nodedns.cluster.records import Answer, ClusterRecords
from nodedns.dns.pack import RR, build_response
from nodedns.dns.wire import QT, RCODE, Query
from nodedns.errors import EncodeError
from nodedns.runtime.logutil import Consolidated
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.chase import Autopathing, Chaser

log = logging.getLogger("nodedns.resolver")
unencodable = Consolidated(log, "unencodable answer")

# What the index owner says about a cluster-zone or reverse name (see the module docstring)
FORWARD, ANSWER, BEFORE_SYNC, CHASE = 0, 1, 2, 3
NOT_OURS = b""  # kept aside for a name the owner said is not ours (until its tags change)


class Chase(NamedTuple):
    """Where an ExternalName leaves the cluster: the CNAME chain so far and the name outside it."""

    chain: list[RR]
    target: str


class Reply(NamedTuple):
    """The index owner's decision for one question (FORWARD, ANSWER, BEFORE_SYNC or CHASE)."""

    kind: int
    wire: bytes  # ANSWER, CHASE: the template (ID 0, unstamped; CHASE: CNAME-only); else b""
    tags: frozenset[str]  # the dependency tags it was decided from
    hot: bool = True  # ANSWER: in the hot dict (else aside: a walk may replace it)
    chase: Chase | None = None  # CHASE: the chain and the target


Remote = Callable[[Query], Awaitable[Reply]]  # a worker: the question, asked of the index owner


class ClusterReplies:
    """Decides and keeps the cluster answers; drops the ones an index change touches."""

    def __init__(
        self,
        *,
        records: ClusterRecords,
        index: Index,
        cluster_answers: ClusterAnswers,
        autopath: Autopathing | None,
        before_sync: bool,
        recursion_available: bool,
        max_udp_size: int,
        can_forward: Callable[[str], bool],
        chaser: Chaser,
    ) -> None:
        self.records = records
        self.index = index
        self.cluster_answers = cluster_answers
        self.autopath = autopath
        self.before_sync = before_sync  # a hook answers would-be NXDOMAINs before the first sync
        self.recursion_available = recursion_available
        self.max_udp_size = max_udp_size
        self.can_forward = can_forward  # an upstream serves this name (an ExternalName target worth chasing)
        self.chaser = chaser  # what else an index change voids (the walks kept for this second)
        self.existence: Existence | None = None  # a worker: what exists, pushed by the owner (`absent`)

    def index_changed(self, change: Change) -> None:
        """A change listener (the wiring adds it): the answers stored under the change's tags go."""
        if not self.cluster_answers.tagged() and change.kind:
            self.chaser.forget_walks()  # nothing stored (a first list): no tags to name
            return
        self.invalidate(change.tags)

    def invalidate(self, tags: frozenset[str] | None) -> None:
        """The index changed what `tags` name (None: anything): their stored answers go, walks too."""
        self.cluster_answers.invalidate(tags)
        self.chaser.forget_walks()

    def cluster_reply(self, q: Query) -> Reply:
        """The index owner's decision for a cluster-zone or reverse name (module docstring), its
        template unstamped (each process stamps its own counter slot). An answer the wire cannot carry
        (a name from the API that slipped past the checks at the edge) is a SERVFAIL, counted and logged
        (consolidated), kept with its tags like any answer: never an exception for the caller."""
        found, tags = self.records.resolve(q.qname, q.qtype)
        try:
            return self._decide(q, found, tags)
        except EncodeError as exc:
            unencodable.report(f"{q.qname or '.'} {QT.name(q.qtype)}: {exc}")
            return Reply(ANSWER, self.build(q, Answer(RCODE.SERVFAIL, aa=False)), tags, True)

    def servfail_reply(self, q: Query) -> Reply:
        """A SERVFAIL for `q` as an owner's reply, with no tags (what a worker uses, never keeps, when the
        owner could not decide or send the real one)."""
        return Reply(ANSWER, self.build(q, Answer(RCODE.SERVFAIL, aa=False)), frozenset(), True)

    def _decide(self, q: Query, found: Answer | None, tags: frozenset[str]) -> Reply:
        if found is None:
            return Reply(FORWARD, NOT_OURS, tags)
        if found.chase is not None:
            return Reply(CHASE, self.build(q, found), tags, chase=Chase(found.answer, found.chase))
        if found.rcode == RCODE.NXDOMAIN and not self.index.synced:
            # never a cacheable NXDOMAIN before the first full sync (the sync drops every stored answer)
            if self.before_sync:
                return Reply(BEFORE_SYNC, b"", tags)
            found = Answer(RCODE.SERVFAIL, aa=False)
        return self._answer_reply(q, found, tags)

    def _answer_reply(self, q: Query, found: Answer, tags: frozenset[str]) -> Reply:
        hot = True
        if found.rcode == RCODE.NXDOMAIN and self.autopath is not None:
            ns = self.chaser.walk_namespace(q.qname)
            if ns is not None:
                tags = tags | {f"a:{ns}"}
                # a walk may answer this name for some clients: not in the client-independent hot dict
                hot = not self.autopath.covers(q.qname)
        return Reply(ANSWER, self.build(q, found), tags, hot)

    def absent(self, q: Query) -> Reply | None:
        """A --workers process's NXDOMAIN decided from what the owner pushed of what exists
        (`existence`, nodedns.cluster.existence): the very reply `cluster_reply` would give at this point of
        the owner's stream, SOA serial included; None when existence alone does not decide (ask)."""
        exists = self.existence
        if exists is None or not exists.ready or not self.index.synced:
            return None
        tags = self.records.absent(q.qname, q.qtype, exists)
        if tags is None:
            return None
        return self._answer_reply(q, Answer(RCODE.NXDOMAIN, authority=[self.records.soa(serial=exists.serial)]), tags)

    def keep(self, key: bytes, reply: Reply) -> None:
        """Store the owner's reply for `key` (a worker does so as it arrives, before any later
        invalidation): ANSWER hot or aside, FORWARD as a "not ours" mark, CHASE expected."""
        kind, wire, tags = reply.kind, reply.wire, reply.tags
        if kind == ANSWER:
            self.cluster_answers.put(key, wire, tags, hot=reply.hot)
        elif kind == FORWARD:
            if tags:  # only what the index decides (a reverse name) is worth remembering
                self.cluster_answers.put(key, NOT_OURS, tags, hot=False)
        elif kind == CHASE and reply.chase is not None:
            if self.can_forward(reply.chase.target):
                self.cluster_answers.expect(key, tags)
            else:
                self.cluster_answers.put(key, wire, tags)

    def build(self, q: Query, found: Answer) -> bytes:
        return build_response(
            q,
            rcode=found.rcode,
            aa=found.aa,
            ra=self.recursion_available,
            answer=found.answer,
            authority=found.authority,
            additional=found.additional,
            max_udp_size=self.max_udp_size,
        )
