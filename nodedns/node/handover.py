"""Hand-over between an agent and its successor: who owns the node setup, who serves, how to leave.

A restart starts a new agent beside the old one on the same addresses (SO_REUSEPORT); the old one goes
only once the new one serves. This module holds the mechanisms; `app` decides when to use them
(docs/restarts.md says why each is built as it is):

- `Roster`: each agent's flock'd entry (`agent-SEQ.lock`, `agent-SEQ.json`) in a directory per what the
  agents share (`roster_key`) and network namespace; every decision under a mutex flock. Joining removes
  dead entries; only an agent alone cleans up or tears the node down; `newer()` tells an agent it is
  superseded; the last one out removes the directory.
- `Handover`: the roster on the event loop (serving, watching for newer agents, waiting for a successor,
  the forward cache handed over through `write_warm`/`read_warm`: data, each part checked by its loader,
  never code), and the `handover` section of /status.
- `udp_occupants`: other processes' unconnected UDP sockets on our addresses (the duplicate-agent check).
- `tcp_migration`: net.ipv4.tcp_migrate_req, set only by an agent that manages a node interface.
- `ReadyFile`: `--ready-file`.

The UDP side of leaving is `server.DNSServer.retire`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from nodedns.errors import HandoverError
from nodedns.names import canonical_ip
from nodedns.runtime.files import NotReadable, read_regular

log = logging.getLogger("nodedns.handover")

DEFAULT_LOCK_DIR = "/run/nodedns"
SUCCESSOR_WAIT = 20.0  # seconds a stopping agent keeps answering for a successor that does not serve yet
TCP_MIGRATE_REQ = "/proc/sys/net/ipv4/tcp_migrate_req"
MUTEX_TIMEOUT = 30.0  # seconds: a teardown holds the mutex for well under one
_ENTRY = re.compile(r"^agent-(\d+)\.lock$")


@dataclass(frozen=True, slots=True)
class Peer:
    """Another live agent in the roster."""

    seq: int
    pid: int
    serving: bool


def netns_id() -> str:
    """The inode of this process's network namespace ("" when /proc does not say)."""
    try:
        return str(os.stat("/proc/self/ns/net").st_ino)
    except OSError:
        return ""


def roster_key(*, interface: str | None, firewall: str, listen: tuple[tuple[str, int], ...]) -> str:
    """What agents that must hand over to each other share: the interface, else the rules, else the address."""
    if interface:
        name = interface
    elif firewall != "none":
        name = f"firewall-{firewall}"
    else:
        host, port = listen[0]
        name = f"dns-{host}-{port}"
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    ns = netns_id()
    return f"{name}.netns-{ns}" if ns else name


