"""How the suite spreads over xdist workers (tests/support/scheduling.py): the worker count, the order of
the modules, and the lock that runs a quiet test with nothing beside it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.support.scheduling import SLOW_FIRST, QuietLock, rank, workers_for


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
