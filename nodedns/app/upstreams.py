"""The forwarding at run time: the forward cache's clock, the upstream files re-read, the routes probed.

Each second the forward cache moves on (the hit paths count its hot answers' TTLs down themselves), and
the hot answers whose second has come (expiry, prefetch point) are looked at, TURN_BUDGET of work a loop
turn. The upstream files
(--upstream-resolv-conf, --kube-dns-config-dir, `zones:`) are re-read on their timer and at once on
SIGHUP; new routes are probed for loops through the agent's own listeners, and a zone whose settings a
reload changed loses its cached answers (the other zones keep theirs). A mode that does not forward
(a shadow) reads the upstream configuration but never sends anything.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from nodedns.app.build import Forwarding
from nodedns.app.loops import LoopProbes
from nodedns.app.parts import Listeners, Mode
from nodedns.config import Config
from nodedns.forward.zones import ZoneTable
from nodedns.runtime.tasks import TURN_BUDGET, Tasks
from nodedns.serve.resolver import Resolver
from nodedns.serve.server import DNSServer

log = logging.getLogger("nodedns.app")  # the name every log line of the agent has had



class Host(Protocol):
    """What the forwarding reads of the agent at run time (a mode may replace its listeners)."""

    config: Config
    mode: Mode
    state: str
    resolver: Resolver
    server: DNSServer
    listeners: Listeners
    loop_probes: LoopProbes
    _tasks: Tasks


class Upstreams:
    """The forwarder, the forward cache and the watcher of the upstream files (`forwarding`) of one agent."""

    def __init__(self, agent: Host, forwarding: Forwarding) -> None:
        self.agent = agent
        self.forwarder = forwarding.forwarder
        self.forward_cache = forwarding.cache
        self.watcher = forwarding.watcher
        self._zone_table = forwarding.zones  # the zones' settings in use (a reload compares against it)
        self._ticker: asyncio.TimerHandle | None = None
        self._stager: asyncio.Handle | None = None  # the next slice of the hot answers looked at (`_stage`)

    def start(self) -> None:
        agent = self.agent
        if self.forwarder is None:
            return
        if not agent.mode.forwards:  # the upstream configuration is read (which names nodedns could forward)
            self.forwarder.set_own_addresses([])  # but nothing is ever sent
            if self.watcher is not None:
                agent._tasks.spawn(self.watcher.run(), "upstream-config")
            return
        # ConfigError: we would forward to ourselves (not bound yet while a predecessor serves)
        self.forwarder.set_own_addresses(agent.server.bound or list(agent.config.listen_addresses))
        self._tick()
        if self.watcher is not None:
            agent._tasks.spawn(self.watcher.run(), "upstream-config")

    def _tick(self) -> None:
        """Move the forward cache to the next second on each second (the answers hot for the last one only
        go), then look at the hot answers whose second has come, a slice a loop turn (`_stage`)."""
        assert self.forward_cache is not None
        delay = self.forward_cache.tick()
        loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(min(max(delay, 0.005), 1.0) + 0.001, self._tick)
        if self._stager is None:
            self._stager = loop.call_soon(self._stage)

    def _stage(self) -> None:
        """Look at a turn's share of the hot answers whose second has come (TURN_BUDGET of work), then let the
        loop run."""
        cache = self.forward_cache
        assert cache is not None
        start = time.perf_counter()
        more = cache.stage()
        while more and time.perf_counter() - start < TURN_BUDGET:
            more = cache.stage()
        self._stager = asyncio.get_running_loop().call_soon(self._stage) if more else None

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        if self._stager is not None:
            self._stager.cancel()

    def reprobe(self) -> None:
        """New upstream routes: probe them for loops too (through our own listeners: a supervisor's workers
        probe through theirs)."""
        agent = self.agent
        if agent.state == "running" and agent.listeners.probes_loops:
            agent._tasks.spawn(agent.loop_probes.probe_all(), "loop-probe")

    def zones_changed(self, table: ZoneTable, changed: set[str]) -> None:
        """A reload changed these zones' settings: their cached answers go, every other zone keeps its own."""
        old = self._zone_table
        self._zone_table = table
        dropped = self.agent.resolver.zones_changed(
            lambda qname: old.zone_for(qname).name in changed or table.zone_for(qname).name in changed)
        log.info("zones reloaded: %s changed (%d cached answers of theirs dropped; the other zones keep theirs)",
                 ", ".join(sorted(z or "." for z in changed)), dropped)

    def hangup(self) -> None:
        """SIGHUP: re-read what can be re-read while running (the upstream files, as the timer does), say
        so in one line; nothing stops. The rest of the configuration takes a restart."""
        log.info("SIGHUP: %s; other settings take a restart", self.reload_files())

    def reload_files(self) -> str:
        """Re-read --upstream-resolv-conf and --kube-dns-config-dir now (a changed, valid config is applied
        and logged as on the timer); what was done, for the log."""
        watcher = self.watcher
        if watcher is None:
            return "nothing to re-read (no upstream resolv.conf or kube-dns ConfigMap directory)"
        self.agent._tasks.spawn(watcher.poll_once(), "upstream-config-reload")
        config = self.agent.config
        files = [f for f in (config.upstream_resolv_conf, config.kube_dns_config_dir) if f]
        return f"re-reading {' and '.join(files)} now"