class Roster:
    """This agent's entry in the hand-over roster of `directory` (blocking calls: use a worker thread)."""

    def __init__(self, directory: str, *, pid: int | None = None, mutex_timeout: float = MUTEX_TIMEOUT) -> None:
        self.directory = directory
        self.pid = os.getpid() if pid is None else pid
        self.mutex_timeout = mutex_timeout
        self.seq = 0
        self.serving = False
        self._fd: int | None = None  # our entry's lock, held while we live
        self._mutex: int | None = None

    # -- the mutex -------------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the roster mutex (bounded wait; HandoverError when another process keeps it)."""
        self.acquire()
        try:
            yield
        finally:
            self.release()

    def acquire(self, *, wait: bool = True) -> bool:
        """Take the mutex; False when `wait` is off and another process holds it.

        The last agent to leave removes the mutex file and the directory (nothing stays behind in
        --lock-dir after a clean stop), so the lock taken must still be the file at the path: a
        process that locked a file unlinked meanwhile opens the new one and tries again."""
        path = os.path.join(self.directory, "mutex")
        deadline = time.monotonic() + self.mutex_timeout
        while True:
            os.makedirs(self.directory, mode=0o755, exist_ok=True)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:  # the directory went between makedirs and open: again
                continue
            locked = False
            try:
                while not locked:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        locked = True
                    except BlockingIOError:
                        if not wait:
                            return False
                        if time.monotonic() > deadline:
                            raise HandoverError(
                                f"{self.directory}/mutex held for more than {self.mutex_timeout:g}s") from None
                        time.sleep(0.01)
                if _same_file(fd, path):
                    self._mutex, fd = fd, -1
                    return True
            finally:
                if fd >= 0:
                    os.close(fd)

    def release(self) -> None:
        if self._mutex is not None:
            fd, self._mutex = self._mutex, None
            os.close(fd)  # closing the last descriptor drops the flock

    # -- entries ---------------------------------------------------------------------------

    def _path(self, seq: int, ext: str) -> str:
        return os.path.join(self.directory, f"agent-{seq:08d}.{ext}")

    def _entries(self) -> list[int]:
        return sorted(int(m.group(1)) for name in os.listdir(self.directory) if (m := _ENTRY.match(name)))

    def _alive(self, seq: int) -> bool:
        """Someone holds the entry's lock (call under the mutex). A dead entry is removed."""
        try:
            fd = os.open(self._path(seq, "lock"), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        for ext in ("lock", "json", "warm", "warm.tmp"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(seq, ext))
        return False

    def _peer(self, seq: int) -> Peer:
        try:
            with open(self._path(seq, "json"), encoding="utf-8") as fh:
                state: Any = json.load(fh)
        except (OSError, ValueError):
            state = {}
        if not isinstance(state, dict):
            state = {}
        return Peer(seq, int(state.get("pid") or 0), bool(state.get("serving")))

    def _others(self) -> list[Peer]:
        return [self._peer(s) for s in self._entries() if s != self.seq and self._alive(s)]

    def join(self) -> list[Peer]:
        """Register; the other live agents (older ones: every entry present has a smaller SEQ)."""
        with self.exclusive():
            others = self._others()
            self.seq = max([0, *self._entries()]) + 1
            fd = os.open(self._path(self.seq, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new file under the mutex: never contended
            self._fd = fd
            self._write()
        return others

    def _write(self) -> None:
        tmp = self._path(self.seq, "json.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"pid": self.pid, "serving": self.serving}, fh)
        os.replace(tmp, self._path(self.seq, "json"))

    def set_serving(self, serving: bool) -> None:
        if self._fd is not None and serving != self.serving:
            self.serving = serving
            self._write()

    def others(self) -> list[Peer]:
        """The other live agents, oldest first (takes the mutex)."""
        with self.exclusive():
            return self._others()

    def others_held(self) -> list[Peer]:
        """The other live agents, oldest first (the caller holds the mutex)."""
        return self._others()

    def newer(self) -> list[Peer] | None:
        """Live agents newer than this one; None when the mutex is busy right now (ask again later)."""
        if not self.acquire(wait=False):
            return None
        try:
            return [p for p in self._others() if p.seq > self.seq]
        finally:
            self.release()

    def warm_path(self, seq: int | None = None) -> str:
        """Where agent `seq` (default: this one) leaves its forward cache for a successor."""
        return self._path(self.seq if seq is None else seq, "warm")

    def leave(self) -> None:
        """Remove our entry and drop its lock; the last agent to leave removes the mutex and the directory."""
        if self._fd is None:
            return
        with contextlib.suppress(HandoverError, OSError), self.exclusive():
            for ext in ("lock", "json", "warm", "warm.tmp"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._path(self.seq, ext))
            self._others()  # dead agents' entries go too
            if not self._entries():
                for name in os.listdir(self.directory):  # a crashed writer's agent-N.json.tmp, say
                    if name.startswith("agent-"):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(os.path.join(self.directory, name))
                os.unlink(os.path.join(self.directory, "mutex"))  # still held: a waiter sees it is stale
                with contextlib.suppress(OSError):  # not empty: someone is joining right now
                    os.rmdir(self.directory)
        fd, self._fd = self._fd, None
        os.close(fd)


WARM_MAGIC = b"nodedns hand-over 1\n"
WARM_WAIT = 2.0  # seconds a successor waits for its predecessor's forward cache (it looks every `period`)
MAX_WARM_BYTES = 4 << 30  # a warm file larger than this is never read, whatever the cache budget


def warm_limit(cache_bytes: int) -> int:
    """The largest hand-over file an agent with this forward cache budget (--cache-max-bytes) reads: its
    budget (an exported entry is smaller than what it is charged in the cache) and 1 MiB for the EDNS
    memory and the framing, never over MAX_WARM_BYTES. A predecessor with a larger budget leaves a file
    this one refuses (logged): the successor starts cold rather than over its memory."""
    return min(MAX_WARM_BYTES, cache_bytes + (1 << 20))


def write_warm(path: str, parts: Iterable[bytes]) -> int:
    """Write `parts` to `path` whole or not at all (beside it, then renamed); the bytes written."""
    tmp = path + ".tmp"
    size = len(WARM_MAGIC)
    with open(tmp, "wb") as fh:
        fh.write(WARM_MAGIC)
        for part in parts:
            fh.write(struct.pack("!Q", len(part)))
            fh.write(part)
            size += 8 + len(part)
    os.replace(tmp, path)
    return size


def read_warm(path: str, limit: int = MAX_WARM_BYTES) -> list[bytes]:
    """The parts of a file `write_warm` wrote. Raises HandoverError when it is not one (or is cut short, or
    is not a regular file, or is over `limit` bytes: refused before it is read), OSError when it cannot
    be read."""
    try:
        _, data = read_regular(path, limit)
    except NotReadable as e:
        raise HandoverError(f"{path}: {e} (the cache budget's limit)") from None
    if not data.startswith(WARM_MAGIC):
        raise HandoverError(f"{path} is not a hand-over file")
    parts, pos = [], len(WARM_MAGIC)
    while pos < len(data):
        if pos + 8 > len(data):
            raise HandoverError(f"{path} is cut short")
        (n,) = struct.unpack_from("!Q", data, pos)
        pos += 8
        if pos + n > len(data):
            raise HandoverError(f"{path} is cut short")
        parts.append(data[pos:pos + n])
        pos += n
    return parts


def _same_file(fd: int, path: str) -> bool:
    """The open file `fd` is the one at `path` (not unlinked or replaced since it was opened)."""
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (at_path.st_dev, at_path.st_ino) == (mine.st_dev, mine.st_ino)


# ----------------------------------------------------------------------------------------------
# Who else serves our addresses


@dataclass(frozen=True, slots=True)
class Occupant:
    """A process (None: not visible from this PID namespace) with a UDP socket bound to one of our addresses.
    For a worker of a `nodedns serve --workers` supervisor, `pid` is the supervisor's, `holder` the worker's."""

    address: tuple[str, int]
    pid: int | None
    command: str
    holder: int | None = None

    @property
    def is_nodedns(self) -> bool:
        """The holder is a nodedns agent (of another roster), as far as its command line says."""
        return self.holder is not None or "nodedns" in self.command

    def describe(self) -> str:
        host, port = self.address
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if self.pid is None:
            return f"{where} is already served by a process outside this PID namespace (its pid is not visible here)"
        text = f"{where} is already served by pid {self.pid}" + (f" ({self.command})" if self.command else "")
        return text + (f", whose worker pid {self.holder} holds the socket" if self.holder is not None else "")


def _cmdline(proc: str, pid: int) -> str:
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as fh:
            return " ".join(fh.read().decode(errors="replace").replace("\0", " ").split())[:200]
    except OSError:
        return ""


def _parent(proc: str, pid: int) -> int | None:
    try:
        with open(os.path.join(proc, str(pid), "stat"), encoding="ascii", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _proc_address(text: str) -> tuple[str, int] | None:
    """`0100007F:0035` (as /proc/net/udp prints it: the address in host byte order) -> ("127.0.0.1", 53)."""
    host, _, port = text.partition(":")
    try:
        words = [int(host[i:i + 8], 16) for i in range(0, len(host), 8)]
        raw = b"".join(struct.pack("=I", w) for w in words)
        family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
        return socket.inet_ntop(family, raw), int(port, 16)
    except (ValueError, OSError, struct.error):
        return None


def _socket_owners(inodes: set[str], proc: str) -> dict[str, int]:
    """socket inode -> the pid of a process holding it (those visible in `proc`)."""
    owners: dict[str, int] = {}
    wanted = {f"socket:[{i}]": i for i in inodes}
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            fds = os.scandir(os.path.join(entry.path, "fd"))
        except OSError:
            continue
        with fds:
            for fd in fds:
                try:
                    target = os.readlink(fd.path)
                except OSError:
                    continue
                if target in wanted:
                    owners.setdefault(wanted[target], int(entry.name))
    return owners


def udp_occupants(addresses: Iterable[tuple[str, int]], *, proc: str = "/proc") -> list[Occupant]:
    """Other processes' unconnected UDP sockets in this network namespace bound to exactly one of `addresses`
    (port 0 is skipped). A connected socket is ignored: that is a leaving agent's detached listener."""
    wanted = {(canonical_ip(h) or h, p) for h, p in addresses if p}
    if not wanted:
        return []
    found: dict[str, tuple[str, int]] = {}  # inode -> address
    for table in ("udp", "udp6"):
        try:
            with open(os.path.join(proc, "net", table), encoding="ascii") as fh:
                lines = fh.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "07":  # 07: TCP_CLOSE, i.e. not connected
                continue
            addr = _proc_address(fields[1])
            if addr is not None and (canonical_ip(addr[0]) or addr[0], addr[1]) in wanted:
                found[fields[9]] = addr
    if not found:
        return []
    owners = _socket_owners(set(found), proc)
    me = os.getpid()
    out = []
    for inode, addr in sorted(found.items(), key=lambda item: item[1]):
        pid = owners.get(inode)
        if pid == me:
            continue
        command = _cmdline(proc, pid) if pid is not None else ""
        holder = None
        if pid is not None and "worker_main" in command:  # a worker: name the supervisor, the agent's process
            parent = _parent(proc, pid)
            if parent is not None and "serve_forks" in _cmdline(proc, parent):
                parent = _parent(proc, parent)  # forked from the zygote (nodedns.workers.zygote): the supervisor is
                # its parent
            if parent is not None and parent != me:
                holder, pid, command = pid, parent, _cmdline(proc, parent)
        out.append(Occupant(addr, pid, command, holder))
    return out


# ----------------------------------------------------------------------------------------------
# TCP listeners


def tcp_migration(*, write: bool = True, path: str = TCP_MIGRATE_REQ) -> tuple[bool, str]:
    """Make closing listeners hand their accept queues to the group (net.ipv4.tcp_migrate_req=1).

    (on, what happened): already on, switched on (only with `write`), or why it stays off.
    """
    try:
        with open(path, encoding="ascii") as fh:
            if fh.read().strip() == "1":
                return True, "net.ipv4.tcp_migrate_req is 1"
    except OSError as exc:
        return False, f"cannot read {path}: {exc.strerror or exc}"
    if not write:
        return False, ("net.ipv4.tcp_migrate_req is 0: TCP connections still in the accept queue when a listener "
                       "closes are reset (the agent sets it only when it manages a node interface, "
                       "--setup-interface)")
    try:
        with open(path, "w", encoding="ascii") as fh:
            fh.write("1\n")
    except OSError as exc:
        why = "read-only /proc/sys" if exc.errno == errno.EROFS else (exc.strerror or str(exc))
        return False, (f"net.ipv4.tcp_migrate_req is 0 and cannot be set here ({why}): TCP connections still "
                       "in the accept queue when a listener closes are reset; set it to 1 on the node")
    return True, "set net.ipv4.tcp_migrate_req to 1"


# ----------------------------------------------------------------------------------------------
# The agent's side, on the event loop


class Handover:
    """An agent's roster entry on the event loop: every flock and file step runs in a worker thread."""

    def __init__(self, roster: Roster, *, period: float = 0.1, set_sysctl: bool = True,
                 warm_bytes: int = MAX_WARM_BYTES) -> None:
        self.roster = roster
        self.warm_bytes = warm_bytes  # the largest hand-over file read (warm_limit of the cache budget)
        self.period = period
        self.set_sysctl = set_sysctl  # the agent manages a node interface: it may switch TCP migration on
        self.superseded: Peer | None = None  # the newest agent started beside this one
        self.tcp_migrate_req: bool | None = None
        self.note = ""
        self.joined_with: list[Peer] = []
        self.announced = False  # our entry says "serving" (written): a successor that joins now sees it
        self.taken_back = 0  # times a successor that had taken over serves no more, and this one took over again
        self.warm: dict[str, Any] = {}  # the forward cache handed on: "taken" (from a predecessor), "left" (for one)

    async def join(self) -> list[Peer]:
        """Register (and ask for TCP accept-queue migration); the live predecessors."""
        self.joined_with = await asyncio.to_thread(self.roster.join)
        self.tcp_migrate_req, self.note = await asyncio.to_thread(tcp_migration, write=self.set_sysctl)
        (log.info if self.tcp_migrate_req else log.warning)("hand-over: %s", self.note)
        if self.joined_with:
            log.info("hand-over: nodedns already runs here (%s): adopting its interface and rules",
                     ", ".join(f"pid {p.pid}{' serving' if p.serving else ''}" for p in self.joined_with))
        return self.joined_with

    async def set_serving(self, serving: bool) -> None:
        if not serving:
            self.announced = False
        await asyncio.to_thread(self.roster.set_serving, serving)
        self.announced = serving

    async def watch(self, on_successor_serving: Callable[[], Awaitable[None]],
                    on_successor_gone: Callable[[], Awaitable[None]] | None = None,
                    on_successor_joined: Callable[[], Awaitable[None]] | None = None) -> None:
        """Until cancelled: notice a newer agent; once one of them serves (it is ready), we are superseded
        (unready) and `on_successor_serving` is called. A newer agent that never gets ready (a bad config, a
        broken image) leaves us ready: we are the one serving, and the rollout waits on it. Superseded, we
        stay so only while a newer agent serves: when none does any more (it was killed: its flock went
        with it; it left; it stopped serving), we are the one serving again, ready, and
        `on_successor_gone` is called (the wiring takes the status port back). Each newer agent that joins
        calls `on_successor_joined` once (the wiring leaves it the forward cache: `write_warm`)."""
        told = False
        seen: int | None = None
        while True:
            newer = await asyncio.to_thread(self.roster.newer)
            if newer is not None:
                if newer and newer[-1].seq != seen:
                    seen = newer[-1].seq
                    log.info("hand-over: a newer nodedns (pid %d) started on this node; serving until it is ready",
                             newer[-1].pid)
                    if on_successor_joined is not None and not newer[-1].serving:
                        await on_successor_joined()
                serving = [p for p in newer if p.serving]
                if serving:
                    if self.superseded is None or serving[-1].seq != self.superseded.seq:
                        log.info("hand-over: the newer nodedns (pid %d) serves: not ready any more", serving[-1].pid)
                    self.superseded = serving[-1]
                    if not told:
                        told = True
                        await on_successor_serving()
                elif told:
                    gone = self.superseded
                    log.warning("hand-over: the newer nodedns (pid %d) that took over serves no more (%s); this one "
                                "serves again", gone.pid if gone else 0,
                                "gone" if not newer else "it is not ready")
                    self.superseded = None
                    self.taken_back += 1
                    told = False
                    seen = newer[-1].seq if newer else None
                    if on_successor_gone is not None:
                        await on_successor_gone()
                elif not newer and seen is not None:
                    log.warning("hand-over: the newer nodedns is gone before it served; still serving")
                    seen = None
            await asyncio.sleep(self.period)

    @contextlib.asynccontextmanager
    async def deciding(self) -> AsyncIterator[list[Peer] | None]:
        """Hold the roster mutex; yields the other live agents (None: the roster could not tell)."""
        try:
            await asyncio.to_thread(self.roster.acquire)
        except (HandoverError, OSError) as exc:
            log.error("hand-over: %s", exc)
            yield None
            return
        try:
            yield await asyncio.to_thread(self.roster.others_held)
        finally:
            self.roster.release()

    async def leave(self) -> None:
        await asyncio.to_thread(self.roster.leave)

    async def write_warm(self, parts: list[bytes]) -> int:
        """Leave `parts` (the forward caches, the EDNS memory) for a successor; the bytes written (0: failed,
        logged)."""
        try:
            return await asyncio.to_thread(write_warm, self.roster.warm_path(), parts)
        except OSError as exc:
            log.warning("hand-over: cannot leave the forward cache for the successor in %s: %s",
                        self.roster.warm_path(), exc.strerror or exc)
            return 0

    async def warm_state(self, others: list[Peer], *, wait: float = WARM_WAIT) -> tuple[list[bytes], Peer | None]:
        """The parts the newest serving predecessor left for us (waiting `wait` seconds at most for them, while
        it notices us), and that predecessor; ([], None) when there is none or it left nothing in time."""
        serving = [p for p in others if p.serving]
        if not serving:
            return [], None
        peer = serving[-1]
        path = self.roster.warm_path(peer.seq)
        deadline = time.monotonic() + wait
        while True:
            try:
                parts = await asyncio.to_thread(read_warm, path, self.warm_bytes)
            except FileNotFoundError:
                if time.monotonic() >= deadline:
                    log.warning("hand-over: the running nodedns (pid %d) left no forward cache within %gs: "
                                "starting with an empty one", peer.pid, wait)
                    return [], peer
                await asyncio.sleep(0.02)
                continue
            except (OSError, HandoverError) as exc:
                log.warning("hand-over: the forward cache the running nodedns left cannot be used: %s", exc)
                parts = []
            with contextlib.suppress(OSError):
                os.unlink(path)
            return parts, peer

    async def wait_for_successor(self, limit: float = SUCCESSOR_WAIT) -> None:
        """When a newer agent has started but does not serve yet, wait for it (at most `limit` seconds):
        we were told to stop too early (a readiness probe answered by us, a hurried operator)."""
        deadline = time.monotonic() + limit
        said = False
        while time.monotonic() < deadline:
            newer = await asyncio.to_thread(self.roster.newer)
            if newer is not None:
                if not newer or any(p.serving for p in newer):
                    return
                if not said:
                    log.warning("hand-over: the newer nodedns (pid %d) does not serve yet; answering until it does "
                                "(%gs at most)", newer[-1].pid, limit)
                    said = True
            await asyncio.sleep(0.1)
        log.error("hand-over: the newer nodedns still does not serve after %gs; leaving anyway", limit)

    def status(self) -> dict[str, Any]:
        """The "handover" section of /status."""
        sup = self.superseded
        return {
            "roster": self.roster.directory,
            "pid": self.roster.pid,
            "seq": self.roster.seq,
            "serving": self.roster.serving,
            "joined_with": [{"pid": p.pid, "serving": p.serving} for p in self.joined_with],
            "superseded_by": None if sup is None else {"pid": sup.pid, "serving": sup.serving},
            "taken_back": self.taken_back,
            "tcp_migrate_req": self.tcp_migrate_req,
            "tcp_note": self.note,
            "forward_cache": dict(self.warm),
        }


class ReadyFile:
    """A file that exists, freshly touched, exactly while the agent is ready (`--ready-file`).

    For an exec readiness probe (`find FILE -mmin -0.1`): when two agents share the status port during a
    surge rollout, an HTTP probe cannot tell which process answers; a file in the pod's own emptyDir can.
    A hung or crashed agent stops touching it, so it goes stale.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def set(self, ready: bool) -> None:
        if ready:
            with open(self.path, "a", encoding="ascii"):
                pass
            os.utime(self.path)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
