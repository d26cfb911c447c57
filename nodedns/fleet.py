"""`--workers N`: one supervisor that syncs, manages the node and reports; N processes that answer DNS.

    supervisor (the `nodedns serve` process)          worker 0 .. N-1 (spawned processes)
      hand-over roster, interface, firewall rules       a DNSServer on every listen address: the
      API watch (or --manifests) -> Index                 kernel spreads queries over the workers'
        every index operation, in order  ---------->      sockets (SO_REUSEPORT)
        (a starting worker: a snapshot first)             replica Index -> records, resolver, caches
      /metrics, /status: the workers' counters  <----     their counters (metrics.Scrape), on request
        summed (aggregate.merge)                          forwarder, loop probes, upstream reloads:
      readiness: own parts + every worker serving         each its own, and its own forward cache
      a dead worker is started again

One set of API watches per node, whatever N. Each worker has a socketpair to the supervisor that
carries length-prefixed pickles (only between the supervisor and the processes it spawned):

    to a worker          ("ops", [op, ...])    index operations, replayed in order (`replay`)
                         ("scrape", n)         send your counters
                         ("retire", forced)    leave the addresses (drain, unless forced), exit 0
    to the supervisor    ("state", {...})      bound, synced, live: on every change
                         ("scrape", n, Scrape)

An op is ("c", Change) | ("b", kind) | ("e", kind) | ("s",) | ("r", kind, keys): a change, a relist
begins / ends, synced, a relist under way when a snapshot was taken. The supervisor's index journals
every operation it applies (`FeedIndex`) and sends the batch of each event-loop turn to every
worker; a worker that starts, or starts again, gets `snapshot(index)` first. A replica is the
supervisor's index, operation for operation, so a relist sweeps the same objects in every process.

Start: as a single agent (roster, node, status, source), but the listeners are the workers'. They
are spawned right after the node is prepared and bind at once, or, when a predecessor serves on the
node (or, for a restarted worker, when its siblings serve), once their replica has synced. A worker
that exits with an error before it ever served (a bind error, a config error), or with a detected
forwarding loop (3), stops the supervisor with its exit status; other deaths (a signal, an error
after serving) are restarted (at once after 30 s of life, else after a back-off from 1 s doubling up
to 30 s). Stop: the lameduck with every worker answering, the
node torn down (unless another agent on the node uses it), then every worker retires (drains its
sockets, closes) and exits. Counters of a worker that ends are kept (gauges dropped), so totals
never go down; a restarted worker's cache counters start again at zero.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import pickle
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

from nodedns import __version__, aggregate, logutil
from nodedns.app import Agent, print_error, run_agent
from nodedns.config import Config
from nodedns.handover import Peer
from nodedns.index import Change, Index
from nodedns.metrics import ListenerStats, Scrape
from nodedns.observe import Observer
from nodedns.server import bind_pair

log = logging.getLogger(__name__)

Op = tuple[Any, ...]
CHUNK = 2000  # changes per snapshot message
MAX_BACKLOG = 64 << 20  # bytes queued to one worker: beyond this it is stuck, and is started again
SCRAPE_TIMEOUT = 1.0  # seconds a /metrics or /status request waits for the workers' counters
GATHER_PERIOD = 5.0  # counters are gathered this often anyway (what a dying worker can lose)
FATAL_EXITS = (2, 3)  # a config error, a forwarding loop: every restart would end the same way
_HEADER = struct.Struct("!I")


def cpu_count() -> int:
    """CPUs this process may run on (its affinity: taskset, cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_for(config: Config) -> int:
    return config.workers or cpu_count()


def serve(config: Config) -> int:
    """`nodedns serve`: one agent, or a supervisor and its workers (--workers, default one per CPU)."""
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
# The channel and the index stream


class Channel:
    """Length-prefixed pickles over one end of a socketpair (asyncio streams)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, sock: socket.socket) -> Channel:
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        return cls(reader, writer)

    @staticmethod
    def encode(message: Any) -> bytes:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        return _HEADER.pack(len(data)) + data

    def send(self, message: Any) -> None:
        self.send_encoded(self.encode(message))

    def send_encoded(self, frame: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(frame)

    async def recv(self) -> Any:
        (n,) = _HEADER.unpack(await self.reader.readexactly(_HEADER.size))
        return pickle.loads(await self.reader.readexactly(n))

    def backlog(self) -> int:
        """Bytes written and not yet taken by the other side."""
        return self.writer.transport.get_write_buffer_size()

    def close(self) -> None:
        self.writer.close()


class FeedIndex(Index):
    """The supervisor's index: applies as usual and journals every operation for the workers."""

    def __init__(self) -> None:
        super().__init__()
        self.journal: list[Op] = []
        self.on_journal: Any = None  # called when the journal gets its first operation

    def _note(self, op: Op) -> None:
        self.journal.append(op)
        if len(self.journal) == 1 and self.on_journal is not None:
            self.on_journal()

    def apply_change(self, change: Change) -> None:
        super().apply_change(change)
        self._note(("c", change))

    def begin_relist(self, kind: str) -> None:
        super().begin_relist(kind)
        self._note(("b", kind))

    def end_relist(self, kind: str) -> int:
        gone = super().end_relist(kind)
        self._note(("e", kind))
        return gone

    def mark_synced(self) -> None:
        super().mark_synced()
        self._note(("s",))

    def take(self) -> list[Op]:
        ops, self.journal = self.journal, []
        return ops


def snapshot(index: Index) -> list[Op]:
    """The operations that rebuild `index` in an empty replica (relists under way included)."""
    ops: list[Op] = [("c", change) for change in index.records()]
    ops.extend(("r", kind, seen) for kind, seen in index.relisting().items())
    if index.synced:
        ops.append(("s",))
    return ops


def replay(index: Index, ops: Iterable[Op]) -> None:
    """Apply journaled operations to a replica, in order."""
    for op in ops:
        tag = op[0]
        if tag == "c":
            index.apply_change(op[1])
        elif tag == "b":
            index.begin_relist(op[1])
        elif tag == "e":
            index.end_relist(op[1])
        elif tag == "s":
            index.mark_synced()
        elif tag == "r":
            index.resume_relist(op[1], op[2])
        else:
            raise ValueError(f"unknown index operation {tag!r}")


# ----------------------------------------------------------------------------------------------
# The supervisor


@dataclasses.dataclass(eq=False)
class Worker:
    """The supervisor's view of one worker process."""

    number: int
    proc: asyncio.subprocess.Process
    started: float
    channel: Channel | None = None
    reader: asyncio.Task[None] | None = None
    bound: bool = False
    synced: bool = False
    live: bool = True
    served: bool = False  # it has served at least once
    scrape: Scrape | None = None
    asked: asyncio.Future[None] | None = None  # a counters request in flight

    @property
    def serving(self) -> bool:
        return self.bound and self.synced and self.live

    def alive(self) -> bool:
        return self.proc.returncode is None


class Fleet(Agent):
    """The supervisor: an Agent whose listeners are its worker processes."""

    def __init__(self, config: Config, *, count: int) -> None:
        self.feed = FeedIndex()
        super().__init__(config, index=self.feed)
        self.count = count
        self.workers: dict[int, Worker] = {}
        self.restarts: dict[int, int] = {}
        self.backoff: dict[int, float] = {}
        self.retired: Scrape | None = None  # counters of workers that ended
        self.exit_code = 0
        self.fatal_report: str | None = None  # the first fatal error line a worker sent (printed once)
        self.defer_workers = False
        self.retiring = False
        self._asked = 0
        self._changed = asyncio.Event()
        # the workers' caches and forwarders report through their counters, not the supervisor's own
        self.observer = FleetObserver(self)
        self.add_provider("workers", _WorkersReport(self))
        self.add_provider("limits", self.limits)  # its settings; the counts are the workers' (worker_limits)

    # -- start -----------------------------------------------------------------------------

    def _binds_after_sync(self, others: list[Peer]) -> bool:
        self.defer_workers = any(p.serving for p in others)
        return False  # spawn the workers now; they wait for their sync themselves when told to

    async def bind(self) -> None:
        self.feed.on_journal = lambda: asyncio.get_running_loop().call_soon(self._flush)
        log.info("starting %d workers on %s", self.count,
                 ", ".join(f"{h}:{p}" for h, p in self.config.listen_addresses))
        for number in range(self.count):
            await self._spawn(number, defer=self.defer_workers)
        self._tasks.spawn(self._supervise(), "workers")
        self._tasks.spawn(self._gather_periodically(), "worker-counters")

    async def _spawn(self, number: int, *, defer: bool) -> None:
        """Start worker `number`: a fresh interpreter (this checkout's nodedns, our environment) given the
        config, then the index snapshot, over its end of a socketpair."""
        mine, theirs = socket.socketpair()
        with theirs:
            proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WORKER_ENTRY, str(theirs.fileno()),
                                                        pass_fds=(theirs.fileno(),))
        worker = Worker(number, proc, time.monotonic())
        self.workers[number] = worker
        log.info("worker %d: pid %s%s", number, proc.pid, " (binds once synced)" if defer else "")
        channel = await Channel.open(mine)
        channel.send(("config", self.config, number, defer))
        self._flush()  # what is journaled so far goes to the others; the snapshot below includes it
        ops = snapshot(self.index)
        for i in range(0, max(len(ops), 1), CHUNK):
            channel.send(("ops", ops[i:i + CHUNK]))
        worker.channel = channel
        worker.reader = asyncio.get_running_loop().create_task(self._read(worker), name=f"worker-{number}")

    def _flush(self) -> None:
        ops = self.feed.take()
        if not ops:
            return
        frame = Channel.encode(("ops", ops))
        for worker in self.workers.values():
            if worker.channel is None:
                continue
            worker.channel.send_encoded(frame)
            if worker.channel.backlog() > MAX_BACKLOG and worker.alive():
                log.error("worker %d does not take its index updates (%d bytes queued): starting it again",
                          worker.number, worker.channel.backlog())
                worker.proc.kill()

    async def _read(self, worker: Worker) -> None:
        assert worker.channel is not None
        try:
            while True:
                message = await worker.channel.recv()
                if message[0] == "state":
                    state: Mapping[str, bool] = message[1]
                    worker.bound, worker.synced, worker.live = state["bound"], state["synced"], state["live"]
                    worker.served = worker.served or worker.serving
                    self._changed.set()
                    if self.node is not None:
                        self.node.poke()  # the rules follow whether anyone serves
                elif message[0] == "scrape":
                    worker.scrape = message[2]
                    if worker.asked is not None and not worker.asked.done():
                        worker.asked.set_result(None)
                elif message[0] == "fatal" and self.fatal_report is None:
                    self.fatal_report = message[2]
        except (asyncio.IncompleteReadError, ConnectionError, EOFError, pickle.UnpicklingError):
            pass  # the worker is gone: _supervise sees the exit

    async def _supervise(self) -> None:
        """Notice dead workers; start them again (a start-up failure stops everything)."""
        due: dict[int, float] = {}
        while not self.retiring:
            await asyncio.sleep(0.1)
            now = time.monotonic()
            for number, worker in list(self.workers.items()):
                if number in due or worker.alive():
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
                lived = now - worker.started
                delay = 0.0 if lived > 30 else min(max(self.backoff.get(number, 0.5) * 2, 1.0), 30.0)
                self.backoff[number] = delay
                log.warning("worker %d (pid %s) died (exit %s); restarting in %.1fs", number, worker.proc.pid,
                            code, delay)
                due[number] = now + delay
            for number, when in list(due.items()):
                if now >= when and not self.retiring:
                    del due[number]
                    self.restarts[number] = self.restarts.get(number, 0) + 1
                    siblings = any(w.serving for n, w in self.workers.items() if n != number)
                    await self._spawn(number, defer=self.defer_workers or siblings)

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

    # -- counters --------------------------------------------------------------------------

    async def gather(self) -> None:
        """Ask every worker for its counters; wait for the answers (at most SCRAPE_TIMEOUT seconds)."""
        loop = asyncio.get_running_loop()
        self._asked += 1
        waiting = []
        for worker in self.workers.values():
            if worker.channel is None or worker.channel.writer.is_closing():
                continue
            worker.asked = loop.create_future()
            waiting.append(worker.asked)
            worker.channel.send(("scrape", self._asked))
        if waiting:
            await asyncio.wait(waiting, timeout=SCRAPE_TIMEOUT)

    async def _gather_periodically(self) -> None:
        while True:
            await asyncio.sleep(GATHER_PERIOD)
            await self.gather()

    # -- readiness -------------------------------------------------------------------------

    def listener_problems(self) -> list[str]:
        waiting = [str(n) for n in range(self.count) if n not in self.workers or not self.workers[n].serving]
        if not waiting:
            return []
        return [f"worker{'s' if len(waiting) > 1 else ''} {', '.join(waiting)} not serving yet"]

    def live(self) -> tuple[bool, list[str]]:
        if self.state in ("running", "stopping") and not any(w.serving for w in self.workers.values()):
            return False, ["no worker serves DNS"]
        return True, []

    def _can_capture(self) -> bool:
        return self.index.synced and any(w.serving for w in self.workers.values())

    async def wait_serving(self) -> None:
        while not (len(self.workers) == self.count and all(w.serving for w in self.workers.values())):
            self._changed.clear()
            await self._changed.wait()

    async def _probe_loops(self) -> None:
        return None  # each worker probes through its own listener

    # -- stop ------------------------------------------------------------------------------

    async def close_listeners(self, *, forced: bool) -> None:
        """Every worker drains and closes its sockets and exits; stragglers are killed."""
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
            self._bury(worker)

    async def run(self) -> int:
        code = await super().run()
        return self.exit_code or code


