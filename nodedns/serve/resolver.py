"""Every rcode decision: what a query gets, from which source (cluster index, cache, upstream).

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

Cluster answers are stored in `ClusterAnswers` for the hit path with the dependency tags `records`
reports; an index change drops only the answers of the tags it touches (`records.change_tags`; the
first sync and a new federation map drop every cluster answer). Forwarded answers live in
`ForwardCache`, which renders them into the same hot dict; cluster changes never touch them. That
dict is read by question alone, so with --autopath answers that depend on the client never go in:
walk answers are kept aside by (question, names walked) for the rest of the second (dropped on
every index change), and an NXDOMAIN that a walk may replace (`Autopathing.covers`) is stored aside
(`ClusterAnswers.aside`, never read by the hit path) with its tags and `a:<namespace>`, the tag of
the Pods that decide `covers`. An NXDOMAIN stored hot carries that tag too, so a Pod that makes
its namespace walk-eligible drops it.

The index owner decides cluster answers in `cluster_reply(q)` -> a `Reply`:

    FORWARD        not ours (a reverse name the index has no PTR for): forwarded
    ANSWER         the answer's template, its tags, hot or aside
    BEFORE_SYNC    a would-be NXDOMAIN before the first sync, with a `before_sync` hook
    CHASE          an ExternalName leaving the cluster: the CNAME-only template, the chain, the target

One process (`remote` None) calls it directly. A `--workers` process holds no index: its `remote`
asks the owner over the local channel and `keep`s the reply the moment it arrives, before any
invalidation the owner sent after it (one ordered stream); `invalidate(tags)` is then called with
the owner's tags. `slip(data)` is the TC=1 reply the UDP listener sends when `limits.RateLimiter`
says so. A query whose OPT record asks for NSID (RFC 5001) gets the node name in the reply's OPT,
whatever the answer (such queries never match a stored answer as they are: `wire.fast_key` leaves
them to this path).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol

from nodedns.cluster.existence import Existence
from nodedns.cluster.index import Index
from nodedns.cluster.records import Answer, ClusterRecords, change_tags
from nodedns.dns.identity import Identity
from nodedns.dns.keys import KEY_HEAD, patch
from nodedns.dns.message import parse_query, short_reply
from nodedns.dns.pack import RR, build_chased, build_response, encode_name
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
from nodedns.errors import EncodeError, FormatError, UpstreamBusy, UpstreamError, WireError
from nodedns.runtime.logutil import Consolidated
from nodedns.runtime.tasks import Tasks
from nodedns.serve.cache import ClusterAnswers, Entry, ForwardCache, filtered_template, make_template
from nodedns.serve.hosts import HostsAnswer, HostsTable
from nodedns.serve.limits import EVERYONE, AllowList

log = logging.getLogger("nodedns.resolver")
errors = Consolidated(log, "forwarding error")
unencodable = Consolidated(log, "unencodable answer")

Outcome = bytes | None | Coroutine[Any, Any, bytes | None]
# Before the first sync: raw query -> the response to send (the query's ID), or UpstreamError.
BeforeSync = Callable[[bytes], Awaitable[bytes]]
LOOP_SIGHTINGS = 2  # CoreDNS: seen more than twice means a loop
# A client's share of the upstream queries in flight: an eighth of --max-concurrent, at least 16
CLIENT_SHARE_FRACTION = 8
CLIENT_SHARE_FLOOR = 16
PREFETCH_PER_TURN = 8  # refreshes started in one event-loop turn at most (the rest wait for their next query)


def client_share(max_concurrent: int) -> int:
    """How many new upstream queries one client may have in flight (module docstring): an eighth of
    --max-concurrent, at least CLIENT_SHARE_FLOOR; 0 (no share: --max-concurrent alone) when that floor
    is the whole of --max-concurrent."""
    share = max(CLIENT_SHARE_FLOOR, max_concurrent // CLIENT_SHARE_FRACTION)
    return share if share < max_concurrent else 0
# An autopath walk's end: (template to send or None, result, position in the names walked); result is
# as_asked | searched | not_found | gave_up
WalkStep = tuple[bytes | None, str, int]

# What the index owner says about a cluster-zone or reverse name (see the module docstring):
# (kind, template or b"", tags, extra): ANSWER's extra is "hot", CHASE's is (chain, target)
FORWARD, ANSWER, BEFORE_SYNC, CHASE = 0, 1, 2, 3
Reply = tuple[int, bytes, frozenset[str], Any]
Remote = Callable[[Query], Awaitable[Reply]]  # a worker: the question, asked of the index owner
NOT_OURS = b""  # kept aside for a name the owner said is not ours (until its tags change)


FILTER_TAG = "filter:aaaa"
FILTER_TAGS = frozenset({FILTER_TAG})  # the tag of the stored --filter-aaaa NODATAs
# filtered NODATAs kept in the hot dict at most: a flood of made-up names is answered (slow path) beyond it
# without pushing the cluster answers out of the table they share
FILTER_STORED_MAX = 10_000
AAAA_KEY_TAIL = b"\x00\x1c"  # a cache key ends with QTYPE, QCLASS: these two bytes for AAAA


class AaaaFilter:
    """--filter-aaaa: whether forwarded AAAA questions get our NODATA now, and why (/status shows both).
    `on`: always; `auto`: as the wiring decides (`set`) from the node's addresses and the Services."""

    __slots__ = ("mode", "soa", "active", "reason")

    def __init__(self, mode: str, soa: bytes) -> None:
        self.mode = mode
        self.soa = soa  # the authority record of the NODATA (cache.filter_soa)
        self.active = mode == "on"
        self.reason = "--filter-aaaa on" if self.active else "not decided yet (auto: until the first check)"

    def status(self) -> dict[str, Any]:
        return {"mode": self.mode, "filtering": self.active, "reason": self.reason}


