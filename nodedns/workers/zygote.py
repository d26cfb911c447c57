"""The process --workers processes are forked from: one interpreter whose imported code they share.

    supervisor (nodedns.workers.supervisor)          zygote (`serve_forks`, a fresh `python -P`)
      Forker.spawn(channel end, table end) -- "S" + fds -->  fork(); the child runs the worker's body
      ForkedProcess(pid, pidfd)  <--- "P" pid + pidfd
      ForkedProcess.returncode   <--- "X" pid status   (when a worker exits: the zygote reaps it)

The zygote (`python -P`: a `nodedns/` folder in the current directory cannot replace the package) imports
what a worker runs, freezes its garbage collector's objects, gives the C heap's free pages back, then only
forks, so the workers share its pages copy-on-write. It ignores SIGINT and SIGTERM (the supervisor decides
when workers stop) and exits when the supervisor's end of its control socket closes. If it dies, the
supervisor kills the workers it forked and starts them again from a new zygote. Signals to a worker go
through its pidfd, so a recycled pid is never hit. What a worker costs, RSS against PSS: docs/restarts.md
"Workers: all cores".
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import logging
import os
import select
import signal
import socket
import struct
import sys
import traceback
from collections.abc import Callable

from nodedns.runtime.heap import release_free_heap

log = logging.getLogger("nodedns.zygote")

_PID = struct.Struct("!i")
_EXIT = struct.Struct("!ii")
SPAWN_TIMEOUT = 30.0  # seconds for the zygote to fork (its imports come first)
MAX_FDS = 4  # fds a fork request may carry to the child (a worker's: its channel, its table socket)


# ----------------------------------------------------------------------------------------------
# The zygote


def serve_forks(fd: int, body: Callable[..., int]) -> int:
    """The zygote's loop on control socket `fd`: fork a child running `body(channel fd, *other fds)` for
    every request (the fds it carried), report each child's pid and exit status. Returns when the
    supervisor is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a hang-up of the group (a terminal closing) is not ours to end
    control = socket.socket(fileno=fd)
    control.setblocking(True)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a child ended: the wake-up fd says so
    gc.collect()
    gc.freeze()  # what is imported stays untouched by the children's collections
    release_free_heap()
    while True:
        readable, _, _ = select.select([fd, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 512)
            _reap(control)
        if fd not in readable:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(control, 64, MAX_FDS)
        except OSError:
            return 0
        if not message:
            return 0  # the supervisor is gone
        if message[:1] != b"S" or not fds:
            for extra in fds:
                os.close(extra)
            continue
        pid = os.fork()
        if pid == 0:
            _child(body, fds, (control.fileno(), wake_r, wake_w))
        for passed in fds:
            os.close(passed)
        pidfd = _pidfd(pid)
        try:
            socket.send_fds(control, [b"P" + _PID.pack(pid)], [pidfd] if pidfd is not None else [])
        except OSError:
            return 0
        finally:
            if pidfd is not None:
                os.close(pidfd)


def _child(body: Callable[..., int], fds: list[int], inherited: tuple[int, ...]) -> None:
    """A forked worker: runs `body` and exits with its code (never returns into the zygote's loop)."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for extra in inherited:
            os.close(extra)
        gc.enable()
        code = body(*fds)
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - whatever it is, this process must end here
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _reap(control: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        with contextlib.suppress(OSError):
            control.send(b"X" + _EXIT.pack(pid, os.waitstatus_to_exitcode(status)))


# ----------------------------------------------------------------------------------------------
# The supervisor's side


class ForkedProcess:
    """A worker forked by the zygote: what asyncio.subprocess.Process offers the supervisor (pid,
    returncode, wait, kill), with the exit status reported by the zygote."""

    def __init__(self, pid: int, pidfd: int | None) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self.returncode: int | None = None
        self._done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def wait(self) -> int:
        return await asyncio.shield(self._done)

    def kill(self) -> None:
        if self.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, OSError):
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)

    def exited(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            if not self._done.done():
                self._done.set_result(code)
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class Forker:
    """Starts the zygote (`entry`: the Python code it runs, given its control socket's fd as argv[1])
    and asks it for workers; a zygote that died is started again at the next spawn."""

    def __init__(self, entry: str) -> None:
        self.entry = entry
        self.proc: asyncio.subprocess.Process | None = None
        self.sock: socket.socket | None = None
        self.waiting: collections.deque[asyncio.Future[ForkedProcess]] = collections.deque()
        self.children: dict[int, ForkedProcess] = {}

    async def _start(self) -> socket.socket:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.proc = await asyncio.create_subprocess_exec(sys.executable, "-P", "-c", self.entry,
                                                             str(theirs.fileno()), pass_fds=(theirs.fileno(),))
        mine.setblocking(False)
        self.sock = mine
        asyncio.get_running_loop().add_reader(mine.fileno(), self._readable)
        log.info("workers are forked from pid %s", self.proc.pid)
        return mine

    async def spawn(self, channel: socket.socket, *more: socket.socket) -> ForkedProcess:
        """A new process running the worker's body on `channel` (the worker's end of its socketpair) and
        `more` (other sockets of the worker's, passed after it)."""
        sock = self.sock if self.sock is not None else await self._start()
        fut: asyncio.Future[ForkedProcess] = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        try:
            socket.send_fds(sock, [b"S"], [channel.fileno(), *(s.fileno() for s in more)])
        except OSError as exc:
            self.waiting.remove(fut)
            self._lost()
            raise ConnectionError(f"the process workers are forked from is gone ({exc})") from None
        return await asyncio.wait_for(asyncio.shield(fut), SPAWN_TIMEOUT)

    def _readable(self) -> None:
        while self.sock is not None:
            try:
                message, fds, _, _ = socket.recv_fds(self.sock, 64, 1)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                message, fds = b"", []
            if not message:
                self._lost()
                return
            if message[:1] == b"P":
                (pid,) = _PID.unpack_from(message, 1)
                child = self.children[pid] = ForkedProcess(pid, fds[0] if fds else None)
                if self.waiting:
                    fut = self.waiting.popleft()
                    if not fut.done():
                        fut.set_result(child)
            elif message[:1] == b"X":
                pid, code = _EXIT.unpack_from(message, 1)
                gone = self.children.pop(pid, None)
                if gone is not None:
                    gone.exited(code)

    def _lost(self) -> None:
        """The zygote is gone: its workers can no longer be followed; they are killed (and restarted)."""
        if self.sock is not None:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self.sock.fileno())
            self.sock.close()
            self.sock = None
        for fut in self.waiting:
            if not fut.done():
                fut.set_exception(ConnectionError("the process workers are forked from is gone"))
        self.waiting.clear()
        if self.children:
            log.error("the process workers are forked from ended: killing its %d workers (they start again)",
                      len(self.children))
        for child in self.children.values():
            child.kill()
            child.exited(-signal.SIGKILL)
        self.children.clear()

    async def close(self) -> None:
        """Stop the zygote (it exits when its control socket closes)."""
        if self.sock is not None:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self.sock.fileno())
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            try:
                await asyncio.wait_for(self.proc.wait(), 5.0)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
