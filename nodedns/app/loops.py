"""Forwarding-loop probes: one through our own listener for every upstream group, the routes marked as loops
probed again, and what a probe that came back several times means (the route loops)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from nodedns.config import HostPort
from nodedns.forward.loops import probe_loops, send_probe
from nodedns.forward.upstream import Forwarder, Group
from nodedns.serve.forwarding import LOOP_SIGHTINGS
from nodedns.serve.resolver import Resolver

log = logging.getLogger("nodedns.app")  # the agent's lines, as they always were

LOOP_RECHECK = 30.0  # seconds between probes of a route marked as a loop


class LoopProbes:
    """The loop probes of one agent's forwarder, sent through its own listener (`bound()`: where it listens)."""

    def __init__(self, *, forwarder: Forwarder | None, resolver: Resolver, bound: Callable[[], Sequence[HostPort]],
                 upstream_timeout: float) -> None:
        self.forwarder = forwarder
        self.resolver = resolver
        self.bound = bound
        self.upstream_timeout = upstream_timeout

    async def probe_all(self) -> None:
        """A loop probe through our own listener for every upstream group (at start, after a reload)."""
        assert self.forwarder is not None
        await self.probe(self.forwarder.groups())

    async def probe(self, groups: list[Group]) -> None:
        """Probe these groups; one marked as a loop whose probe now comes back answered, and seen no more
        than the resolver allows, is a loop no longer (fixed outside our config, say)."""
        host, port = self.bound()[0]
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        timeout = self.upstream_timeout * 2 + 0.5

        async def send(name: str) -> bool:
            return await send_probe(host, port, name, wait=timeout)

        forwarding = self.resolver.forwarding
        results = await probe_loops(groups, send=send, register=forwarding.add_loop_probe)
        for group, name, answered in results:
            if group.loop is not None and answered and forwarding.loop_probes.get(name, 0) <= LOOP_SIGHTINGS:
                group.loop = None
                log.warning('forwarding loop through the upstreams of zone "%s" is gone: forwarding there again',
                            group.label)

    async def recheck(self) -> None:
        """Every LOOP_RECHECK seconds, probe the routes marked as loops again."""
        assert self.forwarder is not None
        while True:
            await asyncio.sleep(LOOP_RECHECK)
            looping = self.forwarder.loops()
            if looping:
                await self.probe(looping)

    def detected(self, qname: str, seen: int) -> None:
        """Our probe came back `seen` times: its route loops. The cluster zone and the other routes keep being
        answered; names for that route get SERVFAIL (the resolver) until a reload changes it or a recheck
        finds it fixed. Loudly: the log, /readyz and /status (the "upstream" section), the metric."""
        assert self.forwarder is not None
        group = self.forwarder.mark_loop(qname, seen)
        if group is None:
            return  # already marked
        servers = ", ".join(srv.text for srv in group.servers)
        log.error('forwarding loop detected for zone "%s": our probe "HINFO %s." came back %d times through the '
                  "upstreams (%s). An upstream forwards to this agent (e.g. a resolv.conf naming 127.0.0.53 or the "
                  "node-local address); point --upstream / --upstream-resolv-conf at a real resolver. Names "
                  "forwarded there get SERVFAIL until then; the cluster zone is answered as usual",
                  group.label, qname, seen, servers)
