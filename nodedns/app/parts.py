"""The parts a mode chooses for the agent, each with its contract, and the one process's own parts.

An `Agent` (nodedns.app.agent) is the lifecycle: it starts and stops its parts in order. What differs
between the modes (one process, the --workers supervisor, a worker, `nodedns shadow`) is which parts
it holds, chosen in nodedns.workers.modes (the shadow's in nodedns.shadow.agent):

  Listeners     where the DNS questions come in: the agent's own sockets (`OwnSockets`: one process, a
                worker), the supervisor's worker processes (nodedns.workers.supervisor.Fleet), the packet
                capture (nodedns.shadow.agent.Capture)
  IndexSource   where the index comes from: the API or --manifests (`IndexOwner`), or the supervisor's
                pushes (nodedns.workers.worker.IndexClient)
  WarmState     what the answering processes hold across a hand-over (the forward caches): this
                process's (`LocalWarm`) or the workers' (Fleet)
  Followers     who holds what the index owner derives, told when it changes (the supervisor's workers)
  Answering     the answering parts that differ (the cache's share, autopath, the allow list, where
                cluster misses go, the tally, insight), built before the agent (`own_answering`)
  Mode          the values a mode sets (its signals, its name in the "event_loop" section, ...)
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import signal
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from nodedns.app.build import own_addresses
from nodedns.cluster import manifests
from nodedns.cluster.index import Index
from nodedns.config import Config, endpoint_text
from nodedns.forward.store import ForwardCache
from nodedns.forward.upstream import Forwarder
from nodedns.node.handover import Peer
from nodedns.podconf.searchpath import Autopath
from nodedns.serve.answers import Remote
from nodedns.serve.limits import AllowList
from nodedns.serve.server import DNSServer
from nodedns.serve.tally import Tally

if TYPE_CHECKING:  # imported where used: --workers processes never load the API client or insight
    from nodedns.cluster import apisync
    from nodedns.cluster.watcher import Timing
    from nodedns.observe.insight import Insight
    from nodedns.observe.observer import Provider

log = logging.getLogger("nodedns.app")

WARM_CACHE = b"C"  # a hand-over part: one process's ForwardCache.export
WARM_EDNS = b"E"  # a hand-over part: one forwarder's EDNS memory (JSON)


@dataclasses.dataclass(frozen=True)
class Mode:
    """The values a mode sets (its parts are chosen beside them, in nodedns.workers.modes)."""

    process: str = "main"  # how this process is named in the "event_loop" section (supervisor, worker N)
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)  # each starts the stop sequence
    log_ready: bool = True  # log "ready: <counts>" once /readyz says ready (a worker: "worker N serving")
    trim_heap: bool = True  # this process answers DNS: give back the heap a burst of answers leaves free
    refuse_duplicates: bool = True  # refuse to start beside a server of our address that is not in our roster
    watches_host_file: bool = True  # re-reads --host-resolv-conf as it changes (a worker renders nothing from it)
    decides_aaaa: bool = True  # --filter-aaaa auto decided here (a worker is told by its supervisor)
    reads_hosts: bool = True  # reads the --hosts files (a worker maps the table its supervisor built)
    forwards: bool = True  # sends queries upstream (a shadow reads the upstream config, sends nothing)


ONE_PROCESS = Mode()


@dataclasses.dataclass(frozen=True)
class Answering:
    """The answering parts that differ by mode, built before the agent (which wires them in)."""

    cache_bytes: int  # this process's share of --cache-max-bytes
    autopath: Autopath | None  # --autopath: plans from the index, or pushed by the supervisor
    allow: AllowList | None  # None: Limits builds the allow list from the config and the index
    remote: Remote | None  # where cluster misses are asked (None: this process owns the index)
    tally: Tally | None  # what the listeners count by client address (None: no listener answers here)
    insight: Insight | None  # the figures per Pod (None: off, or kept by the supervisor)


def own_answering(config: Config, index: Index, *, tally: bool = True, cache_bytes: int | None = None) -> Answering:
    """The answering parts of the index owner: autopath from the index, the allow list from the config, the
    cluster answered here, insight on the index (`tally`: its own listeners count by client)."""
    autopath = Autopath(index=index, zone=config.cluster_domain, node_name=config.node_name) if config.autopath \
        else None
    on = config.insight == "on"
    insight = None
    if on:
        from nodedns.observe.insight import Insight  # here: a --workers process holds no Insight

        insight = Insight(index=index, node_name=config.node_name, zone=config.cluster_domain,
                          own_addresses=own_addresses(config), autopath=autopath)
    return Answering(cache_bytes=config.cache_max_bytes if cache_bytes is None else cache_bytes, autopath=autopath,
                     allow=None, remote=None, tally=Tally() if on and tally else None, insight=insight)


# -- where the DNS questions come in ---------------------------------------------------------------


class Listeners(Protocol):
    """Where the DNS questions come in, and what the agent's readiness, liveness and node loop ask of them."""

    probes_loops: bool  # loop probes go through them at start and after a reload (they answer our own probe)
    rechecks_loops: bool  # routes marked as loops are probed again every LOOP_RECHECK

    async def bind(self) -> None:
        """Start taking questions (OSError or ListenError: the start fails)."""

    def binds_after_sync(self, others: list[Peer]) -> bool:
        """Whether to bind only once the index has synced (`others`: the live agents of our roster)."""

    async def wait_serving(self) -> None:
        """Return once every listener serves (after bind; the index has synced)."""

    def problems(self) -> list[str]:
        """Why the listeners do not serve (empty: they do), for /readyz."""

    def dead(self) -> list[str]:
        """Why the agent is not live (empty: it is), asked while it runs or stops, for /healthz."""

    def can_capture(self) -> bool:
        """Whether traffic may be steered to us (the node loop; the index has synced)."""

    def capture_hold(self) -> str | None:
        """Why the local IPs and rules must not be put back now even if a probe is answered (None: they may)."""

    async def close(self, *, forced: bool) -> None:
        """Leave the addresses: drain what is queued and in flight (at once when `forced`), close."""

    def about(self) -> dict[str, Any]:
        """Where this agent takes questions, for the answers of the debug routes ("dns", ...)."""

    def listening(self) -> list[str]:
        """The bound DNS addresses, for /status."""


