"""Wiring: builds every part from the Config, starts them in order and stops them in reverse.

Start: node prepared (a crashed predecessor's capture rules removed, interface and local IPs
ensured) -> listeners bound (answering SERVFAIL for would-be NXDOMAINs until synced, or forwarding
them to --fallback-upstream) -> cluster source loaded (--manifests) or API watchers started
(--kubeconfig, else in-cluster) -> running; `wait_synced()` tells when the index is complete. The
node reconcile loop installs the conntrack-bypass rules once the listeners serve and the index has
synced, and re-asserts link and rules every --sync-interval.

Stop: the first SIGTERM/SIGINT makes readiness false and starts the lameduck (--lameduck, listeners
keep answering); then the rules are removed, the interface torn down, the listeners closed, the
watchers stopped, exit 0. A second signal cuts the lameduck (and any xtables-lock retries) short:
the process exits at once, after the few milliseconds the rule and link removal take, so no capture
rule outlives us.

For the status endpoint (/healthz, /readyz): `Agent.live()` and `Agent.ready()` each return
`(ok, reasons)`, reasons being short human sentences for the 503 body; `Agent.node_state()` is the
interface/firewall state for /status (setup errors by cause, rules installed, added-back count).
The status endpoint starts right after the listeners (so /healthz and /readyz answer during the
sync) and closes last. Parts report to it through `add_provider(section, part)` (the API watch as
"sync", the node side as "node"; contract in metrics.py and docs/status.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Mapping
from typing import Any

from nodedns import firewall, kube, logutil, manifests, resolvconf
from nodedns.cache import ClusterAnswers
from nodedns.config import Config
from nodedns.explain import Explainer, renderer_search_list
from nodedns.fallback import Fallback
from nodedns.index import Index
from nodedns.metrics import Sampler, Slots
from nodedns.netif import Link, NodeNetwork
from nodedns.observe import Observer, Provider
from nodedns.records import ClusterRecords, ZoneSettings, ns_addresses
from nodedns.resolver import Resolver
from nodedns.server import DNSServer
from nodedns.status import StatusServer

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
        (config.cluster_domain, "in-addr.arpa", "ip6.arpa", *(d for d, _ in config.stub_domain)),
        authoritative=(config.cluster_domain, "in-addr.arpa", "ip6.arpa"),
        stub=(d for d, _ in config.stub_domain),
    )


class Agent:
    """One nodedns agent: index, records, resolver, listeners, and their lifecycle."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.index = Index()
        self.records = ClusterRecords(self.index, zone_settings(config))
        self.slots = metric_slots(config)
        self.cluster_answers = ClusterAnswers(stamp=self.slots.stamp)
        self.fallback = (
            Fallback(config.fallback_upstream, timeout=config.upstream_timeout)
            if config.fallback_upstream is not None else None
        )
        self.resolver = Resolver(
            records=self.records,
            index=self.index,
            cluster_answers=self.cluster_answers,
            max_udp_size=config.max_udp_size,
            before_sync=self.fallback,
        )
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
            timeout=2 * config.upstream_timeout + 1,
        )
        self.status_server: StatusServer | None = None
        self._housekeeping: asyncio.Task[None] | None = None

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
        await self._start_status()
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep(), name="housekeeping")
        await self._load_source()
        self.state = "running"
        if self.node is not None:
            self.node.start(can_capture=self._can_capture)
        if self.kube is None:
            log.info("ready: %s", ", ".join(f"{k} {v}" for k, v in self.index.counts().items()))

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

    async def _start_status(self) -> None:
        listen = self.config.status_listen
        if listen is None:
            return
        settings = self.kubelet_dns()
        host_text: str | None = None
        if self.config.host_resolv_conf:
            try:
                host_text = await asyncio.to_thread(_read_text, self.config.host_resolv_conf)
            except OSError as exc:
                log.warning("cannot read --host-resolv-conf %s (%s): pod resolv.conf rendering goes on without "
                            "it", self.config.host_resolv_conf, exc)
        self.explainer.search_list = renderer_search_list(settings, host_text)
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
        }


def _read_text(path: str) -> str:
    """A host file as the kubelet reads it: bytes, non-UTF-8 kept as surrogate escapes."""
    with open(path, "rb") as fh:
        return fh.read(resolvconf.MAX_RESOLV_CONF_BYTES + 1).decode("utf-8", "surrogateescape")
