"""A worker process: an agent without an index that answers DNS and asks the supervisor about cluster misses.

`worker_main` is the body of the process (forked from the zygote: nodedns.workers.zygote): it reads
its `Start` message, then runs a `WorkerAgent` until the supervisor retires it or its channel closes.
What it receives goes through one dispatch table (`DISPATCH`: message type -> handler), in stream order.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import pickle
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from nodedns.app import Agent, own_addresses, print_error, run_agent
from nodedns.cluster import existence
from nodedns.config import Config
from nodedns.dns.wire import Query
from nodedns.node.handover import Peer
from nodedns.podconf.searchpath import Autopath
from nodedns.runtime import logutil
from nodedns.runtime.heap import release_free_heap
from nodedns.serve.answers import Remote, Reply
from nodedns.serve.limits import AllowList
from nodedns.serve.tally import Row
from nodedns.workers.channel import HEADER, Channel, decode, recv_exactly
from nodedns.workers.messages import (
    HEARTBEAT_PERIOD,
    Allow,
    Answers,
    Ask,
    Beat,
    Counters,
    Dispatch,
    Export,
    Fatal,
    FilterAaaa,
    InsightRows,
    Invalidate,
    Names,
    Plans,
    Reload,
    Retire,
    Start,
    State,
    Synced,
    Warm,
    Who,
)
from nodedns.workers.pushed import PushedAllowList, PushedAutopath

if TYPE_CHECKING:
    from nodedns.observe.insight import Insight

log = logging.getLogger("nodedns.fleet")

PUBLISH_PERIOD = 1.0  # seconds between two counter publications of a worker
ASK_TIMEOUT = 2.0  # seconds a worker waits for the supervisor's reply (then SERVFAIL, not kept)


def worker_config(config: Config) -> Config:
    """What a worker runs with: no node setup, no HTTP listeners, no roster, no lameduck of its own."""
    return dataclasses.replace(config, setup_interface=None, firewall="none", status_listen=None, lock_dir=None,
                               lameduck=0.0, workers=1, debug_listen=None)


class OwnerLink:
    """A worker's side of the cluster answers: asks the supervisor (one question in flight per key; the
    asks of one event loop turn go out as one message of keys) and keeps each reply as it arrives
    (`Resolver.keep`), before reading the next message. Each waiting query has its own future, so a
    query that is cancelled (its TCP client left) cancels nobody else's."""

    def __init__(self) -> None:
        self.channel: Channel | None = None
        self.waiting: dict[bytes, list[asyncio.Future[Reply]]] = {}
        self.keep: Callable[[bytes, Reply], None] | None = None  # Resolver.keep, set once the resolver exists
        self._outbox: list[bytes] = []

    def ask(self, q: Query) -> asyncio.Future[Reply]:
        key = q.key
        loop = asyncio.get_running_loop()
        waiters = self.waiting.get(key)
        if waiters is None:
            if self.channel is None or self.channel.is_closing():
                raise ConnectionError("no channel to the supervisor")
            waiters = self.waiting[key] = []
            if not self._outbox:
                loop.call_soon(self._send)
            self._outbox.append(key)
        fut: asyncio.Future[Reply] = loop.create_future()
        waiters.append(fut)
        return fut

    def _send(self) -> None:
        """This turn's questions, as one message (the key of each: the supervisor needs nothing else)."""
        keys, self._outbox = self._outbox, []
        batch = [(key, waiters) for key in keys if (waiters := self.waiting.get(key)) is not None]
        if self.channel is None or self.channel.is_closing():
            self._expire(batch, ConnectionError("the supervisor is gone"))
            return
        self.channel.send(Ask(keys))
        # one timer per message, not per question: the questions expire together
        asyncio.get_running_loop().call_later(
            ASK_TIMEOUT, self._expire, batch, TimeoutError(f"no reply from the supervisor in {ASK_TIMEOUT:g}s"))

    def _expire(self, batch: list[tuple[bytes, list[asyncio.Future[Reply]]]], exc: Exception) -> None:
        for key, waiters in batch:
            if self.waiting.get(key) is waiters:
                del self.waiting[key]
                _fail(waiters, exc)

    def answered(self, key: bytes, reply: Reply, *, keep: bool = True) -> None:
        if keep and self.keep is not None:
            self.keep(key, reply)
        for fut in self.waiting.pop(key, ()):
            if not fut.done():
                fut.set_result(reply)

    def fail(self) -> None:
        waiting, self.waiting = self.waiting, {}
        for waiters in waiting.values():
            _fail(waiters, ConnectionError("the supervisor is gone"))


def _fail(waiters: list[asyncio.Future[Reply]], exc: Exception) -> None:
    for fut in waiters:
        if not fut.done():
            fut.set_exception(exc)


