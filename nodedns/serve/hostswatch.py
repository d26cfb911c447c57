"""The --hosts files, read at start and read again when one changes (its inode, size or mtime).

`HostsFiles.poll_once()` looks at every file (`os.stat` in a thread); when one changed (or first
appears) it reads it (bytes, non-UTF-8 kept as surrogate escapes, at most MAX_HOSTS_BYTES), builds a
new table from the last good text of every file (nodedns.serve.hosts) and hands it to `on_change` (the
resolver, which also drops forwarded answers cached for those names). A file that cannot be read
(missing, a directory, no permission, too large) keeps its last good text and is logged once per
reason; at start that is a warning, never fatal (a file mounted later is picked up). Every line
skipped is logged with its file and line number once per reading. `run()` polls every `period`;
`status()` is the "hosts" section of /status and /metrics.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nodedns.serve import hosts
from nodedns.serve.hosts import HostsTable

log = logging.getLogger("nodedns.hostswatch")

MAX_HOSTS_BYTES = 16 << 20  # a hosts file larger than this is refused (its last good text is kept)


@dataclass(slots=True)
class _File:
    path: str
    signature: tuple[int, int, int, int] | None = None  # (device, inode, size, mtime_ns) of the text in use
    text: str | None = None  # the last good text (None: never read)
    error: str = ""  # why it cannot be read now ("" when it can)
    skipped: int = 0  # malformed lines in the text in use
    ignored: int = 0  # names in the cluster zone in the text in use


def _read(path: str) -> tuple[tuple[int, int, int, int], str]:
    """The file's signature and text. Raises OSError (ValueError when too large)."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        data = fh.read(MAX_HOSTS_BYTES + 1)
    if len(data) > MAX_HOSTS_BYTES:
        raise ValueError(f"over {MAX_HOSTS_BYTES >> 20} MiB")
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns), data.decode("utf-8", "surrogateescape")


def _signature(path: str) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class HostsFiles:
    """--hosts: the files, the table made from their last good texts (`table`), reloaded as they change."""

    def __init__(self, paths: Sequence[str], *, excluded: Callable[[str], bool],
                 on_change: Callable[[HostsTable], None] | None = None, period: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.files = [_File(p) for p in paths]
        self.excluded = excluded
        self.on_change = on_change
        self.period = period
        self.clock = clock
        self.table = HostsTable()
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
            self._rebuild()
        return changed

    async def _poll(self, f: _File) -> bool:
        try:
            if f.signature is not None and await asyncio.to_thread(_signature, f.path) == f.signature:
                self._readable(f)
                return False
            signature, text = await asyncio.to_thread(_read, f.path)
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

    def _rebuild(self) -> None:
        table = HostsTable()
        for f in self.files:
            if f.text is None:
                continue
            problems = hosts.parse(f.path, f.text, table, excluded=self.excluded)
            f.skipped = sum(1 for p in problems if not p.ignored)
            f.ignored = len(problems) - f.skipped
            for p in problems:
                if p.ignored:
                    log.info("--hosts %s", p)
                else:
                    self.errors += 1
                    log.warning("--hosts %s", p)
        first = self.last_reload is None
        self.table = table
        self.reloads += 1
        self.last_reload = self.clock()
        log.info("--hosts: %s %d names, %d addresses from %d files", "read" if first else "reloaded",
                 len(table.names), table.entries, len(self.files))
        if self.on_change is not None:
            self.on_change(table)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            await self.poll_once()

    def status(self) -> dict[str, Any]:
        """The "hosts" section of /status and /metrics (provider contract in nodedns.metrics.registry); the answers
        are the resolver's (the wiring adds them)."""
        last = self.last_reload
        return {
            "files": [{"path": f.path, "read": f.text is not None, "error": f.error, "skipped": f.skipped,
                       "ignored": f.ignored} for f in self.files],
            "entries": self.table.entries,
            "names": len(self.table.names),
            "reloads": self.reloads,
            "last_reload": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(last)) if last is not None else None,
            "errors": self.errors,
        }
