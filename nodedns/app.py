"""Wiring: builds every part from the Config, starts them in order and stops them in reverse.

Start: node prepared (a crashed predecessor's capture rules removed, interface and local IPs
ensured) -> listeners bound (answering SERVFAIL for would-be NXDOMAINs until synced, or forwarding
them to --fallback-upstream) -> forwarder checked against our own addresses, forward-cache clock and
upstream config reloads started -> cluster source loaded (--manifests) or API watchers started
(--kubeconfig, else in-cluster) -> running -> loop probes sent through our own listener (again after
each upstream config reload); `wait_synced()` tells when the index is complete. The node reconcile
loop installs the conntrack-bypass rules once the listeners serve and the index has synced, and
re-asserts link and rules every --sync-interval.

Stop: the first SIGTERM/SIGINT makes readiness false and starts the lameduck (--lameduck, listeners
keep answering); then the rules are removed, the interface torn down, the listeners closed, the
watchers, prefetches, health checks and reloads stopped, exit 0. A detected forwarding loop stops
the agent at once (no lameduck), exit 3. A second signal cuts the lameduck (and any xtables-lock retries) short:
the process exits at once, after the few milliseconds the rule and link removal take, so no capture
rule outlives us.

For the status endpoint (/healthz, /readyz): `Agent.live()` and `Agent.ready()` each return
`(ok, reasons)`, reasons being short human sentences for the 503 body; `Agent.node_state()` is the
interface/firewall state for /status (setup errors by cause, rules installed, added-back count).
The status endpoint starts right after the listeners (so /healthz and /readyz answer during the
sync) and closes last. Parts report to it through `add_provider(section, part)` (the API watch as
"sync", the node side as "node", the forward cache as "cache", the forwarder as "upstream", the
allow list, rate limit and caps as "limits";
contract in metrics.py and docs/status.md).

`--workers N` (N > 1): `supervise` runs N agent processes that bind the same addresses with
SO_REUSEPORT (the kernel spreads queries over them) and restarts one that dies. Each worker loads
its own index for now; the supervisor is where a single sync process feeding them would go.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import multiprocessing
import multiprocessing.connection
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from nodedns import firewall, kube, logutil, manifests, resolvconf
from nodedns.cache import ClusterAnswers, ForwardCache
from nodedns.config import Config
from nodedns.errors import ConfigError, LoopDetected, ManifestError
from nodedns.explain import Explainer
from nodedns.fallback import Fallback
from nodedns.index import Index
from nodedns.limits import AllowList, RateLimiter
from nodedns.metrics import PLUGIN_CACHE, Sampler, Slots
from nodedns.netif import Link, NodeNetwork
from nodedns.observe import Observer, Provider
from nodedns.records import ClusterRecords, ZoneSettings, ns_addresses
from nodedns.resolver import Resolver
from nodedns.searchpath import Autopath, renderer_search_list
from nodedns.server import DNSServer, bind_pair
from nodedns.status import StatusServer
from nodedns.tasks import Tasks
from nodedns.upstream import ConfigWatcher, Forwarder, RouteSources, describe_routes, probe_loops, send_probe

log = logging.getLogger(__name__)


def zone_settings(config: Config) -> ZoneSettings:
    own = config.local_ip or tuple(host for host, _ in config.listen_addresses)
    return ZoneSettings(
        zone=config.cluster_domain,
        ttl=int(config.ttl),
        pods=config.pods,
        endpoint_pod_names=config.endpoint_pod_names,
        authoritative_reverse=config.authoritative_reverse,
        ns_addresses=ns_addresses(own),
        node_name=config.node_name,
        federations=config.federation,
    )


def node_network(config: Config) -> NodeNetwork | None:
    """The interface and firewall parts --setup-interface and --firewall ask for (None: neither)."""
    link = Link(config.setup_interface, config.local_ip) if config.setup_interface is not None else None
    health_port = config.status_listen[1] if config.status_listen is not None else None
    fw = firewall.make(config.firewall, config.local_ip, health_port=health_port)
    if link is None and fw is None:
        return None
    return NodeNetwork(link=link, firewall=fw, sync_interval=config.sync_interval,
                       skip_teardown=config.skip_teardown)


def metric_slots(config: Config) -> Slots:
    """The zones answers are counted under (CoreDNS's zone label), as node-cache's server blocks."""
    return Slots(
        (config.cluster_domain, "in-addr.arpa", "ip6.arpa", *(d for d, *_ in config.stub_domain)),
        authoritative=(config.cluster_domain, "in-addr.arpa", "ip6.arpa"),
        stub=(d for d, *_ in config.stub_domain),
    )


def route_sources(config: Config) -> RouteSources:
    return RouteSources(
        upstream=config.upstream,
        force_tcp=config.upstream_force_tcp,
        resolv_conf=config.upstream_resolv_conf,
        stub_domains=config.stub_domain,
        kube_dns_dir=config.kube_dns_config_dir,
        federation=config.federation,
    )


class Agent:
    """One nodedns agent: index, records, resolver, listeners, and their lifecycle."""

    def __init__(self, config: Config, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.index = Index()
        self.records = ClusterRecords(self.index, zone_settings(config))
        self.slots = metric_slots(config)
        self.cluster_answers = ClusterAnswers(stamp=self.slots.stamp)
        self.fallback = (
            Fallback(config.fallback_upstream, timeout=config.upstream_timeout)
            if config.fallback_upstream is not None else None
        )
        self.fatal: LoopDetected | None = None
        self.forwarder, self.forward_cache, self.config_watcher = self._build_forwarding(clock)
        self.autopath = (
            Autopath(index=self.index, zone=config.cluster_domain, node_name=config.node_name)
            if config.autopath else None
        )
        self.limits = Limits(config, self.index)
        self.resolver = Resolver(
            records=self.records,
            index=self.index,
            cluster_answers=self.cluster_answers,
            max_udp_size=config.max_udp_size,
            forward_cache=self.forward_cache,
            forwarder=self.forwarder,
            stale_recheck=config.cache_servfail_ttl,
            on_loop=self._loop_detected,
            before_sync=self.fallback,
            autopath=self.autopath,
            allow=self.limits.allow,
            max_pending=config.max_pending,
        )
        self._tasks = Tasks()
        self._ticker: asyncio.TimerHandle | None = None
        self.server = DNSServer(
            resolver=self.resolver,
            cluster_answers=self.cluster_answers,
            addresses=config.listen_addresses,
            max_udp_size=config.max_udp_size,
            tcp_idle_timeout=config.tcp_idle_timeout,
            tcp_max_connections=config.tcp_max_connections,
            # the local IPs may be missing for a moment (interface being re-created): bind anyway
            freebind=config.setup_interface is not None,
            slots=self.slots,
            query_log=Sampler(config.query_log) if config.query_log > 0 else None,
            rate_limiter=self.limits.rate,
        )
        self.node = node_network(config)
        if self.node is not None:
            self.index.on_change(self.node.poke)  # the first sync may allow the rules in
        self.state = "new"
        self._stop: asyncio.Event | None = None
        self._force: asyncio.Event | None = None
        self.kube: kube.KubeSync | None = None
        self.kube_timing = kube.Timing()  # tests shorten it
        self.kube_service_account_dir = kube.SERVICE_ACCOUNT_DIR
        self.source_info: dict[str, Any] = {}
        self.observer = Observer(self)  # reads node_state() as its "node" section
        self.explainer = Explainer(
            resolver=self.resolver, index=self.index, slots=self.slots, zone=config.cluster_domain,
            timeout=2 * config.upstream_timeout + 1, autopath=self.autopath, node_name=config.node_name,
        )
        self.status_server: StatusServer | None = None
        self._housekeeping: asyncio.Task[None] | None = None
        if self.forwarder is not None:
            self.add_provider("upstream", self.forwarder)
            self.add_provider("cache", _CacheReport(self))
        if self.autopath is not None:
            self.add_provider("autopath", self.autopath)
            if not config.node_name:
                log.warning("--autopath without a node name (NODE_NAME or --node-name): no Pod is known to run "
                            "on this node, so every client gets plain answers")
        self.kubelet: resolvconf.KubeletDNS | None = None  # the kubelet settings pods here get (after bind)
        self.host_resolv_conf: str | None = None
        self.limits.server = self.server
        self.add_provider("limits", self.limits)

    def _build_forwarding(
        self, clock: Callable[[], float]
    ) -> tuple[Forwarder | None, ForwardCache | None, ConfigWatcher | None]:
        """Forwarder, forward cache and config watcher, when any upstream source is configured."""
        config = self.config
        sources = route_sources(config)
        if not sources.any():
            return None, None, None
        snapshot = sources.snapshot()
        routes = sources.build(snapshot)
        self._set_federations(sources.federations(snapshot))
        log.info("upstreams: %s", describe_routes(routes))
        forwarder = Forwarder(
            routes=routes,
            policy=config.upstream_policy,
            timeout=config.upstream_timeout,
            max_concurrent=config.max_concurrent,
            health_check=config.health_check,
            udp_size=config.max_udp_size,
        )
        cache = ForwardCache(
            hot=self.cluster_answers.table,
            success_size=config.cache_success,
            success_ttl=config.cache_success_ttl,
            denial_size=config.cache_denial,
            denial_ttl=config.cache_denial_ttl,
            servfail_ttl=config.cache_servfail_ttl,
            serve_stale=config.serve_stale,
            prefetch=config.prefetch,
            udp_size=config.max_udp_size,
            clock=clock,
            stamp=functools.partial(self.slots.stamp, plugin=PLUGIN_CACHE),
        )
        watcher = None
        if config.kube_dns_config_dir or config.upstream_resolv_conf:
            watcher = ConfigWatcher(sources, forwarder, period=config.kube_dns_config_period, snapshot=snapshot,
                                    on_reload=self._reprobe, on_federations=self._set_federations)
        return forwarder, cache, watcher

    def _set_federations(self, federations: tuple[tuple[str, str], ...]) -> None:
        """The kube-dns federations (flags + ConfigMap) changed: answers built with the old map go."""
        if self.records.set_federations(federations):
            self.cluster_answers.clear()
            log.info("federations: %s", ", ".join(f"{n}={d}" for n, d in federations) or "none")

    def add_provider(self, section: str, provider: Provider) -> None:
        """Show a part in /status and /metrics (contract: nodedns.metrics docstring, docs/status.md)."""
        self.observer.add_provider(section, provider)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self.state = "starting"
        self._stop = asyncio.Event()
        self._force = asyncio.Event()
        if self.node is not None:
            await self.node.prepare()
        await self.server.start()
        await self._learn_pod_dns()
        self._start_forwarding()
        await self._start_status()
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep(), name="housekeeping")
        await self._load_source()
        self.state = "running"
        if self.node is not None:
            self.node.start(can_capture=self._can_capture)
        if self.kube is None:
            log.info("ready: %s", ", ".join(f"{k} {v}" for k, v in self.index.counts().items()))
        if self.forwarder is not None:
            self._tasks.spawn(self._probe_loops(), "loop-probe")

    # -- forwarding ------------------------------------------------------------------------

    def _start_forwarding(self) -> None:
        if self.forwarder is None:
            return
        self.forwarder.set_own_addresses(self.server.bound)  # ConfigError: we would forward to ourselves
        self._tick()
        if self.config_watcher is not None:
            self._tasks.spawn(self.config_watcher.run(), "upstream-config")

    def _tick(self) -> None:
        """Move the forward cache to the next second (its hot TTLs go down by one), on each second."""
        assert self.forward_cache is not None
        delay = self.forward_cache.tick()
        self._ticker = asyncio.get_running_loop().call_later(min(max(delay, 0.005), 1.0) + 0.001, self._tick)

    async def _probe_loops(self) -> None:
        assert self.forwarder is not None
        host, port = self.server.bound[0]
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        timeout = self.config.upstream_timeout * 2 + 0.5

        async def send(name: str) -> bool:
            return await send_probe(host, port, name, wait=timeout)

        await probe_loops(self.forwarder.groups(), send=send, register=self.resolver.add_loop_probe)

    def _reprobe(self) -> None:
        """New upstream routes: probe them for loops too."""
        if self.state == "running":
            self._tasks.spawn(self._probe_loops(), "loop-probe")

    def _loop_detected(self, qname: str, seen: int) -> None:
        if self.fatal is not None:
            return
        zone = qname.split(".", 2)[2] if qname.count(".") >= 2 else "."
        self.fatal = LoopDetected(
            f'forwarding loop detected for zone "{zone}": our probe "HINFO {qname}." came back {seen} times '
            "through the upstreams. An upstream forwards to this agent (e.g. a resolv.conf naming 127.0.0.53 "
            "or the node-local address); point --upstream / --upstream-resolv-conf at a real resolver"
        )
        log.error("%s", self.fatal)
        self.force_stop()  # no lameduck: every forwarded answer would be a timeout

    async def _load_source(self) -> None:
        path = self.config.manifests
        if path is None:
            await self._start_kube()
            return
        items = await asyncio.to_thread(manifests.read, path)
        loaded = self.index.load(items)
        log.info("loaded %d objects from %s (%d skipped)", loaded, path, self.index.skipped)
        self.source_info = {"kind": "manifests", "path": path, "loaded": loaded, "skipped": self.index.skipped,
                            "loaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self._warn_missing_namespaces()
        self.index.mark_synced()

    async def _start_kube(self) -> None:
        """Watch the API server: --kubeconfig FILE, else the in-cluster service account."""
        cfg = self.config
        self.kube = kube.KubeSync(
            index=self.index,
            source=kube.ApiSource(kubeconfig=cfg.kubeconfig, service_account_dir=self.kube_service_account_dir),
            resources=kube.resources(pods=cfg.pods, node_name=cfg.node_name),
            timing=self.kube_timing,
        )
        self.source_info = {"kind": "kubernetes API"}
        self.add_provider("sync", self.kube)
        await self.kube.start()

    async def wait_synced(self) -> None:
        """Return once the index is complete (at once for --manifests; bound it with asyncio.timeout)."""
        if self.kube is not None:
            await self.kube.wait_synced()

    def _warn_missing_namespaces(self) -> None:
        missing = sorted({ns for ns, _ in self.index.services} - self.index.namespaces)
        if missing:
            log.warning(
                "services in namespaces without a Namespace object (their names answer NXDOMAIN, as the "
                "spec requires): %s",
                ", ".join(missing),
            )

    async def _learn_pod_dns(self) -> None:
        """The kubelet settings and host resolv.conf the Pods here get their resolv.conf from (after the
        listeners are bound: without --cluster-dns they are our own addresses), for the explainer and
        autopath."""
        settings = self.kubelet = self.kubelet_dns()
        host_text: str | None = None
        if self.config.host_resolv_conf:
            try:
                host_text = await asyncio.to_thread(_read_text, self.config.host_resolv_conf)
            except OSError as exc:
                log.warning("cannot read --host-resolv-conf %s (%s): pod resolv.conf rendering goes on without "
                            "it", self.config.host_resolv_conf, exc)
        self.host_resolv_conf = host_text
        search_list = renderer_search_list(settings, host_text)
        self.explainer.search_list = search_list
        if self.autopath is not None:
            self.autopath.search_list = search_list

    async def _start_status(self) -> None:
        listen = self.config.status_listen
        if listen is None:
            return
        settings = self.kubelet or self.kubelet_dns()
        host_text = self.host_resolv_conf
        server = StatusServer(
            self.observer,
            explainer=self.explainer,
            debug=not self.config.no_debug,
            body_routes={"/v1/resolv-conf": lambda body: resolvconf.handle_http(body, settings, host_text)},
        )
        await server.start(*listen)
        self.status_server = server

    def kubelet_dns(self) -> resolvconf.KubeletDNS:
        """The kubelet settings pods on this node get: --cluster-dns, else this agent's own addresses."""
        cluster_dns = self.config.cluster_dns or self.config.local_ip or tuple(h for h, _ in self.server.bound)
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
        return self.server.alive() and self.index.synced

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
        if self.node is not None:
            forced = self._force is not None and self._force.is_set()
            await self.node.teardown(retry=not forced)
        self.server.close()
        await self.server.wait_closed()
        if self._ticker is not None:
            self._ticker.cancel()
        await self._tasks.cancel_all()
        await self.resolver.close()
        if self.forwarder is not None:
            await self.forwarder.close()
        if self.kube is not None:
            await self.kube.stop()
        if self.status_server is not None:
            await self.status_server.stop()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
        logutil.flush_due()
        self.state = "stopped"
        log.info("stopped")

    async def run(self) -> int:
        """Start, serve until SIGTERM/SIGINT, shut down. The exit code."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            await self.start()
            await self.wait_stopped()
        finally:
            await self.shutdown()
        if self.fatal is not None:
            raise self.fatal
        return 0

    def live(self) -> tuple[bool, list[str]]:
        """Liveness (/healthz): False only when the DNS listeners died while they should be serving."""
        if self.state in ("running", "stopping") and not self.server.alive():
            return False, ["the DNS listeners are not serving"]
        return True, []

    def ready(self) -> tuple[bool, list[str]]:
        """Readiness (/readyz): (True, []) only when the listeners serve, the index has synced, the
        interface holds the local IPs and no shutdown is under way; otherwise the reasons."""
        reasons: list[str] = []
        if self.state in ("stopping", "stopped"):
            reasons.append("shutting down")
        elif self.state != "running":
            reasons.append(f"starting ({self.state})")
        if not self.server.alive():
            reasons.append("the DNS listeners are not serving")
        if not self.index.synced:
            reasons.append("the cluster index has not synced yet")
        if self.node is not None:
            reasons.extend(self.node.problems())
        return not reasons, reasons

    def node_state(self) -> Mapping[str, Any] | None:
        """Interface and conntrack-bypass state for /status; None when neither is configured."""
        return None if self.node is None else self.node.state()

    def status(self) -> Mapping[str, Any]:
        return {
            "state": self.state,
            "synced": self.index.synced,
            "generation": self.index.generation,
            "counts": self.index.counts(),
            "listening": [f"{h}:{p}" for h, p in self.server.bound],
            "node": self.node_state(),
            "kube": self.kube.status() if self.kube is not None else None,
            "forwarding": self.forwarder.status() if self.forwarder is not None else None,
            "cache": self.forward_cache.counts() if self.forward_cache is not None else None,
            "resolver": dict(self.resolver.stats),
        }


class Limits:
    """Who may query and how much (docs/hardening.md): the allow list, the UDP rate limit, and, in
    `status()`, every limit's count for /status and /metrics (the "limits" section)."""

    def __init__(self, config: Config, index: Index) -> None:
        self.config = config
        own = (*config.local_ip, *(host for host, _ in config.listen_addresses))
        self.allow = AllowList(explicit=config.allow_from, own_addresses=own, index=index,
                               node_name=config.node_name)
        if config.allow_from is None:
            index.on_change(self.allow.refresh)  # this node's Node record: its pod CIDRs and addresses
        self.rate = RateLimiter(config.rate_limit) if config.rate_limit > 0 else None
        self.server: DNSServer | None = None

    def status(self) -> Mapping[str, Any]:
        out: dict[str, Any] = {"allow_from": self.allow.status()}
        if self.rate is not None:
            out["rate_limit"] = self.rate.status()
        if self.server is not None:
            resolver = self.server.resolver
            out["pending"] = {"now": resolver.pending, "max": self.config.max_pending,
                              "refused": resolver.stats["refused_pending"]}
            out["tcp"] = {"max_connections": self.config.tcp_max_connections,
                          "open": len(self.server.tcp_clients), "refused": self.server.tcp_refused}
        return out


class _CacheReport:
    """The forward cache as the "cache" section of /status and /metrics (contract in nodedns.metrics).

    Hits are the answers counted under the "cache" plugin's slots: by the UDP hit path (per
    listener) and by the resolver's reads of the hot dict (TCP, and what the hit path passed over).
    """

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def status(self) -> Mapping[str, Any]:
        agent = self.agent
        cache = agent.forward_cache
        assert cache is not None
        hits = {"success": 0, "denial": 0}
        for slot, labels in enumerate(agent.slots.labels):
            if labels.plugin == PLUGIN_CACHE:
                n = agent.cluster_answers.hits[slot] + sum(ls.udp_hit[slot] for ls in agent.server.stats)
                hits["denial" if labels.denial else "success"] += n
        counts = cache.counts()
        stats = agent.resolver.stats
        return {"caches": [{
            "zones": ".",
            "entries": {"success": counts["success"], "denial": counts["denial"]},
            "hits": hits,
            "misses": stats["forwarded"],
            "requests": hits["success"] + hits["denial"] + stats["forwarded"],
            "prefetch": stats["prefetch"],
            "served_stale": stats["stale"],
            "evictions": cache.evictions(),
        }]}


def _read_text(path: str) -> str:
    """A host file as the kubelet reads it: bytes, non-UTF-8 kept as surrogate escapes."""
    with open(path, "rb") as fh:
        return fh.read(resolvconf.MAX_RESOLV_CONF_BYTES + 1).decode("utf-8", "surrogateescape")


# ----------------------------------------------------------------------------------------------
# Running: one agent in this process, or a supervisor of worker processes

EXIT_CONFIG = 2
EXIT_LOOP = 3
FATAL_EXITS = (EXIT_CONFIG, EXIT_LOOP)  # a worker exiting so is not restarted: the supervisor stops


def run_agent(config: Config) -> int:
    """Run one agent on uvloop until stopped; the exit code (errors printed to stderr)."""
    import uvloop

    try:
        return uvloop.run(Agent(config).run())
    except ConfigError as exc:
        print(f"nodedns: config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except LoopDetected as exc:
        print(f"nodedns: fatal: {exc}", file=sys.stderr)
        return EXIT_LOOP
    except ManifestError as exc:
        print(f"nodedns: manifests: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"nodedns: cannot start: {exc}", file=sys.stderr)
        return 1


def _worker_main(config: Config, number: int) -> None:
    from nodedns import logutil

    logutil.setup(config.log_level, config.log_format)
    log.info("worker %d started (pid %d)", number, multiprocessing.current_process().pid or 0)
    sys.exit(run_agent(config))


def concrete_ports(config: Config) -> Config:
    """Listen addresses with port 0 replaced by a port free for UDP and TCP (workers must agree)."""
    if all(port for _, port in config.listen_addresses):
        return config
    out = []
    for host, port in config.listen_addresses:
        if port == 0:
            udp, tcp = bind_pair(host, 0, reuse_port=False)
            port = udp.getsockname()[1]
            udp.close()
            tcp.close()
        out.append((host, port))
    return dataclasses.replace(config, listen=tuple(out))


class Supervisor:
    """N worker processes sharing the listen addresses (SO_REUSEPORT); a dead one is restarted."""

    def __init__(self, config: Config, *, grace: float = 15.0) -> None:
        self.config = concrete_ports(config)
        self.grace = grace
        self.ctx = multiprocessing.get_context("spawn")
        self.workers: dict[int, multiprocessing.process.BaseProcess] = {}
        self.started: dict[int, float] = {}
        self.backoff: dict[int, float] = {}
        self.restarts = 0
        self.stopping = False

    def _start(self, number: int) -> None:
        proc = self.ctx.Process(target=_worker_main, args=(self.config, number), name=f"nodedns-worker-{number}")
        proc.start()
        self.workers[number] = proc
        self.started[number] = time.monotonic()
        log.info("worker %d: pid %s", number, proc.pid)

    def request_stop(self, *_: Any) -> None:
        self.stopping = True

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.request_stop)
        log.info("starting %d workers on %s", self.config.workers,
                 ", ".join(f"{h}:{p}" for h, p in self.config.listen_addresses))
        for number in range(self.config.workers):
            self._start(number)
        code = 0
        pending: dict[int, float] = {}  # worker number -> restart time
        while not self.stopping:
            sentinels = {p.sentinel: n for n, p in self.workers.items() if n not in pending}
            multiprocessing.connection.wait(list(sentinels), timeout=0.2)
            now = time.monotonic()
            for number, proc in list(self.workers.items()):
                if number in pending or proc.is_alive():
                    continue
                exitcode = proc.exitcode
                if exitcode in FATAL_EXITS:
                    log.error("worker %d exited with %s: stopping", number, exitcode)
                    code = int(exitcode or 1)
                    self.stopping = True
                    break
                lived = now - self.started[number]
                delay = 0.0 if lived > 30 else min(max(self.backoff.get(number, 0.5) * 2, 1.0), 30.0)
                self.backoff[number] = delay
                log.warning("worker %d (pid %s) died (exit %s); restarting in %.1fs", number, proc.pid, exitcode,
                            delay)
                pending[number] = now + delay
            for number, when in list(pending.items()):
                if now >= when and not self.stopping:
                    del pending[number]
                    self.restarts += 1
                    self._start(number)
        self._stop_all()
        return code

    def _stop_all(self) -> None:
        for proc in self.workers.values():
            if proc.is_alive() and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        deadline = time.monotonic() + self.grace
        for proc in self.workers.values():
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(2.0)


def supervise(config: Config) -> int:
    """Run `config.workers` worker processes until SIGTERM/SIGINT; the exit code."""
    if config.setup_interface is not None or config.firewall != "none":
        # every worker would ensure and tear down the same link and rules: not until the node part
        # moves to the supervisor
        print("nodedns: config error: workers: --workers > 1 cannot be combined with --setup-interface or "
              "--firewall yet", file=sys.stderr)
        return EXIT_CONFIG
    return Supervisor(config).run()
