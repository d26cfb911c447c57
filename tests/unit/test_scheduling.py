"""How the suite spreads over xdist workers (tests/support/scheduling.py): the worker count, the order of
the modules, and the lock that runs a quiet test with nothing beside it."""

from __future__ import annotations

import inspect
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.support.helpers import IN_CI
from tests.support.scheduling import SLOW_FIRST, QuietLock, lock_file, rank, workers_for


def test_auto_starts_three_workers_for_every_two_cores() -> None:
    assert [workers_for(n) for n in (1, 2, 3, 4, 8)] == [1, 3, 4, 6, 12]


def test_quiet_modules_go_after_every_other_and_slow_ones_first() -> None:
    assert rank("test_outages") < rank("test_config") < rank("test_failover", quiet=True)
    assert rank("test_bench_cache") == rank("bench-lock") == SLOW_FIRST.index("bench-lock")  # its group's place


def _hold(lock: QuietLock, exclusive: bool, events: list[str], name: str, until: threading.Event) -> None:
    with lock.held(exclusive):
        events.append(f"{name} in")
        until.wait(10)
        events.append(f"{name} out")


def _started(events: list[str], entry: str) -> bool:
    deadline = time.monotonic() + 5
    while entry not in events and time.monotonic() < deadline:
        time.sleep(0.01)
    return entry in events


def test_a_quiet_test_waits_for_running_tests_and_no_new_test_starts_beside_it(tmp_path: Path) -> None:
    """Each lock is its own open file (as each worker's is): a shared holder runs, a quiet taker waits for it,
    and a shared taker that comes after the quiet one waits behind it (flock alone would let it in)."""
    locks = [QuietLock(tmp_path) for _ in range(3)]
    events: list[str] = []
    release = {name: threading.Event() for name in ("first", "quiet", "later")}
    first = threading.Thread(target=_hold, args=(locks[0], False, events, "first", release["first"]))
    first.start()
    assert _started(events, "first in")
    quiet = threading.Thread(target=_hold, args=(locks[1], True, events, "quiet", release["quiet"]))
    quiet.start()
    time.sleep(0.2)
    later = threading.Thread(target=_hold, args=(locks[2], False, events, "later", release["later"]))
    later.start()
    time.sleep(0.3)
    assert events == ["first in"]  # the quiet one waits for the running test; the later one waits behind it
    release["first"].set()
    assert _started(events, "quiet in")
    time.sleep(0.3)
    assert events == ["first in", "first out", "quiet in"]  # nothing beside the quiet test
    release["quiet"].set()
    assert _started(events, "later in")
    release["later"].set()
    for thread in (first, quiet, later):
        thread.join(5)
    assert events == ["first in", "first out", "quiet in", "quiet out", "later in", "later out"]
    for lock in locks:
        lock.close()


def test_tests_that_are_not_quiet_share_the_lock(tmp_path: Path) -> None:
    locks = [QuietLock(tmp_path) for _ in range(2)]
    events: list[str] = []
    release = threading.Event()
    threads = [threading.Thread(target=_hold, args=(lock, False, events, f"t{i}", release))
               for i, lock in enumerate(locks)]
    for thread in threads:
        thread.start()
    assert _started(events, "t0 in") and _started(events, "t1 in")  # both at once
    release.set()
    for thread in threads:
        thread.join(5)
    for lock in locks:
        lock.close()


def test_a_lock_file_is_made_readable_by_everyone(tmp_path: Path) -> None:
    made = tmp_path / "made.lock"
    os.close(lock_file(made))
    assert stat.S_IMODE(made.stat().st_mode) == 0o644


@pytest.mark.skipif(os.geteuid() != 0 and not IN_CI, reason="needs root, to leave a file as root and open it as nobody")
@pytest.mark.skipif(shutil.which("setpriv") is None and not IN_CI, reason="setpriv (util-linux) is not installed")
def test_a_lock_file_a_run_as_root_left_is_taken_by_another_user() -> None:
    """A run as root leaves its lock files in /tmp, 0644 and root's: a later run as another user opens them
    to read (flock needs no more) and locks them, where opening them to append is refused."""
    where = Path(tempfile.mkdtemp(prefix="nodedns-lock-"))
    try:
        where.chmod(0o1777)  # as /tmp
        left = where / "left.lock"
        os.close(lock_file(left))
        code = "\n".join(["import fcntl, os", "from pathlib import Path", textwrap.dedent(inspect.getsource(lock_file)),
                          "fd = lock_file(Path(os.environ['LOCK']))", "fcntl.flock(fd, fcntl.LOCK_EX)",
                          "print('locked')", "open(os.environ['LOCK'], 'a')"])
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        r = subprocess.run([*nobody, "/usr/bin/python3", "-c", code],
                           capture_output=True, text=True, timeout=30, env={"LOCK": str(left)}, cwd="/")
        assert r.stdout == "locked\n" and "PermissionError" in r.stderr, (r.stdout, r.stderr)
    finally:
        shutil.rmtree(where)
