"""The --hosts files, read at start and read again when one changes (its inode, size or mtime).

`HostsFiles.poll_once()` looks at every file; when one changed (or first appears) it reads it (bytes,
non-UTF-8 kept as surrogate escapes), builds a new table from the last good text of every file
(nodedns.serve.hosts) and hands it to `on_change` (the resolver, which also drops forwarded answers
cached for those names; with --workers the supervisor, which hands the table to its workers).

Nothing in a hosts file can stop a start, a reload of the other files or a stop:

- only a regular file is read: a FIFO, a device, a socket or a directory is refused with its kind
  named, without waiting for a writer (opened O_NONBLOCK); one over MAX_HOSTS_BYTES is refused from
  its size before it is read;
- every stat and read runs in a daemon thread of its own, given READ_TIMEOUT seconds: a read that has
  not returned by then is given up (the file logged as unreadable; no second read of it is started
  while the first still hangs), and a stuck thread never holds the process at exit;
- the table is built in a daemon thread too (the parse of a large file takes seconds of CPU), off the
  event loop, into one buffer (a memfd sealed against writes, passed to the workers over a Unix
  socket, `pass_table` and `receive_table`, which they map read-only: nodedns.workers), at most
  hosts.MAX_ENTRIES entries;
- the lines skipped are counted, and logged once per file and reading with the first few as a
  sample, never a line each.

A file that cannot be read (missing, not a regular file, no permission, too large, too slow) keeps
its last good text and is logged once per reason; at start that is a warning, never fatal (a file
mounted later is picked up). `run()` polls every `period`; `status()` is the "hosts" section of
/status and /metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import mmap
import os
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from nodedns.runtime.files import read_regular
from nodedns.runtime.heap import release_free_heap
from nodedns.serve import hosts
from nodedns.serve.hosts import HostsTable

log = logging.getLogger("nodedns.hostswatch")

MAX_HOSTS_BYTES = 16 << 20  # a hosts file larger than this is refused (its last good text is kept)
READ_TIMEOUT = 5.0  # seconds a stat or a read of one file may take before it is given up

T = TypeVar("T")


@dataclass(slots=True)
class _File:
    path: str
    signature: tuple[int, int, int, int] | None = None  # (device, inode, size, mtime_ns) of the text in use
    text: bytes | None = None  # the last good text, zlib-compressed (None: never read): a blocklist is a tenth of it
    error: str = ""  # why it cannot be read now ("" when it can)
    skipped: int = 0  # malformed lines in the text in use
    ignored: int = 0  # names in the cluster zone in the text in use
    stuck: threading.Thread | None = None  # a stat or read that has not returned


def _read(path: str, limit: int = MAX_HOSTS_BYTES) -> tuple[tuple[int, int, int, int], bytes]:
    """The file's signature and text (zlib-compressed). Raises OSError (NotReadable: not a regular file,
    over `limit`)."""
    st, data = read_regular(path, limit)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns), zlib.compress(data, 1)


def _signature(path: str) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _resolve(future: asyncio.Future[T], value: T | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)  # type: ignore[arg-type]


def off_loop(fn: Callable[[], T], name: str) -> tuple[asyncio.Future[T], threading.Thread]:
    """Run `fn` in a daemon thread of its own (one that hangs never holds the process at exit); its
    result as a future of this loop, and the thread."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        value: T | None = None
        error: BaseException | None = None
        try:
            value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task, whatever it is
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
            loop.call_soon_threadsafe(_resolve, future, value, error)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return future, thread


_SEALS = (getattr(fcntl, "F_SEAL_SEAL", 0) | getattr(fcntl, "F_SEAL_SHRINK", 0) | getattr(fcntl, "F_SEAL_GROW", 0)
          | getattr(fcntl, "F_SEAL_WRITE", 0))
_TABLE_TAG = struct.Struct("!Q")  # the reading a passed table comes from (`pass_table`)