class WorkerAgent(Agent):
    """An agent without an index: it answers DNS from its hot dict, asks the supervisor on a cluster
    miss, forwards the rest itself, and publishes its counters."""

    SIGNALS = ()  # SIGTERM and SIGINT are ignored (worker_main): the supervisor decides when we stop
    LOG_READY = False  # the supervisor says it; a worker says "worker N serving"
    REFUSE_DUPLICATES = False  # its siblings serve the same addresses; the supervisor checked before spawning
    WATCHES_HOST_FILE = False  # autopath plans come from the supervisor; a worker renders no resolv.conf

    def __init__(self, config: Config, *, number: int, sock: socket.socket, defer: bool, cache_bytes: int) -> None:
        self.link = OwnerLink()
        self.cache_bytes = cache_bytes
        super().__init__(worker_config(config))
        self.link.keep = self.resolver.keep
        self.existence = self.resolver.existence = existence.Existence()
        self.server.freebind = config.setup_interface is not None  # the supervisor ensures the local IPs
        self.number = number
        self.looplag.process = f"worker {number}"
        self.sock = sock
        self.defer = defer
        self.channel: Channel | None = None
        self._synced = asyncio.Event()
        self._reported: tuple[bool, bool, bool, tuple[str, ...]] | None = None

    def _cache_bytes(self) -> int:
        """Its share of --cache-max-bytes, as the supervisor gave it (Start: what it leaves, split over the
        workers)."""
        return self.cache_bytes

    # the parts a worker takes from the supervisor instead of an index

    DECIDES_AAAA = False  # --filter-aaaa auto: the supervisor decides and tells (FilterAaaa)

    def _make_autopath(self) -> Autopath:
        return PushedAutopath(index=self.index, zone=self.config.cluster_domain)

    def _make_allow(self) -> AllowList:
        # own addresses as the supervisor's (the worker's config has the same listen and local IPs)
        return PushedAllowList(explicit=self.config.allow_from, own_addresses=own_addresses(self.config))

    def _remote(self) -> Remote:
        return self.link.ask

    def _make_insight(self) -> Insight | None:
        return None  # the supervisor keeps the figures per Pod; this process counts (its tally)

    def _binds_after_sync(self, others: list[Peer]) -> bool:
        return self.defer

    async def start(self) -> None:
        self.channel = self.link.channel = await Channel.open(self.sock, self._received, self._gone)
        self._tasks.spawn(self._beat(), "heartbeat")
        await super().start()

    async def _beat(self) -> None:
        """Tell the supervisor our event loop runs (it kills a worker silent for HEARTBEAT_TIMEOUT)."""
        beat = Channel.encode(Beat())
        while True:
            if self.channel is not None:
                self.channel.send_encoded(beat)
            await asyncio.sleep(HEARTBEAT_PERIOD)

    async def bind(self) -> None:
        await super().bind()
        self._report()

    async def _load_source(self) -> None:
        self.source_info = {"kind": "supervisor", "worker": self.number}
        self._tasks.spawn(self._publish(), "counters")
        self._report()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def _received(self, message: object) -> None:
        """One message from the supervisor, in stream order (a reply is kept before what follows)."""
        if not DISPATCH(self, message):
            log.warning("worker %d: a message of unknown type %s from the supervisor: ignored", self.number,
                        type(message).__name__)

    def _on_answers(self, message: Answers) -> None:
        answered = self.link.answered
        for key, reply, keep in message.answers:
            answered(key, reply, keep=keep)

    def _on_invalidate(self, message: Invalidate) -> None:
        self.resolver.invalidate(message.tags)

    def _on_names(self, message: Names) -> None:
        self.existence.apply(message.state)

    def _on_synced(self, message: Synced) -> None:
        if not self.index.synced:
            self.index.mark_synced()  # an empty index: the flag readiness and autopath read
            self._synced.set()
            self._report()

    def _on_allow(self, message: Allow) -> None:
        assert isinstance(self.limits.allow, PushedAllowList)
        self.limits.allow.apply(message)

    def _on_plans(self, message: Plans) -> None:
        assert isinstance(self.autopath, PushedAutopath)
        self.autopath.apply(message)
        self.resolver.forget_walks()

    def _on_who(self, message: Who) -> None:
        if self.tally is not None:  # what was counted under the old map first
            self._send_rows(self.tally.retag(message.gens, self.slots.labels))

    def _on_filter_aaaa(self, message: FilterAaaa) -> None:
        self.resolver.set_aaaa_filter(message.active, message.reason)

    def _on_retire(self, message: Retire) -> None:
        (self.force_stop if message.forced else self.request_stop)()

    def _on_reload(self, message: Reload) -> None:
        self.reload_upstream_files()  # the supervisor's SIGHUP, passed on (it logged it)

    def _on_warm(self, message: Warm) -> None:
        started = time.perf_counter()
        entries, edns = self._load_warm(message.parts)
        log.info("worker %d: %d forward cache entries and %d EDNS memories from the running nodedns in %.1f ms",
                 self.number, entries, edns, (time.perf_counter() - started) * 1000)

    def _on_export(self, message: Export) -> None:
        if self.channel is not None:
            self.channel.send(Warm(self._warm_parts()))

    def _on_hangup(self) -> None:
        log.info("worker %d: SIGHUP: %s; other settings take a restart", self.number, self.reload_upstream_files())

    def _gone(self) -> None:
        self.link.fail()
        if self._stop is not None and not self._stop.is_set():
            log.warning("worker %d: the supervisor is gone; stopping", self.number)
            self.request_stop()

    async def _publish(self) -> None:
        """Our counters for the supervisor's scrapes, once a second (no work per scrape here); the insight
        rows formed in slices, the loop answering between them."""
        while True:
            await asyncio.sleep(PUBLISH_PERIOD)
            if self.channel is not None:
                self.channel.send(Counters(self.observer.scrape()))
                self._send_rows(await self.insight_rows_sliced())
                self._report()

    def _send_counters(self) -> None:
        if self.channel is not None:
            self.channel.send(Counters(self.observer.scrape()))
            self._send_rows(self.insight_rows())
            self._report()

    def _send_rows(self, rows: list[Row]) -> None:
        if rows and self.channel is not None:
            self.channel.send(InsightRows(rows))

    def _report(self) -> None:
        state = (bool(self.server.bound) and self.server.alive(), self.index.synced, self.server.alive(),
                 heavy_imports())
        if self.channel is not None and state != self._reported:
            if all(state[:3]) and (self._reported is None or not all(self._reported[:3])):
                log.info("worker %d serving", self.number)
                release_free_heap()  # what starting left free goes back to the system
            self._reported = state
            self.channel.send(State(bound=state[0], synced=state[1], live=state[2], heavy_imports=state[3]))

    async def shutdown(self) -> None:
        await super().shutdown()
        self._send_counters()  # the last ones: what was answered while draining counts too
        if self.channel is not None:
            with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                await asyncio.wait_for(self.channel.drain(), 2.0)
            self.channel.close()


