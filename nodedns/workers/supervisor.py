"""The --workers supervisor: the agent that owns the index, syncs, manages the node; its listeners are N workers.

    supervisor (the `nodedns serve` process)          worker 0 .. N-1 (spawned processes)
      hand-over roster, interface, firewall rules       a DNSServer on every listen address: the
      API watch (or --manifests) -> the one Index         kernel spreads queries over the workers'
      cluster answers for the workers' misses  <-----     sockets (SO_REUSEPORT); NO index: a cluster
        Ask([key]) -> Answers([(key, Reply, keep)])      or reverse miss is asked of the supervisor
      what exists (namespaces, a Service filter) ->       (unless existence alone decides it: an
                                                          NXDOMAIN answered alone, nodedns.cluster.existence)
      the tags each index change touches  ------->        and kept, with its tags, until told
        Invalidate(tags | None), in stream order          hot dict, forward cache, forwarder, loop
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
supervisor pushed, nothing more (docs/sync.md has the memory figures). The messages on each worker's
channel, and why they keep a worker exact, are drawn in nodedns.workers.messages; the worker's side
is nodedns.workers.worker, the entry (one process or this) nodedns.workers.launch.

Signals: a worker ignores SIGTERM and SIGINT. A signal sent to the whole process group (`timeout`,
`kill -- -PGID`, systemd's default KillMode) thus reaches only the supervisor's lameduck, during
which every worker keeps answering; the supervisor then retires them. A worker whose supervisor is
gone (channel closed) stops by itself; SIGKILL stops one worker (and the supervisor starts it again,
unless it is stopping: then nothing is restarted). SIGHUP stops no process: the supervisor re-reads
the upstream files and sends Reload() to every worker, a worker signalled itself re-reads them
too, the zygote ignores it.

Heartbeats: every worker's event loop sends Beat() every HEARTBEAT_PERIOD (any message counts).
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
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from nodedns import __version__
from nodedns.app.agent import Agent
from nodedns.app.parts import WARM_CACHE
from nodedns.app.run import print_error
from nodedns.cluster import existence
from nodedns.cluster import objects as k8s
from nodedns.cluster.changes import Change
from nodedns.config import endpoint_text
from nodedns.dns.keys import key_query
from nodedns.errors import FormatError
from nodedns.forward.store import export_count
from nodedns.metrics import aggregate
from nodedns.metrics.counters import Scrape
from nodedns.node.handover import Peer
from nodedns.serve.hostswatch import pass_table
from nodedns.workers.channel import Channel, channel_errors, encodable, encode_answers
from nodedns.workers.messages import (
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
    Policies,
    Reload,
    Retire,
    Start,
    State,
    Synced,
    Tenants,
    ToWorker,
    Warm,
    Who,
)
from nodedns.workers.pushed import allow_rules, autopath_plans, pod_namespaces
from nodedns.workers.zygote import ForkedProcess, Forker

log = logging.getLogger("nodedns.fleet")

MAX_BACKLOG = 64 << 20  # bytes queued to one worker: beyond this it is stuck, and is started again
HEARTBEAT_LATE = 1.0  # seconds without a message from a worker after which it counts as silent (/readyz)
HEARTBEAT_TIMEOUT = 2.0  # seconds without a message after which a worker that has served is killed and restarted
START_TIMEOUT = 30.0  # the same for a worker that has not served yet (its start: fork, config, bind)
SUPERVISOR_LAG = 0.5  # a watch round this late means our own loop was busy: the workers' messages wait unread
# --cache-max-bytes: the supervisor's own forward cache is filled only by the explainer's lookups; the
# workers, which answer, share the rest
SUPERVISOR_CACHE_BYTES = 1 << 20
EXPORT_WAIT = 1.0  # seconds the workers have to send their forward caches for a newer agent
FATAL_EXITS = (2, 3)  # a config error, a forwarding loop: every restart would end the same way


# The zygote's code (run with -P: sys.path without the current directory, so a `nodedns/` folder there
# cannot shadow the package): the garbage collector off while it imports (no freed holes in the pages
# the workers share), what a worker runs imported (its agent wired by nodedns.workers.modes.worker),
# then only forks (nodedns.workers.zygote). "serve_forks" and "worker_main" stay within the first 200
# characters of the command line: nodedns.node.handover.udp_occupants reads them to name the supervisor
ZYGOTE_ENTRY = ("import gc; gc.disable(); import sys; from nodedns.workers.zygote import serve_forks; "
                "from nodedns.workers.worker import preload, worker_main; from nodedns.workers.modes import worker; "
                "preload(); sys.exit(serve_forks(int(sys.argv[1]), lambda *fds: worker_main(*fds, make=worker)))")


@dataclasses.dataclass(eq=False)
class Worker:
    """The supervisor's view of one worker process."""

    number: int
    proc: ForkedProcess
    started: float
    channel: Channel | None = None
    tables: socket.socket | None = None  # the --hosts table's memfd goes to it here (SCM_RIGHTS)
    reader: asyncio.Future[None] | None = None  # done when its channel closed (all it sent was read)
    bound: bool = False
    synced: bool = False
    live: bool = True
    served: bool = False  # it has served at least once
    scrape: Scrape | None = None
    asks: int = 0  # cluster misses it asked about
    heavy_imports: tuple[str, ...] = ()  # of kubernetes, urllib3, aiohttp, pyroute2: what it loaded (none)
    heard: float = 0.0  # when its last message came (its event loop runs): the supervisor's clock
    killed: str = ""  # why the supervisor killed it ("silent", "stuck"), "" when it did not

    @property
    def serving(self) -> bool:
        return self.bound and self.synced and self.live

    def alive(self) -> bool:
        return self.proc.returncode is None