def share(buffer: bytearray) -> tuple[HostsTable, int]:
    """The table of `buffer`, moved into a memfd this process keeps open (its fd returned), sealed against
    any write or resize: other processes of the node get the fd passed over a Unix socket (`pass_table`,
    `receive_table`) and map it read-only, so the table is held once per node, and none can change it."""
    fd = os.memfd_create("nodedns-hosts", os.MFD_CLOEXEC | getattr(os, "MFD_ALLOW_SEALING", 0))
    try:
        view = memoryview(buffer)
        while view:
            view = view[os.write(fd, view):]
        if _SEALS and hasattr(fcntl, "F_ADD_SEALS"):
            with contextlib.suppress(OSError):  # a kernel without seals: the fd is still ours alone to write
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
        mapped = mmap.mmap(fd, len(buffer), mmap.MAP_SHARED, mmap.PROT_READ)
    except BaseException:
        os.close(fd)
        raise
    return HostsTable(mapped), fd


def pass_table(sock: socket.socket, fd: int, reloads: int) -> None:
    """Send the table's memfd (`share`) over a Unix socket (SCM_RIGHTS), tagged with the reading it comes
    from. Raises OSError (BlockingIOError when the socket's queue is full)."""
    socket.send_fds(sock, [_TABLE_TAG.pack(reloads)], [fd])


def receive_table(sock: socket.socket, size: int, reloads: int) -> HostsTable:
    """The table of reading `reloads` passed on `sock` (`pass_table`), mapped read-only: what is queued is
    read without waiting, an older reading's fd closed. Raises ValueError when it is not there or not
    `size` bytes, OSError when the socket fails. No /proc access: a hardened container's worker needs none.
    `sock` must be non-blocking (the worker's is: worker_main), or a table not queued blocks the caller."""
    found: int | None = None
    while True:
        try:  # recv_fds ignores its flags (Python 3.11): the MSG_DONTWAIT does nothing, the socket's mode decides
            data, fds, _, _ = socket.recv_fds(sock, _TABLE_TAG.size, 4, socket.MSG_DONTWAIT)
        except BlockingIOError:
            break
        if not data and not fds:
            break  # the other end is gone
        tag = _TABLE_TAG.unpack(data)[0] if len(data) == _TABLE_TAG.size else -1
        for extra in fds:
            if tag == reloads and found is None:
                found = extra
            else:
                os.close(extra)
        if found is not None:
            break
    if found is None:
        raise ValueError(f"the table of reading {reloads} was not passed")
    try:
        return open_shared(found, size)
    finally:
        os.close(found)


def open_shared(fd: int, size: int) -> HostsTable:
    """The table in memfd `fd` (`share`; passed by `receive_table`), mapped read-only: it must be `size` bytes."""
    have = os.fstat(fd).st_size
    if have != size:
        raise ValueError(f"the shared hosts table is {have} bytes, not {size}")
    return HostsTable(mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ))