class OwnSockets:
    """The agent's own DNSServer: UDP and TCP sockets on every listen address (one process, or a worker)."""

    probes_loops = True
    rechecks_loops = True

    def __init__(self, server: DNSServer, *, config: Config, defer: bool | None = None,
                 on_bound: Callable[[], None] | None = None) -> None:
        self.server = server
        self.config = config
        self.defer = defer  # None: bind after the sync only beside a serving predecessor; else as told
        self.on_bound = on_bound

    async def bind(self) -> None:
        await self.server.start()
        if self.on_bound is not None:
            self.on_bound()

    def binds_after_sync(self, others: list[Peer]) -> bool:
        """A predecessor serves these addresses: sync first, so we never answer beside it unsynced."""
        if self.defer is not None:
            return self.defer
        return any(p.serving for p in others)

    async def wait_serving(self) -> None:
        return None  # bound before the agent runs; the index has synced

    def problems(self) -> list[str]:
        return [] if self.server.alive() else ["the DNS listeners are not serving"]

    def dead(self) -> list[str]:
        return self.problems()

    def can_capture(self) -> bool:
        return self.server.alive()

    def capture_hold(self) -> str | None:
        return None  # one process answers its own probes

    async def close(self, *, forced: bool) -> None:
        drain = 0.0 if forced else max(1.0, 2 * self.config.upstream_timeout + 0.5)
        await self.server.retire(drain=drain)

    def about(self) -> dict[str, Any]:
        bound = self.server.bound or self.config.listen_addresses
        return {"dns": [endpoint_text(address) for address in bound]}

    def listening(self) -> list[str]:
        return [f"{h}:{p}" for h, p in self.server.bound]


# -- where the index comes from --------------------------------------------------------------------


class IndexSource(Protocol):
    """Where the index comes from."""

    info: dict[str, Any]  # the "source" of /status

    async def load(self) -> None:
        """Load it, or start syncing it (the agent is started but for this)."""

    async def wait_synced(self) -> None:
        """Return once the index is complete."""

    def status(self) -> Mapping[str, Any] | None:
        """The "kube" of /status (None: no API watch)."""

    async def stop(self) -> None:
        """Stop syncing."""


