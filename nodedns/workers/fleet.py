"""`--workers N`: one supervisor that owns the index, syncs, manages the node and reports; N processes that answer DNS.

    supervisor (the `nodedns serve` process)          worker 0 .. N-1 (spawned processes)
      hand-over roster, interface, firewall rules       a DNSServer on every listen address: the
      API watch (or --manifests) -> the one Index         kernel spreads queries over the workers'
      cluster answers for the workers' misses  <-----     sockets (SO_REUSEPORT); NO index: a cluster
        ("ask", [key]) -> ("ans", [(key, Reply)])         or reverse miss is asked of the supervisor
      what exists (namespaces, a Service filter) ->       (unless existence alone decides it: an
                                                          NXDOMAIN answered alone, nodedns.cluster.existence)
      the tags each index change touches  ------->        and kept, with its tags, until told
        ("inv", tags | None), in stream order             hot dict, forward cache, forwarder, loop
      derived data: synced, the allow list's  ---->       probes, upstream reloads: each its own
        inputs, the autopath plans, insight's             ExternalName targets outside the cluster
        address -> Pod generation map
      /metrics, /status: the workers' counters  <----     their counters (metrics.Scrape), published
        summed (aggregate.merge)                          at most once a second
      insight: figures per Pod (insight.Insight) <----    answers counted by client address
                                                          (tally.Tally), handed on once a second
      readiness: own parts + every worker serving
      a dead worker is started again

One index per node, whatever N: a worker holds its hot dict, its forward cache and what the
supervisor pushed, nothing more (docs/sync.md has the memory figures). Each worker has a
socketpair to the supervisor that carries length-prefixed pickles (only between the supervisor and
the processes it spawned):

    to a worker          ("ans", [(key, Reply, keep)])  the owner's decisions for the cluster/reverse
                                               names of one ask (nodedns.serve.resolver: FORWARD, ANSWER,
                                               BEFORE_SYNC, CHASE); keep: false before the first sync
                                               (used, not kept: no tags are sent for the changes of
                                               the first list)
                         ("names", State)      what exists (nodedns.cluster.existence), before the
                                               invalidations of the same flush
                         ("inv", tags | None)  these tags changed (None: everything): drop their answers
                         ("synced",)           the index has synced
                         ("allow", rules)      the default allow list's inputs (networks, open, pod
                                               CIDRs, the IPs of this node's Pods)
                         ("plans", plans, ns)  autopath: client IP -> Plan, walk-eligible namespaces
                         ("who", gens)         insight: Pod address -> generation (tally.Tally.gens)
                         ("retire", forced)    leave the addresses (drain, unless forced), exit 0
                         ("reload",)           re-read the upstream files (the supervisor's SIGHUP)
                         ("warm", parts)       a hand-over: the running agent's forward caches and EDNS
                                               memory (nodedns.node.handover), before "synced"
                         ("export",)           a newer agent joined: send your forward cache
    to the supervisor    ("state", {...})      bound, synced, live: on every change
                         ("beat",)             its event loop runs: every HEARTBEAT_PERIOD
                         ("ask", [key])        the cluster-zone and reverse misses of one event loop
                                               turn, as cache keys (one in flight per key; the owner
                                               reads a key by hand: wire.key_query)
                         ("scrape", Scrape)    its counters, once a second (and a last time on exit)
                         ("insight", rows)     its answers by client since the last ones (tally.Row),
                                               once a second and before it takes a new "who"
                         ("warm", parts)       its forward cache and EDNS memory, for an "export"

Exactness: the supervisor computes a reply from its index at once and writes it on the worker's
stream; every invalidation for a later change is written after it on the same stream, and the
worker keeps a reply the moment it reads it (`Resolver.keep`), before reading what follows. So a
worker never keeps an answer past a change of what it was built from. Invalidations of one event
loop turn go out as one message (and before any reply computed after them).

Why the allow list and autopath are pushed, not asked: both are read for many queries (a client's
first query, every walk-eligible name) and depend on a few hundred objects at most (this node's Node
and Pods), so a worker decides them locally from data the supervisor sends when it changes; only
what needs the whole index (cluster answers) is asked.

Insight, split the same way: the workers see the queries, the supervisor knows the Pods. A worker
counts its answers by client address (`tally.Tally`: one dict increment per hit, no Pod lookup) and
tags them with the Pod generation the supervisor's map gives the address; the supervisor forms
that map from its index (`insight.Insight.refresh`) and pushes it when it changes, and a worker
hands on what it counted under the old map before it takes the new one. So a Pod that takes over
another's address never shares its figures, however late the worker reports, and the supervisor
never has to ask who had an address when. The rows (one per client, name, type and rcode per
second, bounded by `tally`'s caps) come once a second; the supervisor holds every Pod's figures,
sketches and advice (`insight.Insight`), and the search-list misses are told there, where the
queries of one lookup meet again after the kernel spread them over the workers.

Signals: a worker ignores SIGTERM and SIGINT. A signal sent to the whole process group (`timeout`,
`kill -- -PGID`, systemd's default KillMode) thus reaches only the supervisor's lameduck, during
which every worker keeps answering; the supervisor then retires them. A worker whose supervisor is
gone (channel closed) stops by itself; SIGKILL stops one worker (and the supervisor starts it again,
unless it is stopping: then nothing is restarted). SIGHUP stops no process: the supervisor re-reads
the upstream files and sends ("reload",) to every worker, a worker signalled itself re-reads them
too, the zygote ignores it.

Heartbeats: every worker's event loop sends ("beat",) every HEARTBEAT_PERIOD (any message counts).
A worker silent for HEARTBEAT_LATE is not serving (/readyz says so, and `_capture_hold` keeps the
node loop from putting the local IPs and rules back: another worker may answer its probe while this
one's sockets swallow their share of the queries); silent for HEARTBEAT_TIMEOUT (START_TIMEOUT
before it first served), it is killed and started again (`_watch`), counted as a restart with reason
"silent". A watch round that comes late (the supervisor's own loop was stopped or busy) counts every
worker as heard from: their beats wait unread in the channels.

Start: as a single agent (roster, node, status, source), but the listeners are the workers'. They
are spawned right after the node is prepared and bind at once, or, when a predecessor serves on the
node (or, for a restarted worker, when its siblings serve), once the index has synced. A worker
that exits with an error before it ever served (a bind error, a config error), or with a detected
forwarding loop (3), stops the supervisor with its exit status; other deaths (a signal, an error
after serving) are restarted (at once after 30 s of life, else after a back-off from 1 s doubling up
to 30 s). Workers are forked from a zygote (nodedns.workers.zygote: one interpreter started with `-P`, no
current directory on sys.path, so a `nodedns/` folder where the agent was started cannot replace the
installed package) that imported their code once: its pages are shared by every worker. Stop: the
lameduck with every worker answering, the node torn down (unless another agent on the node uses
it), then every worker retires (drains its sockets, closes, sends its last counters) and exits.
Counters of a worker that ends are kept (gauges dropped), so totals never go down; a restarted
worker's cache counters start again at zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import os
import pickle
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from nodedns import __version__
from nodedns.app import WARM_CACHE, Agent, FilterReport, HostsReport, own_addresses, print_error, run_agent
from nodedns.cluster import existence
from nodedns.cluster import objects as k8s
from nodedns.cluster.index import Index
from nodedns.cluster.records import change_tags
from nodedns.config import Config
from nodedns.dns.keys import key_query
from nodedns.dns.wire import Query
from nodedns.errors import FormatError
from nodedns.metrics import aggregate
from nodedns.metrics.registry import ListenerStats, Scrape
from nodedns.names import IPNetwork
from nodedns.node.handover import Peer
from nodedns.observe.observe import Observer
from nodedns.podconf.searchpath import Autopath, Plan
from nodedns.runtime import logutil
from nodedns.runtime.heap import release_free_heap
from nodedns.serve.cache import export_count
from nodedns.serve.limits import LOOPBACK, AllowList
from nodedns.serve.resolver import Remote, Reply
from nodedns.serve.server import bind_pair
from nodedns.serve.tally import Row, Tally
from nodedns.workers.zygote import ForkedProcess, Forker

if TYPE_CHECKING:  # the supervisor's only: a worker never loads nodedns.observe.insight
    from nodedns.observe.insight import Insight

log = logging.getLogger("nodedns.fleet")
channel_errors = logutil.Consolidated(log, "supervisor channel error")

MAX_BACKLOG = 64 << 20  # bytes queued to one worker: beyond this it is stuck, and is started again
MAX_FRAME = (1 << 32) - 1  # the length prefix's range
PUBLISH_PERIOD = 1.0  # seconds between two counter publications of a worker
HEARTBEAT_PERIOD = 0.25  # seconds between two heartbeats of a worker's event loop
HEARTBEAT_LATE = 1.0  # seconds without a message from a worker after which it counts as silent (/readyz)
HEARTBEAT_TIMEOUT = 2.0  # seconds without a message after which a worker that has served is killed and restarted
START_TIMEOUT = 30.0  # the same for a worker that has not served yet (its start: fork, config, bind)
SUPERVISOR_LAG = 0.5  # a watch round this late means our own loop was busy: the workers' messages wait unread
ASK_TIMEOUT = 2.0  # seconds a worker waits for the supervisor's reply (then SERVFAIL, not kept)
# --cache-max-bytes: the supervisor's own forward cache is filled only by the explainer's lookups; the
# workers, which answer, share the rest
SUPERVISOR_CACHE_BYTES = 1 << 20
EXPORT_WAIT = 1.0  # seconds the workers have to send their forward caches for a newer agent
FATAL_EXITS = (2, 3)  # a config error, a forwarding loop: every restart would end the same way
_HEADER = struct.Struct("!I")


def cpu_count() -> int:
    """CPUs this process may run on (its affinity: taskset, cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_for(config: Config) -> int:
    """The processes that answer: --workers (default 1: one process, no supervisor; 0: one per CPU)."""
    return config.workers or cpu_count()


def serve(config: Config) -> int:
    """`nodedns serve`: one agent (the default), or a supervisor and its --workers processes."""
    count = workers_for(config)
    if count <= 1:
        return run_agent(config)
    config = concrete_ports(config)
    return run_agent(config, lambda c: Fleet(c, count=count))


def concrete_ports(config: Config) -> Config:
    """Listen addresses with port 0 replaced by a port free for UDP and TCP (workers must agree)."""
    if all(port for _, port in config.listen_addresses):
        return config
    out = []
    for host, port in config.listen_addresses:
        if port == 0:
            udp, tcp = bind_pair(host, 0, reuse_port=False)
            port = udp.getsockname()[1]
            udp.close()
            tcp.close()
        out.append((host, port))
    return dataclasses.replace(config, listen=tuple(out))


# ----------------------------------------------------------------------------------------------
# The channel


class Channel(asyncio.Protocol):
    """Length-prefixed pickles over one end of a socketpair: each message is handed to `deliver` as it
    is read, in stream order (every complete message of a read at once, before the next read).

    Bytes that do not unpickle close the channel (the stream is lost). A message that `deliver` fails
    on is counted and logged (consolidated); with `keep_on_error` the channel goes on with the next
    message (the supervisor: one worker's odd message must not cost that worker its state), else it
    closes (a worker: a message it could not apply may have been an invalidation, so it stops and the
    supervisor starts it again from the current state)."""

    def __init__(self, deliver: Callable[[Any], None], closed: Callable[[], None] | None = None, *,
                 keep_on_error: bool = False) -> None:
        self.deliver = deliver
        self.closed = closed
        self.keep_on_error = keep_on_error
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._lost = False
        self._writable: asyncio.Future[None] | None = None
        self.delivery_errors = 0

    @classmethod
    async def open(cls, sock: socket.socket, deliver: Callable[[Any], None],
                   closed: Callable[[], None] | None = None, *, keep_on_error: bool = False) -> Channel:
        channel = cls(deliver, closed, keep_on_error=keep_on_error)
        await asyncio.get_running_loop().create_unix_connection(lambda: channel, sock=sock)
        return channel

    @staticmethod
    def encode(message: Any) -> bytes:
        """A message's frame. Raises whatever pickling raises (PicklingError, TypeError, RecursionError,
        ...) for a message that cannot be sent; `encode_answers` never does."""
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        if len(data) > MAX_FRAME:
            raise ValueError(f"a message of {len(data)} bytes is over the channel's frame size")
        return _HEADER.pack(len(data)) + data

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos, n = 0, len(buf)
        view = memoryview(buf)
        try:
            while n - pos >= 4:
                (size,) = _HEADER.unpack_from(buf, pos)
                if n - pos - 4 < size:
                    break
                try:
                    message = pickle.loads(view[pos + 4: pos + 4 + size])
                except Exception as exc:  # noqa: BLE001 - any unpickling failure: the stream is lost
                    log.error("unreadable message on the supervisor channel (%s: %s): closing it",
                              exc.__class__.__name__, exc)
                    self.close()
                    return
                pos += 4 + size
                try:
                    self.deliver(message)
                except Exception as exc:  # noqa: BLE001 - counted; the channel's fate is keep_on_error's
                    self.delivery_errors += 1
                    channel_errors.report(exc)
                    if not self.keep_on_error:
                        self.close()
                        return
        finally:
            view.release()
        if pos:
            del buf[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._wake()
        if self.closed is not None:
            self.closed()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._wake()

    def _wake(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # the sending side

    def send(self, message: Any) -> None:
        self.send_encoded(self.encode(message))

    def send_encoded(self, frame: bytes) -> None:
        if not self.is_closing():
            assert self.transport is not None
            self.transport.write(frame)

    def is_closing(self) -> bool:
        return self._lost or self.transport is None or self.transport.is_closing()

    async def drain(self) -> None:
        """Until what was written has left (or the channel closed)."""
        while not self.is_closing() and self._writable is not None:
            await asyncio.shield(self._writable)

    def backlog(self) -> int:
        """Bytes written and not yet taken by the other side."""
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _encodable(message: Any) -> bool:
    try:
        Channel.encode(message)
    except Exception:  # noqa: BLE001 - any pickling failure
        return False
    return True


def encode_answers(answers: list[tuple[bytes, Reply, bool]], servfail: Callable[[Query], Reply]) -> bytes:
    """The frame of one ("ans", answers) message. A reply that cannot be encoded (pickled) is replaced
    by `servfail(query)`, used and not kept (counted and logged, consolidated): that query gets
    SERVFAIL, the others their answers, and the channel stays."""
    try:
        return Channel.encode(("ans", answers))
    except Exception:  # noqa: BLE001 - find the reply that cannot go, below
        pass
    safe = []
    for key, reply, keep in answers:
        try:
            Channel.encode(reply)
        except Exception as exc:  # noqa: BLE001 - any pickling failure: SERVFAIL for this query only
            channel_errors.report(f"a reply that cannot be sent to a worker ({exc.__class__.__name__}: {exc}): "
                                  "SERVFAIL for its query")
            safe.append((key, servfail(key_query(key)), False))
        else:
            safe.append((key, reply, keep))
    return Channel.encode(("ans", safe))


# ----------------------------------------------------------------------------------------------
# What the supervisor derives for its workers


def allow_rules(allow: AllowList, index: Index, node_name: str) -> tuple[Any, ...] | None:
    """The default allow list's inputs as the supervisor has them: (networks, open, pod CIDRs, IPs of
    this node's Pods); None with an explicit --allow-from (a worker builds that one itself)."""
    if allow.explicit is not None:
        return None
    pod_ips = frozenset(ip for p in index.pods_on_node(node_name) if not p.host_network for ip in p.ips) \
        if node_name else frozenset()
    return tuple(str(n) for n in allow.networks), allow.open, allow.pod_cidrs, pod_ips


def autopath_plans(autopath: Autopath, index: Index, node_name: str) -> tuple[dict[str, Plan], frozenset[str]]:
    """Autopath as the supervisor decides it: the plan of each client IP of this node's Pods that has
    one, and the namespaces where a walk may replace an NXDOMAIN."""
    plans: dict[str, Plan] = {}
    if node_name:
        for pod in index.pods_on_node(node_name):
            for ip in pod.ips:
                plan = autopath.plan_for(ip)
                if plan is not None:
                    plans[ip] = plan
    return plans, autopath.namespaces()


class PushedAllowList(AllowList):
    """A worker's allow list: the default rules come from the supervisor (`apply`); an explicit
    --allow-from is the worker's own."""

    def __init__(self, *, explicit: tuple[IPNetwork, ...] | None, own_addresses: tuple[str, ...]) -> None:
        self.pod_ips: frozenset[str] = frozenset()
        super().__init__(explicit=explicit, own_addresses=own_addresses)

    def refresh(self, *, force: bool = False) -> None:
        if self.explicit is not None:
            super().refresh(force=force)
        elif force:  # until the supervisor's rules arrive: as the supervisor starts, every client
            self._set([*LOOPBACK, *(ipaddress.ip_network(a) for a in self.own)], open_=True)

    def apply(self, rules: tuple[Any, ...]) -> None:
        networks, open_, pod_cidrs, pod_ips = rules
        self.pod_cidrs, self.pod_ips = tuple(pod_cidrs), pod_ips
        self._set([ipaddress.ip_network(n) for n in networks], open_=open_)

    def _pod_of_this_node(self, ip: str) -> bool:
        return ip in self.pod_ips


class PushedAutopath(Autopath):
    """A worker's autopath: the plans and namespaces the supervisor decided (`apply`); the walk and
    its counters are the worker's."""

    def __init__(self, *, index: Index, zone: str) -> None:
        super().__init__(index=index, zone=zone, node_name="")
        self.plans: dict[str, Plan] = {}
        self.walkable: frozenset[str] = frozenset()

    def apply(self, plans: dict[str, Plan], namespaces: frozenset[str]) -> None:
        self.plans, self.walkable = plans, namespaces

    def plan_for(self, client: str) -> Plan | None:
        return self.plans.get(client)

    def namespaces(self) -> frozenset[str]:
        return self.walkable


# ----------------------------------------------------------------------------------------------
# The supervisor


@dataclasses.dataclass(eq=False)
class Worker:
    """The supervisor's view of one worker process."""

    number: int
    proc: ForkedProcess
    started: float
    channel: Channel | None = None
    reader: asyncio.Future[None] | None = None  # done when its channel closed (all it sent was read)
    bound: bool = False
    synced: bool = False
    live: bool = True
    served: bool = False  # it has served at least once
    scrape: Scrape | None = None
    asks: int = 0  # cluster misses it asked about
    heavy_imports: tuple[str, ...] = ()  # of kubernetes, aiohttp, pyroute2: what it loaded (none)
    heard: float = 0.0  # when its last message came (its event loop runs): the supervisor's clock
    killed: str = ""  # why the supervisor killed it ("silent", "stuck"), "" when it did not

    @property
    def serving(self) -> bool:
        return self.bound and self.synced and self.live

    def alive(self) -> bool:
        return self.proc.returncode is None


RESTART_REASONS = ("died", "silent", "stuck")  # nodedns_worker_restarts_total{reason}


class Fleet(Agent):
    """The supervisor: the index owner, an Agent whose listeners are its worker processes."""

    TRIM_HEAP = False  # it answers no DNS (its watch threads trim after each list: nodedns.cluster.kube)
    PROCESS = "supervisor"  # its row of the "event_loop" section; the workers' rows come with their counters

    def __init__(self, config: Config, *, count: int) -> None:
        super().__init__(config)
        self.count = count
        self.forker = Forker(ZYGOTE_ENTRY)
        self.workers: dict[int, Worker] = {}
        self.restarts: dict[int, int] = {}
        self.restart_reasons: dict[int, dict[str, int]] = {}  # worker -> RESTART_REASONS -> times
        self.restarting: dict[int, str] = {}  # worker -> why it is being started again, until it serves
        self.clock: Callable[[], float] = time.monotonic
        self._last_round = 0.0  # the supervisor's clock at its last watch round
        self.backoff: dict[int, float] = {}
        self.retired: Scrape | None = None  # counters of workers that ended
        self.exit_code = 0
        self.fatal_report: str | None = None  # the first fatal error line a worker sent (printed once)
        self.defer_workers = False
        self.retiring = False
        self._changed = asyncio.Event()
        self._tags: set[str] | None = set()  # touched since the last flush (None: everything)
        self._pods_moved = True  # a Pod or Node changed: the pushed allow rules and plans are re-derived
        self._flush_due = False
        self._pushed: dict[str, tuple[Any, ...]] = {}  # what every worker was sent last: kind -> message
        self.existence = existence.Feed(self.index, federated=bool(self.records.federations))
        self._serial_sent: float | None = None
        self._warm_offer: list[bytes] | None = None  # what the running agent left, for workers started meanwhile
        self._exports: dict[int, asyncio.Future[list[bytes]]] = {}  # worker -> its forward cache, asked for
        self.index.on_record(self._index_changed)
        # the workers' caches and forwarders report through their counters, not the supervisor's own
        self.observer = FleetObserver(self)
        self.add_provider("workers", _WorkersReport(self))
        # the files the supervisor reads too (the same files as its workers): its own view, not their sum
        if self.config_watcher is not None:
            self.add_provider("upstream_config", self.config_watcher)
        if self.host_file is not None:
            self.add_provider("host_resolv_conf", self.host_file)
        if self.hosts_files is not None:
            self.add_provider("hosts", HostsReport(self))  # its reading (for lookup); the answers are the workers'
        self.add_provider("limits", self.limits)  # its settings; the counts are the workers' (worker_limits)
        self.add_provider("event_loop", self.looplag)  # its own row; each worker's comes with its counters
        if self.insight is not None:
            self.add_provider("insight", self.insight)  # the figures per Pod are the supervisor's
        if self.resolver.aaaa is not None:
            self.add_provider("filter_aaaa", FilterReport(self))  # its decision; the count is the workers'

    def _make_tally(self) -> Tally | None:
        return None  # the workers answer, and count

    def _cache_bytes(self) -> int:
        return SUPERVISOR_CACHE_BYTES

    def _attribute(self) -> None:
        pass  # the new map goes to the workers with the derived data (_derived: "who")

    def _aaaa_changed(self) -> None:
        if self.workers:
            self._flush()  # the decision goes to the workers with the derived data (_derived: "aaaa")

    # -- the index stream ------------------------------------------------------------------

    def _index_changed(self, kind: str, old: Any, new: Any) -> None:
        self.existence.changed(kind, old, new)
        if kind in (k8s.POD, k8s.NODE, ""):
            self._pods_moved = True
        if not self.index.synced and kind:
            pass  # before the first sync no worker keeps a reply, and the sync drops everything anyway
        else:
            tags = change_tags(kind, old, new)
            if tags is None:
                self._tags = None
            elif self._tags is not None:
                self._tags.update(tags)
        if not self._flush_due and self.workers:
            self._flush_due = True
            with contextlib.suppress(RuntimeError):  # no loop yet (loading before start): the spawn sends it
                asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Send this turn's invalidations, then whatever derived data changed, to every worker."""
        self._flush_due = False
        messages: list[tuple[Any, ...]] = []
        # what exists and the derived data first, the invalidations last: whatever a worker decides
        # alone between two of these messages is dropped by the invalidations if it must be
        state = self.existence.update()
        if state.serial != self._serial_sent or state.bits is not None or state.changed or \
                state.namespaces is not None or state.federated is not None:
            messages.append(("names", state))
            self._serial_sent = state.serial
        messages.extend(self._derived(changed_only=True))
        tags, self._tags = self._tags, set()
        if tags is None or tags:
            messages.append(("inv", None if tags is None else frozenset(tags)))
        if not messages:
            return
        try:
            frames = b"".join(Channel.encode(m) for m in messages)
        except Exception as exc:  # noqa: BLE001 - the workers drop everything rather than keep a stale answer
            channel_errors.report(exc)
            frames = b"".join(Channel.encode(m) for m in messages if _encodable(m)) + Channel.encode(("inv", None))
        for worker in self.workers.values():
            if worker.channel is None:
                continue
            worker.channel.send_encoded(frames)
            if worker.channel.backlog() > MAX_BACKLOG and worker.alive():
                log.error("worker %d does not take its messages (%d bytes queued): starting it again",
                          worker.number, worker.channel.backlog())
                worker.killed = worker.killed or "stuck"
                self.restarting[worker.number] = "stuck (it did not take its messages)"
                worker.proc.kill()

    def _derived(self, *, changed_only: bool) -> list[tuple[Any, ...]]:
        """The derived-data messages (synced, allow rules, autopath plans); with `changed_only`, those
        that differ from what was last sent (and remembered as sent)."""
        current: dict[str, tuple[Any, ...]] = {}
        if self.index.synced and (self._warm is None or self._warm.done()):  # the warm cache goes first
            current["synced"] = ("synced",)
        aaaa = self.resolver.aaaa
        if aaaa is not None and aaaa.mode == "auto":
            current["aaaa"] = ("aaaa", aaaa.active, aaaa.reason)  # --filter-aaaa auto, as the owner decided it
        if self._pods_moved or not changed_only:
            node = self.config.node_name
            rules = allow_rules(self.limits.allow, self.index, node)
            if rules is not None:
                current["allow"] = ("allow", rules)
            if self.autopath is not None and self.autopath.search_list is not None:
                current["plans"] = ("plans", *autopath_plans(self.autopath, self.index, node))
            if self.insight is not None:
                self.insight.refresh()
                current["who"] = ("who", dict(self.insight.gens))
            self._pods_moved = False
        if not changed_only:
            return [("names", self.existence.whole()), *{**self._pushed, **current}.values()]
        out = [m for kind, m in current.items() if self._pushed.get(kind) != m]
        for m in out:
            self._pushed[m[0]] = m
        return out

    def _answer(self, worker: Worker, keys: object) -> None:
        """A worker's cluster misses of one turn (their keys): the replies from the index as it is now,
        as one message on its stream."""
        assert worker.channel is not None
        if self._flush_due or self._tags:
            self._flush()  # earlier changes first: no needless drop of the replies that follow
        if not isinstance(keys, list):
            log.warning("worker %d asked about something that is not a list of keys", worker.number)
            return
        worker.asks += len(keys)
        # before the first sync a reply is used, not kept: no tags are sent for the changes of a first list
        keep = self.index.synced
        resolver = self.resolver
        out = []
        for key in keys:
            try:
                q = key_query(key)
            except (TypeError, ValueError, IndexError, FormatError):
                log.warning("worker %d asked about something that is not a cache key", worker.number)
                continue
            try:
                out.append((key, resolver.cluster_reply(q), keep))
            except Exception as exc:  # noqa: BLE001 - a bug costs this answer (SERVFAIL), not the channel
                channel_errors.report(exc)
                out.append((key, resolver.servfail_reply(q), False))
        worker.channel.send_encoded(encode_answers(out, resolver.servfail_reply))

    def _set_federations(self, federations: tuple[tuple[str, str], ...]) -> None:
        """A new federation map: every worker drops its cluster answers too (and asks about
        federation names again)."""
        before = self.records.federations
        super()._set_federations(federations)
        if self.records.federations != before:
            self.existence.set_federated(bool(self.records.federations))
            self._tags = None
            if self.workers:
                self._flush()

    # -- start -----------------------------------------------------------------------------

    def _binds_after_sync(self, others: list[Peer]) -> bool:
        self.defer_workers = any(p.serving for p in others)
        return False  # spawn the workers now; they wait for their sync themselves when told to

    async def bind(self) -> None:
        log.info("starting %d workers on %s", self.count,
                 ", ".join(f"{h}:{p}" for h, p in self.config.listen_addresses))
        for number in range(self.count):
            await self._spawn(number, defer=self.defer_workers)
        self._tasks.spawn(self._supervise(), "workers")

    def _use_host_text(self, host_text: str | None) -> None:
        super()._use_host_text(host_text)
        self._pods_moved = True  # the autopath plans are formed (again) from the search lists
        if self.workers:
            self._flush()

    async def _spawn(self, number: int, *, defer: bool) -> None:
        """Start worker `number`: forked from the zygote (nodedns.workers.zygote: a fresh `python -P` that
        imported the worker's code once, so every worker shares it), given the config and the derived
        data over its socketpair."""
        mine, theirs = socket.socketpair()
        with theirs:
            try:
                proc = await self.forker.spawn(theirs)
            except BaseException:
                mine.close()
                raise
        now = self.clock()
        worker = Worker(number, proc, now, heard=now)
        self.workers[number] = worker
        log.info("worker %d: pid %s%s", number, proc.pid, " (binds once synced)" if defer else "")
        closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def gone() -> None:
            if not closed.done():
                closed.set_result(None)

        # keep_on_error: one odd message of a worker is counted, not the end of its channel
        channel = await Channel.open(mine, lambda message: self._received(worker, message), gone, keep_on_error=True)
        channel.send(("config", self.config, number, defer))
        if self._warm_offer is not None and self.state == "starting":
            channel.send(("warm", self._warm_offer))
        self._flush()  # the others get what changed so far; the newcomer starts from the current state
        for message in self._derived(changed_only=False):
            channel.send(message)
        worker.channel = channel
        worker.reader = closed

    def _received(self, worker: Worker, message: Any) -> None:
        """One message from a worker, in stream order (each one says its event loop runs)."""
        worker.heard = self.clock()
        tag = message[0]
        if tag == "beat":
            return
        if tag == "ask":
            self._answer(worker, message[1])
        elif tag == "state":
            state: Mapping[str, Any] = message[1]
            worker.bound, worker.synced, worker.live = state["bound"], state["synced"], state["live"]
            worker.heavy_imports = tuple(state.get("heavy_imports", ()))
            worker.served = worker.served or worker.serving
            if worker.serving:
                self.restarting.pop(worker.number, None)
            self._changed.set()
            if self.node is not None:
                self.node.poke()  # the rules follow whether anyone serves
        elif tag == "scrape":
            worker.scrape = message[1]
        elif tag == "insight" and self.insight is not None:
            self.insight.take(message[1])
        elif tag == "fatal" and self.fatal_report is None:
            self.fatal_report = message[2]
        elif tag == "warm":
            asked = self._exports.pop(worker.number, None)
            if asked is not None and not asked.done():
                asked.set_result(list(message[1]))

    def _stopping(self) -> bool:
        return self.retiring or (self._stop is not None and self._stop.is_set())

    async def _export_warm(self) -> list[bytes]:
        """The workers' forward caches (each asked; one that does not answer within EXPORT_WAIT is left out)."""
        loop = asyncio.get_running_loop()
        for worker in self.workers.values():
            if worker.channel is not None and worker.serving:
                self._exports[worker.number] = loop.create_future()
                worker.channel.send(("export",))
        asked = list(self._exports.values())
        if asked:
            await asyncio.wait(asked, timeout=EXPORT_WAIT)
        parts = [p for fut in asked if fut.done() and not fut.cancelled() for p in fut.result()]
        self._exports.clear()
        return parts

    def _load_warm(self, parts: list[bytes]) -> tuple[int, int]:
        """Hand the running agent's forward caches to the workers (each loads all of them, within its own byte
        budget), before they are told the index synced; (entries offered, 0)."""
        self._warm_offer = parts
        for worker in self.workers.values():
            if worker.channel is not None:
                worker.channel.send(("warm", parts))
        return sum(export_count(p[1:]) for p in parts if p[:1] == WARM_CACHE), 0

    def _after_warm(self) -> None:
        self._flush()  # "synced" waited for the warm cache

    async def _supervise(self) -> None:
        """Notice dead workers; start them again (a start-up failure stops everything). Nothing is
        restarted once the stop began (the lameduck included)."""
        due: dict[int, float] = {}
        self._last_round = self.clock()
        while not self.retiring:
            await asyncio.sleep(0.1)
            now = self.clock()
            self._watch_round(now)
            for number, worker in list(self.workers.items()):
                if number in due or worker.alive() or worker.channel is None:
                    continue
                if worker.reader is not None:  # what it sent before it died (a fatal error line)
                    await asyncio.wait({worker.reader}, timeout=1.0)
                self._bury(worker)
                code = worker.proc.returncode
                # its own error before it ever served (bind, config), or a loop: every restart would end so.
                # Killed by a signal (negative status: OOM, an operator) is not its fault: start it again.
                if code is not None and (code in FATAL_EXITS or (code > 0 and not worker.served)):
                    log.error("worker %d (pid %s) exited with %s%s: stopping", number, worker.proc.pid, code,
                              "" if worker.served else " before it served")
                    self.exit_code = code
                    if self.fatal_report is not None:
                        print_error(code, self.fatal_report)
                    self.request_stop()
                    return
                if self._stopping():
                    log.warning("worker %d (pid %s) ended (exit %s) while stopping: not restarted", number,
                                worker.proc.pid, code)
                    continue
                lived = now - worker.started
                previous = self.backoff.get(number, 0.0)
                # a silent worker is started again at once (it was killed so its share gets answered); a
                # second death within 30 s of its start backs off, whatever the reason
                delay = 0.0 if lived > 30 or (worker.killed == "silent" and not previous) \
                    else min(max(previous * 2, 1.0), 30.0)
                self.backoff[number] = delay
                reason = worker.killed or "died"
                counts = self.restart_reasons.setdefault(number, {})
                counts[reason] = counts.get(reason, 0) + 1
                if not worker.killed:
                    self.restarting[number] = f"died (exit {code})"
                    log.warning("worker %d (pid %s) died (exit %s); restarting in %.1fs", number, worker.proc.pid,
                                code, delay)
                due[number] = now + delay
            for number, when in list(due.items()):
                if self._stopping():
                    due.clear()
                elif now >= when:
                    del due[number]
                    self.restarts[number] = self.restarts.get(number, 0) + 1
                    siblings = any(w.serving for n, w in self.workers.items() if n != number)
                    try:
                        await self._spawn(number, defer=self.defer_workers or siblings)
                    except (ConnectionError, OSError, TimeoutError) as exc:
                        log.error("worker %d could not be started (%s): trying again in 1s", number, exc)
                        due[number] = now + 1.0

    def _watch_round(self, now: float) -> None:
        """One round of the watch, `now` by the supervisor's clock: a round this late means our own loop
        did not run (stopped, or busy: a large relist), and the workers' messages wait unread in their
        channels: each counts as heard from now. Then `_watch`."""
        if now - self._last_round > SUPERVISOR_LAG:
            for worker in self.workers.values():
                worker.heard = max(worker.heard, now)
        self._last_round = now
        self._watch(now)

    def _watch(self, now: float) -> None:
        """Kill a worker whose event loop has been silent too long (SIGSTOP, a hang, a loop blocked by a
        bug): its sockets stay in the SO_REUSEPORT group, so its share of the queries is lost until it
        is gone. `_supervise` then starts it again as any dead worker."""
        for number, worker in self.workers.items():
            if worker.killed or not worker.alive() or worker.channel is None:
                continue
            silent = now - worker.heard
            if silent > (HEARTBEAT_TIMEOUT if worker.served else START_TIMEOUT):
                log.error("worker %d (pid %s): no heartbeat for %.1fs (its event loop does not run: stopped, hung "
                          "or blocked); killing it and starting it again", number, worker.proc.pid, silent)
                worker.killed = "silent"
                self.restarting[number] = f"silent for {silent:.1f}s (no heartbeat)"
                worker.proc.kill()

    def silent(self) -> list[str]:
        """The workers that run but have not been heard from for over HEARTBEAT_LATE, or are being started
        again after that: why the node must not be put back (their sockets may swallow queries)."""
        return [reason for _, reason, silent in self._worker_states() if silent]

    def _worker_states(self) -> list[tuple[int, str, bool]]:
        """(worker, why it does not serve, whether that is silence) for every worker not serving."""
        now = self.clock()
        out = []
        for number in range(self.count):
            worker = self.workers.get(number)
            if worker is not None and worker.alive() and not worker.killed and worker.served \
                    and now - worker.heard > HEARTBEAT_LATE:
                out.append((number, f"worker {number} silent for {now - worker.heard:.1f}s (no heartbeat)", True))
            elif worker is not None and worker.serving and worker.alive():
                continue
            elif number in self.restarting:
                why = self.restarting[number]
                out.append((number, f"worker {number} restarting: {why}", why.startswith("silent")))
            else:
                out.append((number, "", False))
        return out

    def _bury(self, worker: Worker) -> None:
        """A worker ended: keep its counters, drop its channel."""
        if worker.scrape is not None:
            kept = [aggregate.counters_only(worker.scrape)]
            if self.retired is not None:
                kept.append(self.retired)
            t = aggregate.merge(self.slots, kept, sections=())
            self.retired = Scrape(version=__version__, slots=self.slots, listeners=t.listeners, alive=True, ready=True,
                                  index={}, cluster_cache=None, panics=t.panics, errors=t.errors)
            worker.scrape = None
        worker.bound = worker.synced = False
        if worker.reader is not None:
            worker.reader.cancel()
        if worker.channel is not None:
            worker.channel.close()
            worker.channel = None
        self._changed.set()

    # -- readiness -------------------------------------------------------------------------

    def listener_problems(self) -> list[str]:
        states = self._worker_states()
        out = [reason for _, reason, _ in states if reason]
        waiting = [str(n) for n, reason, _ in states if not reason]
        if waiting:
            out.append(f"worker{'s' if len(waiting) > 1 else ''} {', '.join(waiting)} not serving yet")
        return out

    def live(self) -> tuple[bool, list[str]]:
        if self.state in ("running", "stopping") and not any(w.serving for w in self.workers.values()):
            return False, ["no worker serves DNS"]
        return True, []

    def _can_capture(self) -> bool:
        return self.index.synced and any(w.serving for w in self.workers.values())

    def _capture_hold(self) -> str | None:
        silent = self.silent()
        return "; ".join(silent) if silent else None

    async def wait_serving(self) -> None:
        while not (len(self.workers) == self.count and all(w.serving for w in self.workers.values())):
            self._changed.clear()
            await self._changed.wait()

    async def _probe_loops(self) -> None:
        return None  # each worker probes through its own listener

    def _on_hangup(self) -> None:
        """SIGHUP: the supervisor and every worker re-read the upstream files (each forwards on its own)."""
        sent = 0
        for worker in self.workers.values():
            if worker.channel is not None and not worker.channel.is_closing():
                worker.channel.send(("reload",))
                sent += 1
        log.info("SIGHUP: %s, and so do its %d workers; other settings take a restart", self.reload_upstream_files(),
                 sent)

    # -- stop ------------------------------------------------------------------------------

    async def close_listeners(self, *, forced: bool) -> None:
        """Every worker drains and closes its sockets, sends its last counters and exits; stragglers
        are killed."""
        self.retiring = True
        drain = 0.0 if forced else max(1.0, 2 * self.config.upstream_timeout + 0.5)
        for worker in self.workers.values():
            if worker.channel is not None:
                worker.channel.send(("retire", forced))
        deadline = time.monotonic() + drain + 10.0
        for worker in self.workers.values():
            try:
                await asyncio.wait_for(worker.proc.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                log.error("worker %d (pid %s) did not stop in time: killing it", worker.number, worker.proc.pid)
                worker.proc.kill()
                await worker.proc.wait()
            if worker.reader is not None:  # its last counters are on the way: read to the end of the stream
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(worker.reader), 1.0)
            self._bury(worker)
        await self.forker.close()

    async def run(self) -> int:
        code = await super().run()
        return self.exit_code or code


class FleetObserver(Observer):
    """/metrics and /status of the supervisor: its own parts plus the sum of the counters its workers
    published last (at most a second old: a scrape costs the workers nothing)."""

    def __init__(self, fleet: Fleet) -> None:
        super().__init__(fleet)
        self.fleet = fleet

    def _totals(self) -> aggregate.Totals:
        fleet = self.fleet
        scrapes = [w.scrape for w in fleet.workers.values() if w.scrape is not None]
        if fleet.retired is not None:
            scrapes.append(fleet.retired)
        return aggregate.merge(fleet.slots, scrapes)

    def _answers(self) -> tuple[list[ListenerStats], int, int]:
        t = self._totals()
        cc = t.cluster_cache
        if cc is None:
            return list(t.listeners), 0, 0
        return list(t.listeners), cc.hits_success + cc.hits_denial, cc.misses

    def _sections(self) -> dict[str, Mapping[str, Any]]:
        out = super()._sections()  # the supervisor's own: sync, node, handover, workers, limits (settings)
        for name, section in self._totals().sections.items():  # the workers': cache, upstream, autopath, ...
            if name == "limits" and name in out:
                out[name] = worker_limits(out[name], section)
            elif name == "filter_aaaa" and name in out:  # the supervisor decides; the workers answer (count)
                out[name] = {**out[name], "filtered": section.get("filtered", 0)}
            elif name == "hosts" and name in out:  # each process reads the files; the workers answer (count)
                out[name] = {**out[name], "answers": section.get("answers", 0)}
            elif name == "event_loop" and name in out:  # one row per process: the supervisor's, each worker's
                out[name] = {"processes": [*out[name].get("processes", ()), *section.get("processes", ())]}
            else:
                out.setdefault(name, section)
        return out

    def scrape(self, sections: Mapping[str, Mapping[str, Any]] | None = None) -> Scrape:
        sections = self._sections() if sections is None else sections
        t = self._totals()
        errors = dict(logutil.error_totals())
        for kind, n in t.errors.items():
            errors[kind] = errors.get(kind, 0) + n
        return Scrape(
            version=__version__,
            slots=self.fleet.slots,
            listeners=t.listeners,
            alive=not self.liveness(),
            ready=not self.readiness(sections),
            index=self._index(),
            cluster_cache=t.cluster_cache if t.cluster_cache is not None else self._cluster_cache(),
            panics=t.panics,
            errors=errors,
            sections=sections,
        )


# In the "limits" section, what is a setting (the supervisor's, the same in every worker) rather
# than a count (the workers', summed): per subsection, the keys taken from the supervisor.
LIMIT_SETTINGS: Mapping[str, tuple[str, ...]] = {
    "allow_from": ("mode", "networks", "pod_cidrs"),
    "rate_limit": ("qps", "slip"),
    "pending": ("max",),
    "upstream_share": ("max",),
    "tcp": ("max_connections", "max_connections_per_client"),
}


def worker_limits(own: Mapping[str, Any], workers: Mapping[str, Any]) -> dict[str, Any]:
    """The "limits" section of a fleet: the workers' counts (they answer, so they refuse, limit and
    queue), summed, with the settings and the allow list's rules as the supervisor has them."""
    out = dict(workers)
    for sub, keys in LIMIT_SETTINGS.items():
        mine = own.get(sub)
        if mine is None:
            continue
        merged = dict(out.get(sub) or {})
        for key in keys:
            if key in mine:
                merged[key] = mine[key]
        out[sub] = merged
    return out


class _WorkersReport:
    """The "workers" section of /status and /metrics (contract in nodedns.metrics.registry)."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.tick = os.sysconf("SC_CLK_TCK")
        self.page = os.sysconf("SC_PAGE_SIZE")

    def _usage(self, pid: int | None) -> tuple[float | None, int | None]:
        if pid is None:
            return None, None
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
                rss_pages = int(fh.read().split()[1])
        except (OSError, IndexError, ValueError):
            return None, None
        return (int(fields[11]) + int(fields[12])) / self.tick, rss_pages * self.page

    def status(self) -> dict[str, Any]:
        fleet = self.fleet
        out = []
        for number in range(fleet.count):
            worker = fleet.workers.get(number)
            up = worker is not None and worker.alive()
            cpu, rss = self._usage(worker.proc.pid if worker is not None and up else None)
            out.append({
                "worker": str(number),
                "pid": worker.proc.pid if worker is not None else None,
                "up": up,
                "serving": worker is not None and worker.serving,
                "restarts": fleet.restarts.get(number, 0),
                "restarts_by_reason": {r: fleet.restart_reasons.get(number, {}).get(r, 0) for r in RESTART_REASONS},
                "silent_seconds": round(fleet.clock() - worker.heard, 3) if worker is not None and up else None,
                "restarting": fleet.restarting.get(number),
                "cluster_asks": worker.asks if worker is not None else 0,
                "heavy_imports": list(worker.heavy_imports) if worker is not None else [],
                "cpu_seconds": cpu,
                "rss_bytes": rss,
            })
        return {"configured": fleet.count, "workers": out}


# ----------------------------------------------------------------------------------------------
# A worker


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
        self.keep: Any = None  # Resolver.keep, set once the resolver exists
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
        self.channel.send(("ask", keys))
        # one timer per message, not per question: the questions expire together
        asyncio.get_running_loop().call_later(
            ASK_TIMEOUT, self._expire, batch, TimeoutError(f"no reply from the supervisor in {ASK_TIMEOUT:g}s"))

    def _expire(self, batch: list[tuple[bytes, list[asyncio.Future[Reply]]]], exc: Exception) -> None:
        for key, waiters in batch:
            if self.waiting.get(key) is waiters:
                del self.waiting[key]
                _fail(waiters, exc)

    def answered(self, key: bytes, reply: Reply, *, keep: bool = True) -> None:
        if keep:
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

    def __init__(self, config: Config, *, number: int, sock: socket.socket, defer: bool) -> None:
        self.link = OwnerLink()
        self.full_config = config
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
        """Its share of --cache-max-bytes: what the supervisor leaves, split over the workers."""
        full = self.full_config
        return max(1 << 20, (full.cache_max_bytes - SUPERVISOR_CACHE_BYTES) // workers_for(full))

    # the parts a worker takes from the supervisor instead of an index

    DECIDES_AAAA = False  # --filter-aaaa auto: the supervisor decides and tells ("aaaa")

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
        beat = Channel.encode(("beat",))
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

    def _received(self, message: Any) -> None:
        """One message from the supervisor, in stream order (a reply is kept before what follows)."""
        tag = message[0]
        if tag == "ans":
            answered = self.link.answered
            for key, reply, keep in message[1]:
                answered(key, reply, keep=keep)
        elif tag == "inv":
            self.resolver.invalidate(message[1])
        elif tag == "names":
            self.existence.apply(message[1])
        elif tag == "synced":
            if not self.index.synced:
                self.index.mark_synced()  # an empty index: the flag readiness and autopath read
                self._synced.set()
                self._report()
        elif tag == "allow":
            assert isinstance(self.limits.allow, PushedAllowList)
            self.limits.allow.apply(message[1])
        elif tag == "plans":
            assert isinstance(self.autopath, PushedAutopath)
            self.autopath.apply(message[1], message[2])
            self.resolver.forget_walks()
        elif tag == "who":
            if self.tally is not None:  # what was counted under the old map first
                self._send_rows(self.tally.retag(message[1], self.slots.labels))
        elif tag == "aaaa":
            self.resolver.set_aaaa_filter(message[1], message[2])
        elif tag == "retire":
            (self.force_stop if message[1] else self.request_stop)()
        elif tag == "reload":
            self.reload_upstream_files()  # the supervisor's SIGHUP, passed on (it logged it)
        elif tag == "warm":
            started = time.perf_counter()
            entries, edns = self._load_warm(message[1])
            log.info("worker %d: %d forward cache entries and %d EDNS memories from the running nodedns in %.1f ms",
                     self.number, entries, edns, (time.perf_counter() - started) * 1000)
        elif tag == "export" and self.channel is not None:
            self.channel.send(("warm", self._warm_parts()))

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
                self.channel.send(("scrape", self.observer.scrape()))
                self._send_rows(await self.insight_rows_sliced())
                self._report()

    def _send_counters(self) -> None:
        if self.channel is not None:
            self.channel.send(("scrape", self.observer.scrape()))
            self._send_rows(self.insight_rows())
            self._report()

    def _send_rows(self, rows: list[Row]) -> None:
        if rows and self.channel is not None:
            self.channel.send(("insight", rows))

    def _report(self) -> None:
        state = (bool(self.server.bound) and self.server.alive(), self.index.synced, self.server.alive(),
                 heavy_imports())
        if self.channel is not None and state != self._reported:
            if all(state[:3]) and (self._reported is None or not all(self._reported[:3])):
                log.info("worker %d serving", self.number)
                release_free_heap()  # what starting left free goes back to the system
            self._reported = state
            self.channel.send(("state", {"bound": state[0], "synced": state[1], "live": state[2],
                                         "heavy_imports": state[3]}))

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


# The zygote's code (run with -P: sys.path without the current directory, so a `nodedns/` folder there
# cannot shadow the package): the garbage collector off while it imports (no freed holes in the pages
# the workers share), what a worker runs imported, then only forks (nodedns.workers.zygote)
ZYGOTE_ENTRY = ("import gc; gc.disable(); import sys; from nodedns.workers.fleet import preload, worker_main; "
                "preload(); "
                "from nodedns.workers.zygote import serve_forks; sys.exit(serve_forks(int(sys.argv[1]), worker_main))")


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
        header = _recv_exactly(sock, _HEADER.size)
        tag, config, number, defer = pickle.loads(_recv_exactly(sock, _HEADER.unpack(header)[0]))
    except (OSError, EOFError, pickle.UnpicklingError, ValueError) as exc:
        print(f"nodedns worker: no configuration from the supervisor ({exc})", file=sys.stderr)
        return 1
    assert tag == "config"
    sock.setblocking(False)
    logutil.setup(config.log_level, config.log_format)
    to_supervisor = socket.socket(fileno=os.dup(fd))  # still open when the agent has closed its channel

    def report(code: int, text: str) -> None:
        """A fatal error goes to the supervisor, which prints it once (not once per worker)."""
        try:
            to_supervisor.setblocking(True)
            to_supervisor.sendall(Channel.encode(("fatal", code, text)))
        except OSError:
            print_error(code, text)

    return run_agent(config, lambda c: WorkerAgent(c, number=number, sock=sock, defer=defer), report)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the supervisor closed the channel")
        data += chunk
    return data
