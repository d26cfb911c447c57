"""The dispatcher: every rcode decision, and which source answers (cluster index, hosts, cache, upstream).

`Resolver.handle(data, client)` takes the raw bytes of one query that missed the hit path and
returns the response bytes (ID and question case already those of the query), None to drop the
packet, or a coroutine for answers that need the network (the server awaits it). Decisions:

    unreadable header, or a response        drop
    client outside the allow list           REFUSED, question echoed (our own loop probes excepted;
                                            see limits.AllowList)
    opcode other than QUERY                 NOTIMP      (these three: the question echoed when it
    malformed, not exactly one question     FORMERR      can be read, our OPT when the query had
    EDNS version > 0                        BADVERS      one: RFC 6891 section 7)
    class CH: id.server., hostname.bind.    TXT: the node name (RFC 4892; nodedns.dns.identity), AA
    class CH: version.bind., version.server TXT: --version-reply; REFUSED when it is not set
    class CH, anything else                 REFUSED
    class other than IN/ANY/CH              REFUSED
    AXFR / IXFR                             REFUSED
    cluster zone, clusterset zone           the index (ClusterRecords); before the first sync a
      (--multicluster-zone), reverse zones  would-be NXDOMAIN is SERVFAIL, or, with a `before_sync`
                                            hook (--fallback-upstream), the hook's answer (never
                                            stored; SERVFAIL when the hook fails)
    ExternalName leaving the cluster        the CNAME chain, then the target's records (via the
                                            forward cache/upstream); rcode from the end of the chain
    a name or address of a --hosts file     its A/AAAA/PTR records from the file (AA, TTL --ttl); another
      (outside the zones above; a PTR the   type: NODATA (NOERROR, AA, no SOA), as CoreDNS's hosts plugin;
      index does not answer)                answered here each time, never stored (nodedns.serve.hosts)
    a Pod under a DNS policy (nodedns.io)   its policies decide first (nodedns.policy): denied, the rule's
                                            NXDOMAIN / NODATA / REFUSED (an RPZ feed's drop: no answer);
                                            an RPZ feed's local data: the answer made from it (the book's
                                            `local`); a cluster answer that names a
                                            namespace its clusterZone hides (a PTR, a CNAME chain):
                                            NXDOMAIN; allowed: as below, without the autopath walk, and
                                            a stored answer let through unchanged is remembered for its
                                            policies' group (`memo_hit`: asked first, after the allow list)
    anything else, no upstream for it       REFUSED
    anything else, fresh in the cache       the cached answer (TTLs counting down); near expiry it
                                            is also refreshed in the background (prefetch)
    anything else, not cached               forwarded; identical in-flight misses share one
                                            upstream query; too many in flight: REFUSED; the client
                                            already holds its share of the new upstream queries in
                                            flight (an eighth of --max-concurrent, at least 16): REFUSED,
                                            as CoreDNS's forward answers over max_concurrent
    more than --max-pending queries         REFUSED (client queries waiting on the network: upstream,
      already waiting                       ExternalName chase, before-sync fallback)
    --filter-aaaa (on, or auto while the    NODATA made here (NOERROR, no answer, our SOA with TTL 30 in
      node has no IPv6): an AAAA question   authority; `cache.filtered_template`), never asked upstream,
      forwarded, outside our zones          stored hot with the tag "filter:aaaa" (dropped when auto flips)
    an upstream answers NXDOMAIN/NODATA     --stale-nxdomain: the positive answer cached for it (expired or
      for a name cached positive            not) with TTL --cache-servfail-ttl (last-known-good), for up to
                                            --stale-nxdomain after the first denial, asked again in the
                                            background each --cache-servfail-ttl; never put in the hot dict
                                            (each one counted: nodedns_stale_nxdomain_served_total)
    upstreams fail (timeout, SERVFAIL)      the expired entry with TTL 30 while within
                                            --serve-stale (RFC 8767), else SERVFAIL (cached briefly);
                                            with every upstream known down, the stale entry at once
    our loop probe seen a third time        dropped; its route is a forwarding loop (reported through
                                            on_loop, which marks it in the forwarder)
    a name routed through a looping route   SERVFAIL, not cached (a fresh cached answer is still
                                            served); the cluster zone is not affected
    --autopath, a Pod of this node asking   the search-list walk (`walk`): each name answered as
      `<base>.<its first search domain>`    above (stored answers, cache, in-flight sharing,
                                            serve-stale); the first that is not NXDOMAIN gives a
                                            CNAME from the query to it plus its records (none when
                                            it is the query itself; NODATA: NODATA, no CNAME, as
                                            CoreDNS); all NXDOMAIN: the query's own
                                            NXDOMAIN; any other rcode on the way, or no answer:
                                            the query's own plain answer (the client walks itself)

The sources are parts the resolver is given (built where the agent is composed), each its own module
and reached directly by callers (`Resolver.forwarding`, `Resolver.answers`, `Resolver.chaser`):
`answers.ClusterReplies` (the index owner's decision for a cluster-zone or reverse name, a `Reply`,
kept for the hit path and dropped by tag on an index change), `forwarding.ForwardPath` (--hosts,
--filter-aaaa, the forward cache, one upstream query in flight per key, serve-stale, prefetch, the
per-client share, loop probes) and `chase.Chaser` (ExternalName chases, autopath walks: each walk is
given `_as_asked`, the answer to one name as asked). Here: the header and the question (parse), the
rcode decisions above that come before any source, class CH, the pending count, and the use of an
owner's `Reply`. One process (`remote` None) asks `ClusterReplies` directly; a `--workers` process
asks the owner through its `remote` and keeps the reply the moment it arrives
(`ClusterReplies.keep`). `slip(data)` is the
TC=1 reply the UDP listener sends when `limits.RateLimiter` says so. A query whose OPT record asks for
NSID (RFC 5001) gets the node name in the reply's OPT, whatever the answer (such queries never match
a stored answer as they are: `keys.fast_key` leaves them to this path).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords
from nodedns.dns.identity import Identity
from nodedns.dns.keys import KEY_HEAD, fast_key, patch
from nodedns.dns.message import parse_query, short_reply
from nodedns.dns.pack import RR, build_response
from nodedns.dns.truncate import add_option
from nodedns.dns.wire import (
    CLASS_ANY,
    CLASS_CH,
    CLASS_IN,
    OPCODE_QUERY,
    OPT_NSID,
    QT,
    RCODE,
    Query,
    question_of,
    read_header,
)
from nodedns.errors import FormatError, UpstreamError, WireError
from nodedns.policy.book import Applied, Memo, PolicyBook
from nodedns.policy.model import DENY, DROP, LOCAL, Decision
from nodedns.serve.answers import ANSWER, BEFORE_SYNC, FORWARD, ClusterReplies, Remote, Reply
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.chase import Autopathing, Chaser, WalkStep
from nodedns.serve.forwarding import (
    AAAA_KEY_TAIL,
    FILTER_TAGS,
    ForwardPath,
    Outcome,
)
from nodedns.serve.hosts import HostsTable
from nodedns.serve.limits import EVERYONE, AllowList

log = logging.getLogger("nodedns.resolver")

# Before the first sync: raw query -> the response to send (the query's ID), or UpstreamError.
BeforeSync = Callable[[bytes], Awaitable[bytes]]


class Resolver:
    """Decides the answer to each query from the parts it holds (cluster replies, forwarding, chases)."""

    def __init__(
        self,
        *,
        records: ClusterRecords,
        index: Index,
        cluster_answers: ClusterAnswers,
        answers: ClusterReplies,
        forwarding: ForwardPath,
        chaser: Chaser,
        max_udp_size: int = 1232,
        before_sync: BeforeSync | None = None,
        autopath: Autopathing | None = None,
        allow: AllowList | None = None,
        max_pending: int = 10_000,
        remote: Remote | None = None,
        identity: Identity | None = None,
        policy: PolicyBook | None = None,
    ) -> None:
        self.records = records
        self.policy = policy  # DNS policies: decided here; the hit paths answer only what a group's memo holds
        self.remote = remote
        self.identity = identity  # CH TXT id.server. and NSID answers; None: REFUSED, no NSID
        self.autopath = autopath
        self.allow = allow if allow is not None else AllowList(explicit=EVERYONE)
        self.max_pending = max_pending
        self.pending = 0  # client queries waiting on the network (upstream, chase, fallback)
        self.before_sync = before_sync
        self.before_sync_failures = 0
        self.index = index
        self.cluster_answers = cluster_answers
        self.hot = cluster_answers.hot
        self.max_udp_size = max_udp_size
        self.formerr = 0
        self.dropped = 0
        self.answers = answers  # the index owner's replies, kept for the hit path
        self.forwarding = forwarding  # --hosts, --filter-aaaa, the forward cache, the upstreams
        self.chaser = chaser  # ExternalName chases, autopath walks
        self.stats = forwarding.stats  # one dict: the forward path's counters, the chases' and ours
        self.forward_cache = forwarding.forward_cache
        self.recursion_available = forwarding.recursion_available
        self.aaaa = forwarding.aaaa  # --filter-aaaa (None: off)

    def set_aaaa_filter(self, active: bool, reason: str) -> bool:
        """--filter-aaaa auto decided (or a worker was told): filter or not from now on. Whether it changed
        (the stored NODATAs go when it did, and so do the walks that may hold one)."""
        f = self.aaaa
        if f is None:
            return False
        changed = f.active != active
        f.active, f.reason = active, reason
        if changed:
            self.cluster_answers.invalidate(FILTER_TAGS)
            if active and self.forward_cache is not None:  # forwarded AAAA answers held hot for this second
                self.forward_cache.drop_hot(lambda key: key.endswith(AAAA_KEY_TAIL, -4, -2))
            self.chaser.forget_walks()
            log.info("--filter-aaaa %s: %s AAAA questions for forwarded names (%s)", f.mode,
                     "answering NODATA to" if active else "forwarding", reason)
        return changed

    def zones_changed(self, in_changed: Callable[[str], bool]) -> int:
        """A reload changed the settings of some zones (`in_changed(qname)`: the name was or is in one): their
        cached answers go (stored under the old caps), the stored --filter-aaaa NODATAs and walks too;
        every other zone keeps its cache. How many answers went."""
        dropped = 0
        if self.forward_cache is not None:
            def match(key: bytes) -> bool:
                asked = question_of(b"\0\0" + key)
                return asked is not None and in_changed(asked[0].rstrip("."))
            dropped = self.forward_cache.drop(match)
        self.cluster_answers.invalidate(FILTER_TAGS)
        self.chaser.forget_walks()
        return dropped

    def set_hosts(self, table: HostsTable) -> None:
        """--hosts read (again): answer from this table from now on. Forwarded answers cached for its names
        go (the hot dict included), so neither path serves one as forwarded while the file names it."""
        self.forwarding.hosts = table
        if self.forward_cache is not None and table.names:
            self.forward_cache.drop(lambda key: table.names_wire(key[KEY_HEAD:-4]))
        self.chaser.forget_walks()

    def walk_step(self, q: Query, names: Sequence[str],
                  client: str | None = None) -> WalkStep | Coroutine[Any, Any, WalkStep]:
        """The walk's (template, result, position), uncounted, each name answered as asked here
        (`Chaser.walk_step`; the explainer asks here)."""
        return self.chaser.walk_step(q, names, client, self._as_asked)

    # -- entry -----------------------------------------------------------------------------

    def handle(self, data: bytes, client: str) -> Outcome:
        head = read_header(data)
        if head is None or head[1] & 0x8000:
            self.dropped += 1
            return None  # not even a header, or a response sent to us
        allow = self.allow
        if client not in allow.allowed:
            if not allow.admit(client) and not self._own_probe(data):
                allow.note_refused(client)
                return short_reply(data, RCODE.REFUSED, udp_size=self.max_udp_size)
            memo = allow.policed_hits.get(client)
            if memo is not None:  # a client under a DNS policy: what its group's memo holds, as a hit path would
                hit = self.memo_hit(data, memo)
                if hit is not None:
                    return hit
        opcode = (head[1] >> 11) & 0xF
        if opcode != OPCODE_QUERY:
            return short_reply(data, RCODE.NOTIMP, udp_size=self.max_udp_size)
        try:
            q = parse_query(data)
        except FormatError:
            self.formerr += 1
            return short_reply(data, RCODE.FORMERR, udp_size=self.max_udp_size)
        except WireError:
            self.dropped += 1
            return None
        policy = self.policy
        if policy is not None and client in policy.clients:
            out = self._policed(policy, q, data, client)
        else:
            out = self.answer(q, data, client)
        if out is None or isinstance(out, bytes):
            return self._nsid(q, out)
        if self.pending >= self.max_pending:
            out.close()
            self.stats["refused_pending"] += 1
            return self._nsid(q, self._reply(q, data, RCODE.REFUSED, aa=False))
        self.pending += 1
        return self._waiting(q, out)

    async def _waiting(self, q: Query, out: Coroutine[Any, Any, bytes | None]) -> bytes | None:
        """A query waiting on the network, counted in `pending` until it has its answer."""
        try:
            return self._nsid(q, await out)
        finally:
            self.pending -= 1

    def memo_hit(self, data: bytes, memo: Memo) -> bytes | None:
        """The stored answer to a plain query that a client's policy group's memo holds (`memo_stored`),
        counted as a stored answer. None: not held (decided anew)."""
        fk = fast_key(data)
        if fk is None:
            return None
        key, qend, _limit = fk
        w = self.memo_stored(key, memo)
        if w is None:
            return None
        self.cluster_answers.hits[w[0]] += 1
        return patch(w, data, qend)

    def memo_stored(self, key: bytes, memo: Memo) -> bytes | None:
        """The stored answer for `key` when a client's policy group's memo holds it (nodedns.policy.book): any
        stored answer for a key decided without reading it, only the very answer checked for one decided on
        its content; counted in the memo's cell. None: not held (decided anew). Both hit paths' Python side
        and the resolver's first look ask it."""
        entry = memo.get(key)
        if entry is None:
            return None
        w = self.hot.get(key)
        if w is None:
            if entry[0] is not True:
                return None
            w = self.forwarding.rehit(key)  # a forwarded answer at the turn of a second
            if w is None:
                return None
        elif entry[0] is not True and entry[0] is not w:
            return None  # rendered again since it was checked: decided again
        entry[1][0] += 1
        return w

    def _policed(self, policy: PolicyBook, q: Query, data: bytes, client: str) -> Outcome:
        """A client under a DNS policy: the policy's decision first, then the answer (no autopath walk: the
        client walks its search list itself, each name decided); a cluster answer naming a namespace the
        client may not see is NXDOMAIN. An allowed question whose answer is stored is remembered for the
        client's group (`_remember`), so the hit paths answer its repeats."""
        d = policy.check(client, q.qname)
        if d is not None and d.action == DENY:
            return self.denied(q, data, d.rcode)
        if d is not None and d.action == LOCAL:  # an RPZ feed's local data (nodedns.policy.book.PolicyBook.local)
            return policy.local(q, data, client, d, ask=lambda tq, tdata: self.answer(tq, tdata, client, walk=False),
                                ra=self.recursion_available, max_udp_size=self.max_udp_size)
        out = self.answer(q, data, client, walk=False)
        applied = policy.clients.get(client)
        if applied is None or applied.namespaces is None or not self.records.claims(q.qname):
            if d is not None:
                self._remember(policy, client, q, d, None)
            return out
        if d is not None:
            self._remember(policy, client, q, d, applied)
        if out is None or isinstance(out, bytes):
            return self._hidden(policy, q, data, client, out, d)
        return self._hidden_later(policy, q, data, client, out, d)

    def _remember(self, policy: PolicyBook, client: str, q: Query, d: Decision, applied: Applied | None) -> None:
        """The stored answer for `q`, if any, into the client's group memo: for any answer (`applied` None: the
        decision reads no answer), or (`applied`: its clusterZone reads the answer) this very answer, once
        checked as `_hidden` checks it. `PolicyBook.remember` keeps out what is not an enforcing allow or
        what an audit policy would deny."""
        w = self.hot.get(q.key)
        if w is None:
            return
        answer: object = True
        if applied is not None:
            if policy.hides(applied, w, 12 + len(q.question)) is not None:
                return
            answer = w
        memo = policy.remember(client, q.key, answer, d)
        if memo is not None:
            self.allow.policed_hit(client, memo)

    async def _hidden_later(self, policy: PolicyBook, q: Query, data: bytes, client: str,
                            out: Coroutine[Any, Any, bytes | None], d: Decision | None) -> bytes | None:
        return self._hidden(policy, q, data, client, await out, d)

    def _hidden(self, policy: PolicyBook, q: Query, data: bytes, client: str, out: bytes | None,
                d: Decision | None) -> bytes | None:
        """`out`, unless it names a namespace the client's clusterZone hides (a PTR target, a CNAME chain)."""
        if out is None:
            return out
        hidden = policy.outside(client, out, 12 + len(q.question))
        if hidden is None:
            return out
        policy.recount(client, d, hidden, q.qname)
        return self.denied(q, data, hidden.rcode)

    def denied(self, q: Query, data: bytes, rcode: str) -> bytes | None:
        """A policy's denial: NXDOMAIN, NODATA (NOERROR, no answer) or REFUSED; authoritative for our zones;
        DROP (an RPZ feed's `rpz-drop.`): no answer at all."""
        if rcode == DROP:
            return None
        ours = self.records.claims(q.qname)
        if rcode == "REFUSED":
            return self._reply(q, data, RCODE.REFUSED, aa=False)
        return self._reply(q, data, RCODE.NXDOMAIN if rcode == "NXDOMAIN" else RCODE.NOERROR, aa=ours)

    def _nsid(self, q: Query, out: bytes | None) -> bytes | None:
        """The reply with our NSID option (the node name) when the query asked for it (RFC 5001)."""
        if out is None or not q.nsid or self.identity is None:
            return out
        return add_option(out, OPT_NSID, self.identity.nsid)

    def _own_probe(self, data: bytes) -> bool:
        """One of our loop probes: it must travel a loop even through an upstream we would refuse."""
        probes = self.forwarding.loop_probes
        if not probes:
            return False
        q = question_of(data)
        return q is not None and q[0][:-1] in probes

    def slip(self, data: bytes) -> bytes | None:
        """The TC=1 reply (question only) for a rate-limited UDP query: a real resolver asks again over TCP."""
        return short_reply(data, RCODE.NOERROR, tc=True, udp_size=self.max_udp_size)

    def answer(self, q: Query, data: bytes, client: str | None, *, walk: bool = True) -> Outcome:
        """The answer to a parsed query (no allow list, no pending count: `handle` does those). `client`
        None: as a client without an autopath plan gets it, uncounted (the explainer). `walk` False: no
        autopath walk (a client under a DNS policy)."""
        if q.edns and q.edns_version != 0:
            return self._reply(q, data, RCODE.BADVERS, aa=False)
        if q.qclass == CLASS_CH:
            return self._chaos(q, data)
        if q.qclass not in (CLASS_IN, CLASS_ANY):
            return self._reply(q, data, RCODE.REFUSED, aa=False)
        if q.qtype in (QT.AXFR, QT.IXFR):
            return self._reply(q, data, RCODE.REFUSED, aa=False)
        stored = self.cluster_answers.get(q.key)
        if stored is not None:
            return patch(stored, data, 12 + len(q.question))
        if self.autopath is not None and walk:
            names = self.autopath.names(q.qname, client) if client is not None else None
            if names is not None:
                return self.chaser.walk(q, data, names, client, self._as_asked)
        return self._as_asked(q, data, client)

    def _as_asked(self, q: Query, data: bytes, client: str | None) -> Outcome:
        """The answer to the question as asked (no autopath): index, forwarding or refusal. `client`: whose
        share of the upstream queries a new one counts against (None: nobody's)."""
        if not self.records.claims(q.qname):
            return self.forwarding.forward(q, data, client)
        aside = self.cluster_answers.aside.get(q.key)
        if aside is not None:  # an NXDOMAIN a walk may replace, or a name the owner said is not ours
            return patch(aside, data, 12 + len(q.question)) if aside else self.forwarding.forward(q, data, client)
        if self.remote is not None:
            reply = self.answers.absent(q)
            if reply is None:
                return self._ask(self.remote, q, data, client)
        else:
            reply = self.answers.cluster_reply(q)
        self.answers.keep(q.key, reply)
        return self._use(q, data, reply, client)

    # -- an owner's reply ------------------------------------------------------------------

    def _use(self, q: Query, data: bytes, reply: Reply, client: str | None) -> Outcome:
        """The response to `q` from the owner's reply (kept already)."""
        kind, wire, tags = reply.kind, reply.wire, reply.tags
        if kind == ANSWER:
            return patch(wire, data, 12 + len(q.question))
        if kind == FORWARD:
            return self.forwarding.forward(q, data, client)
        if kind == BEFORE_SYNC:
            if self.before_sync is None:
                return self._reply(q, data, RCODE.SERVFAIL, aa=False)
            return self._before_sync(self.before_sync, q, data)
        chase = reply.chase  # CHASE
        if chase is not None and self.forwarding.can_forward(chase.target):
            return self.chaser.chase(q, data, chase.chain, chase.target, wire, tags, client)
        return patch(wire, data, 12 + len(q.question))

    async def _ask(self, remote: Remote, q: Query, data: bytes, client: str | None) -> bytes | None:
        """A worker's cluster miss: the owner's reply over the channel (kept as it arrived)."""
        try:
            reply = await remote(q)
        except (OSError, EOFError, TimeoutError) as exc:
            log.debug("no answer from the index owner for %s: %s", q.qname, exc)
            return self._reply(q, data, RCODE.SERVFAIL, aa=False)
        out = self._use(q, data, reply, client)
        if out is None or isinstance(out, bytes):
            return out
        return await out

    async def _before_sync(self, hook: BeforeSync, q: Query, data: bytes) -> bytes | None:
        try:
            return await hook(data)
        except UpstreamError as exc:
            self.before_sync_failures += 1
            log.debug("before-sync fallback failed: %s", exc)
            return self._reply(q, data, RCODE.SERVFAIL, aa=False)

    # -- server identity (class CH) --------------------------------------------------------

    def _chaos(self, q: Query, data: bytes) -> bytes:
        """CH TXT (or ANY) id.server./hostname.bind.: the node name (RFC 4892); version.bind./
        version.server.: the --version-reply text when set. Every other CH question: REFUSED."""
        text = self.identity.txt(q.qname) if self.identity is not None else None
        if text is None or q.qtype not in (QT.TXT, QT.ANY):
            return self._reply(q, data, RCODE.REFUSED, aa=False)
        wire = build_response(q, rcode=RCODE.NOERROR, aa=True, ra=self.recursion_available,
                              answer=(RR(q.qname, QT.TXT, 0, text),), rclass=CLASS_CH,
                              max_udp_size=self.max_udp_size)
        return patch(wire, data, 12 + len(q.question))

    # -- plain replies ---------------------------------------------------------------------

    def _reply(self, q: Query, data: bytes, rcode: int, *, aa: bool) -> bytes:
        wire = build_response(
            q, rcode=rcode, aa=aa, ra=self.recursion_available, max_udp_size=self.max_udp_size
        )
        return patch(wire, data, 12 + len(q.question))
