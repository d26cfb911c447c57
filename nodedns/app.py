"""Wiring: builds every part from the Config, starts them in order and stops them in reverse.

Start: listeners bound (answering SERVFAIL for would-be NXDOMAINs until synced) -> cluster source
loaded or synced -> running. Stop (SIGTERM/SIGINT): listeners closed -> exit. Later parts (API
sync, forwarder, status, interface, firewall) hook into the same order.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping
from typing import Any

from nodedns import manifests
from nodedns.cache import ClusterAnswers
from nodedns.config import Config
from nodedns.errors import ConfigError
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
        )
        self.state = "new"
        self._stop: asyncio.Event | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self.state = "starting"
        self._stop = asyncio.Event()
        await self.server.start()
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