RESTART_REASONS = ("died", "silent", "stuck")  # nodedns_worker_restarts_total{reason}


class Fleet:
    """The supervisor's worker processes, a part of its agent (nodedns.workers.modes wires it): the agent's
    listeners (`Listeners`: the workers bind, serve and retire), what holds its forward caches across a
    hand-over (`WarmState`), and the followers of what the index owner derives (`Followers`, and the
    change listener `index_changed` on the watch path): the workers hold no index."""

    probes_loops = False  # each worker probes through its own listener
    rechecks_loops = True

    def __init__(self, agent: Agent, *, count: int) -> None:
        self.agent = agent
        self.config = agent.config
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
        self.fatal_report: str | None = None  # the first fatal error line a worker sent (printed once)
        self.defer_workers = False
        self.retiring = False
        self._changed = asyncio.Event()
        self._tags: set[str] | None = set()  # touched since the last flush (None: everything)
        self._pods_moved = True  # a Pod or Node changed: the pushed allow rules and plans are re-derived
        self._flush_due = False
        self._pushed: dict[type[ToWorker], ToWorker] = {}  # what every worker was sent last: kind -> message
        self.existence = existence.Feed(agent.index, federated=bool(agent.records.federations))
        self._serial_sent: float | None = None
        self._warm_offer: list[bytes] | None = None  # what the running agent left, for workers started meanwhile
        # (dropped once the agent runs: `_supervise`)
        self._exports: dict[int, asyncio.Future[list[bytes]]] = {}  # worker -> its forward cache, asked for
        self._dispatch = (  # the supervisor's one dispatch table: each message type a worker sends -> its handler
            Dispatch[Worker]()
            .on(Beat, self._on_beat)
            .on(Ask, self._on_ask)
            .on(State, self._on_state)
            .on(Counters, self._on_counters)
            .on(InsightRows, self._on_insight_rows)
            .on(Fatal, self._on_fatal)
            .on(Warm, self._on_warm)
        )

    def _worker_cache_bytes(self) -> int:
        """A worker's share of --cache-max-bytes: what the supervisor leaves, split over the workers."""
        return max(1 << 20, (self.config.cache_max_bytes - SUPERVISOR_CACHE_BYTES) // self.count)

    def aaaa_changed(self) -> None:
        if self.workers:
            self._flush()  # the decision goes to the workers with the derived data (_derived: FilterAaaa)

    def hosts_changed(self) -> None:
        if self.workers:
            self._flush()  # the new table goes to the workers with the derived data (_derived: Hosts)

    # -- the index stream ------------------------------------------------------------------

    def index_changed(self, change: Change) -> None:
        """A change listener (nodedns.workers.modes adds it after the agent's own): what exists, and the tags
        of the loop turn for the workers' one invalidation."""
        kind = change.kind
        self.existence.changed(kind, change.old, change.new)
        if kind in (k8s.POD, k8s.NODE, ""):
            self._pods_moved = True
        if not self.agent.index.synced and kind:
            pass  # before the first sync no worker keeps a reply, and the sync drops everything anyway
        else:
            tags = change.tags
            if tags is None:
                self._tags = None
            elif self._tags is not None:
                self._tags.update(tags)
        self.flush_soon()

    def flush_soon(self, *_: object) -> None:
        """Send this loop turn's changes to the workers once the turn's listeners ran (a flush already due
        sends them). Also the policy book's listener: a book rebuilt after this turn's flush was queued
        (its rebuild is queued on the first Pod or policy change, the flush on the first change of any
        kind) goes out in a flush of its own, not with the next unrelated change."""
        if not self._flush_due and self.workers:
            self._flush_due = True
            with contextlib.suppress(RuntimeError):  # no loop yet (loading before start): the spawn sends it
                asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Send this turn's invalidations, then whatever derived data changed, to every worker."""
        self._flush_due = False
        messages: list[ToWorker] = []
        # what exists and the derived data first, the invalidations last: whatever a worker decides
        # alone between two of these messages is dropped by the invalidations if it must be
        state = self.existence.update()
        if state.serial != self._serial_sent or state.bits is not None or state.changed or \
                state.namespaces is not None or state.federated is not None:
            messages.append(Names(state))
            self._serial_sent = state.serial
        messages.extend(self._derived(changed_only=True))
        tags, self._tags = self._tags, set()
        if tags is None or tags:
            messages.append(Invalidate(None if tags is None else frozenset(tags)))
        if not messages:
            return
        try:
            frames = b"".join(Channel.encode(m) for m in messages)
        except Exception as exc:  # noqa: BLE001 - the workers drop everything rather than keep a stale answer
            channel_errors.report(exc)
            frames = b"".join(Channel.encode(m) for m in messages if encodable(m)) + Channel.encode(Invalidate(None))
        hosts = next((m for m in messages if isinstance(m, Hosts)), None)
        for worker in self.workers.values():
            if worker.channel is None:
                continue
            if hosts is not None:
                self._pass_table(worker, hosts)
            worker.channel.send_encoded(frames)
            if worker.channel.backlog() > MAX_BACKLOG and worker.alive():
                log.error("worker %d does not take its messages (%d bytes queued): starting it again",
                          worker.number, worker.channel.backlog())
                worker.killed = worker.killed or "stuck"
                self.restarting[worker.number] = "stuck (it did not take its messages)"
                worker.proc.kill()

    def _pass_table(self, worker: Worker, message: Hosts) -> None:
        """The --hosts table's memfd on the worker's table socket, before the Hosts message that names it
        (the worker maps it when the message comes; one that cannot go leaves it the table it has)."""
        files = self.agent.hosts_files
        if worker.tables is None or files is None or files.fd is None:
            return
        try:
            pass_table(worker.tables, files.fd, message.reloads)
        except OSError as exc:
            log.warning("worker %d: cannot pass the --hosts table (it keeps the one it has): %s", worker.number, exc)

    def _derived(self, *, changed_only: bool) -> list[ToWorker]:
        """The derived-data messages (synced, allow rules, autopath plans); with `changed_only`, those
        that differ from what was last sent (and remembered as sent)."""
        current: dict[type[ToWorker], ToWorker] = {}
        warm = self.agent._warm
        if self.agent.index.synced and (warm is None or warm.done()):  # the warm cache goes first
            current[Synced] = Synced()
        files = self.agent.hosts_files
        if files is not None and files.fd is not None:  # --hosts: the table, once per node (a memfd they map)
            current[Hosts] = Hosts(files.table.size, files.reloads)
        aaaa = self.agent.resolver.aaaa
        if aaaa is not None and aaaa.mode == "auto":
            current[FilterAaaa] = FilterAaaa(aaaa.active, aaaa.reason)  # --filter-aaaa auto, as the owner decided it
        if self._pods_moved or not changed_only:
            node = self.config.node_name
            rules = allow_rules(self.agent.limits.allow, self.agent.index, node)
            if rules is not None:
                current[type(rules)] = rules
            if self.agent.autopath is not None and self.agent.autopath.search_list is not None:
                plans = autopath_plans(self.agent.autopath, self.agent.index, node)
                current[type(plans)] = plans
            if self.agent.insight is not None:
                self.agent.insight.refresh()
                current[Who] = Who(dict(self.agent.insight.gens))
            # the shares per namespace (upstream queries, --miss-limit-namespace): whose Pod each address is
            current[Tenants] = pod_namespaces(self.agent.index, node)
            self._pods_moved = False
        current[Policies] = Policies(dict(self.agent.policy.clients))  # the book is rebuilt before this flush
        if not changed_only:
            return [Names(self.existence.whole()), *{**self._pushed, **current}.values()]
        out = [m for kind, m in current.items() if self._pushed.get(kind) != m]
        for m in out:
            self._pushed[type(m)] = m
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
        keep = self.agent.index.synced
        resolver = self.agent.resolver
        out = []
        for key in keys:
            try:
                q = key_query(key)
            except (TypeError, ValueError, IndexError, FormatError):
                log.warning("worker %d asked about something that is not a cache key", worker.number)
                continue
            try:
                out.append((key, resolver.answers.cluster_reply(q), keep))
            except Exception as exc:  # noqa: BLE001 - a bug costs this answer (SERVFAIL), not the channel
                channel_errors.report(exc)
                out.append((key, resolver.answers.servfail_reply(q), False))
        worker.channel.send_encoded(encode_answers(out, resolver.answers.servfail_reply))

    def federations_changed(self) -> None:
        """A new federation map: every worker drops its cluster answers too (and asks about
        federation names again)."""
        self.existence.set_federated(bool(self.agent.records.federations))
        self._tags = None
        if self.workers:
            self._flush()

    # -- start -----------------------------------------------------------------------------

    def binds_after_sync(self, others: list[Peer]) -> bool:
        self.defer_workers = any(p.serving for p in others)
        return False  # spawn the workers now; they wait for their sync themselves when told to

    async def bind(self) -> None:
        log.info("starting %d workers on %s", self.count,
                 ", ".join(f"{h}:{p}" for h, p in self.config.listen_addresses))
        for number in range(self.count):
            await self._spawn(number, defer=self.defer_workers)
        self.agent._tasks.spawn(self._supervise(), "workers")

    def search_lists_changed(self) -> None:
        self._pods_moved = True  # the autopath plans are formed (again) from the search lists
        if self.workers:
            self._flush()

    async def _spawn(self, number: int, *, defer: bool) -> None:
        """Start worker `number`: forked from the zygote (nodedns.workers.zygote: a fresh `python -P` that
        imported the worker's code once, so every worker shares it), given the config and the derived
        data over its socketpair."""
        mine, theirs = socket.socketpair()
        tables, their_tables = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs, their_tables:
            try:
                proc = await self.forker.spawn(theirs, their_tables)
            except BaseException:
                mine.close()
                tables.close()
                raise
        tables.setblocking(False)
        now = self.clock()
        worker = Worker(number, proc, now, heard=now, tables=tables)
        self.workers[number] = worker
        log.info("worker %d: pid %s%s", number, proc.pid, " (binds once synced)" if defer else "")
        closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def gone() -> None:
            if not closed.done():
                closed.set_result(None)

        # keep_on_error: one odd message of a worker is counted, not the end of its channel
        channel = await Channel.open(mine, lambda message: self._received(worker, message), gone, keep_on_error=True)
        channel.send(Start(self.config, number, defer, self._worker_cache_bytes()))
        if self._warm_offer is not None and self.agent.state == "starting":
            channel.send(Warm(self._warm_offer))
        self._flush()  # the others get what changed so far; the newcomer starts from the current state
        for message in self._derived(changed_only=False):
            if isinstance(message, Hosts):
                self._pass_table(worker, message)
            channel.send(message)
        worker.channel = channel
        worker.reader = closed

    def _received(self, worker: Worker, message: object) -> None:
        """One message from a worker, in stream order (each one says its event loop runs)."""
        worker.heard = self.clock()
        if not self._dispatch(worker, message):
            log.warning("worker %d: a message of unknown type %s: ignored", worker.number, type(message).__name__)

    def _on_beat(self, worker: Worker, message: Beat) -> None:
        pass  # heard from: that is all a beat says

    def _on_ask(self, worker: Worker, message: Ask) -> None:
        self._answer(worker, message.keys)

    def _on_state(self, worker: Worker, message: State) -> None:
        worker.bound, worker.synced, worker.live = message.bound, message.synced, message.live
        worker.heavy_imports = tuple(message.heavy_imports)
        worker.served = worker.served or worker.serving
        if worker.serving:
            self.restarting.pop(worker.number, None)
        self._changed.set()
        if self.agent.node is not None:
            self.agent.node.poke()  # the rules follow whether anyone serves

    def _on_counters(self, worker: Worker, message: Counters) -> None:
        worker.scrape = message.scrape

    def _on_insight_rows(self, worker: Worker, message: InsightRows) -> None:
        if self.agent.insight is not None:
            self.agent.insight.take(message.rows)

    def _on_fatal(self, worker: Worker, message: Fatal) -> None:
        if self.fatal_report is None:
            self.fatal_report = message.text

    def _on_warm(self, worker: Worker, message: Warm) -> None:
        asked = self._exports.pop(worker.number, None)
        if asked is not None and not asked.done():
            asked.set_result(list(message.parts))

    def _stopping(self) -> bool:
        return self.retiring or (self.agent._stop is not None and self.agent._stop.is_set())

    async def export(self) -> list[bytes]:
        """The workers' forward caches (each asked; one that does not answer within EXPORT_WAIT is left out)."""
        loop = asyncio.get_running_loop()
        for worker in self.workers.values():
            if worker.channel is not None and worker.serving:
                self._exports[worker.number] = loop.create_future()
                worker.channel.send(Export())
        asked = list(self._exports.values())
        if asked:
            await asyncio.wait(asked, timeout=EXPORT_WAIT)
        parts = [p for fut in asked if fut.done() and not fut.cancelled() for p in fut.result()]
        self._exports.clear()
        return parts

    def load(self, parts: list[bytes]) -> tuple[int, int]:
        """Hand the running agent's forward caches to the workers (each loads all of them, within its own byte
        budget), before they are told the index synced; (entries offered, 0)."""
        self._warm_offer = parts
        for worker in self.workers.values():
            if worker.channel is not None:
                worker.channel.send(Warm(parts))
        return sum(export_count(p[1:]) for p in parts if p[:1] == WARM_CACHE), 0

    def warm_loaded(self) -> None:
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
            if self._warm_offer is not None and self.agent.state != "starting":
                self._warm_offer = None  # handed to every worker started while starting: not kept after
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
                    self.agent.exit_code = code
                    if self.fatal_report is not None:
                        print_error(code, self.fatal_report)
                    self.agent.request_stop()
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
            t = aggregate.merge(self.agent.slots, kept, sections=())
            self.retired = Scrape(version=__version__, slots=self.agent.slots, listeners=t.listeners, alive=True,
                                  ready=True,
                                  index={}, cluster_cache=None, panics=t.panics, errors=t.errors)
            worker.scrape = None
        worker.bound = worker.synced = False
        if worker.reader is not None:
            worker.reader.cancel()
        if worker.channel is not None:
            worker.channel.close()
            worker.channel = None
        if worker.tables is not None:
            worker.tables.close()
            worker.tables = None
        self._changed.set()

    # -- readiness -------------------------------------------------------------------------

    def problems(self) -> list[str]:
        states = self._worker_states()
        out = [reason for _, reason, _ in states if reason]
        waiting = [str(n) for n, reason, _ in states if not reason]
        if waiting:
            out.append(f"worker{'s' if len(waiting) > 1 else ''} {', '.join(waiting)} not serving yet")
        return out

    def dead(self) -> list[str]:
        return [] if any(w.serving for w in self.workers.values()) else ["no worker serves DNS"]

    def can_capture(self) -> bool:
        return any(w.serving for w in self.workers.values())

    def capture_hold(self) -> str | None:
        silent = self.silent()
        return "; ".join(silent) if silent else None

    async def wait_serving(self) -> None:
        while not (len(self.workers) == self.count and all(w.serving for w in self.workers.values())):
            self._changed.clear()
            await self._changed.wait()

    def hangup(self) -> None:
        """SIGHUP: the supervisor and every worker re-read the upstream files (each forwards on its own)."""
        sent = 0
        for worker in self.workers.values():
            if worker.channel is not None and not worker.channel.is_closing():
                worker.channel.send(Reload())
                sent += 1
        log.info("SIGHUP: %s, and so do its %d workers; other settings take a restart",
                 self.agent.upstreams.reload_files(), sent)

    # -- stop ------------------------------------------------------------------------------

    async def close(self, *, forced: bool) -> None:
        """Every worker drains and closes its sockets, sends its last counters and exits; stragglers
        are killed."""
        self.retiring = True
        drain = 0.0 if forced else max(1.0, 2 * self.config.upstream_timeout + 0.5)
        for worker in self.workers.values():
            if worker.channel is not None:
                worker.channel.send(Retire(forced))
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

    def about(self) -> dict[str, Any]:
        return {"dns": [endpoint_text(address) for address in self.config.listen_addresses]}

    def listening(self) -> list[str]:
        return []  # the workers' sockets (the supervisor binds none)
