"""The hand-over between two agents of one node: the predecessor that serves and the successor that starts.

The successor joins the roster (nodedns.node.handover); alone there, another process serving one of its
addresses is a duplicate, not a predecessor, and is refused before the node is touched (node-cache's
terminating Pod is given HOLDER_WAIT seconds to let go). It prepares the node (a live predecessor's
interface and rules adopted, a crashed one's removed), loads the forward cache the running agent leaves it,
and says it serves once bound, synced and ready but for saying so; the predecessor then steps aside (its
HTTP listeners close) and, stopping, leaves the interface and the rules to it (or to node-cache's Pod on
the way back from a migration).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from nodedns.app.parts import Followers, WarmState
from nodedns.config import Config
from nodedns.errors import DuplicateAgent, HandoverError, NetifError
from nodedns.node import handover
from nodedns.observe.observer import Observer, Provider

if TYPE_CHECKING:  # imported where used: --workers processes never load pyroute2
    from nodedns.node.netif import NodeNetwork

log = logging.getLogger("nodedns.app")  # the name every log line of the agent has had

# the last readiness reason of an agent in a hand-over roster: ready in every other way, its entry not yet
# saying so (a newcomer joining then must see it serving)
NOT_ANNOUNCED = "hand-over: not yet marked serving in the roster"
HOLDER_POLL = 0.5  # seconds between two looks at a port another process holds (Agent.HOLDER_WAIT)


class Host(Protocol):
    """What the hand-over reads of the agent (its parts may be replaced by a mode after it is built)."""

    config: Config
    handover: handover.Handover | None
    node: NodeNetwork | None
    warm: WarmState
    followers: Followers | None
    observer: Observer
    HOLDER_WAIT: float

    def add_provider(self, section: str, provider: Provider) -> None: ...

    def stopping_now(self) -> bool: ...

    async def wait_serving(self) -> None: ...


class Succession:
    """One agent's side of the hand-over: as the successor that starts and as the predecessor that leaves."""

    def __init__(self, agent: Host) -> None:
        self.agent = agent
        self.node_prepared = False  # the node was touched (so the teardown has something to remove)

    async def join(self) -> list[handover.Peer]:
        """Register in the hand-over roster; the live agents already there (none without a roster)."""
        agent = self.agent
        if agent.handover is None:
            return []
        try:
            others = await agent.handover.join()
        except (OSError, HandoverError) as exc:
            log.warning("hand-over disabled: cannot use %s (%s); a new agent started beside this one would "
                        "tear down what this one uses", agent.handover.roster.directory, exc)
            agent.handover = None
            return []
        agent.add_provider("handover", agent.handover)
        return others

    async def refuse_duplicates(self) -> None:
        """No agent of our roster lives here: another process serving one of our addresses is not a predecessor
        handing over but a duplicate, and SO_REUSEPORT would let the kernel split the queries between us. An
        agent that manages the node's interface first gives a holder that is no nodedns agent HOLDER_WAIT
        seconds to let go (`_let_go`); another nodedns agent is refused at once."""
        config = self.agent.config
        found = await asyncio.to_thread(handover.udp_occupants, config.listen_addresses)
        if found and config.setup_interface is not None and not any(o.is_nodedns for o in found):
            found = await self._let_go(found)
        if found:
            raise DuplicateAgent(
                f"{found[0].describe()}, and it is not a nodedns agent handing over to this one (not in the "
                "hand-over roster); two servers on one address would split the queries between them. Stop it, or "
                "start this agent as its successor: the same --lock-dir and --setup-interface (or, without one, "
                "the same first --listen address)")

    async def _let_go(self, found: list[handover.Occupant]) -> list[handover.Occupant]:
        """During a migration from NodeLocal DNSCache, node-cache's Pod is still terminating when this one
        starts (the DaemonSet declares no ports, so nothing holds this Pod back): its socket on our address
        goes once it has removed its rules and interface. Wait for that, saying so, before touching the
        node; what still holds the address after HOLDER_WAIT seconds (or when we are stopped) is refused."""
        agent = self.agent
        loop = asyncio.get_running_loop()
        started = loop.time()
        log.warning("%s, which is no nodedns agent of this roster (node-cache's Pod still terminating, in a "
                    "migration?): waiting up to %gs for it to let go before setting up the interface and rules",
                    found[0].describe(), agent.HOLDER_WAIT)
        while found and loop.time() - started < agent.HOLDER_WAIT and not agent.stopping_now():
            await asyncio.sleep(HOLDER_POLL)
            found = await asyncio.to_thread(handover.udp_occupants, agent.config.listen_addresses)
        if not found:
            log.info("the other process let go of our DNS address after %.1fs: starting", loop.time() - started)
        return found

    async def prepare_node(self, *, clean: bool) -> None:
        """The node's interface and rules (`clean`: no live predecessor, so its rules are leftovers)."""
        assert self.agent.node is not None
        self.node_prepared = True
        try:
            await self.agent.node.prepare(clean=clean)
        except NetifError:
            self.node_prepared = False  # refused (no NET_ADMIN): nothing was made, nothing to tear down
            raise

    async def hand_over(self, entry: handover.Handover, *, yield_status: Callable[[], Awaitable[None]],
                        take_back_status: Callable[[], Awaitable[None]]) -> None:
        """Say we serve once bound, synced and ready but for saying so (a newcomer with a bad config never makes
        its predecessor step aside); step aside (HTTP listeners) for a newer agent that serves. /readyz says
        ready only once the roster says serving: a successor started on that signal must see us serving (else
        it would think itself alone and answer beside us before its own sync)."""
        await self.agent.wait_serving()
        while [r for r in self.agent.observer.readiness() if r != NOT_ANNOUNCED]:  # noqa: ASYNC110 - polled parts
            await asyncio.sleep(0.05)
        await entry.set_serving(True)
        await entry.watch(yield_status, take_back_status, functools.partial(self.leave_warm_state, entry))

    # -- the forward cache across a hand-over ------------------------------------------------

    async def leave_warm_state(self, entry: handover.Handover) -> None:
        """A newer agent joined: leave it our forward cache, so it starts warm."""
        started = time.perf_counter()
        parts = await self.agent.warm.export()
        size = await entry.write_warm(parts)
        if size:
            ms = round((time.perf_counter() - started) * 1000, 1)
            entry.warm["left"] = {"bytes": size, "ms": ms}
            log.info("hand-over: left the forward cache for the newer agent (%d bytes in %.0f ms)", size, ms)

    async def take_warm_state(self, entry: handover.Handover, others: list[handover.Peer]) -> None:
        """Load what the running agent left (before we bind: the first answers come from its cache)."""
        started = time.perf_counter()
        try:
            parts, peer = await entry.warm_state(others)
            if not parts or peer is None:
                return
            loading = time.perf_counter()
            entries, edns = self.agent.warm.load(parts)
        finally:
            if self.agent.followers is not None:
                self.agent.followers.warm_loaded()  # the supervisor tells its workers the index synced only now
        done = time.perf_counter()
        taken = {"entries": entries, "edns": edns, "from_pid": peer.pid, "ms": round((done - started) * 1000, 1),
                 "load_ms": round((done - loading) * 1000, 1)}
        entry.warm["taken"] = taken
        log.info("hand-over: %d forward cache entries and %d EDNS memories from the running nodedns (pid %d) in "
                 "%.0f ms", entries, edns, peer.pid, taken["ms"])

    # -- leaving ---------------------------------------------------------------------------

    async def teardown_node(self, *, retry: bool) -> None:
        """Remove the rules and the interface, unless another agent on the node still uses them (or this one
        never touched them: it refused to start)."""
        node = self.agent.node
        assert node is not None
        if not self.node_prepared:
            return
        entry = self.agent.handover
        if entry is None:
            await node.teardown(retry=retry, keep_link=await self._foreign_server())
            return
        async with entry.deciding() as others:
            if others is None or others:
                who = ", ".join(f"pid {p.pid}" for p in others) if others else "the roster could not tell"
                log.info("hand-over: leaving the interface and the rules to the other agent (%s)", who)
                await node.teardown(retry=retry, keep=True)
            else:
                await node.teardown(retry=retry, keep_link=await self._foreign_server())

    async def _foreign_server(self) -> str:
        """Who else, no nodedns agent, serves our DNS addresses as we leave ("" when nobody): node-cache's Pod,
        started beside this one on the way back from a migration. Its addresses are on our interface: we
        leave the interface to it (our rules go), or it would answer nothing until it adds them again."""
        config = self.agent.config
        if config.setup_interface is None:
            return ""
        found = await asyncio.to_thread(handover.udp_occupants, config.listen_addresses)
        foreign = [o for o in found if not o.is_nodedns]
        return f"pid {foreign[0].pid} ({foreign[0].command or 'not visible here'})" if foreign else ""
