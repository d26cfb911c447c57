"""The RPZ feeds the policies name: a watch per named ConfigMap, each key read into a feed off the loop.

`FeedWatches.sync()` (after each rebuild of the book) starts a list+watch of each ConfigMap a
ClusterDNSPolicy names (`spec.rpz.configMapRef`), narrowed to it (its namespace's path, `fieldSelector
metadata.name=NAME`), and stops the watches no policy names any more: the agent reads no other
ConfigMap. Each change of a watched ConfigMap has every key the policies name parsed (`rpz.parse`) in a
thread, so a large feed never stalls the answers; the book gets the new `FeedState` and is rebuilt (the
feed applies from the next query: within a second, no restart). A ConfigMap that is missing, a key it
does not hold, or a ConfigMap the agent may not read (403) is a `FeedState` problem: that feed is not
applied, the rest of the policy is, and the policy's status and the log say so.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from nodedns.cluster import objects as k8s
from nodedns.cluster.watcher import Batch, Resource
from nodedns.policy.book import FeedRef, FeedState, PolicyBook
from nodedns.policy.rpz import Feed, parse

log = logging.getLogger("nodedns.policy")

NOT_FOUND = "ConfigMapNotFound"
KEY_NOT_FOUND = "KeyNotFound"
FORBIDDEN = "Forbidden"


class Watching(Protocol):
    """What starts and stops watches (nodedns.cluster.apisync.KubeSync)."""

    def watch(self, res: Resource, sink: Callable[[Batch], None]) -> bool: ...

    def unwatch(self, ident: str) -> None: ...

    def refusal(self, ident: str) -> str:
        """Why the API server refuses the watch ("": it does not)."""
        ...


def resource(namespace: str, name: str) -> Resource:
    """The list+watch of one ConfigMap: its namespace's path, narrowed to it by name."""
    return Resource(k8s.CONFIG_MAP, "configmaps", f"/api/v1/namespaces/{namespace}/configmaps",
                    field_selector=f"metadata.name={name}", required=False, key=f"configmaps/{namespace}/{name}",
                    without=f"the RPZ feeds of ConfigMap {namespace}/{name} are not applied (does the agent's Role in "
                    f"{namespace} grant list and watch on configmaps?)")


class FeedWatches:
    """The watches of the ConfigMaps the policies name and the feeds read from them (module docstring)."""

    def __init__(self, book: PolicyBook, watching: Watching, changed: Callable[[], None]) -> None:
        self.book = book
        self.watching = watching
        self.changed = changed  # the book must be rebuilt (a feed's state changed)
        self.maps: dict[tuple[str, str], k8s.ConfigMap | None] = {}  # listed ConfigMaps (None: it does not exist)
        self._watched: set[tuple[str, str]] = set()
        self._seen_in_relist: dict[tuple[str, str], bool] = {}
        # what was last read of each key: (the ConfigMap exists, the key's text or None)
        self._texts: dict[FeedRef, tuple[bool, str | None]] = {}
        self._tasks: set[asyncio.Future[Feed]] = set()

    def sync(self) -> None:
        """Watch what the policies name now, stop what they no longer name."""
        wanted = self.book.wanted_feeds()
        maps = {(ns, name) for ns, name, _ in wanted}
        for key in sorted(maps - self._watched):
            if self.watching.watch(resource(*key), self._sink(key)):
                self._watched.add(key)
        for key in sorted(self._watched - maps):
            self.watching.unwatch(resource(*key).ident)
            self._watched.discard(key)
            self.maps.pop(key, None)
        gone = [ref for ref in self.book.feeds if ref not in wanted]
        for ref in gone:
            self.book.set_feed(ref, None)
            self._texts.pop(ref, None)
        for ref in wanted:
            if (ref[0], ref[1]) in self.maps and ref not in self._texts:
                self._read(ref)  # a new key of a ConfigMap already listed
        if gone:
            self.changed()

    def refused(self) -> None:
        """Look again at the watches the API server refuses: their feeds' problem (a forbidden ConfigMap)."""
        changed = False
        for ref in self.book.wanted_feeds():
            key = (ref[0], ref[1])
            if key in self.maps or key not in self._watched:
                continue
            why = self.watching.refusal(resource(*key).ident)
            state = self.book.feeds.get(ref)
            if why and (state is None or state.problem != why):
                self.book.set_feed(ref, FeedState(problem=why, reason=FORBIDDEN))
                changed = True
        if changed:
            self.changed()

    def _sink(self, key: tuple[str, str]) -> Callable[[Batch], None]:
        def apply(batch: Batch) -> None:
            if key not in self._watched:
                return
            if batch.begin:
                self._seen_in_relist[key] = False
            for change in batch.changes:
                record = change.record if isinstance(change.record, k8s.ConfigMap) else None
                if change.name != key[1]:
                    continue
                self.maps[key] = record
                self._seen_in_relist[key] = self._seen_in_relist.get(key, False) or record is not None
            if batch.end and not self._seen_in_relist.get(key, True):
                self.maps[key] = None  # listed, and not there
            if batch.end or (batch.changes and key in self.maps):
                for ref in self.book.wanted_feeds():
                    if (ref[0], ref[1]) == key:
                        self._read(ref)

        return apply

    def _read(self, ref: FeedRef) -> None:
        """The feed of one key of a listed ConfigMap: parsed in a thread when its text changed."""
        cm = self.maps.get((ref[0], ref[1]))
        text = None if cm is None else dict(cm.data).get(ref[2])
        seen = (cm is not None, text)
        if self._texts.get(ref) == seen and (text is not None or ref in self.book.feeds):
            return
        self._texts[ref] = seen
        if text is None:
            where = f"ConfigMap {ref[0]}/{ref[1]}"
            problem, reason = ((f"{where} does not exist", NOT_FOUND) if cm is None else
                               (f"{where} has no key {ref[2]!r}", KEY_NOT_FOUND))
            self.book.set_feed(ref, FeedState(problem=problem, reason=reason))
            self.changed()
            return
        loop = asyncio.get_running_loop()
        task = loop.run_in_executor(None, parse, text)
        self._tasks.add(task)

        def done(fut: asyncio.Future[Feed]) -> None:
            self._tasks.discard(fut)
            if fut.cancelled() or self._texts.get(ref) != seen:
                return  # a newer text is being read
            exc = fut.exception()
            if exc is not None:  # a bug in the reader: said, and the feed not applied
                log.error("RPZ feed %s/%s key %s could not be read", *ref, exc_info=exc)
                self.book.set_feed(ref, FeedState(problem=f"the feed could not be read: {exc!r}", reason="Invalid"))
            else:
                self.book.set_feed(ref, FeedState(feed=fut.result()))
            self.changed()

        task.add_done_callback(done)

    def stop(self) -> None:
        for key in list(self._watched):
            self.watching.unwatch(resource(*key).ident)
        self._watched.clear()
        for task in self._tasks:
            task.cancel()
