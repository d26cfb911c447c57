"""--filter-aaaa auto: whether AAAA questions are answered NODATA, decided by the index owner.

Filtered while the node has no global IPv6 address (our own --local-ip excepted) and no Service an IPv6
ClusterIP, and the index has synced; looked at again every `period` seconds. The decision is given to the
resolver's `nodedns.serve.forwarding.AaaaFilter`; a --workers supervisor tells its workers
(nodedns.workers.worker follows).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from nodedns.cluster.index import Index
from nodedns.serve.resolver import Resolver

log = logging.getLogger("nodedns.app")


class AaaaAuto:
    """The decision from the node's addresses and the index's Services; `changed` when it flips."""

    period = 5.0  # seconds between two looks at the node's addresses and the Services

    def __init__(self, index: Index, resolver: Resolver, local_ip: tuple[str, ...], *,
                 changed: Callable[[], None]) -> None:
        self.index = index
        self.resolver = resolver
        self.local_ip = local_ip
        self.changed = changed

    def node_ipv6(self) -> list[str]:
        """The node's global IPv6 addresses, our own --local-ip excepted (tests replace it)."""
        from nodedns.node.netif import global_ipv6  # noqa: PLC0415 - pyroute2 only where the node is read

        own = set(self.local_ip)
        return [ip for ip in global_ipv6() if ip not in own]

    def decision(self, node_v6: list[str]) -> tuple[bool, str]:
        """(filter, why) from the node's global IPv6 addresses and the Services' ClusterIPs."""
        if node_v6:
            return False, f"the node has a global IPv6 address ({node_v6[0]})"
        for svc in self.index.services.values():
            for ip in svc.cluster_ips:
                if ":" in ip:
                    return False, f"Service {svc.namespace}/{svc.name} has the IPv6 ClusterIP {ip}"
        if not self.index.synced:
            return False, "the index has not synced yet: the Services are not known"
        return True, "the node has no global IPv6 address and no Service an IPv6 ClusterIP"

    async def run(self) -> None:
        """Look again every `period` (the addresses are read in a thread)."""
        while True:
            try:
                node_v6 = await asyncio.to_thread(self.node_ipv6)
            except OSError as exc:
                node_v6 = []
                log.debug("--filter-aaaa auto: cannot read the node's addresses: %s", exc)
            active, reason = self.decision(node_v6)
            if self.resolver.set_aaaa_filter(active, reason):
                self.changed()  # the supervisor tells its workers
            elif self.resolver.aaaa is not None:
                self.resolver.aaaa.reason = reason
            await asyncio.sleep(self.period)
