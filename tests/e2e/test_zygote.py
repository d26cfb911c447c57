"""nodedns.workers.zygote: workers forked from one process; their pids, exit statuses and kills as the supervisor sees
them, and what happens when the zygote itself dies. A small body stands in for the worker's."""

from __future__ import annotations

import asyncio
import os
import signal
import socket

import pytest

from nodedns.workers.zygote import ForkedProcess, Forker
from tests.support.helpers import subprocess_env

# each child: reads a line from its channel, answers with its pid, then exits with the number the line
# names, or (for "hang") waits until killed
ENTRY = """
import os, socket, sys, time
from nodedns.workers.zygote import serve_forks
def body(fd):
    s = socket.socket(fileno=fd)
    s.setblocking(True)
    word = s.recv(64).decode().strip()
    s.sendall(str(os.getpid()).encode())
    if word == "hang":
        time.sleep(3600)
    return int(word)
sys.exit(serve_forks(int(sys.argv[1]), body))
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie not yet reaped by its parent counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(autouse=True)
def this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The zygote runs with -P: the checkout reaches it through PYTHONPATH, as in production the installed one."""
    monkeypatch.setenv("PYTHONPATH", subprocess_env()["PYTHONPATH"])


async def start(forker: Forker, word: str) -> tuple[ForkedProcess, int]:
    mine, theirs = socket.socketpair()
    with theirs:
        proc = await forker.spawn(theirs)
    mine.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_sendall(mine, word.encode())
    pid = int((await asyncio.wait_for(loop.sock_recv(mine, 64), 10)).decode())
    mine.close()
    return proc, pid


def test_workers_report_their_pid_and_exit_status_and_are_killed_by_pidfd() -> None:
    async def main() -> None:
        forker = Forker(ENTRY)
        try:
            ok, ok_pid = await start(forker, "0")
            failing, failing_pid = await start(forker, "3")
            hanging, hanging_pid = await start(forker, "hang")
            assert [p.pid for p in (ok, failing, hanging)] == [ok_pid, failing_pid, hanging_pid]
            assert len({ok_pid, failing_pid, hanging_pid, os.getpid()}) == 4
            assert await asyncio.wait_for(ok.wait(), 10) == 0
            assert await asyncio.wait_for(failing.wait(), 10) == 3
            assert hanging.returncode is None and alive(hanging_pid)
            hanging.kill()
            assert await asyncio.wait_for(hanging.wait(), 10) == -signal.SIGKILL
            assert not alive(hanging_pid)
            zygote = forker.proc
            assert zygote is not None
        finally:
            await asyncio.wait_for(forker.close(), 10)
        assert zygote.returncode == 0  # it left when its control socket closed (not killed after 5 s)

    asyncio.run(main())


def test_when_the_zygote_dies_its_workers_are_killed_and_the_next_spawn_starts_a_new_one() -> None:
    async def main() -> None:
        forker = Forker(ENTRY)
        try:
            child, pid = await start(forker, "hang")
            first = forker.proc
            assert first is not None
            first.kill()
            assert await asyncio.wait_for(child.wait(), 10) == -signal.SIGKILL
            for _ in range(200):
                if not alive(pid):
                    break
                await asyncio.sleep(0.05)
            assert not alive(pid)
            again, _ = await start(forker, "5")
            assert forker.proc is not first
            assert await asyncio.wait_for(again.wait(), 10) == 5
        finally:
            await asyncio.wait_for(forker.close(), 10)

    asyncio.run(main())
