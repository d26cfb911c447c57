"""The agent's lifecycle: every part built from the Config, started in order, stopped in reverse.

`start()` binds, loads the index and serves; the first SIGTERM/SIGINT makes readiness false, the lameduck
runs, then the teardown; a second signal cuts it short; SIGHUP re-reads the upstream files. `live()` and
`ready()` answer /healthz and /readyz. Nothing subclasses the Agent: a mode gives it other parts
(nodedns.app.parts, nodedns.workers.modes). The order, step by step: docs/architecture.md "The agent's lifecycle".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from nodedns.app.build import (
    aaaa_filter,
    build_forwarding,
    dns_server_for,
    dnstap_for,
    explainer_for,
    fallback_for,
    handover_for,
    host_file_for,
    hosts_files_for,
    metric_slots,
    node_network,
    policy_book_for,
    resolver_for,
    zone_settings,
)
from nodedns.app.filteraaaa import AaaaAuto
from nodedns.app.httplisteners import HttpListeners
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
from nodedns.app.poddns import PodDns
from nodedns.app.policies import PolicyUpkeep
from nodedns.app.readiness import keep_ready_file, say_ready, unready_reasons
from nodedns.app.sections import KubeDnsReport, Limits, cluster_dns_ips, register_sections
from nodedns.app.succession import Succession
from nodedns.app.upstreams import Upstreams
from nodedns.cluster.changes import Changes
from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords
from nodedns.config import Config
from nodedns.node import handover
from nodedns.observe.history import History
from nodedns.observe.insightfeed import InsightFeed
from nodedns.observe.looplag import LoopLag
from nodedns.observe.observer import Observer, Provider
from nodedns.runtime import logutil
from nodedns.runtime.heap import HeapTrimmer, freeze_collector, trim_heap
from nodedns.runtime.tasks import Tasks, unless_stopped
from nodedns.serve.cache import ClusterAnswers, cluster_share
from nodedns.serve.hosts import HostsTable

if TYPE_CHECKING:  # imported where used: --workers processes never load aiohttp, nor the watch (urllib3)
    from nodedns.observe.httpgate import HttpLimits
    from nodedns.observe.status import StatusServer

log = logging.getLogger("nodedns.app")  # the name every log line of the agent has had


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
        self.fallback = fallback_for(config)
        self.dnstap = dnstap_for(config)
        forwarding = build_forwarding(
            config, hot=self.cluster_answers.hot, max_bytes=self._cache_bytes - self.cluster_answers.max_bytes,
            slots=self.slots, clock=clock, warn=mode.log_ready, on_federations=self._set_federations,
            on_reload=lambda: self.upstreams.reprobe(), on_zones=lambda t, c: self.upstreams.zones_changed(t, c))
        self.forwarder, self.forward_cache, self.config_watcher = forwarding.forwarder, forwarding.cache, \
            forwarding.watcher
        self.upstreams: Upstreams = Upstreams(self, forwarding)  # the forwarding at run time
        self.autopath = parts.autopath
        self.limits = Limits(config, self.index, allow=parts.allow)
        aaaa, zone_soa = aaaa_filter(config, self.slots)
        self.policy = policy_book_for(config, owner=parts.remote is None)  # DNS policies (nodedns.io)
        self.policy.on_clients.append(self.limits.allow.set_policed)
        self.resolver = resolver_for(
            config, policy=self.policy, records=self.records, index=self.index, cluster_answers=self.cluster_answers,
            forward_cache=self.forward_cache, forwarder=self.forwarder,
            on_loop=lambda qname, seen: self.loop_probes.detected(qname, seen), before_sync=self.fallback,
            autopath=self.autopath, allow=self.limits.allow, namespace_of=self.limits.namespaces,
            remote=parts.remote, aaaa_filter=aaaa, filter_soa=zone_soa)
        self._tasks = Tasks()
        self.policies = PolicyUpkeep(self.policy, self.index, self._tasks)
        self.tally = parts.tally  # what the listeners count by client address
        self.insight = parts.insight  # the figures per Pod (the owner of the index)
        self.insight_feed = InsightFeed(self.insight, self.tally, self.slots, about=self.about,
                                        policy=lambda: self.observer.section("policy"))
        self.server = dns_server_for(config, resolver=self.resolver, cluster_answers=self.cluster_answers,
                                     slots=self.slots, tap=self.dnstap, rate_limiter=self.limits.rate,
                                     miss_budget=self.limits.misses, tally=self.tally)
        self.loop_probes: LoopProbes = LoopProbes(forwarder=self.forwarder, resolver=self.resolver,
                                      bound=lambda: self.server.bound, upstream_timeout=config.upstream_timeout)
        self.node = node_network(config)
        self.state = "new"
        self._stop: asyncio.Event | None = None
        self._force: asyncio.Event | None = None
        self.observer: Observer = Observer(self)  # reads node_state() as its "node" section
        # the parts a mode replaces (nodedns.workers.modes); these are one process's
        self.listeners: Listeners = OwnSockets(self.server, config=config)
        self.source: IndexSource = IndexOwner(config=config, index=self.index, add_provider=self.add_provider)
        self.warm: WarmState = LocalWarm(forward_cache=self.forward_cache, forwarder=self.forwarder)
        self.on_hangup: Callable[[], None] = self.upstreams.hangup  # SIGHUP
        self.http = HttpListeners(self)  # the status and debug listeners
        self.status_server_of: Callable[[], StatusServer] = self.http.routes  # the HTTP routes served
        self.openers: list[Callable[[], Awaitable[None]]] = []  # a part's own start, before the agent's
        self.closers: list[Callable[[], Awaitable[None]]] = []  # a part's own stop, after the agent's
        self.explainer = explainer_for(config, resolver=self.resolver, index=self.index, slots=self.slots,
                                       autopath=self.autopath, insight=self.insight, about=self.about)
        self.http_limits: HttpLimits | None = None  # None: the defaults (tests change them)
        self.history = History()  # the status page's charts, /debug/history (sampled with a debug listener)
        self._housekeeping: asyncio.Task[None] | None = None
        self.handover = handover_for(config)
        self.succession = Succession(self)  # the hand-over with a predecessor and a successor
        self._warm: asyncio.Future[None] | None = None  # loading what the running agent left (hand-over)
        if self.dnstap is not None and self.forwarder is not None:
            self.forwarder.tap = self.dnstap
        if self.autopath is not None and not config.node_name:
            log.warning("--autopath without a node name (NODE_NAME or --node-name): no Pod is known to run "
                        "on this node, so every client gets plain answers")
        self.pod_dns = PodDns(self)  # the kubelet settings and the node's resolv.conf the Pods here get
        self.hosts_files = hosts_files_for(config, excluded=self._cluster_named, on_change=self._hosts_changed) \
            if mode.reads_hosts else None
        self.host_file = host_file_for(config, on_change=self.pod_dns.use_host_text)
        self.limits.server = self.server
        # how late the loop runs: every serving process (docs/status.md); start-up counted apart until it serves
        self.looplag = LoopLag(process=mode.process, starting=True)
        register_sections(self)  # each part in /status and /metrics
        # --filter-aaaa auto, decided by the index owner (a worker is told: nodedns.workers.worker)
        self.aaaa_auto = AaaaAuto(self.index, self.resolver, config.local_ip, changed=self._aaaa_changed)
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
            add(self.insight_feed.pods_changed)  # the address -> Pod map insight attributes answers by
        add(self.policies.changed)  # which DNS policies apply to which client of this node
        # what a mode adds (a supervisor: its workers; a shadow: its race) follows, added where it is wired
        # (nodedns.workers.modes)

    def _aaaa_changed(self) -> None:
        if self.followers is not None:
            self.followers.aaaa_changed()  # the supervisor tells its workers

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

    @property
    def status_server(self) -> StatusServer | None:
        """The HTTP routes while the status or debug listener is open."""
        return self.http.server

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
        others = await self.succession.join()
        if self.handover is not None and any(p.serving for p in others):
            self._warm = asyncio.ensure_future(self.succession.take_warm_state(self.handover, others))
        if not others and self.mode.refuse_duplicates:
            await self.succession.refuse_duplicates()  # before the node is touched: its rules may be the other's
        if self.node is not None:
            await self.succession.prepare_node(clean=not others)  # a live predecessor's rules are not leftovers
        if self.forwarder is not None:  # an upstream that is one of our listen addresses: fail before binding
            self.forwarder.set_own_addresses(self.config.listen_addresses)
        if self.dnstap is not None:
            self.dnstap.start()
        if self.hosts_files is not None:  # read before the first answer; a missing file is a warning
            if not await unless_stopped(self._stop, self.hosts_files.poll_once()):
                return  # a stop came while a large file was parsed: it is honoured now, not after the parse
            self._tasks.spawn(self.hosts_files.run(), "hosts")
        defer = self.listeners.binds_after_sync(others)
        if not defer:
            await self.bind()
        await self.pod_dns.learn()  # the kubelet's settings: our listen addresses, bound or not yet
        self.upstreams.start()
        await self.http.start()
        if self.host_file is not None and self.mode.watches_host_file:
            self._tasks.spawn(self.host_file.run(), "host-resolv-conf")
        self._housekeeping = asyncio.get_running_loop().create_task(logutil.flush_on_time(), name="housekeeping")
        if isinstance(self.source, IndexOwner) and self.config.manifests is None and cluster_dns_ips(
                self.config.local_ip):  # the index from the API: is a local IP the kube-dns ClusterIP there?
            self.add_provider("kube_dns", KubeDnsReport(index=self.index, local_ips=self.config.local_ip))
        await self.source.load()
        self.policies.start(self.source.kube if isinstance(self.source, IndexOwner) else None,
                            manifests=self.config.manifests is not None)
        if self.insight is not None:
            self.insight_feed.reattribute()  # the Pods loaded so far (an API sync goes on: each change forms it again)
            if self.tally is not None:
                self._tasks.spawn(self.insight_feed.run(), "insight")
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
            self._tasks.spawn(freeze_collector(self._synced_unless_stopped, self.freeze_gc_after, self.looplag),
                              "gc-freeze")
        if self.node is not None:
            self.node.start(can_capture=self._can_capture, hold=self.listeners.capture_hold)
        if self.mode.log_ready:
            self._tasks.spawn(say_ready(self.observer, self.index, unready_after=self.UNREADY_AFTER), "say-ready")
        if self.forwarder is not None:
            if self.listeners.probes_loops:  # a supervisor's workers, a shadow: no listener of ours to probe through
                self._tasks.spawn(self.loop_probes.probe_all(), "loop-probe")
            if self.listeners.rechecks_loops:
                self._tasks.spawn(self.loop_probes.recheck(), "loop-recheck")
        if self.resolver.aaaa is not None and self.resolver.aaaa.mode == "auto" and self.mode.decides_aaaa:
            self._tasks.spawn(self.aaaa_auto.run(), "filter-aaaa")
        if self.handover is not None:
            self._tasks.spawn(self.succession.hand_over(self.handover, yield_status=self.http.yield_status,
                                                        take_back_status=self.http.take_back_status), "handover")
        if self.config.ready_file is not None:
            self._tasks.spawn(keep_ready_file(self.observer, handover.ReadyFile(self.config.ready_file)), "ready-file")

    async def bind(self) -> None:
        """Bind the DNS listeners (the supervisor of --workers starts its workers instead, a shadow its capture)."""
        await self.listeners.bind()

    async def wait_serving(self) -> None:
        """Return once the listeners are bound and serve, and the index has synced (after start())."""
        await self.wait_synced()
        await self.listeners.wait_serving()

    async def _synced_unless_stopped(self) -> bool:
        """Wait for the index to sync; False when a stop came first."""
        assert self._stop is not None
        return await unless_stopped(self._stop, self.wait_synced()) and self.index.synced \
            and not self._stop.is_set()

    def stopping_now(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    async def wait_synced(self) -> None:
        """Return once the index is complete (at once for --manifests; bound it with asyncio.timeout)."""
        await self.source.wait_synced()

    @property
    def source_info(self) -> dict[str, Any]:
        """Where the index comes from, for /status."""
        return self.source.info

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
            await self.succession.teardown_node(retry=not forced)
        await self.listeners.close(forced=forced)
        self.upstreams.stop()
        await self._tasks.cancel_all()
        await self.resolver.forwarding.close()  # its background refreshes
        if self.dnstap is not None:
            await self.dnstap.close()
        self.looplag.stop()
        if self.forwarder is not None:
            await self.forwarder.close()
        self.policies.stop()
        await self.source.stop()
        await self.http.stop()
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
        interface holds the local IPs and no shutdown is under way; otherwise the reasons (nodedns.app.readiness)."""
        reasons = unready_reasons(self.state, self.listeners, self.index, self.node, self.handover)
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
