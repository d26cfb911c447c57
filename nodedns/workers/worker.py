"""A worker process: an agent without an index that answers DNS and asks the supervisor about cluster misses.

`worker_main` is the body of the process (forked from the zygote: nodedns.workers.zygote): it reads
its `Start` message, then runs the worker's agent (wired in nodedns.workers.modes: its own sockets, the
cache's share it was given, the parts pushed by the supervisor, and `IndexClient`, its side of the
supervisor) until the supervisor retires it or its channel closes. What it receives goes through one
dispatch table (`DISPATCH`: message type -> handler), in stream order.
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
from collections.abc import Callable, Mapping
from typing import Any

from nodedns.app.agent import Agent
from nodedns.app.parts import LocalWarm
from nodedns.app.run import print_error, run_agent
from nodedns.cluster import existence
from nodedns.config import Config
from nodedns.dns.wire import Query
from nodedns.runtime import logutil
from nodedns.runtime.heap import release_free_heap
from nodedns.serve.answers import Reply
from nodedns.serve.hostswatch import receive_table
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
    Hosts,
    InsightRows,
    Invalidate,
    Names,
    Plans,
    Policies,
    Reload,
    Retire,
    Start,
    State,
    Synced,
    Tenants,
    Warm,
    Who,
)
from nodedns.workers.pushed import PushedAllowList, PushedAutopath

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
    (`ClusterReplies.keep`), before reading the next message. Each waiting query has its own future, so a
    query that is cancelled (its TCP client left) cancels nobody else's."""

    def __init__(self) -> None:
        self.channel: Channel | None = None
        self.waiting: dict[bytes, list[asyncio.Future[Reply]]] = {}
        self.keep: Callable[[bytes, Reply], None] | None = None  # ClusterReplies.keep, set once the resolver exists
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


class IndexClient:
    """A worker's side of its supervisor, a part of the worker's agent (nodedns.workers.modes wires it): the
    agent's index source (`IndexSource`: an empty index, synced when the supervisor says so), the channel
    opened before the agent starts and closed after it stopped, what the supervisor pushes (`DISPATCH`),
    the heartbeat, and the worker's state and counters sent back."""

    def __init__(self, agent: Agent, *, number: int, sock: socket.socket, link: OwnerLink,
                 tables: socket.socket | None = None) -> None:
        self.agent = agent
        self.number = number
        self.sock = sock
        self.tables = tables  # the --hosts table's memfd comes here (SCM_RIGHTS), before its Hosts message
        self.link = link
        self.existence = existence.Existence()  # what exists, as the supervisor says: the resolver's too
        self.warm = LocalWarm(forward_cache=agent.forward_cache, forwarder=agent.forwarder)
        self.info: dict[str, Any] = {}
        self.channel: Channel | None = None
        self._synced = asyncio.Event()
        self._reported: tuple[bool, bool, bool, tuple[str, ...]] | None = None

    async def open(self) -> None:
        """The channel to the supervisor, and the heartbeat on it (before the agent starts)."""
        self.channel = self.link.channel = await Channel.open(self.sock, self._received, self._gone)
        self.agent._tasks.spawn(self._beat(), "heartbeat")

    async def _beat(self) -> None:
        """Tell the supervisor our event loop runs (it kills a worker silent for HEARTBEAT_TIMEOUT)."""
        beat = Channel.encode(Beat())
        while True:
            if self.channel is not None:
                self.channel.send_encoded(beat)
            await asyncio.sleep(HEARTBEAT_PERIOD)

    async def load(self) -> None:
        self.info = {"kind": "supervisor", "worker": self.number}
        self.agent._tasks.spawn(self._publish(), "counters")
        self.report()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def status(self) -> Mapping[str, Any] | None:
        return None  # no API watch: the supervisor's

    async def stop(self) -> None:
        return None  # nothing syncs here

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
        self.agent.resolver.answers.invalidate(message.tags)

    def _on_names(self, message: Names) -> None:
        self.existence.apply(message.state)

    def _on_synced(self, message: Synced) -> None:
        if not self.agent.index.synced:
            self.agent.index.mark_synced()  # an empty index: the flag readiness and autopath read
            self._synced.set()
            self.report()

    def _on_allow(self, message: Allow) -> None:
        assert isinstance(self.agent.limits.allow, PushedAllowList)
        self.agent.limits.allow.apply(message)

    def _on_plans(self, message: Plans) -> None:
        assert isinstance(self.agent.autopath, PushedAutopath)
        self.agent.autopath.apply(message)
        self.agent.resolver.chaser.forget_walks()

    def _on_who(self, message: Who) -> None:
        if self.agent.tally is not None:  # what was counted under the old map first
            self._send_rows(self.agent.tally.retag(message.gens, self.agent.slots.labels))

    def _on_tenants(self, message: Tenants) -> None:
        self.agent.limits.namespaces.apply(message.namespaces)

    def _on_policies(self, message: Policies) -> None:
        self.agent.policy.take(message.clients)  # the allow list forgets them (the book's listener)

    def _on_filter_aaaa(self, message: FilterAaaa) -> None:
        self.agent.resolver.set_aaaa_filter(message.active, message.reason)

    def _on_hosts(self, message: Hosts) -> None:
        try:
            if self.tables is None:
                raise ValueError("no table socket to the supervisor")
            table = receive_table(self.tables, message.size, message.reloads)
        except (OSError, ValueError) as exc:
            log.warning("worker %d: cannot map the supervisor's --hosts table (the one in use stays): %s",
                        self.number, exc)
            return
        self.agent.resolver.set_hosts(table)

    def _on_retire(self, message: Retire) -> None:
        (self.agent.force_stop if message.forced else self.agent.request_stop)()

    def _on_reload(self, message: Reload) -> None:
        self.agent.upstreams.reload_files()  # the supervisor's SIGHUP, passed on (it logged it)

    def _on_warm(self, message: Warm) -> None:
        started = time.perf_counter()
        entries, edns = self.warm.load(message.parts)
        log.info("worker %d: %d forward cache entries and %d EDNS memories from the running nodedns in %.1f ms",
                 self.number, entries, edns, (time.perf_counter() - started) * 1000)

    def _on_export(self, message: Export) -> None:
        if self.channel is not None:
            self.channel.send(Warm(self.warm.parts()))

    def hangup(self) -> None:
        log.info("worker %d: SIGHUP: %s; other settings take a restart", self.number,
                 self.agent.upstreams.reload_files())

    def _gone(self) -> None:
        self.link.fail()
        if self.agent._stop is not None and not self.agent._stop.is_set():
            log.warning("worker %d: the supervisor is gone; stopping", self.number)
            self.agent.request_stop()

    async def _publish(self) -> None:
        """Our counters for the supervisor's scrapes, once a second (no work per scrape here); the insight
        rows formed in slices, the loop answering between them."""
        while True:
            await asyncio.sleep(PUBLISH_PERIOD)
            if self.channel is not None:
                self.channel.send(Counters(self.agent.observer.scrape()))
                self._send_rows(await self.agent.insight_feed.rows_sliced())
                self.report()

    def _send_counters(self) -> None:
        if self.channel is not None:
            self.channel.send(Counters(self.agent.observer.scrape()))
            self._send_rows(self.agent.insight_feed.rows())
            self.report()

    def _send_rows(self, rows: list[Row]) -> None:
        if rows and self.channel is not None:
            self.channel.send(InsightRows(rows))

    def report(self) -> None:
        server = self.agent.server
        state = (bool(server.bound) and server.alive(), self.agent.index.synced, server.alive(), heavy_imports())
        if self.channel is not None and state != self._reported:
            if all(state[:3]) and (self._reported is None or not all(self._reported[:3])):
                log.info("worker %d serving", self.number)
                release_free_heap()  # what starting left free goes back to the system
            self._reported = state
            self.channel.send(State(bound=state[0], synced=state[1], live=state[2], heavy_imports=state[3]))

    async def close(self) -> None:
        """After the agent stopped: its last counters, the channel drained and closed."""
        self._send_counters()  # the last ones: what was answered while draining counts too
        if self.channel is not None:
            with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                await asyncio.wait_for(self.channel.drain(), 2.0)
            self.channel.close()


