"""Wiring: builds every part from the Config, starts them in order and stops them in reverse.

Start: listeners bound (answering SERVFAIL for would-be NXDOMAINs until synced) -> status endpoint
(so /healthz and /readyz answer during the sync) -> cluster source loaded or synced -> running.
Stop (SIGTERM/SIGINT): unready at once -> listeners closed -> status endpoint closed -> exit.
Later parts (API sync, forwarder, interface, firewall) hook into the same order and report to the
status endpoint through `add_provider(section, part)` (contract in metrics.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Mapping
from typing import Any

from nodedns import logutil, manifests, resolvconf
from nodedns.cache import ClusterAnswers
from nodedns.config import Config
from nodedns.errors import ConfigError
from nodedns.explain import Explainer, renderer_search_list
from nodedns.index import Index
from nodedns.metrics import Sampler, Slots
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
        self.resolver = Resolver(
            records=self.records,
            index=self.index,
            cluster_answers=self.cluster_answers,
            max_udp_size=config.max_udp_size,
        )
        self.server = DNSServer(
            resolver=self.resolver,
            cluster_answers=self.cluster_answers,
            addresses=config.listen_addresses,
            max_udp_size=config.max_udp_size,
            tcp_idle_timeout=config.tcp_idle_timeout,
            tcp_max_connections=config.tcp_max_connections,
            slots=self.slots,
            query_log=Sampler(config.query_log) if config.query_log > 0 else None,
        )
        self.state = "new"
        self._stop: asyncio.Event | None = None
        self.source_info: dict[str, Any] = {}
        self.observer = Observer(self)
        self.explainer = Explainer(
            resolver=self.resolver, index=self.index, slots=self.slots, zone=config.cluster_domain,
            timeout=2 * config.upstream_timeout + 1,
        )
        self.status_server: StatusServer | None = None
        self._housekeeping: asyncio.Task[None] | None = None

    def add_provider(self, section: str, provider: Provider) -> None:
        """Show a part in /status, /metrics and /readyz (contract: nodedns.metrics docstring)."""
        self.observer.add_provider(section, provider)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self.state = "starting"
        self._stop = asyncio.Event()
        await self.server.start()
        await self._start_status()
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep(), name="housekeeping")
        await self._load_source()
        self.state = "running"
        log.info("ready: %s", ", ".join(f"{k} {v}" for k, v in self.index.counts().items()))

    async def _load_source(self) -> None:
        path = self.config.manifests
        if path is None:
            raise ConfigError("manifests", "no cluster source configured: give --manifests FILE")
        items = await asyncio.to_thread(manifests.read, path)
        loaded = self.index.load(items)
        log.info("loaded %d objects from %s (%d skipped)", loaded, path, self.index.skipped)
        self.source_info = {"kind": "manifests", "path": path, "loaded": loaded, "skipped": self.index.skipped,
                            "loaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self._warn_missing_namespaces()
        self.index.mark_synced()

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

    async def shutdown(self) -> None:
        self.state = "stopping"
        self.observer.stopping = True
        self.server.close()
        await self.server.wait_closed()
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
            loop.add_signal_handler(sig, self.request_stop)
        try:
            await self.start()
            await self.wait_stopped()
        finally:
            await self.shutdown()
        return 0

    def status(self) -> Mapping[str, Any]:
        return {
            "state": self.state,
            "synced": self.index.synced,
            "generation": self.index.generation,
            "counts": self.index.counts(),
            "listening": [f"{h}:{p}" for h, p in self.server.bound],
        }


def _read_text(path: str) -> str:
    """A host file as the kubelet reads it: bytes, non-UTF-8 kept as surrogate escapes."""
    with open(path, "rb") as fh:
        return fh.read(resolvconf.MAX_RESOLV_CONF_BYTES + 1).decode("utf-8", "surrogateescape")
