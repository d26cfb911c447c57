"""Answers for names outside our zones: --hosts, --filter-aaaa, the forward cache, the upstreams.

`ForwardPath.forward(q, data, client)` answers a name no zone of ours holds:

    a name or address of a --hosts file     its records (AA, TTL --ttl), answered each time, never stored
    no upstream for it                      REFUSED
    --filter-aaaa active, an AAAA question  our NODATA, stored hot with the tag "filter:aaaa" (at most
                                            FILTER_STORED_MAX of them)
    a loop probe                            forwarded as it is (no cache, no sharing); its third sighting
                                            is a forwarding loop (`on_loop`) and is dropped
    fresh in the cache                      the cached answer; past its prefetch point also refreshed in
                                            the background (at most PREFETCH_PER_TURN started per loop turn,
                                            PREFETCH_IN_FLIGHT at once)
    denied upstream, --stale-nxdomain       the positive answer cached for it (last-known-good)
    stale, upstreams failed or known down   the stale answer at once (RFC 8767)
    a looping route                         SERVFAIL
    the client over its share               REFUSED at once (`client_share`)
    its namespace over its share            REFUSED at once (`namespace_share`: all its Pods on this node
                                            together, so more Pods buy no more of --max-concurrent)
    else                                    asked: identical in-flight misses share one upstream query

`shared(q, stale)` is the one upstream query per key (coalescing); the ExternalName chase and the
autopath walk (nodedns.serve.chase) ask through it too. `rehit(key)` re-renders a cached forwarded
answer from its key alone (no parsing). The forwarder is a `Forwarding` protocol, so this module does
not import nodedns.forward.upstream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from nodedns.cluster.records import ClusterRecords
from nodedns.dns.keys import key_query, patch
from nodedns.dns.pack import build_response
from nodedns.dns.wire import QT, RCODE, Query, question_of
from nodedns.errors import FormatError, UpstreamBusy, UpstreamError
from nodedns.forward.store import Entry, ForwardCache, make_template
from nodedns.forward.zones import CachePolicy, Zone
from nodedns.runtime.logutil import Consolidated
from nodedns.runtime.tasks import Tasks
from nodedns.serve.cache import ClusterAnswers, filtered_template
from nodedns.serve.hosts import HostsAnswer, HostsTable

log = logging.getLogger("nodedns.resolver")
errors = Consolidated(log, "forwarding error")

# An answer: the bytes to send, None to drop, or a coroutine giving one of those (it waits on the network)
Outcome = bytes | None | Coroutine[Any, Any, bytes | None]
LOOP_SIGHTINGS = 2  # CoreDNS: seen more than twice means a loop
# A client's share of the upstream queries in flight: an eighth of --max-concurrent, at least 16
CLIENT_SHARE_FRACTION = 8
CLIENT_SHARE_FLOOR = 16
# ... and a namespace's (its Pods on this node together): a quarter of --max-concurrent, at least 16
NAMESPACE_SHARE_FRACTION = 4
PREFETCH_PER_TURN = 8  # refreshes started in one event-loop turn at most (the rest wait for their next query)
# refreshes in flight at once at most: a burst of entries coming due (after priming, a restart, a gap in
# the traffic) is refreshed 16 at a time, so a client's miss waits behind at most 16 refreshes at the
# upstream and in parsing, not hundreds (bench-tail's worst round: max 6-10 ms without, 4-5.5 ms with)
PREFETCH_IN_FLIGHT = 16
# serve-stale verify: how long a client waits on the upstream before it gets the stale answer (RFC 8767's
# client-response timer, its recommended 1.8 s); the upstream query goes on and refreshes the entry
STALE_CLIENT_TIMER = 1.8


def client_share(max_concurrent: int) -> int:
    """How many new upstream queries one client may have in flight (module docstring): an eighth of
    --max-concurrent, at least CLIENT_SHARE_FLOOR; 0 (no share: --max-concurrent alone) when that floor
    is the whole of --max-concurrent."""
    share = max(CLIENT_SHARE_FLOOR, max_concurrent // CLIENT_SHARE_FRACTION)
    return share if share < max_concurrent else 0


def namespace_share(max_concurrent: int) -> int:
    """How many new upstream queries the Pods of one namespace on this node may have in flight together:
    a quarter of --max-concurrent, at least CLIENT_SHARE_FLOOR; 0 (no share) when that is all of it."""
    share = max(CLIENT_SHARE_FLOOR, max_concurrent // NAMESPACE_SHARE_FRACTION)
    return share if share < max_concurrent else 0


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

    def zone_for(self, qname: str) -> Zone | None:
        """The settings of the zone that forwards this name (nodedns.forward.zones; None: the flags')."""
        ...

    async def query(self, qname: str, key: bytes, *, probe: bool = False) -> bytes:
        """The upstream's validated response to the query in `key`. Raises UpstreamError/UpstreamBusy. A loop
        probe (`probe`) is sent even to a zone whose upstreams are all down."""
        ...


def _retrieve(task: asyncio.Future[Any]) -> None:
    """A query a client stopped waiting for: its outcome read, so no error goes unretrieved."""
    if not task.cancelled():
        task.exception()


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


class ForwardPath:
    """The forwarded answers: the cache in front of the upstreams, one query in flight per key, stale
    serving, prefetch, the per-client share, --hosts, --filter-aaaa and the loop probes."""

    def __init__(
        self,
        *,
        records: ClusterRecords,
        cluster_answers: ClusterAnswers,
        forward_cache: ForwardCache | None,
        forwarder: Forwarding | None,
        max_udp_size: int,
        stale_recheck: float,
        on_loop: Callable[[str, int], None] | None,
        client_share: int,
        aaaa_filter: AaaaFilter | None,
        hosts_ttl: int,
        namespace_share: int = 0,
        namespace_of: Callable[[str], str | None] = lambda _client: None,
        filter_soa: bytes | None = None,
        stale_mode: str = "verify",
    ) -> None:
        self.records = records
        self.filter_soa = filter_soa  # the NODATA's authority for a zone's `filter-aaaa: on` (without --filter-aaaa)
        self.stale_mode = stale_mode  # --serve-stale-mode: names whose zone the forwarder does not say
        self.stale_timer = STALE_CLIENT_TIMER
        self.cluster_answers = cluster_answers
        self.forward_cache = forward_cache
        self.forwarder = forwarder if forward_cache is not None else None
        self.recursion_available = self.forwarder is not None
        # the resolver's counters, one dict: the forward path's, the chases' and the resolver's own
        self.stats = {"forwarded": 0, "coalesced": 0, "prefetch": 0, "refused_busy": 0, "servfail": 0,
                      "stale": 0, "chased": 0, "refused_pending": 0, "refused_share": 0, "stale_nxdomain": 0,
                      "refused_namespace_share": 0,
                      "hosts": 0, "prefetch_deferred": 0, "stale_late": 0}
        self.max_udp_size = max_udp_size
        self.stale_recheck = max(stale_recheck, 1.0)
        self.on_loop = on_loop
        self.hosts: HostsTable | None = None  # --hosts: the table in use (set_hosts); None: no --hosts
        self.hosts_ttl = hosts_ttl
        self.aaaa = aaaa_filter  # --filter-aaaa (None: off)
        self.filter_stored_max = FILTER_STORED_MAX
        self.client_share = client_share  # new upstream queries one client may have in flight (0: no share)
        self._by_client: dict[str, int] = {}  # client -> new upstream queries in flight on its behalf
        self.namespace_share = namespace_share  # ... the Pods of one namespace together (0: no share)
        self.namespace_of = namespace_of  # client address -> its Pod's namespace (None: no Pod of this node)
        self._by_namespace: dict[str, int] = {}  # namespace -> new upstream queries in flight for its Pods
        self.prefetch_per_turn = PREFETCH_PER_TURN
        self._prefetch_turn = 0  # refreshes started in this loop turn
        self.prefetch_in_flight = PREFETCH_IN_FLIGHT
        self._refreshing = 0  # refreshes in flight (at most prefetch_in_flight)
        self._due: dict[bytes, None] = {}  # refreshes ahead waiting for a slot, in the order they came due
        self._due_soon = False  # `_next_due` is called at the next turn
        self.loop_probes: dict[str, int] = {}
        self._inflight: dict[bytes, asyncio.Future[bytes]] = {}
        self._tasks = Tasks()
        if forward_cache is not None:
            cluster_answers.on_not_ours = forward_cache.discard
            forward_cache.refresh = self.refresh_ahead

    def share_status(self) -> dict[str, int]:
        """The per-client and per-namespace shares of upstream queries: the settings, refusals so far, clients
        and namespaces holding some now (a client's or a namespace's shares in several zones: once)."""
        clients = {who.partition(" ")[0] for who in self._by_client}
        namespaces = {ns.partition(" ")[0] for ns in self._by_namespace}
        return {"max": self.client_share, "refused": self.stats["refused_share"], "clients": len(clients),
                "namespace_max": self.namespace_share, "namespace_refused": self.stats["refused_namespace_share"],
                "namespaces": len(namespaces)}

    def hosts_answer(self, q: Query) -> HostsAnswer | None:
        """The --hosts answer for this question (None: the files do not name it)."""
        return self.hosts.lookup(q.qname, q.qtype, self.hosts_ttl) if self.hosts is not None else None

    def filtered(self, q: Query, zone: Zone | None = None) -> bool:
        """--filter-aaaa (or the `filter-aaaa` of the name's `zone`) applies to this question now: AAAA,
        forwarded, outside the cluster and clusterset zones."""
        if q.qtype != QT.AAAA:
            return False
        f = self.aaaa
        on = zone.filter_aaaa if zone is not None and zone.filter_aaaa is not None else f is not None and f.active
        return on and not self.records.in_zone(q.qname) and not self.records.in_clusterset(q.qname)

    def zone(self, qname: str) -> Zone | None:
        """The settings of the zone that forwards qname (None: no forwarder, or the flags')."""
        return self.forwarder.zone_for(qname) if self.forwarder is not None else None

    def policy(self, qname: str) -> CachePolicy | None:
        zone = self.zone(qname)
        return zone.cache if zone is not None else None

    def _recheck(self, policy: CachePolicy | None) -> float:
        """How long a name whose upstreams failed is served stale (and last-known-good) before it is asked
        again: its zone's servfail-ttl (--cache-servfail-ttl), at least a second."""
        return self.stale_recheck if policy is None else max(float(policy.servfail_ttl), 1.0)

    def can_forward(self, qname: str) -> bool:
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

    def forward(self, q: Query, data: bytes, client: str | None) -> Outcome:
        """The answer to a name outside our zones (module docstring): bytes, None, or a coroutine."""
        if self.hosts is not None:
            local = self.hosts_answer(q)
            if local is not None:
                if client is not None:  # a client's query (the explainer's are not counted)
                    self.stats["hosts"] += 1
                wire = build_response(q, rcode=RCODE.NOERROR, aa=True, ra=self.recursion_available,
                                      answer=local.records, max_udp_size=self.max_udp_size)
                return patch(wire, data, 12 + len(q.question))
        cache = self.forward_cache
        if cache is None or not self.can_forward(q.qname):
            return self._reply(q, data, RCODE.REFUSED)
        qend = 12 + len(q.question)
        zone = self.zone(q.qname)
        if self.filtered(q, zone):
            soa = self.aaaa.soa if self.aaaa is not None else self.filter_soa
            assert soa is not None
            wire = filtered_template(q.key, soa, udp_size=self.max_udp_size)
            if self.cluster_answers.with_tag(FILTER_TAG) < self.filter_stored_max:
                wire = self.cluster_answers.put(q.key, wire, FILTER_TAGS)
            return patch(wire, data, qend)
        if is_probe_name(q.qname, q.qtype):
            return self._probe(q, data, qend)
        now = cache.now()
        entry = cache.get(q.key)
        policy = zone.cache if zone is not None else None
        if entry is not None:
            if cache.denied(entry, now, policy) and not cache.fresh(entry, now):
                return patch(self._last_known_good(q, entry, now), data, qend)
            if cache.fresh(entry, now):
                wire = cache.serve(q.key, entry, now)
                if cache.prefetch_due(entry, now) and q.key not in self._inflight and self._prefetch_slot():
                    self.stats["prefetch"] += 1
                    self._tasks.spawn(self._refresh(q, entry), "prefetch")
                return patch(wire, data, qend)
            if cache.stale_usable(entry, now, policy):
                if entry.fail_until > now or self._unreachable(q.qname):
                    # the upstreams just failed for this entry, or are known down: the stale answer now
                    # (RFC 8767), not after a timeout; asked again after --cache-servfail-ttl
                    self.stats["stale"] += 1
                    if entry.fail_until <= now:
                        cache.mark_failed(entry, now, self._recheck(policy))
                    return patch(cache.serve_stale_answer(q.key, entry, now), data, qend)
                if self.forwarder is not None and self.forwarder.looping(q.qname):
                    return self._reply(q, data, RCODE.SERVFAIL)
                if (policy.stale_mode if policy is not None else self.stale_mode) == "immediate":
                    # serve-stale immediate: the stale answer now, the name asked again in the background
                    self.stats["stale"] += 1
                    if q.key not in self._inflight:
                        self._tasks.spawn(self.shared(q, entry, background=True), "stale-refresh")
                    return patch(cache.serve_stale_answer(q.key, entry, now), data, qend)
                if client is not None and q.key not in self._inflight and \
                        self._over_share(self._share_key(client, q.qname)):
                    return self._reply(q, data, RCODE.REFUSED)
                return self._verify(q, data, qend, entry, client)
        if self.forwarder is not None and self.forwarder.looping(q.qname):
            return self._reply(q, data, RCODE.SERVFAIL)  # forwarded, it would only travel the loop
        if client is not None and q.key not in self._inflight and self._over_share(self._share_key(client, q.qname)):
            return self._reply(q, data, RCODE.REFUSED)  # at once: nothing waits, nothing is asked
        return self._miss(q, data, qend, entry, client)

    def _prefetch_slot(self) -> bool:
        """Whether one more refresh may start in this loop turn (at most `prefetch_per_turn` a turn and
        `prefetch_in_flight` at once): beyond either the entry is served as it is (hot for the rest of
        the second) and its next query starts the refresh, so a burst of entries coming due is spread
        over turns instead of holding one, and over time instead of queueing at the upstream."""
        if self._prefetch_turn >= self.prefetch_per_turn or self._refreshing >= self.prefetch_in_flight:
            self.stats["prefetch_deferred"] += 1
            return False
        if not self._prefetch_turn:
            asyncio.get_running_loop().call_soon(self._new_turn)
        self._prefetch_turn += 1
        self._refreshing += 1  # given back when the refresh ends (`_refresh`)
        return True

    def refresh_ahead(self, key: bytes) -> bool:
        """Refresh a cached entry asked in its life at its prefetch point, before any query comes
        (`ForwardCache.stage`): now, under the same caps as a prefetch, or as soon as a refresh in flight
        ends (`_next_due`, in the order they came due)."""
        if self.forward_cache is None or self.forwarder is None or key in self._inflight:
            return True
        if self.aaaa is not None and self.aaaa.active and key.endswith(AAAA_KEY_TAIL, -4, -2):
            return True  # filtered now: not asked again
        self._due[key] = None
        self._next_due()
        return True

    def _next_due(self) -> None:
        """Start the refreshes ahead that are due, while the caps allow (the rest wait for the next end of
        a refresh, or for the next turn when this one has started its share)."""
        self._due_soon = False
        cache, due = self.forward_cache, self._due
        assert cache is not None
        while due and self._refreshing < self.prefetch_in_flight:
            if self._prefetch_turn >= self.prefetch_per_turn:
                if not self._due_soon:
                    self._due_soon = True
                    asyncio.get_running_loop().call_soon(self._next_due)
                return
            key = next(iter(due))
            del due[key]
            entry = cache.get(key)
            if entry is None or key in self._inflight or entry.prefetch_at > cache.now() + 2:
                continue  # gone, being refreshed, or refreshed meanwhile (its next prefetch point far off)
            try:
                q = key_query(key)
            except FormatError:
                continue
            if not self._prefetch_slot():
                due[key] = None
                return
            self.stats["prefetch"] += 1
            self._tasks.spawn(self._refresh(q, entry), "prefetch")

    async def _refresh(self, q: Query, entry: Entry) -> None:
        """A prefetch: the entry asked again in the background; its slot (`_prefetch_slot`) given back."""
        try:
            await self.shared(q, entry, background=True)
        finally:
            self._refreshing -= 1
            if self._due:
                self._next_due()

    def _new_turn(self) -> None:
        self._prefetch_turn = 0

    def _share_key(self, client: str, qname: str) -> str:
        """Whose share a new upstream query counts against: the client's in its zone (a client holding its
        share of a stalled zone's queries still asks the other zones)."""
        zone = self.zone(qname)
        return client if zone is None or not zone.name else f"{client} {zone.name}"

    def _namespace_key(self, share_key: str) -> str | None:
        """The namespace share a client's share key (`_share_key`) also counts against: its Pod's namespace
        in the same zone; None when the client is no Pod of this node or namespaces are not shared."""
        if not self.namespace_share:
            return None
        address, _, zone = share_key.partition(" ")
        ns = self.namespace_of(address)
        if ns is None:
            return None
        return f"{ns} {zone}" if zone else ns

    def _over_share(self, client: str) -> bool:
        """`client`, or its namespace, already holds its share of the upstream queries in flight: its next
        new one is refused (counted), so one client, or the Pods of one namespace, cannot take every
        --max-concurrent slot while others wait."""
        if self.client_share and self._by_client.get(client, 0) >= self.client_share:
            self.stats["refused_share"] += 1
            return True
        if self.namespace_share:
            ns = self._namespace_key(client)
            if ns is not None and self._by_namespace.get(ns, 0) >= self.namespace_share:
                self.stats["refused_namespace_share"] += 1
                return True
        return False

    async def _miss(self, q: Query, data: bytes, qend: int, stale: Entry | None, client: str | None) -> bytes:
        return patch(await self.shared(q, stale, client=client), data, qend)

    async def _verify(self, q: Query, data: bytes, qend: int, stale: Entry, client: str | None) -> bytes:
        """serve-stale verify: the upstream asked first; when it has not answered within `stale_timer`
        (RFC 8767's client-response timer) the stale answer now, while the query goes on and refreshes
        the entry when it comes."""
        asked = asyncio.ensure_future(self.shared(q, stale, client=client))
        try:
            done, _ = await asyncio.wait((asked,), timeout=self.stale_timer)
        except BaseException:
            asked.cancel()
            raise
        if asked in done:
            return patch(asked.result(), data, qend)
        asked.add_done_callback(_retrieve)
        cache = self.forward_cache
        assert cache is not None
        now = cache.now()
        if not cache.stale_usable(stale, now, self.policy(q.qname)):
            return patch(await asked, data, qend)
        self.stats["stale"] += 1
        self.stats["stale_late"] += 1
        return patch(cache.serve_stale_answer(q.key, stale, now, hot=False), data, qend)

    async def shared(self, q: Query, stale: Entry | None, *, background: bool = False,
                     client: str | None = None) -> bytes:
        """The template for q.key: joins an identical query in flight, else asks the upstreams (a new
        upstream query counts against `client`'s share while it is in flight; a client over its share
        gets REFUSED, its query never asked)."""
        key = q.key
        pending = self._inflight.get(key)
        if pending is not None:
            self.stats["coalesced"] += 1
            return await asyncio.shield(pending)
        if client is not None:
            client = self._share_key(client, q.qname)
        if client is not None and self._over_share(client):
            return self._template(q, RCODE.REFUSED)
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        by_client, by_namespace = self._by_client, self._by_namespace
        ns = None
        if client is not None:
            by_client[client] = by_client.get(client, 0) + 1
            ns = self._namespace_key(client)
            if ns is not None:
                by_namespace[ns] = by_namespace.get(ns, 0) + 1
        try:
            wire = await self._fetch(q, stale, background=background)
        except BaseException:
            fut.cancel()
            raise
        finally:
            self._inflight.pop(key, None)
            if client is not None:
                _release(by_client, client)
            if ns is not None:
                _release(by_namespace, ns)
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
            policy = self.policy(q.qname)
            if stale is not None and (rcode == RCODE.NXDOMAIN or (rcode == RCODE.NOERROR and response[6:8] == b"\0\0")):
                now = cache.now()
                if cache.last_known_good(stale, now, policy):
                    if not stale.denied_since:
                        stale.denied_since = now
                        log.info("--stale-nxdomain: an upstream answered %s for %s %s, cached positive: serving "
                                 "that answer for up to %gs while asking again", "NXDOMAIN" if rcode else "NODATA",
                                 q.qname, QT.name(q.qtype),
                                 cache.stale_nxdomain if policy is None else policy.stale_nxdomain)
                    cache.mark_failed(stale, now, self._recheck(policy))  # asked again after its servfail-ttl
                    if cache.fresh(stale, now):
                        return cache.serve(q.key, stale, now)  # a prefetch: the entry keeps its TTL
                    if background:  # asked again for last-known-good: nobody waits, nothing is served
                        return cache.serve_stale_answer(q.key, stale, now, int(self._recheck(policy)), hot=False)
                    return self._last_known_good(q, stale, now, asked=True)
            return cache.admit(q.key, response, policy=policy, asked=not background)[0]
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
        recheck = self._recheck(self.policy(q.qname))
        if not asked and entry.fail_until <= now and q.key not in self._inflight:
            cache.mark_failed(entry, now, recheck)
            self._tasks.spawn(self.shared(q, entry, background=True), "last-known-good")
        return cache.serve_stale_answer(q.key, entry, now, ttl=int(recheck), hot=False)

    def last_known_good(self, key: bytes) -> float | None:
        """Seconds --stale-nxdomain still serves the cached positive answer for `key` over an upstream's
        NXDOMAIN/NODATA (None: not in that state). For the explainer."""
        cache = self.forward_cache
        entry = cache.get(key) if cache is not None else None
        if entry is None or cache is None:
            return None
        now = cache.now()
        asked = question_of(b"\0\0" + key)  # a key is a query from byte 2 on
        policy = self.policy(asked[0].rstrip(".")) if asked is not None else None
        if not cache.denied(entry, now, policy):
            return None
        return entry.denied_since + (cache.stale_nxdomain if policy is None else policy.stale_nxdomain) - now

    def _failed(self, q: Query, stale: Entry | None, exc: Exception, *, background: bool = False) -> bytes:
        """Every upstream failed: the stale entry (RFC 8767) or SERVFAIL, remembered briefly.

        A failed prefetch keeps the entry as it is (its TTL still runs) and caches no SERVFAIL.
        """
        cache = self.forward_cache
        assert cache is not None
        now = cache.now()
        policy = self.policy(q.qname)
        if background and stale is not None and cache.fresh(stale, now):
            cache.mark_failed(stale, now, self._recheck(policy))
            return cache.serve(q.key, stale, now)
        if stale is not None and cache.stale_usable(stale, now, policy):
            self.stats["stale"] += 1
            cache.mark_failed(stale, now, self._recheck(policy))
            return cache.serve_stale_answer(q.key, stale, now)
        log.debug("SERVFAIL for %s: %s", q.qname, exc)
        self.stats["servfail"] += 1
        wire = self._template(q, RCODE.SERVFAIL)
        if not background and not is_probe_name(q.qname, q.qtype):
            cache.admit_servfail(q.key, wire, policy)
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
        """Forward without cache or in-flight sharing (loop probes: sent even while the zone is down, since a
        loop is what makes its upstreams look down)."""
        assert self.forwarder is not None
        try:
            response = await self.forwarder.query(q.qname, q.key, probe=True)
            wire = self._plain(q.key, response)
        except (UpstreamError, FormatError):
            wire = self._template(q, RCODE.SERVFAIL)
        return patch(wire, data, qend)

    def _plain(self, key: bytes, response: bytes) -> bytes:
        return make_template(key, response, udp_size=self.max_udp_size).wire

    def _reply(self, q: Query, data: bytes, rcode: int) -> bytes:
        return patch(self._template(q, rcode), data, 12 + len(q.question))


def _release(counts: dict[str, int], key: str) -> None:
    """One upstream query of `key` (a client's or a namespace's share) done: its count down, gone at 0."""
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]