# the supervisor's libraries (urllib3: the watch's HTTP client): never loaded by a worker
HEAVY = ("kubernetes", "urllib3", "aiohttp", "pyroute2")


def heavy_imports() -> tuple[str, ...]:
    """Which of the supervisor's libraries this process has loaded (a worker: none; /status shows it)."""
    return tuple(name for name in HEAVY if name in sys.modules)


def preload() -> None:
    """Import what a worker loads as it starts (the zygote does it once for every worker)."""
    import uvloop  # noqa: F401 - run_agent's loop

    from nodedns.serve.server import c_hit_path

    c_hit_path()


def worker_main(fd: int, tables: int = -1, *,
                make: Callable[[Config, Start, socket.socket, socket.socket | None], Agent]) -> int:
    """The body of a worker process: its config comes first over the channel on `fd`; then the agent
    `make(config, start, channel socket, table socket)` wires (nodedns.workers.modes.worker) runs (`tables`:
    the socket the supervisor passes the --hosts table's memfd on, -1 none); the exit code."""
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

    table_sock = socket.socket(fileno=tables) if tables >= 0 else None
    if table_sock is not None:
        table_sock.setblocking(False)
    return run_agent(config, lambda c: make(c, start, sock, table_sock), report)


# The worker's one dispatch table: each message type the supervisor sends -> its handler
DISPATCH: Dispatch[IndexClient] = (
    Dispatch[IndexClient]()
    .on(Answers, IndexClient._on_answers)
    .on(Invalidate, IndexClient._on_invalidate)
    .on(Names, IndexClient._on_names)
    .on(Synced, IndexClient._on_synced)
    .on(Allow, IndexClient._on_allow)
    .on(Plans, IndexClient._on_plans)
    .on(Who, IndexClient._on_who)
    .on(Tenants, IndexClient._on_tenants)
    .on(Policies, IndexClient._on_policies)
    .on(FilterAaaa, IndexClient._on_filter_aaaa)
    .on(Hosts, IndexClient._on_hosts)
    .on(Retire, IndexClient._on_retire)
    .on(Reload, IndexClient._on_reload)
    .on(Warm, IndexClient._on_warm)
    .on(Export, IndexClient._on_export)
)