HEAVY = ("kubernetes", "aiohttp", "pyroute2")  # the supervisor's libraries: never loaded by a worker


def heavy_imports() -> tuple[str, ...]:
    """Which of the supervisor's libraries this process has loaded (a worker: none; /status shows it)."""
    return tuple(name for name in HEAVY if name in sys.modules)


def preload() -> None:
    """Import what a worker loads as it starts (the zygote does it once for every worker)."""
    import uvloop  # noqa: F401 - run_agent's loop

    from nodedns.serve.server import c_hit_path

    c_hit_path()


def worker_main(fd: int) -> int:
    """The body of a worker process: its config comes first over the channel on `fd`; the exit code."""
    # a signal to the whole group (Ctrl-C, timeout, kill -- -PGID, systemd) must not cut the
    # supervisor's lameduck short: the supervisor decides (retire), or its channel closing does
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until its loop handles it (Agent.run): never an exit
    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    try:
        header = recv_exactly(sock, HEADER.size)
        start = decode(recv_exactly(sock, HEADER.unpack(header)[0]))
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, IndexError) as exc:
        print(f"nodedns worker: no configuration from the supervisor ({exc})", file=sys.stderr)
        return 1
    if not isinstance(start, Start):
        print(f"nodedns worker: no configuration from the supervisor (a {type(start).__name__} came first)",
              file=sys.stderr)
        return 1
    config = start.config
    sock.setblocking(False)
    logutil.setup(config.log_level, config.log_format)
    to_supervisor = socket.socket(fileno=os.dup(fd))  # still open when the agent has closed its channel

    def report(code: int, text: str) -> None:
        """A fatal error goes to the supervisor, which prints it once (not once per worker)."""
        try:
            to_supervisor.setblocking(True)
            to_supervisor.sendall(Channel.encode(Fatal(code, text)))
        except OSError:
            print_error(code, text)

    return run_agent(config, lambda c: WorkerAgent(c, number=start.number, sock=sock, defer=start.defer,
                                                 cache_bytes=start.cache_bytes), report)


# The worker's one dispatch table: each message type the supervisor sends -> its handler
DISPATCH: Dispatch[WorkerAgent] = (
    Dispatch[WorkerAgent]()
    .on(Answers, WorkerAgent._on_answers)
    .on(Invalidate, WorkerAgent._on_invalidate)
    .on(Names, WorkerAgent._on_names)
    .on(Synced, WorkerAgent._on_synced)
    .on(Allow, WorkerAgent._on_allow)
    .on(Plans, WorkerAgent._on_plans)
    .on(Who, WorkerAgent._on_who)
    .on(FilterAaaa, WorkerAgent._on_filter_aaaa)
    .on(Retire, WorkerAgent._on_retire)
    .on(Reload, WorkerAgent._on_reload)
    .on(Warm, WorkerAgent._on_warm)
    .on(Export, WorkerAgent._on_export)
)
