"""Every rcode decision: what a query gets, from which source (cluster index, cache, upstream).

`Resolver.handle(data, client)` takes the raw bytes of one query that missed the hit path and
returns the response bytes (ID and question case already those of the query), None to drop the
packet, or a coroutine for answers that need the network (the server awaits it). Decisions:

    unreadable header, or a response        drop
    opcode other than QUERY                 NOTIMP
    malformed, not exactly one question     FORMERR
    EDNS version > 0                        BADVERS
    class other than IN/ANY                 REFUSED
    AXFR / IXFR                             REFUSED
    cluster zone, reverse zones             the index (ClusterRecords); before the first sync a
                                            would-be NXDOMAIN is SERVFAIL, or, with a `before_sync`
                                            hook (--fallback-upstream), the hook's answer (never
                                            stored; SERVFAIL when the hook fails)
    anything else                           forwarded (REFUSED while no forwarder is configured)

Cluster answers are stored in `ClusterAnswers` for the hit path and dropped when the index changes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from nodedns.cache import ClusterAnswers
from nodedns.errors import FormatError, UpstreamError, WireError
from nodedns.index import Index
from nodedns.records import Answer, ClusterRecords
from nodedns.wire import (
    CLASS_ANY,
    CLASS_IN,
    OPCODE_QUERY,
    QT,
    RCODE,
    Query,
    build_response,
    header_only,
    parse_query,
    patch,
    read_header,
)

log = logging.getLogger(__name__)

Outcome = bytes | None | Coroutine[Any, Any, bytes | None]
# Before the first sync: raw query -> the response to send (the query's ID), or UpstreamError.
BeforeSync = Callable[[bytes], Awaitable[bytes]]


class Resolver:
    """Decides the answer to each query; owns the stored cluster answers."""

    def __init__(
        self,
        *,
        records: ClusterRecords,
        index: Index,
        cluster_answers: ClusterAnswers,
        max_udp_size: int = 1232,
        before_sync: BeforeSync | None = None,
    ) -> None:
        self.records = records
        self.before_sync = before_sync
        self.before_sync_failures = 0
        self.index = index
        self.cluster_answers = cluster_answers
        self.max_udp_size = max_udp_size
        self.recursion_available = False
        self.formerr = 0
        self.dropped = 0
        index.on_change(cluster_answers.clear)

    # -- entry -----------------------------------------------------------------------------

    def handle(self, data: bytes, client: str) -> Outcome:
        head = read_header(data)
        if head is None or head[1] & 0x8000:
            self.dropped += 1
            return None  # not even a header, or a response sent to us
        opcode = (head[1] >> 11) & 0xF
        if opcode != OPCODE_QUERY:
            return header_only(data, RCODE.NOTIMP)
        try:
            q = parse_query(data)
        except FormatError:
            self.formerr += 1
            return header_only(data, RCODE.FORMERR)
        except WireError:
            self.dropped += 1
            return None
        return self.answer(q, data, client)

    def answer(self, q: Query, data: bytes, client: str) -> Outcome:
        if q.edns and q.edns_version != 0:
            return self._reply(q, data, RCODE.BADVERS, aa=False)
        if q.qclass not in (CLASS_IN, CLASS_ANY):
            return self._reply(q, data, RCODE.REFUSED, aa=False)
        if q.qtype in (QT.AXFR, QT.IXFR):
            return self._reply(q, data, RCODE.REFUSED, aa=False)
        stored = self.cluster_answers.get(q.key)
        if stored is not None:
            return patch(stored, data, 12 + len(q.question))
        found = self.records.lookup(q.qname, q.qtype)
        if found is not None:
            return self._cluster(q, data, found)
        return self._reply(q, data, RCODE.REFUSED, aa=False)

    # -- cluster answers -------------------------------------------------------------------

    def _cluster(self, q: Query, data: bytes, found: Answer) -> Outcome:
        if found.rcode == RCODE.NXDOMAIN and not self.index.synced:
            # never a cacheable NXDOMAIN before the first full sync
            if self.before_sync is not None:
                return self._before_sync(self.before_sync, q, data)
            found = Answer(RCODE.SERVFAIL, aa=False)
        wire = build_response(
            q,
            rcode=found.rcode,
            aa=found.aa,
            ra=self.recursion_available,
            answer=found.answer,
            authority=found.authority,
            additional=found.additional,
            max_udp_size=self.max_udp_size,
        )
        self.cluster_answers.put(q.key, wire)
        return patch(wire, data, 12 + len(q.question))

    async def _before_sync(self, hook: BeforeSync, q: Query, data: bytes) -> bytes | None:
        try:
            return await hook(data)
        except UpstreamError as exc:
            self.before_sync_failures += 1
            log.debug("before-sync fallback failed: %s", exc)
            return self._reply(q, data, RCODE.SERVFAIL, aa=False)

    def lookup(self, qname: str, qtype: int) -> Answer | None:
        """The cluster answer for a name, for the explainer (None when the name is not ours)."""
        return self.records.lookup(qname, qtype)

    # -- plain replies ---------------------------------------------------------------------

    def _reply(self, q: Query, data: bytes, rcode: int, *, aa: bool) -> bytes:
        wire = build_response(
            q, rcode=rcode, aa=aa, ra=self.recursion_available, max_udp_size=self.max_udp_size
        )
        return patch(wire, data, 12 + len(q.question))
