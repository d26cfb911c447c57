"""The agent's lifecycle: builds every part from the Config, starts them in order and stops them in reverse.

One concept (the start and stop order, readiness, the hand-over that runs through both), hence one
module over 800 lines; what differs by mode is in its parts (nodedns.app.parts), chosen in
nodedns.workers.modes.

Start: registered in the hand-over roster (nodedns.node.handover; when the agent manages the node or is
given --lock-dir) -> alone in the roster, another process serving one of our addresses is a
duplicate, not a predecessor: refused (exit 2, naming its pid) before anything is touched -> node
prepared (a crashed predecessor's capture rules removed, unless another agent lives: then its
interface and rules are adopted; interface and local IPs ensured) ->
listeners bound (answering SERVFAIL for would-be NXDOMAINs until synced, or forwarding them to
--fallback-upstream; beside a serving predecessor, only once the index has synced) -> forwarder
checked against our own addresses, forward-cache clock and upstream config reloads started ->
cluster source loaded (--manifests) or API watchers started (--kubeconfig, else in-cluster) ->
running -> loop probes sent through our own listener (again after each upstream config reload);
`wait_synced()` tells when the index is complete. The node reconcile loop installs the
conntrack-bypass rules once the listeners serve, the index has synced and a query to the local IPs
is answered, and re-asserts link and rules every --sync-interval (at once when `nodedns guard` took
the local IPs away). Once ready in every other way, the agent says so in the roster (only then does
/readyz say ready, so a successor started on that signal sees it serving) and watches for a newer agent:
once that one serves (is ready), it is unready ("superseded") and closes its HTTP listeners.

Stop: the first SIGTERM/SIGINT makes readiness false and starts the lameduck (--lameduck, listeners
keep answering); a newer agent that does not serve yet is waited for (20 s at most); then the rules
are removed and the interface torn down (only when no other agent lives), the listeners retired
(UDP sockets leave SO_REUSEPORT, their queues and what is in flight are answered, then they close),
the watchers, prefetches, health checks and reloads stopped, exit 0. A detected forwarding loop
does not stop the agent: the looping route answers SERVFAIL (reported in the log, /readyz, /status
and the metrics) until a reload changes it or a recheck finds it fixed. A second signal cuts the
lameduck (and any xtables-lock retries and the drain) short: the process exits at once, after the
few milliseconds the rule and link removal take, so no capture rule outlives us. SIGHUP stops
nothing: the upstream files (--upstream-resolv-conf, --kube-dns-config-dir) are re-read at once, as
their timer does, with one log line; the rest of the configuration takes a restart.

Every process that answers DNS (this one, or each --workers worker) gives back the heap a burst
left free (nodedns.runtime.heap: malloc_trim when the heap has shrunk, at most every 5 s, off the loop).

Insight (`--insight on`, the default; nodedns.observe.insight, docs/insight.md): the DNS listeners count
every answer by client address (`nodedns.serve.tally.Tally`); once a second, and whenever this node's Pods
change the address -> Pod map, the counts go to the `Insight` (which owns the map and the figures
per Pod), shown by GET /debug/top, the status page and the "insight" section of /status and
/metrics. A --workers supervisor keeps the Insight, its workers the tallies (nodedns.workers.modes).

For the status listener (/healthz, /readyz): `Agent.live()` and `Agent.ready()` each return
`(ok, reasons)`, reasons being short human sentences for the 503 body; `Agent.node_state()` is the
interface/firewall state for /status (setup errors by cause, rules installed, added-back count).
The HTTP listeners (status: probes and metrics; debug: /status, the explainer, /v1/resolv-conf)
start right after the DNS listeners (so /healthz and /readyz answer during the sync) and close
last. Parts report through `add_provider(section, part)` (the API watch as "sync", the node side
as "node", the forward cache as "cache", the forwarder as "upstream", the roster as "handover",
the allow list, rate limit and caps as "limits", the HTTP listeners as "http"; contract in
metrics.py and docs/status.md).

Nothing subclasses the Agent: a mode gives it other parts (nodedns.workers.modes). `listeners`
(`Listeners`: bind, serve, retire; the supervisor's are its worker processes, a shadow's a packet
capture), `source` (`IndexSource`: the API or --manifests, or a worker's supervisor), `warm`
(`WarmState`: the forward caches across a hand-over), `followers` (`Followers`: told when what this
index owner derives changes), the `Answering` parts built before it (the cache's share, autopath,
the allow list, where cluster misses go, the tally, insight), a `Mode` (signals, its name in the
"event_loop" section, ...), and `on_hangup`, `status_server_of`, `openers`/`closers` (a part's own
start before the agent's, its stop after).
pyroute2 (netif) and aiohttp (status) are imported where used, so workers never load them.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import gc
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from nodedns import __version__
from nodedns.app.build import handover_for, metric_slots, node_network, route_sources, sample_rate, zone_settings
from nodedns.app.loops import LoopProbes
from nodedns.app.parts import (
    ONE_PROCESS,
    Answering,
    Followers,
    IndexOwner,
    IndexSource,
    Listeners,
    LocalWarm,
    Mode,
    OwnSockets,
    WarmState,
    own_answering,
)
from nodedns.app.reports import CacheReport, FilterReport, HostsReport, KubeDnsReport, Limits, cluster_dns_ips
from nodedns.cluster import objects as k8s
from nodedns.cluster.changes import Change, Changes
from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords
from nodedns.config import DEFAULT_UPSTREAM_RESOLV_CONF, Config, Endpoint, HostPort, endpoint_text
from nodedns.dns.identity import node_identity
from nodedns.errors import (
    ConfigError,
    DuplicateAgent,
    HandoverError,
    ListenError,
    NetifError,
    NodednsError,
    listen_reason,
)
from nodedns.forward.fallback import Fallback
from nodedns.forward.routes import ConfigWatcher, describe_routes
from nodedns.forward.store import ForwardCache
from nodedns.forward.upstream import Forwarder
from nodedns.forward.zones import ZoneTable
from nodedns.metrics.counters import Sampler
from nodedns.metrics.slots import PLUGIN_CACHE
from nodedns.node import handover
from nodedns.observe.explain import Explainer
from nodedns.observe.history import History
from nodedns.observe.looplag import LoopLag
from nodedns.observe.observe import Observer, Provider
from nodedns.podconf import resolvconf
from nodedns.podconf.hostfile import HostFile
from nodedns.podconf.searchpath import renderer_search_list
from nodedns.policy.book import PolicyBook
from nodedns.runtime import logutil
from nodedns.runtime.dnstap import Dnstap
from nodedns.runtime.heap import HeapTrimmer, trim_heap
from nodedns.runtime.tasks import Tasks
from nodedns.serve.answers import ClusterReplies
from nodedns.serve.cache import ClusterAnswers, cluster_share, filter_soa
from nodedns.serve.chase import Chaser
from nodedns.serve.forwarding import AaaaFilter, ForwardPath, client_share, namespace_share
from nodedns.serve.hosts import HostsTable
from nodedns.serve.hostswatch import HostsFiles
from nodedns.serve.resolver import Resolver
from nodedns.serve.server import DNSServer
from nodedns.serve.tally import Row

if TYPE_CHECKING:  # imported where used: --workers processes never load aiohttp, nor the watch (urllib3)
    from nodedns.observe.httpgate import HttpLimits
    from nodedns.observe.status import StatusServer
    from nodedns.policy.feeds import FeedWatches
    from nodedns.policy.status import StatusWriter

log = logging.getLogger("nodedns.app")  # the name every log line of the agent has had
_history_errors = logutil.Consolidated(log, "history sample error")

# the last readiness reason of an agent in a hand-over roster: ready in every other way, its entry not yet
# saying so (a newcomer joining then must see it serving)
NOT_ANNOUNCED = "hand-over: not yet marked serving in the roster"

INSIGHT_PERIOD = 1.0  # seconds between two hand-overs of the tally to the Insight
GC_FREEZE_AFTER = 10.0  # seconds after the sync: then the collector's long-lived objects are frozen (gc.freeze)
INSIGHT_SLICE = 64  # rows (tally entries) handled per loop turn in that hand-over: about a millisecond
STAGE_LEAD = 0.3  # seconds before each second when its forwarded answers start being rendered ahead
TAKE_BACK_TRIES = 10  # a superseded agent whose successor died: attempts to listen on the status port again
# index changes the DNS policy book is built from ("": everything may have changed)
POLICY_INPUTS = frozenset((k8s.POD, k8s.NAMESPACE, *k8s.POLICY_KINDS, ""))
HOLDER_POLL = 0.5  # seconds between two looks at a port another process holds (Agent.HOLDER_WAIT)


def with_denials(doc: Mapping[str, Any], policy: Mapping[str, Any] | None, namespace: str | None) -> dict[str, Any]:
    """The insight document with the DNS policies' denials (the `policy` section of /status: by Pod, policy and
    rule, bounded by the policies' names and rules, never the names asked): each Pod's own under its entry
    (`denied`, `denied_total`), every row of the node (of `namespace`) as `policy_denied`."""
    rows = [dict(r) for r in (policy or {}).get("denied") or () if isinstance(r, Mapping)
            and (namespace is None or str(r.get("pod", "")).split("/", 1)[0] == namespace)]
    by_pod: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_pod.setdefault(str(r.get("pod")), []).append({"policy": r.get("policy"), "rule": r.get("rule"),
                                                          "count": r.get("count", 0)})
    pods = [{**p, "denied": by_pod.get(str(p.get("pod")), []),
             "denied_total": sum(int(d["count"] or 0) for d in by_pod.get(str(p.get("pod")), [])
                                 if not str(d["rule"]).endswith("(audit)"))}
            for p in doc.get("pods", [])]
    return {**doc, "pods": pods, "policy_denied": rows}


class Agent:
    """One nodedns agent: index, records, resolver, listeners, and their lifecycle."""

    UNREADY_AFTER = 5.0  # seconds of not being ready before the log says why
    HOLDER_WAIT = 60.0  # seconds a node-managing agent waits for another holder of its address (node-cache's
    # terminating Pod; its terminationGracePeriodSeconds is 30 s) before refusing to start
    # seconds after the sync to freeze the collector's objects again (None: never). Set by run_agent, for the
    # process it runs (an agent run inside another program, a test, leaves that program's collector alone)
    freeze_gc_after: float | None = None

    def __init__(self, config: Config, *, clock: Callable[[], float] = time.monotonic, index: Index | None = None,
                 mode: Mode = ONE_PROCESS, answering: Answering | None = None) -> None:
        self.config = config
        self.mode = mode
        self.index = index if index is not None else Index()
        parts = answering if answering is not None else own_answering(config, self.index)
        self.followers: Followers | None = None  # who holds what this index owner derives (the workers)
        self.exit_code = 0  # a part's reason to end with another code than 0 (a worker's fatal error)
        self._cache_bytes = parts.cache_bytes
        self.records = ClusterRecords(self.index, zone_settings(config))
        self.slots = metric_slots(config)
        # this process's share of --cache-max-bytes: a part for the cluster answers, the rest for forwarded ones
        self.cluster_answers = ClusterAnswers(max_bytes=cluster_share(self._cache_bytes), stamp=self.slots.stamp)
        self.fallback = (
            Fallback(config.fallback_upstream, timeout=config.upstream_timeout)
            if config.fallback_upstream is not None else None
        )
        self._zone_table = ZoneTable({})  # the zones' settings in use (a reload compares against it)
        # --dnstap: the frames of client and upstream queries, sent to the collector by a task of its own
        self.dnstap = Dnstap(config.dnstap, identity=config.node_name or socket.gethostname(),
                             version=f"nodedns {__version__}") if config.dnstap is not None else None
        self.forwarder, self.forward_cache, self.config_watcher = self._build_forwarding(clock)
        self.autopath = parts.autopath
        self.limits = Limits(config, self.index, allow=parts.allow)
        aaaa = None
        zone_soa = filter_soa(config.cluster_domain)  # a zone's `filter-aaaa: on`: the NODATA's authority
        if config.filter_aaaa != "off" or any(z.filter_aaaa for z in config.zones):
            self.slots.filtered = zone_soa  # how the counters tell our NODATA
        if config.filter_aaaa != "off":
            aaaa = AaaaFilter(config.filter_aaaa, zone_soa)
        # DNS policies (nodedns.io): the index owner builds the book from its index; a worker is pushed it
        self.policy = PolicyBook(node_name=config.node_name,
                                 zones=(config.cluster_domain.strip("."), config.multicluster_zone.strip(".")))
        self.policy.owner = parts.remote is None  # a worker's book is what the owner pushes (workers.messages)
        self.policy.on_clients.append(self.limits.allow.set_policed)
        self._policy_due = False
        # the index owner synced from the API: the RPZ feeds' ConfigMaps watched, the policies' status written
        self.feeds: FeedWatches | None = None
        self.policy_status: StatusWriter | None = None
        # the resolver's parts, built here and given to it: the forward path, the chases and walks, the cluster replies
        forwarding = ForwardPath(
            records=self.records, cluster_answers=self.cluster_answers, forward_cache=self.forward_cache,
            forwarder=self.forwarder, max_udp_size=config.max_udp_size, stale_recheck=config.cache_servfail_ttl,
            on_loop=lambda qname, seen: self.loop_probes.detected(qname, seen),
            client_share=client_share(config.max_concurrent),
            # ... and each namespace's: its Pods on this node together (whose Pod a client is: Limits.namespaces)
            namespace_share=namespace_share(config.max_concurrent), namespace_of=self.limits.namespaces,
            aaaa_filter=aaaa, hosts_ttl=int(config.ttl), filter_soa=zone_soa, stale_mode=config.serve_stale_mode)
        chaser = Chaser(records=self.records, cluster_answers=self.cluster_answers, forwarding=forwarding,
                        autopath=self.autopath, max_udp_size=config.max_udp_size)
        answers = ClusterReplies(
            records=self.records, index=self.index, cluster_answers=self.cluster_answers, autopath=self.autopath,
            before_sync=self.fallback is not None, recursion_available=forwarding.recursion_available,
            max_udp_size=config.max_udp_size, can_forward=forwarding.can_forward, chaser=chaser)
        self.resolver = Resolver(
            policy=self.policy,
            records=self.records,
            index=self.index,
            cluster_answers=self.cluster_answers,
            answers=answers,
            forwarding=forwarding,
            chaser=chaser,
            max_udp_size=config.max_udp_size,
            before_sync=self.fallback,
            autopath=self.autopath,
            allow=self.limits.allow,
            max_pending=config.max_pending,
            remote=parts.remote,
            identity=node_identity(config.node_name, socket.gethostname(), config.version_reply),
        )
        self._tasks = Tasks()
        self._ticker: asyncio.TimerHandle | None = None
        self._stager: asyncio.Handle | None = None  # the next slice of the next second's answers (`_stage`)
        self.tally = parts.tally  # what the listeners count by client address
        self.insight = parts.insight  # the figures per Pod (the owner of the index)
        self._insight_due = False
        self.server = DNSServer(
            resolver=self.resolver,
            cluster_answers=self.cluster_answers,
            addresses=config.listen_addresses,
            max_udp_size=config.max_udp_size,
            tcp_idle_timeout=config.tcp_idle_timeout,
            tcp_max_connections=config.tcp_max_connections,
            tcp_max_per_client=config.tcp_max_connections_per_client,
            # the local IPs may be missing for a moment (interface being re-created): bind anyway
            freebind=config.setup_interface is not None,
            slots=self.slots,
            query_log=Sampler(sample_rate(config)) if sample_rate(config) > 0 else None,
            log_rate=config.query_log,
            tap=self.dnstap,
            tap_rate=config.dnstap_sample,
            rate_limiter=self.limits.rate,
            tally=self.tally,
            miss_budget=self.limits.misses,
        )
        self.loop_probes = LoopProbes(forwarder=self.forwarder, resolver=self.resolver,
                                      bound=lambda: self.server.bound, upstream_timeout=config.upstream_timeout)
        self.node = node_network(config)
        self.state = "new"
        self._stop: asyncio.Event | None = None
        self._force: asyncio.Event | None = None
        self.observer = Observer(self)  # reads node_state() as its "node" section
        # the parts a mode replaces (nodedns.workers.modes); these are one process's
        self.listeners: Listeners = OwnSockets(self.server, config=config)
        self.source: IndexSource = IndexOwner(config=config, index=self.index, add_provider=self.add_provider)
        self.warm: WarmState = LocalWarm(forward_cache=self.forward_cache, forwarder=self.forwarder)
        self.on_hangup: Callable[[], None] = self._on_hangup  # SIGHUP
        self.status_server_of: Callable[[], StatusServer] = self._status_server  # the HTTP routes served
        self.openers: list[Callable[[], Awaitable[None]]] = []  # a part's own start, before the agent's
        self.closers: list[Callable[[], Awaitable[None]]] = []  # a part's own stop, after the agent's
        self.explainer = Explainer(
            resolver=self.resolver, index=self.index, slots=self.slots, zone=config.cluster_domain,
            timeout=2 * config.upstream_timeout + 1, autopath=self.autopath, node_name=config.node_name,
            multicluster_zone=config.multicluster_zone,
        )
        self.explainer.about = self.about
        self.status_server: StatusServer | None = None
        self._node_prepared = False
        self.http_limits: HttpLimits | None = None  # None: the defaults (tests change them)
        self._sampling = False  # the history task runs
        self.history = History()  # the status page's charts, /debug/history (sampled with a debug listener)
        self._housekeeping: asyncio.Task[None] | None = None
        self.handover = handover_for(config)
        self._warm: asyncio.Future[None] | None = None  # loading what the running agent left (hand-over)
        if self.forwarder is not None:
            assert self.forward_cache is not None  # built with the forwarder
            self.add_provider("upstream", self.forwarder)
            self.add_provider("cache", CacheReport(cache=self.forward_cache, slots=self.slots,
                                                   cluster_answers=self.cluster_answers, server=self.server,
                                                   resolver=self.resolver))
            if self.resolver.aaaa is not None:
                self.add_provider("filter_aaaa", FilterReport(resolver=self.resolver, slots=self.slots,
                                                              server=self.server))
        if self.config_watcher is not None:
            self.add_provider("upstream_config", self.config_watcher)
        self.add_provider("policy", self.policy)
        if self.dnstap is not None:
            self.add_provider("dnstap", self.dnstap)
            if self.forwarder is not None:
                self.forwarder.tap = self.dnstap
        if self.autopath is not None:
            self.add_provider("autopath", self.autopath)
            if not config.node_name:
                log.warning("--autopath without a node name (NODE_NAME or --node-name): no Pod is known to run "
                            "on this node, so every client gets plain answers")
        self.kubelet: resolvconf.KubeletDNS | None = None  # the kubelet settings pods here get (after bind)
        self.host_resolv_conf: str | None = None
        self.hosts_files = HostsFiles(config.hosts, excluded=self._cluster_named, on_change=self._hosts_changed,
                                      period=config.kube_dns_config_period) if config.hosts and mode.reads_hosts \
            else None
        if self.hosts_files is not None:
            self.add_provider("hosts", HostsReport(files=self.hosts_files, resolver=self.resolver))
        self.host_file = HostFile(config.host_resolv_conf, on_change=self._use_host_text,
                                  period=config.kube_dns_config_period) if config.host_resolv_conf else None
        if self.host_file is not None and mode.watches_host_file:
            self.add_provider("host_resolv_conf", self.host_file)
        self.limits.server = self.server
        self.add_provider("limits", self.limits)
        # how late the loop runs: every serving process (docs/status.md); start-up counted apart until it serves
        self.looplag = LoopLag(process=mode.process, starting=True)
        self.add_provider("event_loop", self.looplag)
        if self.insight is not None:
            self.add_provider("insight", self.insight)
            self.explainer.insight = self.insight.pod
        self.changes = Changes(self.index)
        self._wire_changes()

    def _wire_changes(self) -> None:
        """The watch path's listeners, all registered here: each index change (its tags named once, by
        `changes.Change`) reaches them in this order. Nothing else registers on the index."""
        add = self.changes.add
        add(self.resolver.answers.index_changed)  # the stored answers built from what changed go
        if self.limits.refreshes_allow:
            allow = self.limits.allow
            add(lambda _: allow.refresh())  # this node's Node record: its pod CIDRs and addresses
        node = self.node
        if node is not None:
            add(lambda _: node.poke())  # the first sync may allow the rules in
        if self.insight is not None:
            add(self._pods_changed)  # the address -> Pod map insight attributes answers by
        add(self._policies_changed)  # which DNS policies apply to which client of this node
        # what a mode adds (a supervisor: its workers; a shadow: its race) follows, added where it is wired
        # (nodedns.workers.modes)

    # -- insight ---------------------------------------------------------------------------

    def _pods_changed(self, change: Change) -> None:
        """A Pod or this node's Node changed: the address -> Pod map is formed again (once per loop turn)."""
        if change.kind not in (k8s.POD, k8s.NODE, "") or self._insight_due:
            return
        self._insight_due = True
        try:
            asyncio.get_running_loop().call_soon(self._reattribute)
        except RuntimeError:  # no loop yet (built, not started): start() forms it
            self._insight_due = False

    def _policies_changed(self, change: Change) -> None:
        """A Pod, a Namespace or a DNS policy changed: the policy book is built again (once per loop turn)."""
        if change.kind not in POLICY_INPUTS or self._policy_due:
            return
        self._policy_due = True
        try:
            asyncio.get_running_loop().call_soon(self._rebuild_policies)
        except RuntimeError:  # no loop yet (built, not started): built now
            self._rebuild_policies()

    def _rebuild_policies(self) -> None:
        self._policy_due = False
        if self.policy.owner:
            self.policy.rebuild(self.index)
            if self.feeds is not None:
                self.feeds.sync()  # the ConfigMaps the policies name now
            if self.policy_status is not None:
                self.policy_status.reconcile()

    def _start_policy_feeds(self) -> None:
        """Synced from the API as the index owner: watch the ConfigMaps of RPZ feeds, write the policies' status."""
        kube = self.source.kube if isinstance(self.source, IndexOwner) else None
        if self.config.manifests is not None and self.policy.owner:
            self.policy.no_feeds = "RPZ feeds are read from the API server only (this agent reads --manifests)"
            self._rebuild_policies()
        if kube is None or kube.http is None or not self.policy.owner:
            return
        from nodedns.policy.feeds import FeedWatches  # the index owner's alone (a worker never watches)
        from nodedns.policy.status import StatusWriter

        http = kube.http
        self.feeds = FeedWatches(self.policy, kube, lambda: self._policies_changed(Change("", None, None)))
        self.policy_status = StatusWriter(self.policy, self.index, http.patch)
        self._tasks.spawn(self._policy_upkeep(), "policy-upkeep")
        self._rebuild_policies()

    async def _policy_upkeep(self) -> None:
        """Every few seconds: a feed's ConfigMap the API server refuses, a status write due again."""
        while True:
            await asyncio.sleep(2.0)
            if self.feeds is not None:
                self.feeds.refused()
            if self.policy_status is not None:
                self.policy_status.reconcile()

    def _reattribute(self) -> None:
        self._insight_due = False
        if self.insight is not None and self.insight.refresh():
            self._attribute()

    def _attribute(self) -> None:
        """The address -> Pod map changed: what was counted so far goes under the old one, then the new
        one is used (the --workers supervisor pushes it to its workers instead)."""
        if self.tally is not None and self.insight is not None:
            self.insight.take(self.tally.retag(self.insight.gens, self.slots.labels))

    def insight_rows(self) -> list[Row]:
        """What the listeners counted since the last call (the tally, under the current map)."""
        return self.tally.flush(self.slots.labels) if self.tally is not None else []

    async def insight_rows_sliced(self) -> list[Row]:
        """`insight_rows` cut into slices of about a millisecond (INSIGHT_SLICE counted entries), the event
        loop running between them: a second of a busy node's counts is a thousand rows and more."""
        if self.tally is None:
            return []
        steps = self.tally.flusher(self.slots.labels, INSIGHT_SLICE)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return list(done.value)
            await asyncio.sleep(0)

    async def take_sliced(self, rows: list[Row]) -> None:
        """Hand rows to the Insight INSIGHT_SLICE at a time, the event loop running between the slices."""
        assert self.insight is not None
        for start in range(0, len(rows), INSIGHT_SLICE):
            if start:
                await asyncio.sleep(0)
            self.insight.take(rows[start:start + INSIGHT_SLICE])

    async def _count_insight(self) -> None:
        """Hand the tally to the Insight once a second, in slices (the loop answers between them)."""
        assert self.insight is not None
        while True:
            await asyncio.sleep(INSIGHT_PERIOD)
            await self.take_sliced(await self.insight_rows_sliced())

    def insight_document(self, sort: str, namespace: str | None, limit: int) -> Mapping[str, Any]:
        """GET /debug/top: the figures as of now (what the listeners counted so far included), and which
        agent this is."""
        if self.insight is None:
            from nodedns.observe.insight import OFF

            return {**OFF, "agent": self.about()}
        self.insight.take(self.insight_rows())
        doc = self.insight.document(sort=sort, namespace=namespace, limit=limit)
        return {**with_denials(doc, self.observer.section("policy"), namespace), "agent": self.about()}

    def _build_forwarding(
        self, clock: Callable[[], float]
    ) -> tuple[Forwarder | None, ForwardCache | None, ConfigWatcher | None]:
        """Forwarder, forward cache and config watcher, when any upstream source is configured."""
        config = self.config
        sources = route_sources(config)
        if not sources.any():
            return None, None, None
        missing = sources.missing_dir()
        if missing is not None and self.mode.log_ready:  # once for the agent, not once more per worker
            log.warning("%s", missing)
        try:
            snapshot = sources.snapshot()
            routes = sources.build(snapshot)
        except ConfigError as exc:
            if config.upstream or config.upstream_resolv_conf != DEFAULT_UPSTREAM_RESOLV_CONF:
                raise
            raise ConfigError("upstream", "the default upstreams are the nameservers of "
                              f"{DEFAULT_UPSTREAM_RESOLV_CONF}, which cannot be used ({exc}); give --upstream ADDR, "
                              "or --upstream none to refuse names outside the cluster") from None
        self._set_federations(sources.federations(snapshot))
        self._zone_table = ZoneTable(routes.zones)
        log.info("upstreams: %s", describe_routes(routes))
        forwarder = Forwarder(
            routes=routes,
            policy=config.upstream_policy,
            timeout=config.upstream_timeout,
            max_concurrent=config.max_concurrent,
            health_check=config.health_check,
            udp_size=config.max_udp_size,
            tls_servername=config.upstream_tls_servername,
            tls_ca=config.upstream_tls_ca,
            clock=clock,
        )
        cache = ForwardCache(
            hot=self.cluster_answers.hot,
            success_size=config.cache_success,
            success_ttl=config.cache_success_ttl,
            denial_size=config.cache_denial,
            denial_ttl=config.cache_denial_ttl,
            servfail_ttl=config.cache_servfail_ttl,
            serve_stale=config.serve_stale,
            min_ttl=config.cache_min_ttl,
            stale_nxdomain=config.stale_nxdomain,
            prefetch=config.prefetch,
            udp_size=config.max_udp_size,
            max_bytes=self._cache_bytes - self.cluster_answers.max_bytes,
            clock=clock,
            stamp=functools.partial(self.slots.stamp, plugin=PLUGIN_CACHE),
        )
        watcher = None
        if config.kube_dns_config_dir or config.upstream_resolv_conf or sources.config_file:
            watcher = ConfigWatcher(sources, forwarder, period=config.kube_dns_config_period, snapshot=snapshot,
                                    on_reload=self._reprobe, on_federations=self._set_federations,
                                    on_zones=self._zones_changed)
        return forwarder, cache, watcher

    def _zones_changed(self, table: ZoneTable, changed: set[str]) -> None:
        """A reload changed these zones' settings: their cached answers go, every other zone keeps its own."""
        old = self._zone_table
        self._zone_table = table
        dropped = self.resolver.zones_changed(
            lambda qname: old.zone_for(qname).name in changed or table.zone_for(qname).name in changed)
        log.info("zones reloaded: %s changed (%d cached answers of theirs dropped; the other zones keep theirs)",
                 ", ".join(sorted(z or "." for z in changed)), dropped)

    # --filter-aaaa auto: decided by the index owner (a worker is told: nodedns.workers.worker)
    AAAA_CHECK_PERIOD = 5.0  # seconds between two looks at the node's addresses and the Services

    def node_ipv6(self) -> list[str]:
        """The node's global IPv6 addresses, our own --local-ip excepted (tests replace it)."""
        from nodedns.node.netif import global_ipv6  # noqa: PLC0415 - pyroute2 only where the node is read

        own = set(self.config.local_ip)
        return [ip for ip in global_ipv6() if ip not in own]

    def aaaa_decision(self, node_v6: list[str]) -> tuple[bool, str]:
        """--filter-aaaa auto: (filter, why) from the node's global IPv6 addresses and the Services' ClusterIPs."""
        if node_v6:
            return False, f"the node has a global IPv6 address ({node_v6[0]})"
        for svc in self.index.services.values():
            for ip in svc.cluster_ips:
                if ":" in ip:
                    return False, f"Service {svc.namespace}/{svc.name} has the IPv6 ClusterIP {ip}"
        if not self.index.synced:
            return False, "the index has not synced yet: the Services are not known"
        return True, "the node has no global IPv6 address and no Service an IPv6 ClusterIP"

    async def _watch_aaaa(self) -> None:
        """--filter-aaaa auto: look again every AAAA_CHECK_PERIOD (the addresses are read in a thread)."""
        while True:
            try:
                node_v6 = await asyncio.to_thread(self.node_ipv6)
            except OSError as exc:
                node_v6 = []
                log.debug("--filter-aaaa auto: cannot read the node's addresses: %s", exc)
            active, reason = self.aaaa_decision(node_v6)
            if self.resolver.set_aaaa_filter(active, reason):
                if self.followers is not None:
                    self.followers.aaaa_changed()  # the supervisor tells its workers
            elif self.resolver.aaaa is not None:
                self.resolver.aaaa.reason = reason
            await asyncio.sleep(self.AAAA_CHECK_PERIOD)

    def _set_federations(self, federations: tuple[tuple[str, str], ...]) -> None:
        """The kube-dns federations (flags + ConfigMap) changed: answers built with the old map go."""
        if self.records.set_federations(federations):
            self.cluster_answers.clear()
            log.info("federations: %s", ", ".join(f"{n}={d}" for n, d in federations) or "none")
            if self.followers is not None:
                self.followers.federations_changed()

    def _hosts_changed(self, table: HostsTable) -> None:
        """--hosts read (again): this process answers from the new table, and so do the followers (the
        workers map the supervisor's)."""
        self.resolver.set_hosts(table)
        if self.followers is not None:
            self.followers.hosts_changed()

    def _cluster_named(self, name: str) -> bool:
        """--hosts: a name the cluster answers (the cluster or clusterset zone): a hosts line cannot take it."""
        return self.records.in_zone(name) or self.records.in_clusterset(name)

    def add_provider(self, section: str, provider: Provider) -> None:
        """Show a part in /status and /metrics (contract: nodedns.metrics.registry docstring, docs/status.md)."""
        self.observer.add_provider(section, provider)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self.state = "starting"
        self.looplag.start()
        self._stop = asyncio.Event()
        self._force = asyncio.Event()
        if self.config.ready_file is not None:
            handover.ReadyFile(self.config.ready_file).set(False)  # a crashed predecessor's, in this pod
        if self.config.setup_interface is None:
            log.info("no --setup-interface: this agent changes no interface and no host sysctl%s",
                     "" if self.config.firewall == "none" else f" (its {self.config.firewall} rules only)")
        others = await self._join_handover()
        if self.handover is not None and any(p.serving for p in others):
            self._warm = asyncio.ensure_future(self._take_warm_state(self.handover, others))
        if not others and self.mode.refuse_duplicates:
            await self._refuse_duplicates()  # before the node is touched: its rules may be the other's
        if self.node is not None:
            self._node_prepared = True
            try:
                await self.node.prepare(clean=not others)  # a live predecessor's rules are not leftovers
            except NetifError:
                self._node_prepared = False  # refused (no NET_ADMIN): nothing was made, nothing to tear down
                raise
        if self.forwarder is not None:  # an upstream that is one of our listen addresses: fail before binding
            self.forwarder.set_own_addresses(self.config.listen_addresses)
        if self.dnstap is not None:
            self.dnstap.start()
        if self.hosts_files is not None:  # read before the first answer; a missing file is a warning
            if not await self._unless_stopped(self.hosts_files.poll_once()):
                return  # a stop came while a large file was parsed: it is honoured now, not after the parse
            self._tasks.spawn(self.hosts_files.run(), "hosts")
        defer = self.listeners.binds_after_sync(others)
        if not defer:
            await self.bind()
        await self._learn_pod_dns()  # the kubelet's settings: our listen addresses, bound or not yet
        self._start_forwarding()
        await self._start_status()
        if self.host_file is not None and self.mode.watches_host_file:
            self._tasks.spawn(self.host_file.run(), "host-resolv-conf")
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep(), name="housekeeping")
        if isinstance(self.source, IndexOwner) and self.config.manifests is None and cluster_dns_ips(
                self.config.local_ip):  # the index from the API: is a local IP the kube-dns ClusterIP there?
            self.add_provider("kube_dns", KubeDnsReport(index=self.index, local_ips=self.config.local_ip))
        await self.source.load()
        self._start_policy_feeds()
        if self.insight is not None:
            self._reattribute()  # the Pods loaded so far (an API sync goes on: each change forms the map again)
            if self.tally is not None:
                self._tasks.spawn(self._count_insight(), "insight")
        if defer:
            log.info("hand-over: binding once the index has synced (the running agent answers meanwhile)")
            if not await self._synced_unless_stopped():
                return
            if self._warm is not None:
                await self._warm  # bounded by handover.WARM_WAIT
            await self.bind()
        self.state = "running"
        self.looplag.mark_ready()  # the index loaded, the listeners bound: from here the turns are serving's
        if self.mode.trim_heap:
            self._tasks.spawn(trim_heap(HeapTrimmer()), "heap-trim")
        if self.freeze_gc_after is not None:
            self._tasks.spawn(self._freeze_gc(self.freeze_gc_after), "gc-freeze")
        if self.node is not None:
            self.node.start(can_capture=self._can_capture, hold=self.listeners.capture_hold)
        if self.mode.log_ready:
            self._tasks.spawn(self._say_ready(), "say-ready")
        if self.forwarder is not None:
            if self.listeners.probes_loops:  # a supervisor's workers, a shadow: no listener of ours to probe through
                self._tasks.spawn(self._probe_loops(), "loop-probe")
            if self.listeners.rechecks_loops:
                self._tasks.spawn(self.loop_probes.recheck(), "loop-recheck")
        if self.resolver.aaaa is not None and self.resolver.aaaa.mode == "auto" and self.mode.decides_aaaa:
            self._tasks.spawn(self._watch_aaaa(), "filter-aaaa")
        if self.handover is not None:
            self._tasks.spawn(self._hand_over(self.handover), "handover")
        if self.config.ready_file is not None:
            self._tasks.spawn(self._keep_ready_file(handover.ReadyFile(self.config.ready_file)), "ready-file")

    async def bind(self) -> None:
        """Bind the DNS listeners (the supervisor of --workers starts its workers instead, a shadow its capture)."""
        await self.listeners.bind()

    async def wait_serving(self) -> None:
        """Return once the listeners are bound and serve, and the index has synced (after start())."""
        await self.wait_synced()
        await self.listeners.wait_serving()

    # -- hand-over -------------------------------------------------------------------------

    async def _refuse_duplicates(self) -> None:
        """No agent of our roster lives here: another process serving one of our addresses is not a predecessor
        handing over but a duplicate, and SO_REUSEPORT would let the kernel split the queries between us. An
        agent that manages the node's interface first gives a holder that is no nodedns agent HOLDER_WAIT
        seconds to let go (`_let_go`); another nodedns agent is refused at once."""
        found = await asyncio.to_thread(handover.udp_occupants, self.config.listen_addresses)
        if found and self.config.setup_interface is not None and not any(o.is_nodedns for o in found):
            found = await self._let_go(found)
        if found:
            raise DuplicateAgent(
                f"{found[0].describe()}, and it is not a nodedns agent handing over to this one (not in the "
                "hand-over roster); two servers on one address would split the queries between them. Stop it, or "
                "start this agent as its successor: the same --lock-dir and --setup-interface (or, without one, "
                "the same first --listen address)")

    async def _let_go(self, found: list[handover.Occupant]) -> list[handover.Occupant]:
        """During a migration from NodeLocal DNSCache, node-cache's Pod is still terminating when this one
        starts (the DaemonSet declares no ports, so nothing holds this Pod back): its socket on our address
        goes once it has removed its rules and interface. Wait for that, saying so, before touching the
        node; what still holds the address after HOLDER_WAIT seconds (or when we are stopped) is refused."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        log.warning("%s, which is no nodedns agent of this roster (node-cache's Pod still terminating, in a "
                    "migration?): waiting up to %gs for it to let go before setting up the interface and rules",
                    found[0].describe(), self.HOLDER_WAIT)
        while found and loop.time() - started < self.HOLDER_WAIT and not (self._stop and self._stop.is_set()):
            await asyncio.sleep(HOLDER_POLL)
            found = await asyncio.to_thread(handover.udp_occupants, self.config.listen_addresses)
        if not found:
            log.info("the other process let go of our DNS address after %.1fs: starting", loop.time() - started)
        return found

    async def _join_handover(self) -> list[handover.Peer]:
        """Register in the hand-over roster; the live agents already there (none without a roster)."""
        if self.handover is None:
            return []
        try:
            others = await self.handover.join()
        except (OSError, HandoverError) as exc:
            log.warning("hand-over disabled: cannot use %s (%s); a new agent started beside this one would "
                        "tear down what this one uses", self.handover.roster.directory, exc)
            self.handover = None
            return []
        self.add_provider("handover", self.handover)
        return others

    async def _unless_stopped(self, work: Coroutine[Any, Any, object]) -> bool:
        """Run `work` unless a stop comes first (then it is cancelled); whether it ran to its end."""
        assert self._stop is not None
        running = asyncio.ensure_future(work)
        stopped = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait((running, stopped), return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not running.done():
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            return False
        running.result()
        return True

    async def _synced_unless_stopped(self) -> bool:
        """Wait for the index to sync; False when a stop came first."""
        assert self._stop is not None
        synced = asyncio.ensure_future(self.wait_synced())
        stopped = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait((synced, stopped), return_when=asyncio.FIRST_COMPLETED)
        for fut in (synced, stopped):
            fut.cancel()
        return self.index.synced and not self._stop.is_set()

    async def _hand_over(self, entry: handover.Handover) -> None:
        """Say we serve once bound, synced and ready but for saying so (a newcomer with a bad config never makes
        its predecessor step aside); step aside (HTTP listeners) for a newer agent that serves. /readyz says
        ready only once the roster says serving: a successor started on that signal must see us serving (else
        it would think itself alone and answer beside us before its own sync)."""
        await self.wait_serving()
        while [r for r in self.observer.readiness() if r != NOT_ANNOUNCED]:  # noqa: ASYNC110 - polled parts
            await asyncio.sleep(0.05)
        await entry.set_serving(True)
        await entry.watch(self._yield_status, self._take_back_status, functools.partial(self._leave_warm_state, entry))

    async def _say_ready(self) -> None:
        """Log `ready: <counts>` the moment /readyz first says ready (the log never says ready while
        /readyz says 503); while it does not, why not: once UNREADY_AFTER seconds in, then whenever
        the reasons change."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        said: list[str] | None = None
        while reasons := self.observer.readiness():
            late = loop.time() - started >= self.UNREADY_AFTER
            if late and reasons != said:
                log.warning("not ready yet (GET /readyz says 503): %s", "; ".join(reasons))
                said = reasons
            await asyncio.sleep(1.0 if late else 0.1)  # every part's status is asked: not ten times a second for long
        log.info("ready: %s", ", ".join(f"{k} {v}" for k, v in self.index.counts().items()))
        for warning in self.observer.warnings():  # wrong, but no reason not to answer: /readyz says them too
            log.warning("%s", warning)

    async def _keep_ready_file(self, ready_file: handover.ReadyFile) -> None:
        """--ready-file: touched every second while /readyz would say ready, removed otherwise."""
        try:
            while True:
                await asyncio.to_thread(ready_file.set, not self.observer.readiness())
                await asyncio.sleep(1.0)
        finally:
            ready_file.set(False)

    # -- the forward cache across a hand-over ------------------------------------------------

    async def _leave_warm_state(self, entry: handover.Handover) -> None:
        """A newer agent joined: leave it our forward cache, so it starts warm."""
        started = time.perf_counter()
        parts = await self.warm.export()
        size = await entry.write_warm(parts)
        if size:
            ms = round((time.perf_counter() - started) * 1000, 1)
            entry.warm["left"] = {"bytes": size, "ms": ms}
            log.info("hand-over: left the forward cache for the newer agent (%d bytes in %.0f ms)", size, ms)

    async def _take_warm_state(self, entry: handover.Handover, others: list[handover.Peer]) -> None:
        """Load what the running agent left (before we bind: the first answers come from its cache)."""
        started = time.perf_counter()
        try:
            parts, peer = await entry.warm_state(others)
            if not parts or peer is None:
                return
            loading = time.perf_counter()
            entries, edns = self.warm.load(parts)
        finally:
            if self.followers is not None:
                self.followers.warm_loaded()  # the supervisor tells its workers the index synced only now
        done = time.perf_counter()
        taken = {"entries": entries, "edns": edns, "from_pid": peer.pid, "ms": round((done - started) * 1000, 1),
                 "load_ms": round((done - loading) * 1000, 1)}
        entry.warm["taken"] = taken
        log.info("hand-over: %d forward cache entries and %d EDNS memories from the running nodedns (pid %d) in "
                 "%.0f ms", entries, edns, peer.pid, taken["ms"])

    async def _yield_status(self) -> None:
        """A newer agent serves beside us: let the shared status and debug ports reach it (probes, scrapes,
        operators)."""
        if self.status_server is not None:
            log.info("hand-over: the newer agent serves; closing our status and debug listeners so probes, "
                     "scrapes and operators reach it")
            server, self.status_server = self.status_server, None
            await server.stop()

    async def _take_back_status(self) -> None:
        """The newer agent that took the shared status port over serves no more (killed, gone): listen on it
        again, so the kubelet's probes and the scrapes reach this agent, which serves. Tried for a while;
        without it the liveness probe fails and the kubelet restarts this Pod, which is the fallback."""
        if self.status_server is not None or self._stopping_now():
            return
        for attempt in range(TAKE_BACK_TRIES):
            try:
                await self._start_status()
            except OSError as exc:
                log.error("hand-over: cannot listen on the status port again (%s); trying again (%d of %d)", exc,
                          attempt + 1, TAKE_BACK_TRIES)
                await asyncio.sleep(1.0)
                continue
            log.info("hand-over: status and debug listeners open again")
            return

    def _stopping_now(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    async def _teardown_node(self, *, retry: bool) -> None:
        """Remove the rules and the interface, unless another agent on the node still uses them (or this one
        never touched them: it refused to start)."""
        assert self.node is not None
        if not self._node_prepared:
            return
        if self.handover is None:
            await self.node.teardown(retry=retry, keep_link=await self._foreign_server())
            return
        async with self.handover.deciding() as others:
            if others is None or others:
                who = ", ".join(f"pid {p.pid}" for p in others) if others else "the roster could not tell"
                log.info("hand-over: leaving the interface and the rules to the other agent (%s)", who)
                await self.node.teardown(retry=retry, keep=True)
            else:
                await self.node.teardown(retry=retry, keep_link=await self._foreign_server())

    async def _foreign_server(self) -> str:
        """Who else, no nodedns agent, serves our DNS addresses as we leave ("" when nobody): node-cache's Pod,
        started beside this one on the way back from a migration. Its addresses are on our interface: we
        leave the interface to it (our rules go), or it would answer nothing until it adds them again."""
        if self.config.setup_interface is None:
            return ""
        found = await asyncio.to_thread(handover.udp_occupants, self.config.listen_addresses)
        foreign = [o for o in found if not o.is_nodedns]
        return f"pid {foreign[0].pid} ({foreign[0].command or 'not visible here'})" if foreign else ""

    # -- forwarding ------------------------------------------------------------------------

    def _start_forwarding(self) -> None:
        if self.forwarder is None:
            return
        if not self.mode.forwards:  # the upstream configuration is read (which names nodedns could forward)
            self.forwarder.set_own_addresses([])  # but nothing is ever sent
            if self.config_watcher is not None:
                self._tasks.spawn(self.config_watcher.run(), "upstream-config")
            return
        # ConfigError: we would forward to ourselves (not bound yet while a predecessor serves)
        self.forwarder.set_own_addresses(self.server.bound or list(self.config.listen_addresses))
        self._tick()
        if self.config_watcher is not None:
            self._tasks.spawn(self.config_watcher.run(), "upstream-config")

    def _tick(self) -> None:
        """Move the forward cache to the next second (its hot TTLs go down by one), on each second; in the
        last STAGE_LEAD of each, render the next second's answers ahead, a slice a loop turn (`_stage`)."""
        assert self.forward_cache is not None
        delay = self.forward_cache.tick()
        loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(min(max(delay, 0.005), 1.0) + 0.001, self._tick)
        if self._stager is not None:
            self._stager.cancel()
        self._stager = loop.call_later(max(delay - STAGE_LEAD, 0.0), self._stage)

    def _stage(self) -> None:
        assert self.forward_cache is not None
        self._stager = asyncio.get_running_loop().call_soon(self._stage) if self.forward_cache.stage() else None

    async def _probe_loops(self) -> None:
        await self.loop_probes.probe_all()

    def _reprobe(self) -> None:
        """New upstream routes: probe them for loops too (through our own listeners: a supervisor's workers
        probe through theirs)."""
        if self.state == "running" and self.listeners.probes_loops:
            self._tasks.spawn(self._probe_loops(), "loop-probe")

    async def wait_synced(self) -> None:
        """Return once the index is complete (at once for --manifests; bound it with asyncio.timeout)."""
        await self.source.wait_synced()

    @property
    def source_info(self) -> dict[str, Any]:
        """Where the index comes from, for /status."""
        return self.source.info

    async def _learn_pod_dns(self) -> None:
        """The kubelet settings and host resolv.conf the Pods here get their resolv.conf from (after the
        listeners are bound: without --cluster-dns they are our own addresses), for the explainer and
        autopath. The host file is read again as it changes (`_watch_host_file`)."""
        self.kubelet = self.kubelet_dns()
        host_text = await self.host_file.load() if self.host_file is not None else None
        self._use_host_text(host_text)

    def _use_host_text(self, host_text: str | None) -> None:
        """The node's resolv.conf text (None: none) for the search lists and the /v1/resolv-conf renderer."""
        settings = self.kubelet or self.kubelet_dns()
        self.host_resolv_conf = host_text
        search_list = renderer_search_list(settings, host_text)
        self.explainer.search_list = search_list
        if self.autopath is not None:
            self.autopath.search_list = search_list
        if self.insight is not None:
            self.insight.search_list = search_list
            self.insight.host_searches = host_searches(host_text)
        if self.followers is not None:
            self.followers.search_lists_changed()  # the supervisor forms its workers' autopath plans again

    def _status_server(self) -> StatusServer:
        """The HTTP routes this agent serves (its listeners are opened by `_start_status`)."""
        from nodedns.observe.status import StatusServer

        settings = self.kubelet or self.kubelet_dns()
        return StatusServer(
            self.observer,
            explainer=self.explainer,
            top=self.insight_document,
            debug=not self.config.no_debug,
            # the host file's text as it is now (re-read as it changes)
            body_routes={"/v1/resolv-conf": lambda body: resolvconf.handle_http(body, settings, self.host_resolv_conf)},
            limits=self.http_limits,
            history=self.history,
        )

    async def _start_status(self) -> None:
        """The status listener (probes, scrapes: a failure to listen stops the start) and the debug
        listener (operators: a failure is logged and the agent serves DNS without it)."""
        cfg = self.config
        if cfg.status_listen is None and cfg.debug_listen is None:
            return
        from nodedns.observe.status import DEBUG

        server = self.status_server_of()
        reuse = self.handover is not None  # shared with a successor
        try:
            if cfg.status_listen is not None:
                await self._listen_status(server, cfg.status_listen, reuse_port=reuse)
            if cfg.debug_listen is not None:
                try:
                    await server.listen(DEBUG, cfg.debug_listen, reuse_port=reuse)
                except OSError as exc:
                    server.failed(DEBUG, cfg.debug_listen, str(exc))
                    log.warning("%s", debug_listen_warning(cfg.debug_listen, exc))
        except BaseException:
            await server.stop()
            raise
        self.status_server = server
        self.add_provider("http", server)
        if cfg.debug_listen is not None and not self._sampling:
            self._sampling = True  # once: a status server opened again (a hand-over taken back) needs no second
            self._tasks.spawn(self._sample_history(), "history")

    async def _listen_status(self, server: StatusServer, where: HostPort, *, reuse_port: bool) -> None:
        """The status listener, or ListenError. An agent that manages the node's interface gives a port in use
        HOLDER_WAIT seconds to come free (node-cache's metrics on 9253, its Pod still terminating)."""
        from nodedns.observe.status import STATUS

        loop = asyncio.get_running_loop()
        started = loop.time()
        said = False
        while True:
            try:
                await server.listen(STATUS, where, reuse_port=reuse_port)
                break
            except OSError as exc:
                waiting = loop.time() - started < self.HOLDER_WAIT and not (self._stop and self._stop.is_set())
                if exc.errno != errno.EADDRINUSE or self.config.setup_interface is None or not waiting:
                    raise ListenError("--status-listen", endpoint_text(where), exc) from None
                if not said:
                    log.warning("status listener: --status-listen %s is in use by another process (node-cache's "
                                "metrics, its Pod still terminating?): waiting up to %gs for it to come free",
                                endpoint_text(where), self.HOLDER_WAIT)
                    said = True
                await asyncio.sleep(HOLDER_POLL)
        if said:
            log.info("status listener: %s came free after %.1fs", endpoint_text(where), loop.time() - started)

    async def _sample_history(self) -> None:
        """Every few seconds, the agent's counters into the history the status page draws (the
        --workers supervisor: its workers' counters, summed). Off the DNS path: it reads counters."""
        history = self.history
        while True:
            try:
                await self.observer.refresh()
                history.add(self.observer.reading())
            except Exception as exc:  # noqa: BLE001 - a broken sample costs its point, not the charts
                _history_errors.report(exc)
            await asyncio.sleep(history.interval)

    def kubelet_dns(self) -> resolvconf.KubeletDNS:
        """The kubelet settings pods on this node get: --cluster-dns, else this agent's own addresses."""
        bound = self.server.bound or self.config.listen_addresses
        cluster_dns = self.config.cluster_dns or self.config.local_ip or tuple(h for h, _ in bound)
        return resolvconf.KubeletDNS(cluster_dns=cluster_dns, cluster_domain=self.config.cluster_domain)

    async def _housekeep(self) -> None:
        """Timers of the agent itself: consolidated error summaries go out when their minute ends."""
        while True:
            await asyncio.sleep(5.0)
            logutil.flush_due()

    def request_stop(self) -> None:
        self.observer.stopping = True  # unready from now on, while the listeners still answer
        if self._stop is not None:
            self._stop.set()

    async def wait_stopped(self) -> None:
        assert self._stop is not None
        await self._stop.wait()

    def _can_capture(self) -> bool:
        """Traffic may be steered to us: listeners serving and index synced (the lameduck included:
        the rules go only when the teardown removes them)."""
        return self.index.synced and self.listeners.can_capture()

    def force_stop(self) -> None:
        """Second signal: end the lameduck now and skip retries during teardown."""
        if self._force is not None:
            self._force.set()
        self.request_stop()

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._stop is not None and self._stop.is_set():
            log.warning("second %s: exiting at once", sig.name)
            self.force_stop()
        else:
            log.info("%s: not ready any more; lameduck %gs, then teardown", sig.name, self.config.lameduck)
            self.request_stop()

    def _on_hangup(self) -> None:
        """SIGHUP: re-read what can be re-read while running (the upstream files, as the timer does), say
        so in one line; nothing stops. The rest of the configuration takes a restart."""
        log.info("SIGHUP: %s; other settings take a restart", self.reload_upstream_files())

    def reload_upstream_files(self) -> str:
        """Re-read --upstream-resolv-conf and --kube-dns-config-dir now (a changed, valid config is applied
        and logged as on the timer); what was done, for the log."""
        watcher = self.config_watcher
        if watcher is None:
            return "nothing to re-read (no upstream resolv.conf or kube-dns ConfigMap directory)"
        self._tasks.spawn(watcher.poll_once(), "upstream-config-reload")
        files = [f for f in (self.config.upstream_resolv_conf, self.config.kube_dns_config_dir) if f]
        return f"re-reading {' and '.join(files)} now"

    async def _freeze_gc(self, after: float) -> None:
        """Once the index has synced, and again `after` seconds later (the first answers made and stored),
        move every object the collector tracks into its permanent generation (gc.freeze): a full collection
        no longer walks the modules, the index and the warm cache, and those walks were its long pauses
        (docs/cache.md "Tail latency"). Objects frozen are still freed when their last reference goes;
        only a reference cycle among them would stay."""
        if not await self._synced_unless_stopped():
            return
        gc.freeze()  # O(1): the generations' lists joined to the permanent one (never gc.get_freeze_count(): it
        self.looplag.gc_freezes += 1  # walks that list, 12 ms for a forwarder's objects, on the loop)
        await asyncio.sleep(after)
        gc.freeze()
        self.looplag.gc_freezes += 1

    async def _lameduck(self) -> None:
        if self.config.lameduck <= 0 or self._force is None or self._force.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._force.wait(), self.config.lameduck)

    async def shutdown(self) -> None:
        was_running = self.state == "running"
        self.state = "stopping"
        if was_running:
            await self._lameduck()
        forced = self._force is not None and self._force.is_set()
        if self.config.ready_file is not None:
            handover.ReadyFile(self.config.ready_file).set(False)
        if self.handover is not None:
            if was_running and not forced:
                await self.handover.wait_for_successor()
            await self.handover.set_serving(False)
        if self.node is not None:
            await self._teardown_node(retry=not forced)
        await self.listeners.close(forced=forced)
        if self._ticker is not None:
            self._ticker.cancel()
        if self._stager is not None:
            self._stager.cancel()
        await self._tasks.cancel_all()
        await self.resolver.close()
        if self.dnstap is not None:
            await self.dnstap.close()
        self.looplag.stop()
        if self.forwarder is not None:
            await self.forwarder.close()
        if self.feeds is not None:
            self.feeds.stop()
        if self.policy_status is not None:
            self.policy_status.stop()
        await self.source.stop()
        if self.status_server is not None:
            await self.status_server.stop()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
        if self.handover is not None:
            await self.handover.leave()
        logutil.flush_due()
        self.state = "stopped"
        log.info("stopped")

    async def run(self) -> int:
        """Start, serve until SIGTERM/SIGINT, shut down. The exit code (a fatal error raises)."""
        loop = asyncio.get_running_loop()
        for sig in self.mode.signals:
            loop.add_signal_handler(sig, self._on_signal, sig)
        loop.add_signal_handler(signal.SIGHUP, lambda: self.on_hangup())
        try:
            for opener in self.openers:
                await opener()
            await self.start()
            await self.wait_stopped()
        finally:
            await self.shutdown()
            for closer in self.closers:
                await closer()
        return self.exit_code

    def live(self) -> tuple[bool, list[str]]:
        """Liveness (/healthz): False only when the DNS listeners died while they should be serving."""
        if self.state in ("running", "stopping"):
            dead = self.listeners.dead()
            if dead:
                return False, dead
        return True, []

    def ready(self) -> tuple[bool, list[str]]:
        """Readiness (/readyz): (True, []) only when the listeners serve, the index has synced, the
        interface holds the local IPs and no shutdown is under way; otherwise the reasons."""
        reasons: list[str] = []
        if self.state in ("stopping", "stopped"):
            reasons.append("shutting down")
        elif self.state != "running":
            reasons.append(f"starting ({self.state})")
        reasons.extend(self.listeners.problems())
        if not self.index.synced:
            reasons.append("the cluster index has not synced yet")
        if self.node is not None:
            reasons.extend(self.node.problems())
        if self.handover is not None and self.handover.superseded is not None:
            reasons.append(f"superseded by a newer nodedns on this node (pid {self.handover.superseded.pid})")
        elif self.handover is not None and self.state == "running" and not self.handover.announced:
            reasons.append(NOT_ANNOUNCED)
        return not reasons, reasons

    def node_state(self) -> Mapping[str, Any] | None:
        """Interface and conntrack-bypass state for /status; None when neither is configured."""
        return None if self.node is None else self.node.state()

    def about(self) -> dict[str, Any]:
        """Which agent this is (the node, this process, its DNS addresses): every answer of the debug
        routes carries it, so `nodedns lookup`/`explain`/`top` say which agent they talked to."""
        return {"node": self.config.node_name or socket.gethostname(), "pid": os.getpid(), **self.listeners.about()}

    def status(self) -> Mapping[str, Any]:
        return {
            "state": self.state,
            "synced": self.index.synced,
            "generation": self.index.generation,
            "counts": self.index.counts(),
            "listening": self.listeners.listening(),
            "node": self.node_state(),
            "kube": self.source.status(),
            "forwarding": self.forwarder.status() if self.forwarder is not None else None,
            "cache": self.forward_cache.counts() if self.forward_cache is not None else None,
            "resolver": dict(self.resolver.stats),
        }


def host_searches(text: str | None) -> tuple[str, ...]:
    """The search domains the node's resolv.conf gives host-network processes (none when unreadable)."""
    if not text:
        return ()
    try:
        return tuple(d.lower().rstrip(".") for d in resolvconf.parse_host_resolv_conf(text).searches)
    except NodednsError:
        return ()


def debug_listen_warning(where: Endpoint, exc: OSError) -> str:
    """The warning for a debug listener that cannot listen: the flag, the URL, and what follows for
    `nodedns lookup`/`explain`/`top`, which look there by default."""
    text = endpoint_text(where)
    url = text if text.startswith("unix:") else f"http://{text}"
    return (f"debug listener: --debug-listen {url}: {listen_reason('--debug-listen', text, exc)}. This agent serves "
            f"DNS without it (no /, /status, /debug/*, /v1/resolv-conf); nodedns lookup, explain and top that "
            f"reach {url} talk to whatever listens there, not to this agent (each answer names the agent it "
            f"came from)")