class Autopathing(Protocol):
    """What the resolver needs from node-local autopath (nodedns.podconf.searchpath.Autopath)."""

    def names(self, qname: str, client: str) -> Sequence[str] | None:
        """The names to walk for this query from this client (the query first), or None: plain answer."""
        ...

    def covers(self, qname: str) -> bool:
        """A walk may replace an NXDOMAIN for this name: keep it out of the hot dict."""
        ...

    def count(self, result: str, position: int) -> None:
        """A walk ended: as_asked | searched | not_found | gave_up, at this position of its names."""
        ...


class Forwarding(Protocol):
    """What the resolver needs from the forwarder (nodedns.forward.upstream.Forwarder)."""

    def routable(self, qname: str) -> bool:
        """Some upstream group serves this name."""
        ...

    def unreachable(self, qname: str) -> bool:
        """Every upstream for this name is known down (its health checks fail)."""
        ...

    def looping(self, qname: str) -> bool:
        """The route for this name is a forwarding loop (our probe came back through it)."""
        ...

    async def query(self, qname: str, key: bytes) -> bytes:
        """The upstream's validated response to the query in `key`. Raises UpstreamError/UpstreamBusy."""
        ...


def is_probe_name(qname: str, qtype: int) -> bool:
    """A loop probe's shape: HINFO for `<digits>.<digits>.<zone>` (ours and CoreDNS's loop plugin's).

    Such queries skip the cache and in-flight sharing, so a probe travels a loop instead of being
    absorbed by it, and the agent that sent it sees it come back.
    """
    if qtype != QT.HINFO:
        return False
    first, _, rest = qname.partition(".")
    second = rest.partition(".")[0]
    return first.isdigit() and second.isdigit()


