"""Keep the index in sync with the Kubernetes API: one Watcher thread per resource, their batches applied on the loop.

`KubeSync` builds the API client (nodedns.cluster.kubeapi) and one `Watcher` per resource
(nodedns.cluster.watcher: the list/watch loop, its back-off and errors), and applies what they send.
Raw JSON is parsed and shrunk in the thread; batches of changes go to the event loop with
`call_soon_threadsafe` (a few in flight at most: back-pressure), where `KubeSync` applies them.
Nothing here blocks the loop. The index is marked synced once every required resource has finished
its first list and every optional one has too or is refused; until then the resolver answers
SERVFAIL for would-be NXDOMAINs. During an outage the index is kept as it is and
`KubeSync.status()` says how stale it is.
"""
from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nodedns.cluster import objects as k8s
from nodedns.cluster.index import Index
from nodedns.cluster.kubeapi import ApiSource, Http
from nodedns.cluster.watcher import (
    CLUSTER_DNS_POLICIES,
    DNS_POLICIES,
    ENDPOINTSLICES,
    IMPORTED_SLICES,
    NAMESPACES,
    NODES_PATH,
    PODS_PATH,
    SERVICE_IMPORTS,
    SERVICES,
    Backoff,
    Batch,
    Resource,
    StreamSupport,
    Timing,
    Watcher,
    spread_window,
)

log = logging.getLogger("nodedns.kube")


M_ARENA_MAX = -8  # glibc's mallopt parameter
WATCH_ARENAS = 2


