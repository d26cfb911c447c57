"""Wiring: builds every part from the Config, starts them in order and stops them in reverse.

Start: listeners bound (answering SERVFAIL for would-be NXDOMAINs until synced, or forwarding them
to --fallback-upstream) -> cluster source loaded (--manifests) or API watchers started (--kubeconfig,
else in-cluster) -> running; `wait_synced()` tells when the index is complete. Stop (SIGTERM/SIGINT):
listeners closed -> watchers stopped -> exit. Later parts (forwarder, status, interface, firewall)
hook into the same order.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping
from typing import Any

from nodedns import kube, manifests
from nodedns.cache import ClusterAnswers
from nodedns.config import Config
from nodedns.fallback import Fallback
from nodedns.index import Index
from nodedns.records import ClusterRecords, ZoneSettings, ns_addresses
from nodedns.resolver import Resolver
from nodedns.server import DNSServer

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


class Agent:
    """One nodedns agent: index, records, resolver, listeners, and their lifecycle."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.index = Index()
        self.records = ClusterRecords(self.index, zone_settings(config))
        self.cluster_answers = ClusterAnswers()
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
        )
        self.state = "new"
        self._stop: asyncio.Event | None = None
        self.kube: kube.KubeSync | None = None
        self.kube_timing = kube.Timing()  # tests shorten it
        self.kube_service_account_dir = kube.SERVICE_ACCOUNT_DIR

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self.state = "starting"
        self._stop = asyncio.Event()
        await self.server.start()
        await self._load_source()
        self.state = "running"
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

    def request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    async def wait_stopped(self) -> None:
        assert self._stop is not None
        await self._stop.wait()

    async def shutdown(self) -> None:
        self.state = "stopping"
        self.server.close()
        await self.server.wait_closed()
        if self.kube is not None:
            await self.kube.stop()
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
            "kube": self.kube.status() if self.kube is not None else None,
        }
