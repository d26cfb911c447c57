"""How the suite is spread over xdist workers: how many there are, the groups of modules that must not run
side by side, the tests that run with nothing beside them, and the slow modules sent first (used by
tests/conftest.py)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# xdist groups (relayout): the modules whose tests share a fixed resource run on one worker, in turn
# (`--dist loadgroup`): fixed ports 5353/9253/9254 on the host, the benchmark lock /tmp/nodedns-bench.lock.
XDIST_GROUPS = {
    "fixed-ports": frozenset({
        'test_doc_commands',
        'test_quickstart',
        'test_duplicates',
    }),
    "bench-lock": frozenset({
        'test_firewall',
        'test_handover',
        'test_bench_cache',
        'test_bench_cluster',
        'test_bench_index',
        'test_bench_insight',
        'test_bench_scale',
        'test_bench_workers',
        'test_scripts_smoke',
        'test_soak',
        'test_restart_under_load',
    }),
}


# The modules that take longest (over ~15 s on the 2-core machine, the slowest first), sent to the
# workers before the rest so that no long module starts last and keeps one worker busy alone at the end
# (longest-first scheduling); the groups above count as one long unit each.
SLOW_FIRST = (
    "test_sync_memory",
    "bench-lock",
    "test_outages",
    "test_image",
    "test_hostile",
    "test_invalidation",
    "test_quickstart",
    "test_packaging",
    "test_status_page_browser",
    "test_insight",
    "test_clients",
    "test_bench_tail",
    "test_bench_apiserver",
)


def group_of(stem: str) -> str | None:
    return next((g for g, stems in XDIST_GROUPS.items() if stem in stems), None)


def rank(stem: str, quiet: bool = False) -> int:
    """Where the module `stem` goes in the order of the run: its group's or its own place in SLOW_FIRST;
    a module with quiet tests last of all (when the other workers are out of work, its tests keep none
    of them waiting, and none waits for a long test of theirs to end)."""
    if quiet:
        return len(SLOW_FIRST) + 1
    key = group_of(stem) or stem
    return SLOW_FIRST.index(key) if key in SLOW_FIRST else len(SLOW_FIRST)


def workers_for(cores: int) -> int:
    """The workers `-n auto` starts on `cores` cores: three for every two. The suite mostly waits (agents
    starting, scripts sleeping through outages, images building: the cores are busy less than half of
    a run with one worker a core), so a third worker on two cores fills the idle time; the tests whose
    bounds are on timing run alone (QuietLock), so the extra load never reaches their figures."""
    return max(1, cores * 3 // 2)


class QuietLock:
    """A readers-writer lock over the suite's xdist workers, in two lock files: a test marked `quiet` (its
    bounds are on latency or timing under a load it makes itself) holds it exclusively, every other
    test shares it. So a quiet test starts once the tests running on the other workers have ended, and
    no test starts beside it; between quiet tests the other workers go on.

    flock(2) grants a shared lock whenever no exclusive one is held, even to a caller that came after a
    waiting exclusive one: with the other workers starting test after test, the quiet test could wait
    for ever. So every taker passes the gate first (held exclusively, and only while taking the lock):
    a quiet test waiting for the running tests to end holds the gate, and no new test gets past it.
    """

    def __init__(self, directory: Path = Path("/tmp")) -> None:
        self._gate = lock_file(directory / "nodedns-tests-quiet-gate.lock")
        self._lock = lock_file(directory / "nodedns-tests-quiet.lock")

    @contextmanager
    def held(self, exclusive: bool) -> Iterator[None]:
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._gate)
        os.close(self._lock)


def lock_file(path: Path) -> int:
    """A descriptor to flock `path` through, whoever made the file: a run as root leaves it root's (0644
    under its umask), which another user can still open to read (flock needs no more), but not with
    O_CREAT where fs.protected_regular guards /tmp; so it is opened as it is, and made (readable by
    everyone) only when missing."""
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        os.fchmod(fd, 0o644)
        return fd


def under_xdist() -> bool:
    """Whether this process is an xdist worker of a run with more than one."""
    return os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw") and \
        os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") != "1"
