"""`nodedns shadow`'s agent: the one Agent with a packet capture as its listeners, and the judge it feeds.

Its agent (`shadow`: the agent's index, resolver and HTTP listeners) binds no DNS
address, changes no interface and no rule, holds no hand-over roster and sends nothing: its listeners
are a `Capture`, whose `bind()` opens the capture (nodedns.shadow.sniff: an AF_PACKET socket with a BPF
filter for `--port` on `--interface`, CAP_NET_RAW only) and each captured packet goes to the judge
(nodedns.shadow.judge). Everything else is the agent's: the sync (API or --manifests), the status
listener (/healthz, /readyz, /metrics) and the debug listener (/, /status, /debug/*, and GET
/debug/shadow here). The configuration is `nodedns serve`'s, the same file and flags; what would touch
the node (--setup-interface, --local-ip, --firewall, --lock-dir), --workers, --autopath and --insight
are set aside (`shadow_config`), so the DaemonSet's ConfigMap serves both.

The capture is read on the event loop every `POLL` seconds (`_poll`): what the socket holds (up to
`QUEUE` packets and `QUEUE_BYTES` of them; beyond, a packet is dropped and counted "queue": a Pod's
TCP queries padded to 64 KB fill bytes long before packets) is read in one go and judged in
slices of `BATCH`, the loop turning between them so that the HTTP listeners are answered. One wake-up
per `POLL` instead of one per packet: at 10,000 packets a second the per-packet wake-ups (the poll, a
callback, the read that finds nothing more) were most of the shadow's CPU; the socket's 4 MiB buffer
holds far more than a `POLL` of traffic. The kernel's own drops of the socket (PACKET_STATISTICS) are
counted "kernel". Unpaired queries are expired every `EXPIRE_EVERY` seconds. /readyz is ready once the
capture is open and the index has synced; the capture closing (the interface gone) makes /healthz fail.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from nodedns.app.agent import Agent
from nodedns.app.parts import Mode
from nodedns.config import Config
from nodedns.node.handover import Peer
from nodedns.shadow import sniff
from nodedns.shadow.judge import KEEP, Shadow, summary

if TYPE_CHECKING:
    from nodedns.observe.status import StatusServer

log = logging.getLogger("nodedns.shadowagent")

QUEUE = 8192  # captured packets read in one poll, waiting to be judged
QUEUE_BYTES = 8 << 20  # ... and their bytes
BATCH = 256  # packets judged per turn of the event loop
POLL = 0.05  # seconds between two reads of the capture
EXPIRE_EVERY = 0.5  # seconds between two looks for unpaired queries
RECV = 0x40000  # bytes read per packet (sniff.SNAPLEN)


# it serves no address (the DNS of the node is the one it watches): no duplicate to refuse; sends nothing
SHADOW = Mode(refuse_duplicates=False, trim_heap=False, forwards=False)

def shadow_config(config: Config) -> Config:
    """The configuration with what would touch the node, or answer DNS, set aside (module docstring)."""
    return dataclasses.replace(config, setup_interface=None, local_ip=(), firewall="none", lock_dir=None,
                               workers=1, autopath=False, insight="off", fallback_upstream=None, lameduck=0.0)


class ShadowReport:
    """The "shadow" section of /status and /metrics: the judge's counts and the capture's drops."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture

    def status(self) -> Mapping[str, Any]:
        a = self.capture
        a.count_kernel_drops()
        doc = a.shadow.status()
        doc.update(interface=a.interface, port=a.port, capturing=a.capture is not None, queue=len(a.queue),
                   queue_bytes=a.queued_bytes, recent=list(a.shadow.recent)[:5])
        if a.capture_error:
            doc["unready"] = [f"capture: {a.capture_error}"]
        return doc