def limit_arenas(arenas: int = WATCH_ARENAS) -> None:
    """At most `arenas` glibc malloc arenas for the process (`mallopt(M_ARENA_MAX)`); a no-op without
    glibc, and when MALLOC_ARENA_MAX is set in the environment (the operator's choice wins).

    glibc gives every thread that allocates its own arena (up to 8 per core), each keeping what was
    freed in it: the watch threads (one per resource) would hold one each. Their allocations are
    serialized by the GIL anyway, so sharing two costs no speed and holds less (docs/sync.md "Memory: where
    it goes"). Called before the first watch thread starts.
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(M_ARENA_MAX, arenas)


def resources(*, pods: str, node_name: str, multicluster: bool = False) -> tuple[Resource, ...]:
    """Services, EndpointSlices, Namespaces; all Pods in `pods verified` mode, else this node's Pods;
    this node's own Node (a list and watch narrowed to it by `metadata.name`: zone, region, Pod CIDRs);
    with `multicluster`, ServiceImports and the imported EndpointSlices; the DNS policies (optional: a
    cluster without the nodedns.io CRDs syncs without them)."""
    out = [SERVICES, ENDPOINTSLICES, NAMESPACES]
    if multicluster:
        out += [SERVICE_IMPORTS, IMPORTED_SLICES]
    out += [CLUSTER_DNS_POLICIES, DNS_POLICIES]
    if pods == "verified":
        out.append(Resource(k8s.POD, "pods", PODS_PATH))  # a pod A record needs a Pod with that IP: required
    elif node_name:
        out.append(Resource(k8s.POD, "pods", PODS_PATH, field_selector=f"spec.nodeName={node_name}",
                            required=False, without="this node's Pods are unknown: no autopath, and the "
                            "default allow list admits no Pod by its own address (the pod CIDR still counts)"))
    if node_name:
        out.append(Resource(k8s.NODE, "nodes", NODES_PATH, field_selector=f"metadata.name={node_name}",
                            required=False, without="this node's Node is unknown: no zone/region order of headless "
                            "answers, no federation CNAMEs to this zone, and the default allow list does not know "
                            "the node's pod CIDRs (it answers every client meanwhile)"))
    else:
        log.warning("no node name (set NODE_NAME or --node-name): this node's Pods and Node are not watched "
                    "(no topology order, no federation CNAMEs to this zone, no autopath)")
    return tuple(out)


# ----------------------------------------------------------------------------------------------
# All resources, on the loop


@dataclass(slots=True)
class _Supervised:
    watcher: Watcher
    task: asyncio.Task[None] | None = None
    thread: threading.Thread | None = None
    sink: Callable[[Batch], None] | None = None  # a watch started by `watch`: its batches go there, not to the index


class KubeSync:
    """Runs one Watcher per resource, applies their batches to the index, reports sync and staleness."""

    def __init__(
        self,
        *,
        index: Index,
        source: ApiSource,
        resources: tuple[Resource, ...],
        timing: Timing | None = None,
        rng: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.index = index
        self.source = source
        self.resources = resources
        self.timing = timing or Timing()
        self.rng = rng
        self.clock = clock
        self.http: Http | None = None
        self.synced = asyncio.Event()
        self.started = clock()
        self.synced_after: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watchers: dict[str, _Supervised] = {}
        self._stopping = False
        self.streams = StreamSupport(enabled=self.timing.watch_list)
        self._objects = 0  # cluster-wide objects in the index (Services, EndpointSlices, Namespaces): the spread

    def spread(self) -> float:
        """The window retries spread over now (any thread): --kube-relist-spread scaled to the cluster."""
        return spread_window(self.timing.relist_spread, self._objects)

    async def start(self) -> None:
        """Load the configuration (ConfigError is fatal) and start a watcher per resource."""
        self._loop = asyncio.get_running_loop()
        self.started = self.clock()
        limit_arenas()  # before the watch threads allocate
        self.http = await asyncio.to_thread(Http, self.source)
        log.info("watching %s at %s: %s", self.source.describe(), self.http.base,
                 ", ".join(r.name + (f" ({r.field_selector})" if r.field_selector else "") for r in self.resources))
        for res in self.resources:
            self._start_watch(res, None)
        if not self.resources:
            self._set_synced()

    def _start_watch(self, res: Resource, sink: Callable[[Batch], None] | None) -> None:
        assert self.http is not None
        w = Watcher(res, http=self.http, post=self._post, timing=self.timing, rng=self.rng, clock=self.clock,
                    on_access=self._access_changed, streams=self.streams, spread=self.spread)
        sup = _Supervised(w, sink=sink)
        self._watchers[res.ident] = sup
        sup.task = asyncio.create_task(self._supervise(sup), name=f"watch:{res.ident}")

    def watch(self, res: Resource, sink: Callable[[Batch], None]) -> bool:
        """Start a watch of one more resource (on the loop, once started) whose batches go to `sink` on the
        loop instead of the index (the ConfigMaps of RPZ feeds); it never holds the sync back. False when not
        started yet or stopping."""
        if self.http is None or self._stopping:
            return False
        if res.ident not in self._watchers:
            self._start_watch(res, sink)
        return True

    def refusal(self, ident: str) -> str:
        """Why the API server refuses a watch (403: RBAC; 404: not served), "" when it does not."""
        sup = self._watchers.get(ident)
        if sup is None or not sup.watcher.state.forbidden:
            return ""
        st = sup.watcher.state
        return f"{st.forbidden} {'Forbidden' if st.forbidden == 403 else 'Not Found'}: {st.last_error}"

    def unwatch(self, ident: str) -> None:
        """Stop a watch `watch` started (its thread ends at its next read; nothing it sends is applied)."""
        sup = self._watchers.get(ident)
        if sup is None or sup.sink is None:
            return
        del self._watchers[ident]
        sup.watcher.stop()

    async def wait_synced(self) -> None:
        """Return once every resource has been listed (bound it with asyncio.timeout)."""
        await self.synced.wait()

    async def stop(self, grace: float = 5.0) -> None:
        """Stop every watcher; threads still blocked after `grace` seconds are left to die (daemons)."""
        self._stopping = True
        for sup in self._watchers.values():
            sup.watcher.stop()
        tasks = [s.task for s in self._watchers.values() if s.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for t in pending:
                t.cancel()
            if pending:
                log.warning("watchers still busy at shutdown: %s", ", ".join(t.get_name() for t in pending))
        if self.http is not None:
            await asyncio.to_thread(self.http.close)

    # -- supervision -------------------------------------------------------------------------

    async def _supervise(self, sup: _Supervised) -> None:
        """Run the watcher's thread; if it dies of a bug, log it, back off and start it again."""
        assert self._loop is not None
        backoff = Backoff(self.timing.backoff_initial, self.timing.backoff_max, rng=self.rng)
        w = sup.watcher
        while not self._stopping and self._watchers.get(w.resource.ident) is sup:
            done: asyncio.Future[None] = self._loop.create_future()
            sup.thread = threading.Thread(target=self._thread_main, args=(w, done), name=f"watch-{w.resource.ident}",
                                          daemon=True)
            sup.thread.start()
            try:
                await done
                return
            except Exception as exc:  # noqa: BLE001 - a bug in one watcher must not end the agent
                w.state.crashes += 1
                w.state.last_error = f"{exc.__class__.__name__}: {exc}"
                w.rv = None  # where it stopped is unknown: relist
                log.error("watcher %s crashed; restarting it with a relist", w.resource.name, exc_info=exc)
            await asyncio.sleep(backoff.next())

    def _thread_main(self, w: Watcher, done: asyncio.Future[None]) -> None:
        assert self._loop is not None
        error: BaseException | None = None
        try:
            w.run()
        except BaseException as exc:  # noqa: BLE001 - handed to the supervisor on the loop
            error = exc

        def finish() -> None:
            if done.done():
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        with contextlib.suppress(RuntimeError):  # the loop is already closed
            self._loop.call_soon_threadsafe(finish)

    # -- applying batches (on the loop) --------------------------------------------------------

    def _post(self, batch: Batch) -> None:
        """Called in a watcher thread."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._apply, batch)

    def _apply(self, batch: Batch) -> None:
        sup = self._watchers.get(batch.resource.ident)
        if sup is None or sup.watcher.resource is not batch.resource:
            return  # unwatched meanwhile (and perhaps watched again by a new watcher): its thread is ending
        if sup.sink is not None:
            try:
                sup.sink(batch)
                if batch.end:
                    sup.watcher.state.synced = True
            finally:
                sup.watcher.release_slot()
            return
        try:
            kind = batch.resource.kind
            index = self.index
            if batch.begin:
                index.begin_relist(kind)
            for change in batch.changes:
                index.apply_change(change)
            index.skipped += batch.skipped
            if batch.end:
                self._objects = len(index.services) + len(index.slices) + len(index.namespaces)
                gone = index.end_relist(kind)
                if gone:
                    log.info("%s: relist removed %d objects deleted meanwhile", batch.resource.name, gone)
                if not sup.watcher.state.synced:
                    sup.watcher.state.synced = True
                    log.info("%s listed", batch.resource.ident)
                self._check_synced()
        finally:
            sup.watcher.release_slot()

    def _access_changed(self) -> None:
        """A watcher thread: its resource turned forbidden or readable; look at the sync on the loop."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: we are shutting down
                self._loop.call_soon_threadsafe(self._check_synced)

    def _check_synced(self) -> None:
        """The index is synced once every required resource is listed and every optional one is listed or
        refused (403/404): an optional input degrades the answers, it never holds the zone back."""
        if self.synced.is_set():
            return
        states = [s.watcher.state for s in self._watchers.values() if s.sink is None]
        if all(st.synced or (not st.required and st.forbidden) for st in states):
            self._set_synced()

    def _set_synced(self) -> None:
        self.index.mark_synced()
        self.synced_after = self.clock() - self.started
        self.synced.set()
        counts = ", ".join(f"{k} {v}" for k, v in self.index.counts().items())
        without = [name for name, s in self._watchers.items() if not s.watcher.state.synced and s.sink is None]
        log.info("synced with the API server in %.2fs: %s%s", self.synced_after, counts,
                 f" (without {', '.join(without)}: refused or not served)" if without else "")

    # -- status ----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Sync state per resource and overall staleness, for the status endpoint.

        `stale_seconds` is 0 while every watch stream is open; otherwise the time since the API
        server last answered for the resource that has been out of touch longest. The index keeps
        answering meanwhile.
        """
        now = self.clock()
        per = {name: s.watcher.state.snapshot(now) for name, s in self._watchers.items()}
        stale = 0.0
        for s in self._watchers.values():
            st = s.watcher.state
            if not st.connected:
                contact = st.last_contact if st.last_contact is not None else st.started
                stale = max(stale, now - contact)
        conditions = []
        unready = []
        for name, s in self._watchers.items():
            st = s.watcher.state
            if st.forbidden:
                conditions.append({"type": "ResourceForbidden" if st.forbidden == 403 else "ResourceNotServed",
                                   "resource": name, "status": "True", "required": st.required,
                                   "verb": st.forbidden_verb, "code": st.forbidden, "message": st.forbidden_message})
                if st.required and st.forbidden == 403:
                    unready.append(f"{name}: 403 Forbidden: the agent may not {st.forbidden_verb} {name} "
                                   f"(missing RBAC verb {st.forbidden_verb!r}; the rule it needs: "
                                   f"{s.watcher.resource.rbac_rule(st.forbidden_verb)})")
                elif st.required:
                    unready.append(f"{name}: 404 Not Found: the API server does not serve "
                                   f"{s.watcher.resource.path} ({st.forbidden_verb} failed)")
        out: dict[str, Any] = {
            "source": self.source.describe(),
            "server": self.http.base if self.http is not None else None,
            "synced": self.synced.is_set(),
            "conditions": conditions,
            "synced_after_seconds": None if self.synced_after is None else round(self.synced_after, 3),
            "stale_seconds": round(stale, 3),
            "credential_reloads": self.http.reloads if self.http is not None else 0,
            "initial_state": "stream" if self.streams.enabled else "list",
            "stream_refused": self.streams.refusal or None,
            "relist_window_seconds": round(self.spread(), 3),
            "resources": per,
        }
        if unready:
            out["unready"] = unready
        return out
