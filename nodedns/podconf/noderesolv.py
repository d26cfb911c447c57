"""The node's resolv.conf that Pod resolv.conf files are rendered from (--host-resolv-conf), read and re-read.

The kubelet reads its `--resolv-conf` file each time it forms a Pod's DNS, as bytes; so does this
reader: any byte is kept (non-UTF-8 as surrogate escapes, as nodedns.podconf.resolvconf expects), at most
what the kubelet reads (`resolvconf.MAX_RESOLV_CONF_BYTES`, plus one byte so an oversized file is
told). `HostFile.load()` reads it once at start; `run()` reads it again every `period` and hands a
changed text to `on_change` (the wiring: the explainer's, autopath's and insight's search lists, the
/v1/resolv-conf renderer). A file that cannot be read (gone, a directory, no permission) keeps the
last text read, logged once per reason; a text the kubelet would refuse (`HostResolvConfError`: a
nameserver line without an address, over 10 MiB) is taken all the same, since the renderer must
answer what the kubelet would, and logged once. Both show in the "host_resolv_conf" section of
/status and /metrics (`status()`): the counts and a condition while one holds. The task never ends
on a file.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from nodedns.errors import HostResolvConfError, NodednsError
from nodedns.podconf import resolvconf

log = logging.getLogger("nodedns.hostfile")


def read_host_text(path: str) -> str:
    """The file as the kubelet reads it: bytes, non-UTF-8 kept as surrogate escapes. Raises OSError."""
    with open(path, "rb") as fh:
        return fh.read(resolvconf.MAX_RESOLV_CONF_BYTES + 1).decode("utf-8", "surrogateescape")


class HostFile:
    """--host-resolv-conf: the text in use (`text`, None until read or when never readable), re-read as it changes."""

    def __init__(self, path: str, *, on_change: Callable[[str | None], None] | None = None, period: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.on_change = on_change
        self.period = period
        self.clock = clock
        self.text: str | None = None
        self.changes = 0
        self.errors = 0
        self.last_error = ""
        self.unreadable_since: float | None = None
        self.unusable = ""  # why the kubelet would refuse the text in use ("" when it would not)
        self._reported: str | None = None  # the last reason logged (a read failure or the kubelet's refusal)
        self._loaded = False  # read once: later new texts are changes

    async def load(self) -> str | None:
        """The first read (at start): the text, or None when the file cannot be read (logged)."""
        await self.poll_once()
        return self.text

    async def poll_once(self) -> bool:
        """Read the file; True when its text changed (and `on_change` was called). Never raises (but
        CancelledError)."""
        try:
            text = await asyncio.to_thread(read_host_text, self.path)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - OSError mostly; whatever it is, the last text stays
            self._unreadable(f"cannot read {self.path}: {getattr(exc, 'strerror', None) or exc}")
            return False
        if self.unreadable_since is not None:
            log.info("--host-resolv-conf %s is readable again", self.path)
            self.unreadable_since = None
            self._reported = None
        if text == self.text:
            return False
        first = not self._loaded
        self._loaded = True
        self.text = text
        self._check(text)
        if not first:
            self.changes += 1
            log.info("--host-resolv-conf %s changed: Pod resolv.conf files are rendered from the new text", self.path)
        if self.on_change is not None:
            self.on_change(text)
        return True

    def _check(self, text: str) -> None:
        try:
            resolvconf.parse_host_resolv_conf(text)
        except HostResolvConfError as exc:
            self.unusable = str(exc)
            self._report(f"the kubelet cannot form Pod DNS from {self.path}: {exc}; rendered Pod resolv.conf "
                         "files say so, as the kubelet would")
            return
        if self.unusable:
            self._reported = None  # usable again: the same refusal later is new
        self.unusable = ""

    def _unreadable(self, reason: str) -> None:
        if self.unreadable_since is None:
            self.unreadable_since = self.clock()
        kept = "the last text read is kept" if self.text is not None else "rendering goes on without it"
        self._report(f"{reason}; {kept}")

    def _report(self, reason: str) -> None:
        """Count and log a reason once (the same file re-read every period is not a new error)."""
        if reason == self._reported:
            return
        self._reported = reason
        self.errors += 1
        self.last_error = reason
        log.warning("--host-resolv-conf: %s", reason)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            await self.poll_once()

    def status(self) -> dict[str, Any]:
        """The "host_resolv_conf" section of /status and /metrics (provider contract in nodedns.metrics.registry)."""
        conditions = []
        if self.unreadable_since is not None:
            conditions.append({
                "type": "HostResolvConfUnreadable",
                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.unreadable_since)),
                "message": self.last_error,
            })
        if self.unusable:
            conditions.append({"type": "HostResolvConfUnusable",
                               "message": f"the kubelet cannot form Pod DNS from this file: {self.unusable}"})
        return {"path": self.path, "read": self.text is not None, "changes": self.changes, "errors": self.errors,
                "last_error": self.last_error, "conditions": conditions}


def host_searches(text: str | None) -> tuple[str, ...]:
    """The search domains the node's resolv.conf gives host-network processes (none when unreadable)."""
    if not text:
        return ()
    try:
        return tuple(d.lower().rstrip(".") for d in resolvconf.parse_host_resolv_conf(text).searches)
    except NodednsError:
        return ()
