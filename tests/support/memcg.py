"""A memory cgroup with a limit for a process tree under test: the Pod's memory limit, held by the kernel.

`MemoryCgroup(limit_mb)` creates a child of this process's own memory cgroup: on the unified hierarchy
(cgroup v2, `memory.max`) where its memory controller can be enabled for children, else on the v1
memory hierarchy (`memory.limit_in_bytes`, with `memory.move_charge_at_immigrate` so the pages a moved
process holds are charged to it). `add(pids)` moves processes in (their later children are born in it);
`peak_mb()` is the most it was charged (v2 `memory.peak`, v1 `memory.max_usage_in_bytes`), `oom_kills()`
the processes the kernel killed in it for the limit; `close()` moves whoever is left back out and removes
it. Needs root; `available()` says why not where it cannot be made.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def _own(hierarchy: str) -> str | None:
    """This process's cgroup path on a hierarchy ("" for the unified one, else a v1 controller)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (hierarchy == "" and controllers == "") or hierarchy in controllers.split(","):
            return path
    return None


def _unified() -> Path | None:
    """The unified hierarchy's mount, when its memory controller is there."""
    for mount in (ROOT, ROOT / "unified"):
        controllers = mount / "cgroup.controllers"
        if controllers.exists() and "memory" in controllers.read_text().split():
            return mount
    return None


class MemoryCgroup:
    def __init__(self, limit_mb: float, name: str = f"nodedns-attack-{os.getpid()}") -> None:
        self.limit = int(limit_mb * 1024 * 1024)
        self.path, self.v2 = self._make(name)
        if self.v2:
            (self.path / "memory.max").write_text(str(self.limit))
            with contextlib.suppress(OSError):
                (self.path / "memory.swap.max").write_text("0")  # a Pod's limit with no swap
        else:
            with contextlib.suppress(OSError):
                (self.path / "memory.move_charge_at_immigrate").write_text("3")
            (self.path / "memory.limit_in_bytes").write_text(str(self.limit))
            with contextlib.suppress(OSError):  # a Pod's limit with no swap
                (self.path / "memory.memsw.limit_in_bytes").write_text(str(self.limit))

    @staticmethod
    def _make(name: str) -> tuple[Path, bool]:
        unified, own = _unified(), _own("")
        if unified is not None and own is not None:
            parent = unified / own.lstrip("/")
            with contextlib.suppress(OSError):
                (parent / "cgroup.subtree_control").write_text("+memory")
                path = parent / name
                path.mkdir(exist_ok=True)
                if (path / "memory.max").exists():
                    return path, True
                path.rmdir()
        own_v1 = _own("memory")
        if own_v1 is None or not (ROOT / "memory").is_dir():
            raise OSError("no memory cgroup hierarchy this process can create a child in")
        path = ROOT / "memory" / own_v1.lstrip("/") / name
        path.mkdir(exist_ok=True)
        return path, False

    def add(self, pids: list[int]) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, OSError):
                (self.path / "cgroup.procs").write_text(str(pid))

    def peak_mb(self) -> float:
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        with contextlib.suppress(OSError, ValueError):
            return int((self.path / name).read_text()) / (1024 * 1024)
        return float("nan")

    def oom_kills(self) -> int:
        name = "memory.events" if self.v2 else "memory.oom_control"
        with contextlib.suppress(OSError):
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def close(self) -> None:
        parent = self.path.parent / "cgroup.procs"
        with contextlib.suppress(OSError):
            for pid in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    parent.write_text(pid)
        with contextlib.suppress(OSError):
            self.path.rmdir()


def available() -> str | None:
    """None when a memory cgroup can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root"
    try:
        MemoryCgroup(512, name=f"nodedns-probe-{os.getpid()}").close()
    except OSError as exc:
        return str(exc)
    return None