class FleetObserver(Observer):
    """/metrics and /status of the supervisor: its own parts plus the sum of its workers' counters."""

    def __init__(self, fleet: Fleet) -> None:
        super().__init__(fleet)
        self.fleet = fleet

    async def refresh(self) -> None:
        await self.fleet.gather()

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
    "tcp": ("max_connections",),
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
    """The "workers" section of /status and /metrics (contract in nodedns.metrics)."""

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


class WorkerAgent(Agent):
    """An agent whose index is a replica fed by the supervisor; it answers DNS and reports counters."""

    SIGNALS = (signal.SIGTERM,)  # SIGINT (a terminal's Ctrl-C) is the supervisor's to handle
    LOG_READY = False  # the supervisor says it; a worker says "worker N serving"

    def __init__(self, config: Config, *, number: int, sock: socket.socket, defer: bool) -> None:
        super().__init__(worker_config(config))
        self.server.freebind = config.setup_interface is not None  # the supervisor ensures the local IPs
        self.number = number
        self.sock = sock
        self.defer = defer
        self.channel: Channel | None = None
        self._synced = asyncio.Event()
        self._feed: asyncio.Task[None] | None = None
        self._reported: tuple[bool, bool, bool] | None = None

    def _binds_after_sync(self, others: list[Peer]) -> bool:
        return self.defer

    async def bind(self) -> None:
        await super().bind()
        self._report()

    async def _load_source(self) -> None:
        self.channel = await Channel.open(self.sock)
        self.source_info = {"kind": "supervisor", "worker": self.number}
        self._feed = asyncio.get_running_loop().create_task(self._read(), name="feed")
        self._report()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def _read(self) -> None:
        assert self.channel is not None
        try:
            while True:
                message = await self.channel.recv()
                if message[0] == "ops":
                    replay(self.index, message[1])
                    if self.index.synced and not self._synced.is_set():
                        self._synced.set()
                        self._report()
                elif message[0] == "scrape":
                    self.channel.send(("scrape", message[1], self.observer.scrape()))
                    self._report()
                elif message[0] == "retire":
                    (self.force_stop if message[1] else self.request_stop)()
        except (asyncio.IncompleteReadError, ConnectionError, EOFError):
            if self._stop is not None and not self._stop.is_set():
                log.warning("worker %d: the supervisor is gone; stopping", self.number)
                self.request_stop()

    def _report(self) -> None:
        state = (bool(self.server.bound) and self.server.alive(), self.index.synced, self.server.alive())
        if self.channel is not None and state != self._reported:
            if all(state) and (self._reported is None or not all(self._reported)):
                log.info("worker %d serving: %s", self.number,
                         ", ".join(f"{k} {v}" for k, v in self.index.counts().items()))
            self._reported = state
            self.channel.send(("state", {"bound": state[0], "synced": state[1], "live": state[2]}))

    async def shutdown(self) -> None:
        await super().shutdown()
        if self._feed is not None:
            self._feed.cancel()
        if self.channel is not None:
            self.channel.close()


WORKER_ENTRY = "import sys; from nodedns.fleet import worker_main; sys.exit(worker_main(int(sys.argv[1])))"


def worker_main(fd: int) -> int:
    """The body of a worker process: its config comes first over the channel on `fd`; the exit code."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches us too: the supervisor decides
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