class Resolver:
    """Decides the answer to each query; owns the stored cluster answers."""

    def __init__(
        self,
        *,
        records: ClusterRecords,
        index: Index,
        cluster_answers: ClusterAnswers,
        max_udp_size: int = 1232,
        forward_cache: ForwardCache | None = None,
        forwarder: Forwarding | None = None,
        stale_recheck: float = 5.0,
        on_loop: Callable[[str, int], None] | None = None,
        before_sync: BeforeSync | None = None,
        autopath: Autopathing | None = None,
        allow: AllowList | None = None,
        max_pending: int = 10_000,
        client_share: int = 0,
        remote: Remote | None = None,
        identity: Identity | None = None,
        aaaa_filter: AaaaFilter | None = None,
        hosts_ttl: int = 5,
    ) -> None:
        self.records = records
        self.hosts: HostsTable | None = None  # --hosts: the table in use (set_hosts); None: no --hosts
        self.hosts_ttl = hosts_ttl
        self.aaaa = aaaa_filter  # --filter-aaaa (None: off)
        self.filter_stored_max = FILTER_STORED_MAX
        self.remote = remote
        self.existence: Existence | None = None  # a worker: what exists, pushed by the owner (`_absent`)
        self.identity = identity  # CH TXT id.server. and NSID answers; None: REFUSED, no NSID
        self.autopath = autopath
        self.allow = allow if allow is not None else AllowList(explicit=EVERYONE)
        self.max_pending = max_pending
        self.client_share = client_share  # new upstream queries one client may have in flight (0: no share)
        self._by_client: dict[str, int] = {}  # client -> new upstream queries in flight on its behalf
        self.pending = 0  # client queries waiting on the network (upstream, chase, fallback)
        self.before_sync = before_sync
        self.before_sync_failures = 0
        self.index = index
        self.cluster_answers = cluster_answers
        self.max_udp_size = max_udp_size
        self.forward_cache = forward_cache
        self.forwarder = forwarder if forward_cache is not None else None
        self.stale_recheck = max(stale_recheck, 1.0)
        self.on_loop = on_loop
        self.recursion_available = self.forwarder is not None
        self.formerr = 0
        self.dropped = 0
        self.stats = {"forwarded": 0, "coalesced": 0, "prefetch": 0, "refused_busy": 0, "servfail": 0,
                      "stale": 0, "chased": 0, "refused_pending": 0, "refused_share": 0, "stale_nxdomain": 0,
                      "hosts": 0, "prefetch_deferred": 0}
        self.prefetch_per_turn = PREFETCH_PER_TURN
        self._prefetch_turn = 0  # refreshes started in this loop turn
        self.loop_probes: dict[str, int] = {}
        self._inflight: dict[bytes, asyncio.Future[bytes]] = {}
        self._tasks = Tasks()
        self._svc_suffix = f".svc.{records.zone}"
        if forward_cache is not None:
            cluster_answers.on_not_ours = forward_cache.discard
        index.on_record(self._index_changed)
        # --autopath: walk answers by (key, names) for the rest of the second, dropped on an index change
        self._walked: dict[tuple[bytes, tuple[str, ...]], WalkStep] = {}
        self._walked_second = -1
        self._walk_epoch = 0  # moves on every index change: a walk that spanned one is not kept

    def _index_changed(self, kind: str, old: Any, new: Any) -> None:
        if not self.cluster_answers.tagged() and kind:
            self.forget_walks()  # nothing stored (a first list): no tags to name
            return
        self.invalidate(change_tags(kind, old, new))

    def invalidate(self, tags: frozenset[str] | None) -> None:
        """The index changed what `tags` name (None: anything): their stored answers go, walks too."""
        self.cluster_answers.invalidate(tags)
        self.forget_walks()

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
            self.forget_walks()
            log.info("--filter-aaaa %s: %s AAAA questions for forwarded names (%s)", f.mode,
                     "answering NODATA to" if active else "forwarding", reason)
        return changed

    def set_hosts(self, table: HostsTable) -> None:
        """--hosts read (again): answer from this table from now on. Forwarded answers cached for its names
        go (the hot dict included), so neither path serves one as forwarded while the file names it."""
        self.hosts = table
        if self.forward_cache is not None:
            names = table.wire_names()
            if names:
                self.forward_cache.drop(lambda key: key[KEY_HEAD:-4] in names)
        self.forget_walks()

    def hosts_answer(self, q: Query) -> HostsAnswer | None:
        """The --hosts answer for this question (None: the files do not name it)."""
        return self.hosts.lookup(q.qname, q.qtype, self.hosts_ttl) if self.hosts is not None else None

    def _filtered(self, q: Query) -> bool:
        """--filter-aaaa applies to this question now: AAAA, forwarded, outside the cluster and clusterset zones."""
        f = self.aaaa
        return (f is not None and f.active and q.qtype == QT.AAAA and not self.records.in_zone(q.qname)
                and not self.records.in_clusterset(q.qname))

    def forget_walks(self) -> None:
        """Walk answers kept for this second are void (the index or the autopath plans changed)."""
        self._walked.clear()
        self._walk_epoch += 1

    # -- entry -----------------------------------------------------------------------------

    def handle(self, data: bytes, client: str) -> Outcome:
        head = read_header(data)
        if head is None or head[1] & 0x8000:
            self.dropped += 1
            return None  # not even a header, or a response sent to us
        allow = self.allow
        if client not in allow.allowed and not allow.admit(client) and not self._own_probe(data):
            allow.note_refused(client)
            return short_reply(data, RCODE.REFUSED, udp_size=self.max_udp_size)
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

    def _nsid(self, q: Query, out: bytes | None) -> bytes | None:
        """The reply with our NSID option (the node name) when the query asked for it (RFC 5001)."""
        if out is None or not q.nsid or self.identity is None:
            return out
        return add_option(out, OPT_NSID, self.identity.nsid)

    def _own_probe(self, data: bytes) -> bool:
        """One of our loop probes: it must travel a loop even through an upstream we would refuse."""
        if not self.loop_probes:
            return False
        q = question_of(data)
        return q is not None and q[0][:-1] in self.loop_probes

    def share_status(self) -> dict[str, int]:
        """The per-client share of upstream queries: the setting, refusals so far, clients holding some now."""
        return {"max": self.client_share, "refused": self.stats["refused_share"], "clients": len(self._by_client)}

    def slip(self, data: bytes) -> bytes | None:
        """The TC=1 reply (question only) for a rate-limited UDP query: a real resolver asks again over TCP."""
        return short_reply(data, RCODE.NOERROR, tc=True, udp_size=self.max_udp_size)

    def answer(self, q: Query, data: bytes, client: str | None) -> Outcome:
        """The answer to a parsed query (no allow list, no pending count: `handle` does those). `client`
        None: as a client without an autopath plan gets it, uncounted (the explainer)."""
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
        if self.autopath is not None:
            names = self.autopath.names(q.qname, client) if client is not None else None
            if names is not None:
                return self.walk(q, data, names, client)
        return self._as_asked(q, data, client)

    def _as_asked(self, q: Query, data: bytes, client: str | None) -> Outcome:
        """The answer to the question as asked (no autopath): index, forwarding or refusal. `client`: whose
        share of the upstream queries a new one counts against (None: nobody's)."""
        if not self.records.claims(q.qname):
            return self._forward(q, data, client)
        aside = self.cluster_answers.aside.get(q.key)
        if aside is not None:  # an NXDOMAIN a walk may replace, or a name the owner said is not ours
            return patch(aside, data, 12 + len(q.question)) if aside else self._forward(q, data, client)
        if self.remote is not None:
            reply = self._absent(q)
            if reply is None:
                return self._ask(self.remote, q, data, client)
        else:
            reply = self.cluster_reply(q)
        self.keep(q.key, reply)
        return self._use(q, data, reply, client)

    # -- cluster answers -------------------------------------------------------------------

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
            return ANSWER, self._build(q, Answer(RCODE.SERVFAIL, aa=False)), tags, True

    def servfail_reply(self, q: Query) -> Reply:
        """A SERVFAIL for `q` as an owner's reply, with no tags (what a worker uses, never keeps, when the
        owner could not decide or send the real one)."""
        return ANSWER, self._build(q, Answer(RCODE.SERVFAIL, aa=False)), frozenset(), True

    def _decide(self, q: Query, found: Answer | None, tags: frozenset[str]) -> Reply:
        if found is None:
            return FORWARD, NOT_OURS, tags, None
        if found.chase is not None:
            return CHASE, self._build(q, found), tags, (found.answer, found.chase)
        if found.rcode == RCODE.NXDOMAIN and not self.index.synced:
            # never a cacheable NXDOMAIN before the first full sync (the sync drops every stored answer)
            if self.before_sync is not None:
                return BEFORE_SYNC, b"", tags, None
            found = Answer(RCODE.SERVFAIL, aa=False)
        return self._answer_reply(q, found, tags)

    def _answer_reply(self, q: Query, found: Answer, tags: frozenset[str]) -> Reply:
        hot = True
        if found.rcode == RCODE.NXDOMAIN and self.autopath is not None:
            ns = self._walk_namespace(q.qname)
            if ns is not None:
                tags = tags | {f"a:{ns}"}
                # a walk may answer this name for some clients: not in the client-independent hot dict
                hot = not self.autopath.covers(q.qname)
        return ANSWER, self._build(q, found), tags, hot

    def _absent(self, q: Query) -> Reply | None:
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

    def _walk_namespace(self, qname: str) -> str | None:
        """The namespace whose Pods decide whether a walk may replace this name's NXDOMAIN."""
        if not qname.endswith(self._svc_suffix):
            return None
        return qname[: -len(self._svc_suffix)].rpartition(".")[2]

    def keep(self, key: bytes, reply: Reply) -> None:
        """Store the owner's reply for `key` (a worker does so as it arrives, before any later
        invalidation): ANSWER hot or aside, FORWARD as a "not ours" mark, CHASE expected."""
        kind, wire, tags, extra = reply
        if kind == ANSWER:
            self.cluster_answers.put(key, wire, tags, hot=extra)
        elif kind == FORWARD:
            if tags:  # only what the index decides (a reverse name) is worth remembering
                self.cluster_answers.put(key, NOT_OURS, tags, hot=False)
        elif kind == CHASE:
            if self._can_forward(extra[1]):
                self.cluster_answers.expect(key, tags)
            else:
                self.cluster_answers.put(key, wire, tags)

    def _use(self, q: Query, data: bytes, reply: Reply, client: str | None) -> Outcome:
        """The response to `q` from the owner's reply (kept already)."""
        kind, wire, tags, extra = reply
        if kind == ANSWER:
            return patch(wire, data, 12 + len(q.question))
        if kind == FORWARD:
            return self._forward(q, data, client)
        if kind == BEFORE_SYNC:
            if self.before_sync is None:
                return self._reply(q, data, RCODE.SERVFAIL, aa=False)
            return self._before_sync(self.before_sync, q, data)
        chain, target = extra
        if self._can_forward(target):
            return self._chase(q, data, chain, target, wire, tags, client)
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

    def _build(self, q: Query, found: Answer) -> bytes:
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

    async def _before_sync(self, hook: BeforeSync, q: Query, data: bytes) -> bytes | None:
        try:
            return await hook(data)
        except UpstreamError as exc:
            self.before_sync_failures += 1
            log.debug("before-sync fallback failed: %s", exc)
            return self._reply(q, data, RCODE.SERVFAIL, aa=False)

    def lookup(self, qname: str, qtype: int) -> Answer | None:
        """The cluster answer for a name, for the explainer (None when the name is not ours)."""
        return self.records.resolve(qname, qtype)[0]

    # -- forwarded answers -----------------------------------------------------------------

    def _can_forward(self, qname: str) -> bool:
        return self.forwarder is not None and self.forwarder.routable(qname)

    def _unreachable(self, qname: str) -> bool:
        return self.forwarder is not None and self.forwarder.unreachable(qname)

    def rehit(self, key: bytes) -> bytes | None:
        """The template of a fresh forwarded answer for a key that left the hot dict at the turn of a
        second, rendered for this second without parsing the query; None sends the query the slow way
        (not cached, expired, or due for a prefetch)."""
        cache = self.forward_cache
        if cache is None:
            return None
        if self.aaaa is not None and self.aaaa.active and key.endswith(AAAA_KEY_TAIL, -4, -2):
            return None  # filtered now: the slow path answers it (a forwarded AAAA kept from before)
        entry = cache.get(key)
        if entry is None:
            return None
        now = cache.now()
        if not cache.fresh(entry, now) or cache.near_expiry(entry, now):
            return None
        return cache.serve(key, entry, now)

    def _forward(self, q: Query, data: bytes, client: str | None) -> Outcome:
        if self.hosts is not None:
            local = self.hosts_answer(q)
            if local is not None:
                if client is not None:  # a client's query (the explainer's are not counted)
                    self.stats["hosts"] += 1
                wire = build_response(q, rcode=RCODE.NOERROR, aa=True, ra=self.recursion_available,
                                      answer=local.records, max_udp_size=self.max_udp_size)
                return patch(wire, data, 12 + len(q.question))
        cache = self.forward_cache
        if cache is None or not self._can_forward(q.qname):
            return self._reply(q, data, RCODE.REFUSED, aa=False)
        qend = 12 + len(q.question)
        if self._filtered(q):
            assert self.aaaa is not None
            wire = filtered_template(q.key, self.aaaa.soa, udp_size=self.max_udp_size)
            if self.cluster_answers.with_tag(FILTER_TAG) < self.filter_stored_max:
                wire = self.cluster_answers.put(q.key, wire, FILTER_TAGS)
            return patch(wire, data, qend)
        if is_probe_name(q.qname, q.qtype):
            return self._probe(q, data, qend)
        now = cache.now()
        entry = cache.get(q.key)
        if entry is not None:
            if cache.denied(entry, now) and not cache.fresh(entry, now):
                return patch(self._last_known_good(q, entry, now), data, qend)
            if cache.fresh(entry, now):
                wire = cache.serve(q.key, entry, now)
                if cache.prefetch_due(entry, now) and q.key not in self._inflight and self._prefetch_slot():
                    self.stats["prefetch"] += 1
                    self._tasks.spawn(self._shared(q, entry, background=True), "prefetch")
                return patch(wire, data, qend)
            if cache.stale_usable(entry, now) and (entry.fail_until > now or self._unreachable(q.qname)):
                # the upstreams just failed for this entry, or are known down: the stale answer now
                # (RFC 8767), not after a timeout; asked again after --cache-servfail-ttl
                self.stats["stale"] += 1
                if entry.fail_until <= now:
                    cache.mark_failed(entry, now, self.stale_recheck)
                return patch(cache.serve_stale_answer(q.key, entry, now), data, qend)
        if self.forwarder is not None and self.forwarder.looping(q.qname):
            return self._reply(q, data, RCODE.SERVFAIL, aa=False)  # forwarded, it would only travel the loop
        if client is not None and q.key not in self._inflight and self._over_share(client):
            return self._reply(q, data, RCODE.REFUSED, aa=False)  # at once: nothing waits, nothing is asked
        return self._miss(q, data, qend, entry, client)

    def _prefetch_slot(self) -> bool:
        """Whether one more refresh may start in this loop turn (at most `prefetch_per_turn`): beyond it
        the entry is served as it is (hot for the rest of the second) and its next query starts the
        refresh, so a burst of entries coming due is spread over turns instead of holding one."""
        if self._prefetch_turn >= self.prefetch_per_turn:
            self.stats["prefetch_deferred"] += 1
            return False
        if not self._prefetch_turn:
            asyncio.get_running_loop().call_soon(self._new_turn)
        self._prefetch_turn += 1
        return True

    def _new_turn(self) -> None:
        self._prefetch_turn = 0

    def _over_share(self, client: str) -> bool:
        """`client` already holds its share of the upstream queries in flight: its next new one is refused
        (counted), so one client cannot take every --max-concurrent slot while others wait."""
        if not self.client_share or self._by_client.get(client, 0) < self.client_share:
            return False
        self.stats["refused_share"] += 1
        return True

    async def _miss(self, q: Query, data: bytes, qend: int, stale: Entry | None, client: str | None) -> bytes:
        return patch(await self._shared(q, stale, client=client), data, qend)

    async def _shared(self, q: Query, stale: Entry | None, *, background: bool = False,
                      client: str | None = None) -> bytes:
        """The template for q.key: joins an identical query in flight, else asks the upstreams (a new
        upstream query counts against `client`'s share while it is in flight; a client over its share
        gets REFUSED, its query never asked)."""
        key = q.key
        pending = self._inflight.get(key)
        if pending is not None:
            self.stats["coalesced"] += 1
            return await asyncio.shield(pending)
        if client is not None and self._over_share(client):
            return self._template(q, RCODE.REFUSED)
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        by_client = self._by_client
        if client is not None:
            by_client[client] = by_client.get(client, 0) + 1
        try:
            wire = await self._fetch(q, stale, background=background)
        except BaseException:
            fut.cancel()
            raise
        finally:
            self._inflight.pop(key, None)
            if client is not None:
                left = by_client[client] - 1
                if left:
                    by_client[client] = left
                else:
                    del by_client[client]
        fut.set_result(wire)
        return wire

    async def _fetch(self, q: Query, stale: Entry | None, *, background: bool) -> bytes:
        cache = self.forward_cache
        assert cache is not None and self.forwarder is not None
        self.stats["forwarded"] += 1
        try:
            response = await self.forwarder.query(q.qname, q.key)
            rcode = response[3] & 0xF
            if rcode == RCODE.SERVFAIL:
                raise UpstreamError("upstream answered SERVFAIL")
            if stale is not None and (rcode == RCODE.NXDOMAIN or (rcode == RCODE.NOERROR and response[6:8] == b"\0\0")):
                now = cache.now()
                if cache.last_known_good(stale, now):
                    if not stale.denied_since:
                        stale.denied_since = now
                        log.info("--stale-nxdomain: an upstream answered %s for %s %s, cached positive: serving "
                                 "that answer for up to %gs while asking again", "NXDOMAIN" if rcode else "NODATA",
                                 q.qname, QT.name(q.qtype), cache.stale_nxdomain)
                    cache.mark_failed(stale, now, self.stale_recheck)  # asked again after --cache-servfail-ttl
                    if cache.fresh(stale, now):
                        return cache.serve(q.key, stale, now)  # a prefetch: the entry keeps its TTL
                    if background:  # asked again for last-known-good: nobody waits, nothing is served
                        return cache.serve_stale_answer(q.key, stale, now, int(self.stale_recheck), hot=False)
                    return self._last_known_good(q, stale, now, asked=True)
            return cache.admit(q.key, response)[0]
        except UpstreamBusy:
            self.stats["refused_busy"] += 1
            return self._template(q, RCODE.REFUSED)
        except (UpstreamError, FormatError) as exc:
            return self._failed(q, stale, exc, background=background)
        except Exception as exc:  # noqa: BLE001 - a bug costs this answer, not the waiters
            errors.report(exc)
            return self._template(q, RCODE.SERVFAIL)

    def _last_known_good(self, q: Query, entry: Entry, now: float, *, asked: bool = False) -> bytes:
        """--stale-nxdomain: the positive entry an upstream denied, TTL --cache-servfail-ttl (when it is
        asked again), counted and kept out of the hot dict (each one is counted); past its recheck time it is
        asked again in the background (`asked`: it just was)."""
        cache = self.forward_cache
        assert cache is not None
        self.stats["stale_nxdomain"] += 1
        if not asked and entry.fail_until <= now and q.key not in self._inflight:
            cache.mark_failed(entry, now, self.stale_recheck)
            self._tasks.spawn(self._shared(q, entry, background=True), "last-known-good")
        return cache.serve_stale_answer(q.key, entry, now, ttl=int(self.stale_recheck), hot=False)

    def last_known_good(self, key: bytes) -> float | None:
        """Seconds --stale-nxdomain still serves the cached positive answer for `key` over an upstream's
        NXDOMAIN/NODATA (None: not in that state). For the explainer."""
        cache = self.forward_cache
        entry = cache.get(key) if cache is not None else None
        if entry is None or cache is None:
            return None
        now = cache.now()
        if not cache.denied(entry, now):
            return None
        return entry.denied_since + cache.stale_nxdomain - now

    def _failed(self, q: Query, stale: Entry | None, exc: Exception, *, background: bool = False) -> bytes:
        """Every upstream failed: the stale entry (RFC 8767) or SERVFAIL, remembered briefly.

        A failed prefetch keeps the entry as it is (its TTL still runs) and caches no SERVFAIL.
        """
        cache = self.forward_cache
        assert cache is not None
        now = cache.now()
        if background and stale is not None and cache.fresh(stale, now):
            cache.mark_failed(stale, now, self.stale_recheck)
            return cache.serve(q.key, stale, now)
        if stale is not None and cache.stale_usable(stale, now):
            self.stats["stale"] += 1
            cache.mark_failed(stale, now, self.stale_recheck)
            return cache.serve_stale_answer(q.key, stale, now)
        log.debug("SERVFAIL for %s: %s", q.qname, exc)
        self.stats["servfail"] += 1
        wire = self._template(q, RCODE.SERVFAIL)
        if not background and not is_probe_name(q.qname, q.qtype):
            cache.admit_servfail(q.key, wire)
        return wire

    def _template(self, q: Query, rcode: int) -> bytes:
        return build_response(q, rcode=rcode, aa=False, ra=self.recursion_available,
                              max_udp_size=self.max_udp_size)

    async def close(self) -> None:
        """Cancel background refreshes."""
        await self._tasks.cancel_all()

    # -- loop probes -----------------------------------------------------------------------

    def add_loop_probe(self, qname: str) -> None:
        """Count arrivals of this probe name; the third one is a forwarding loop."""
        self.loop_probes[qname] = 0

    def _probe(self, q: Query, data: bytes, qend: int) -> Outcome:
        seen = self.loop_probes.get(q.qname)
        if seen is not None:
            seen += 1
            self.loop_probes[q.qname] = seen
            if seen > LOOP_SIGHTINGS:
                if self.on_loop is not None:
                    self.on_loop(q.qname, seen)
                return None
        return self._pass_through(q, data, qend)

    async def _pass_through(self, q: Query, data: bytes, qend: int) -> bytes:
        """Forward without cache or in-flight sharing (loop probes)."""
        assert self.forwarder is not None
        try:
            response = await self.forwarder.query(q.qname, q.key)
            wire = self._plain(q.key, response)
        except (UpstreamError, FormatError):
            wire = self._template(q, RCODE.SERVFAIL)
        return patch(wire, data, qend)

    def _plain(self, key: bytes, response: bytes) -> bytes:
        return make_template(key, response, udp_size=self.max_udp_size).wire

    # -- ExternalName targets outside the cluster --------------------------------------------

    def _chase(self, q: Query, data: bytes, chain: list[RR], target: str, plain: bytes,
               tags: frozenset[str], client: str | None) -> Outcome:
        """`plain` is the CNAME-only template (when the target cannot be asked); `tags` the chain's."""
        cache = self.forward_cache
        assert cache is not None
        try:
            name = encode_name(target)
            tq = q._replace(qname=target, key=q.key[:KEY_HEAD] + name + q.key[-4:],
                            question=name + q.question[-4:])
        except ValueError:
            self.cluster_answers.settled(q.key)
            self.cluster_answers.put(q.key, plain, tags)
            return patch(plain, data, 12 + len(q.question))
        self.stats["chased"] += 1
        qend = 12 + len(q.question)
        now = cache.now()
        entry = cache.get(tq.key)
        if entry is not None and cache.fresh(entry, now):
            return patch(self._chained(q, chain, tags, cache.serve(tq.key, entry, now)), data, qend)
        return self._chase_miss(q, tq, data, qend, chain, tags, entry, client)

    async def _chase_miss(self, q: Query, tq: Query, data: bytes, qend: int, chain: list[RR],
                          tags: frozenset[str], stale: Entry | None, client: str | None) -> bytes:
        target = await self._shared(tq, stale, client=client)
        return patch(self._chained(q, chain, tags, target), data, qend)

    def _chained(self, q: Query, chain: list[RR], tags: frozenset[str], target: bytes) -> bytes:
        """The chain + target answer, kept in the hot dict for the rest of this second unless the
        chain's tags changed while the target was asked (or a walk may replace its NXDOMAIN)."""
        assert self.forward_cache is not None
        wire = build_chased(q, chain=chain, target=target, ra=self.recursion_available,
                            max_udp_size=self.max_udp_size)
        settled = self.cluster_answers.settled(q.key)
        if self.autopath is not None:
            ns = self._walk_namespace(q.qname)
            if ns is not None:
                tags = tags | {f"a:{ns}"}
        if settled and not (wire[3] & 0xF == RCODE.NXDOMAIN and self.autopath is not None
                            and self.autopath.covers(q.qname)):
            self.forward_cache.hold(q.key, wire)
            self.cluster_answers.watch(q.key, tags)
        return wire

    # -- node-local autopath ----------------------------------------------------------------

    def walk(self, q: Query, data: bytes, names: Sequence[str], client: str | None = None) -> Outcome:
        """Answer `q` by walking `names` (`q`'s own name first) as the client's resolver would
        (`walk_step`), counted in the autopath metrics."""
        qend = 12 + len(q.question)
        step = self.walk_step(q, names, client)
        if isinstance(step, tuple):
            return self._walked_answer(step, data, qend)
        return self._walk_finish(step, data, qend)

    async def _walk_finish(self, pending: Coroutine[Any, Any, WalkStep], data: bytes, qend: int) -> bytes | None:
        return self._walked_answer(await pending, data, qend)

    def _walked_answer(self, step: WalkStep, data: bytes, qend: int) -> bytes | None:
        wire, result, position = step
        if self.autopath is not None:
            self.autopath.count(result, position)
        return patch(wire, data, qend) if wire is not None else None

    def walk_step(self, q: Query, names: Sequence[str],
                  client: str | None = None) -> WalkStep | Coroutine[Any, Any, WalkStep]:
        """The walk's (template, result, position): each name is answered like a query of its own
        (`_candidate`: stored answers, index, cache, in-flight sharing, serve-stale), going on only
        past NXDOMAIN. Nothing built for `q` goes into the hot dict; the step is kept by (question,
        names) for the rest of the second (the same walk gives the same answer until the index or
        a TTL moves). Not counted: the explainer asks here too."""
        key = (q.key, tuple(names))
        second = int(self.forward_cache.now()) if self.forward_cache is not None else 0
        if second != self._walked_second:
            self._walked.clear()
            self._walked_second = second
        done = self._walked.get(key)
        if done is not None:
            return done
        epoch = self._walk_epoch
        first: bytes | None = None
        for i in range(len(names)):
            out = self._candidate(q, names, i, client)
            if out is not None and not isinstance(out, bytes):
                return self._walk_on(q, names, key, i, out, first, epoch, client)
            if i == 0:
                first = out
            step = self._walk_step(q, names, i, out, first)
            if step is not None:
                return self._keep(key, step, epoch)
        return None, "gave_up", 0  # not reached: the last name always ends the walk

    async def _walk_on(self, q: Query, names: Sequence[str], key: tuple[bytes, tuple[str, ...]], i: int,
                       pending: Coroutine[Any, Any, bytes | None], first: bytes | None, epoch: int,
                       client: str | None) -> WalkStep:
        out = await pending
        while True:
            if i == 0:
                first = out
            step = self._walk_step(q, names, i, out, first)
            if step is not None:
                return self._keep(key, step, epoch)
            i += 1
            nxt = self._candidate(q, names, i, client)
            out = nxt if nxt is None or isinstance(nxt, bytes) else await nxt

    def _keep(self, key: tuple[bytes, tuple[str, ...]], step: WalkStep, epoch: int) -> WalkStep:
        if epoch != self._walk_epoch:
            return step  # the index changed during the walk: this answer is for this query only
        if len(self._walked) >= self.cluster_answers.max_entries:
            self._walked.clear()
        self._walked[key] = step
        return step

    def _candidate(self, q: Query, names: Sequence[str], i: int, client: str | None) -> Outcome:
        """The plain answer (a template: ID 0, lowercase question) to `q` asked for `names[i]`."""
        if i == 0:
            tq = q
        else:
            try:
                name = encode_name(names[i])
            except ValueError:
                return None  # not a name we can send: the walk gives up
            tq = q._replace(qname=names[i], key=q.key[:KEY_HEAD] + name + q.key[-4:], question=name + q.key[-4:])
        stored = self.cluster_answers.table.get(tq.key) or self.cluster_answers.aside.get(tq.key)
        if stored:
            return stored
        return self._as_asked(tq, b"\x00\x00" + tq.key, client)

    def _walk_step(self, q: Query, names: Sequence[str], i: int, out: bytes | None,
                   first: bytes | None) -> WalkStep | None:
        """(template to send, result, position) once names[i] answered `out` (None: no answer) ends the
        walk; None to go on to the next name."""
        rcode = out[3] & 0xF if out is not None else -1
        if rcode == RCODE.NXDOMAIN and i + 1 < len(names):
            return None
        if rcode == RCODE.NOERROR and out is not None:
            if i == 0:
                return out, "as_asked", 0
            # records: a CNAME to the name found, then its records. NODATA: no CNAME, like CoreDNS's
            # autopath (an answer section with only a CNAME would end glibc's search even when both
            # A and AAAA are empty; an empty one lets it go on, as it would without us)
            chain = [RR(q.qname, QT.CNAME, self.records.ttl, names[i])] if out[6:8] != b"\x00\x00" else []
            return build_chased(q, chain=chain, target=out, ra=self.recursion_available,
                                max_udp_size=self.max_udp_size), "searched", i
        return first, ("not_found" if rcode == RCODE.NXDOMAIN else "gave_up"), i

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