class HostsFiles:
    """--hosts: the files, the table made from their last good texts (`table`), reloaded as they change."""

    def __init__(self, paths: Sequence[str], *, excluded: Callable[[str], bool],
                 on_change: Callable[[HostsTable], None] | None = None, period: float = 10.0,
                 clock: Callable[[], float] = time.time, read_timeout: float = READ_TIMEOUT,
                 max_entries: int = hosts.MAX_ENTRIES) -> None:
        self.files = [_File(p) for p in paths]
        self.excluded = excluded
        self.on_change = on_change
        self.period = period
        self.clock = clock
        self.read_timeout = read_timeout
        self.max_entries = max_entries
        self.table = HostsTable()
        self.fd: int | None = None  # the memfd of `table` (shared with the workers), kept open while in use
        self._old_fd: int | None = None  # the one before (a worker told of it may still be opening it)
        self.reloads = 0  # tables built (the first reading included)
        self.errors = 0  # read failures and skipped lines, each counted once
        self.last_reload: float | None = None

    async def poll_once(self) -> bool:
        """Look at every file; True when one changed and a new table was handed on. Never raises (but
        CancelledError)."""
        changed = False
        for f in self.files:
            changed |= await self._poll(f)
        if changed:
            try:
                await self._rebuild()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the table in use stays; logged, counted
                self.errors += 1
                log.warning("--hosts: cannot build the table (the one in use stays): %s: %s",
                            type(exc).__name__, exc)
                return False
        return changed

    async def _in_thread(self, f: _File, fn: Callable[[], T]) -> T:
        """`fn` (a stat or a read of `f`) in a daemon thread, given `read_timeout` seconds."""
        future, thread = off_loop(fn, f"hosts-read {f.path}")
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.read_timeout)
        except TimeoutError:
            f.stuck = thread
            raise TimeoutError(f"no answer from the file system within {self.read_timeout:g}s") from None

    async def _poll(self, f: _File) -> bool:
        if f.stuck is not None:
            if f.stuck.is_alive():
                self._unreadable(f, f"an earlier read has not returned (over {self.read_timeout:g}s)")
                return False
            f.stuck = None
        try:
            if f.signature is not None and await self._in_thread(f, lambda: _signature(f.path)) == f.signature:
                self._readable(f)
                return False
            signature, text = await self._in_thread(f, lambda: _read(f.path))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - OSError mostly; whatever it is, the last good text stays
            self._unreadable(f, str(getattr(exc, "strerror", None) or exc))
            return False
        self._readable(f)
        f.signature = signature
        if text == f.text:
            return False
        f.text = text
        return True

    def _readable(self, f: _File) -> None:
        if f.error:
            log.info("--hosts %s is readable again", f.path)
            f.error = ""

    def _unreadable(self, f: _File, reason: str) -> None:
        kept = "its last good contents are kept" if f.text is not None else "no names from it until it can be read"
        error = f"cannot read {f.path}: {reason}; {kept}"
        if error == f.error:
            return
        f.error = error
        self.errors += 1
        log.warning("--hosts: %s", error)

    def _build(self, texts: list[tuple[_File, bytes]]) -> tuple[HostsTable, int, list[hosts.Problems]]:
        """In a thread: the table of these texts, shared (a memfd), and each file's problems."""
        builder = hosts.Builder(excluded=self.excluded, max_entries=self.max_entries)
        problems = [builder.add_text(f.path, zlib.decompress(text).decode("utf-8", "surrogateescape"))
                    for f, text in texts]
        buffer = builder.finish()
        del builder
        table, fd = share(buffer)
        del buffer
        release_free_heap()  # the parse's transient objects go back to the system
        return table, fd, problems

    async def _rebuild(self) -> None:
        texts = [(f, f.text) for f in self.files if f.text is not None]
        future, _thread = off_loop(lambda: self._build(texts), "hosts-build")
        table, fd, problems = await future
        for (f, _text), p in zip(texts, problems, strict=True):
            f.skipped, f.ignored = p.skipped, p.ignored
            self.errors += p.skipped
            if p.skipped or p.ignored:
                (log.warning if p.skipped else log.info)(
                    "--hosts %s: %d lines skipped, %d names ignored (a zone the cluster answers); the first: %s",
                    f.path, p.skipped, p.ignored, "; ".join(str(x) for x in p.sample))
        first = self.last_reload is None
        if self._old_fd is not None:
            os.close(self._old_fd)
        self._old_fd, self.fd = self.fd, fd
        self.table = table
        self.reloads += 1
        self.last_reload = self.clock()
        log.info("--hosts: %s %d names, %d addresses from %d files", "read" if first else "reloaded",
                 table.names, table.entries, len(self.files))
        if self.on_change is not None:
            self.on_change(table)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            await self.poll_once()

    def close(self) -> None:
        for fd in (self.fd, self._old_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fd = self._old_fd = None

    def status(self) -> dict[str, Any]:
        """The "hosts" section of /status and /metrics (provider contract in nodedns.metrics.registry); the answers
        are the resolver's (the wiring adds them)."""
        last = self.last_reload
        return {
            "files": [{"path": f.path, "read": f.text is not None, "error": f.error, "skipped": f.skipped,
                       "ignored": f.ignored} for f in self.files],
            "entries": self.table.entries,
            "names": self.table.names,
            "bytes": self.table.size,
            "max_entries": self.max_entries,
            "max_file_bytes": MAX_HOSTS_BYTES,
            "reloads": self.reloads,
            "last_reload": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(last)) if last is not None else None,
            "errors": self.errors,
        }