class IndexOwner:
    """The index loaded from --manifests, or synced from the API (--kubeconfig, else in-cluster)."""

    def __init__(self, *, config: Config, index: Index, add_provider: Callable[[str, Provider], None]) -> None:
        self.config = config
        self.index = index
        self.add_provider = add_provider
        self.info: dict[str, Any] = {}
        self.kube: apisync.KubeSync | None = None
        self.kube_timing: Timing | None = None  # None: watcher.Timing() (tests shorten it)
        self.kube_service_account_dir: str | None = None  # None: kubeapi.SERVICE_ACCOUNT_DIR

    async def load(self) -> None:
        path = self.config.manifests
        if path is None:
            await self._start_kube()
            return
        # read as a stream and shrunk object by object in a thread: the raw objects never pile up
        items = await asyncio.to_thread(
            functools.partial(manifests.changes, path, multicluster=bool(self.config.multicluster_zone)))
        loaded = self.index.load_changes(items)
        del items
        log.info("loaded %d objects from %s (%d skipped)", loaded, path, self.index.skipped)
        self.info = {"kind": "manifests", "path": path, "loaded": loaded, "skipped": self.index.skipped,
                     "loaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self._warn_missing_namespaces()
        self.index.mark_synced()

    async def _start_kube(self) -> None:
        """Watch the API server: --kubeconfig FILE, else the in-cluster service account."""
        # here: a --workers process never loads the API client (urllib3, orjson)
        from nodedns.cluster import apisync, kubeapi
        from nodedns.cluster.watcher import Timing

        cfg = self.config
        self.kube = apisync.KubeSync(
            index=self.index,
            source=kubeapi.ApiSource(kubeconfig=cfg.kubeconfig,
                                  service_account_dir=self.kube_service_account_dir or kubeapi.SERVICE_ACCOUNT_DIR),
            resources=apisync.resources(pods=cfg.pods, node_name=cfg.node_name,
                                     multicluster=bool(cfg.multicluster_zone)),
            timing=dataclasses.replace(self.kube_timing or Timing(), relist_spread=cfg.kube_relist_spread),
        )
        self.info = {"kind": "kubernetes API"}
        self.add_provider("sync", self.kube)
        await self.kube.start()

    async def wait_synced(self) -> None:
        """Return once the index is complete (at once for --manifests; bound it with asyncio.timeout)."""
        if self.kube is not None:
            await self.kube.wait_synced()

    def status(self) -> Mapping[str, Any] | None:
        return self.kube.status() if self.kube is not None else None

    async def stop(self) -> None:
        if self.kube is not None:
            await self.kube.stop()

    def _warn_missing_namespaces(self) -> None:
        missing = sorted({ns for ns, _ in self.index.services} - self.index.namespaces)
        if missing:
            log.warning(
                "services in namespaces without a Namespace object (their names answer NXDOMAIN, as the "
                "spec requires): %s",
                ", ".join(missing),
            )
        missing = sorted({ns for ns, _ in self.index.service_imports} - self.index.namespaces)
        if missing:
            log.warning("ServiceImports in namespaces without a Namespace object (not imported here: their "
                        "clusterset names answer NXDOMAIN): %s", ", ".join(missing))


# -- the forward caches across a hand-over, and who follows the owner's derived data --------------


class WarmState(Protocol):
    """What the answering processes hold across a hand-over: their forward caches and EDNS memories."""

    async def export(self) -> list[bytes]:
        """The parts of a hand-over file (nodedns.node.handover.write_warm) for a newer agent."""

    def load(self, parts: list[bytes]) -> tuple[int, int]:
        """Load what the running agent left: (entries, EDNS memories)."""


class LocalWarm:
    """This process's forward cache and forwarder, as hand-over parts."""

    def __init__(self, *, forward_cache: ForwardCache | None, forwarder: Forwarder | None) -> None:
        self.forward_cache = forward_cache
        self.forwarder = forwarder

    def parts(self) -> list[bytes]:
        """This process's forward cache and EDNS memory, as parts of a hand-over file (handover.write_warm)."""
        parts = []
        if self.forward_cache is not None:
            parts.append(WARM_CACHE + self.forward_cache.export())
        if self.forwarder is not None:
            parts.append(WARM_EDNS + json.dumps(self.forwarder.export_edns()).encode())
        return parts

    async def export(self) -> list[bytes]:
        return self.parts()

    def load(self, parts: list[bytes]) -> tuple[int, int]:
        """Load hand-over parts into this process's forward cache and forwarder: (entries, EDNS memories). A
        part that fails in any way (a value out of range, bytes that are not what they say) is skipped whole
        with one log line; the others are loaded."""
        entries = edns = 0
        for part in parts:
            kind, body = part[:1], part[1:]
            try:
                if kind == WARM_CACHE and self.forward_cache is not None:
                    entries += self.forward_cache.load(body)
                elif kind == WARM_EDNS and self.forwarder is not None:
                    edns += self.forwarder.load_edns(json.loads(body))
            except Exception as exc:  # noqa: BLE001 - whatever breaks a part, the agent starts without it
                log.warning("hand-over: part of the running nodedns's forward cache cannot be used (%d bytes "
                            "skipped): %s: %s", len(part), type(exc).__name__, exc)
        return entries, edns


class Followers(Protocol):
    """Who holds what the index owner derives besides it (the --workers supervisor's workers): told when it
    changes. The index changes themselves reach them through the watch path (a change listener)."""

    def federations_changed(self) -> None:
        """The federation map changed: every answer built with the old one goes."""

    def search_lists_changed(self) -> None:
        """The node's resolv.conf was read (again): the autopath plans are formed again."""

    def aaaa_changed(self) -> None:
        """--filter-aaaa auto turned on or off."""

    def warm_loaded(self) -> None:
        """The running agent's warm state is loaded, or there is none."""

    def hosts_changed(self) -> None:
        """The --hosts files were read (again): a new table (the agent's `hosts_files`)."""