class Capture:
    """The listeners of `nodedns shadow`'s agent (module docstring): the capture and the judge it feeds,
    a part of the agent (`shadow` wires it: `Listeners`, the "shadow" section, the routes)."""

    probes_loops = False  # no listener of ours to send a loop probe through
    rechecks_loops = False

    def __init__(self, agent: Agent, *, interface: str, port: int, clock: Callable[[], float] = time.monotonic,
                 max_rate: float | None = None) -> None:
        self.agent = agent
        self.interface = interface
        self.port = port
        kwargs: dict[str, Any] = {} if max_rate is None else {"max_rate": max_rate}
        self.shadow = Shadow(resolver=agent.resolver, index=agent.index, zone=agent.config.cluster_domain, port=port,
                             clock=clock, **kwargs)
        self.capture: socket.socket | None = None
        self.capture_error = ""
        self.queue: collections.deque[bytes] = collections.deque()
        self.queued_bytes = 0  # of the packets in `queue`
        self._buffer = bytearray(RECV)  # each packet is read here, then copied at its own size

    # -- what a shadow does instead of answering ----------------------------------------------

    async def bind(self) -> None:
        """Open the capture (OSError: no CAP_NET_RAW, no such interface)."""
        try:
            self.capture = sniff.open_capture(self.interface, self.port)
        except OSError as exc:
            raise OSError(exc.errno, f"capture on {self.interface} port {self.port}: "
                                     f"{exc.strerror or exc} (it needs CAP_NET_RAW)") from None
        self.agent._tasks.spawn(self._poll(), "shadow-capture")
        self.agent._tasks.spawn(self._expire(), "shadow-expire")
        log.info("shadow: watching DNS on %s port %d (UDP and TCP); answering nothing", self.interface, self.port)

    async def _poll(self) -> None:
        while self.capture is not None:
            self._read()
            while self.queue:
                self._judge()
                if self.queue:
                    await asyncio.sleep(0)  # the HTTP listeners between two slices
            await asyncio.sleep(POLL)

    def _read(self) -> None:
        """What the socket holds, into the queue (at most QUEUE waiting; beyond, dropped and counted)."""
        sock = self.capture
        if sock is None:
            return
        queue, recv, buffer = self.queue, sock.recv_into, self._buffer
        view = memoryview(buffer)
        for _ in range(QUEUE):
            try:
                n = recv(buffer)  # loopback's second copies are dropped by the filter
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # the interface went away: the capture is over
                self._lost(str(exc))
                return
            if len(queue) >= QUEUE or self.queued_bytes + n > QUEUE_BYTES:
                self.shadow.dropped["queue"] += 1
                continue
            queue.append(bytes(view[:n]))
            self.queued_bytes += n

    def _judge(self) -> None:
        """A slice of BATCH queued packets to the judge."""
        queue = self.queue
        packet = self.shadow.packet
        now = self.shadow.clock()
        for _ in range(min(BATCH, len(queue))):
            data = queue.popleft()
            self.queued_bytes -= len(data)
            packet(data, now)

    def _lost(self, why: str) -> None:
        log.error("shadow: the capture on %s failed: %s", self.interface, why)
        self.capture_error = why
        self._close_capture()

    def _close_capture(self) -> None:
        sock, self.capture = self.capture, None
        if sock is not None:
            sock.close()

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(EXPIRE_EVERY)
            self.shadow.expire()

    def count_kernel_drops(self) -> None:
        if self.capture is not None:
            n = sniff.kernel_drops(self.capture)
            if n:
                self.shadow.dropped["kernel"] += n

    def binds_after_sync(self, others: list[Peer]) -> bool:
        return any(p.serving for p in others)  # (no roster: never)

    async def wait_serving(self) -> None:
        return None  # open once bound

    def problems(self) -> list[str]:
        if self.capture is None:
            return [f"the capture on {self.interface} is not open" + (f": {self.capture_error}"
                                                                      if self.capture_error else "")]
        return []

    def dead(self) -> list[str]:
        return self.problems()

    def can_capture(self) -> bool:
        return False  # it touches no node

    def capture_hold(self) -> str | None:
        return None

    async def close(self, *, forced: bool) -> None:
        self._close_capture()
        log.info("shadow: %s", summary(self.shadow.status()))

    def about(self) -> dict[str, Any]:
        return {"dns": [], "shadow": f"{self.interface} port {self.port}"}

    def listening(self) -> list[str]:
        return []

    def shadow_document(self, limit: int = KEEP) -> Mapping[str, Any]:
        self.count_kernel_drops()
        doc = self.shadow.document(limit)
        doc.update(interface=self.interface, capturing=self.capture is not None, queue=len(self.queue),
                   synced=self.agent.index.synced, agent=self.agent.about())
        return doc

    def status_server(self) -> StatusServer:
        """The agent's status and debug routes, with GET /debug/shadow (no resolv.conf route, no top)."""
        from nodedns.observe.status import StatusServer

        agent = self.agent
        return StatusServer(agent.observer, explainer=agent.explainer, debug=not agent.config.no_debug,
                            limits=agent.http_limits, history=agent.history, shadow=self.shadow_document)


def shadow(config: Config, *, interface: str, port: int, clock: Callable[[], float] = time.monotonic,
           max_rate: float | None = None) -> Agent:
    """`nodedns shadow`: the agent's index, resolver and HTTP listeners, a packet capture as its listeners."""
    agent = Agent(shadow_config(config), clock=clock, mode=SHADOW)
    agent.limits.allow.answering = False  # it judges as the agent would answer, and answers nobody
    capture = Capture(agent, interface=interface, port=port, clock=clock, max_rate=max_rate)
    agent.listeners = capture
    # the propagation race: what changed and when (the judge is made after the wiring, before any change)
    agent.changes.add(capture.shadow.record_changed)
    agent.add_provider("shadow", ShadowReport(capture))
    agent.status_server_of = capture.status_server  # GET /debug/shadow (no resolv.conf route, no top)
    return agent
