"""The watch loop of one resource, in its own thread: state from the watch cache, then a watch, with back-off.

Each `Watcher` runs one resource's loop in its own named daemon thread, with blocking HTTP through the
`kubernetes` package's loaders and urllib3 pool (raw JSON, never client model objects): the initial state from
the watch cache (a WatchList stream, else a list for the life of the process) applied as one relist, then a
watch from the last resourceVersion; 410 relists, 429/503 wait Retry-After, other failures back off with
jitter (`Backoff`), spread over the relist window in an outage; 401 reloads the credentials; 403/404 mark the
resource refused and ask again with their own back-off (an optional resource syncs without it). Every
situation and what the watcher does: docs/sync.md "Behaviour".

Batches of `SlimChange`s go to the event loop with `call_soon_threadsafe` (a few in flight at most:
back-pressure), where `KubeSync` (nodedns.cluster.apisync) applies them.
"""
from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import urllib3
from urllib3.exceptions import HTTPError as TransportError

from nodedns.cluster import objects as k8s
from nodedns.cluster.index import ADDED, DELETED, MODIFIED, SlimChange, change_of
from nodedns.cluster.kubeapi import Http, status_error
from nodedns.cluster.listbody import ListBody
from nodedns.errors import ApiError, ApiGone, ApiUnauthorized, ObjectError
from nodedns.runtime.heap import release_free_heap
from nodedns.runtime.logutil import Consolidated

log = logging.getLogger("nodedns.kube")


SLOTS_IN_FLIGHT = 4  # batches per resource handed to the loop and not yet applied
LIST_READ = 65536  # bytes read from a list body at a time


HEALTHY_WATCH = 1.0  # seconds: a watch that ends sooner without any event is retried with back-off


INITIAL_EVENTS_END = "k8s.io/initial-events-end"  # the annotation of the BOOKMARK that ends a WatchList's initial state
# the cluster size at which --kube-relist-spread is the whole window: the Services, EndpointSlices and Namespaces
# of a 5,000-node cluster (10,000 + 10,500 + 1,000); a smaller cluster spreads over its share of it
SPREAD_FULL_AT = 20_000
SPREAD_FLOOR = 0.05  # the smallest share of the window (a tiny cluster still spreads over a little)


# ----------------------------------------------------------------------------------------------
# What to watch


@dataclass(frozen=True, slots=True)
class Resource:
    kind: str  # objects.SERVICE, ...
    name: str  # plural: the key in status()
    path: str
    page_size: int = 500
    field_selector: str = ""
    label_selector: str = ""
    # required: the cluster zone cannot be answered without it (no sync, not ready while it cannot be
    # read); optional: the zone is synced without it when the API server refuses it (403) or does not
    # serve it (404), and it is asked for again with back-off
    required: bool = True
    without: str = ""  # optional: what the agent does without it (for the log line and /status)
    key: str = ""  # its key in KubeSync's watchers and /status when several watches share a resource ("": name)

    @property
    def ident(self) -> str:
        return self.key or self.name

    @property
    def api_group(self) -> str:
        """The RBAC apiGroup: "" for the core API (/api/v1/...), else the group (/apis/GROUP/VERSION/...)."""
        parts = self.path.strip("/").split("/")
        return parts[1] if parts[0] == "apis" else ""

    def rbac_rule(self, verb: str) -> str:
        """The ClusterRole rule that lets the agent do `verb` (list, watch) on this resource, as YAML flow."""
        verbs = '"list", "watch"' if verb in ("list", "watch") else f'"{verb}"'
        return f'{{apiGroups: ["{self.api_group}"], resources: ["{self.name}"], verbs: [{verbs}]}}'


SERVICES = Resource(k8s.SERVICE, "services", "/api/v1/services")
ENDPOINTSLICES = Resource(k8s.ENDPOINTSLICE, "endpointslices", "/apis/discovery.k8s.io/v1/endpointslices",
                          page_size=100)  # slices are large (up to 100 endpoints): smaller pages, lower peaks
NAMESPACES = Resource(k8s.NAMESPACE, "namespaces", "/api/v1/namespaces")
PODS_PATH = "/api/v1/pods"
NODES_PATH = "/api/v1/nodes"
# Multi-Cluster Services (--multicluster-zone): ServiceImports (a CRD: optional), and the EndpointSlices
# imported for them, selected by their label (a second watch of EndpointSlices, as CoreDNS has)
SERVICE_IMPORTS = Resource(k8s.SERVICE_IMPORT, "serviceimports",
                           "/apis/multicluster.x-k8s.io/v1alpha1/serviceimports", required=False,
                           without="no ServiceImports: every name of the clusterset zone but its apex and "
                           "dns-version answers NXDOMAIN (is the Multi-Cluster Services CRD installed, and does "
                           "the daemonset/multicluster component's ClusterRole grant list and watch?)")
# DNS policies (nodedns.io CRDs, daemonset/policy-crds.yaml): optional, a cluster without them runs without
_NO_POLICIES = ("no DNS policies: every Pod resolves as if none applied (are the nodedns.io CRDs of "
                "daemonset/policy-crds.yaml installed, and does the ClusterRole grant list and watch?)")
DNS_POLICIES = Resource(k8s.DNS_POLICY, "dnspolicies", "/apis/nodedns.io/v1alpha1/dnspolicies", required=False,
                        without=_NO_POLICIES)
CLUSTER_DNS_POLICIES = Resource(k8s.CLUSTER_DNS_POLICY, "clusterdnspolicies",
                                "/apis/nodedns.io/v1alpha1/clusterdnspolicies", required=False, without=_NO_POLICIES)
IMPORTED_SLICES = Resource(k8s.IMPORTED_SLICE, "imported-endpointslices", "/apis/discovery.k8s.io/v1/endpointslices",
                           page_size=100, label_selector=k8s.MCS_SERVICE_NAME_LABEL)


# ----------------------------------------------------------------------------------------------
# Timing and back-off


@dataclass(frozen=True, slots=True)
class Timing:
    watch_timeout: float = 300.0  # timeoutSeconds asked of the server: uniform in [t, 2t), like client-go
    read_slack: float = 15.0  # a watch's read timeout is timeoutSeconds + this: a silent stream is dropped
    request_timeout: float = 60.0  # read timeout of list requests
    connect_timeout: float = 10.0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    # a resource the API server refuses (403) or does not serve (404): asked again from 1 s, doubling up to
    # a minute, so a fixed ClusterRole is picked up without a restart
    forbidden_initial: float = 1.0
    forbidden_max: float = 60.0
    # relists after a 410, reconnects during an outage and retries after a 429 wait a random share of this
    # window, scaled to the cluster's size (spread_window): at 5,000 nodes the fleet's relists spread over it
    relist_spread: float = 30.0
    watch_list: bool = True  # ask for the initial state as a WatchList stream first (falls back to lists)
    # a WatchList silent this long (or this long without its initial-events-end bookmark) before the end of its
    # initial state: the server ignored sendInitialEvents (an older one sends no such bookmark): refused
    initial_events_timeout: float = 60.0


def spread_window(spread: float, objects: int) -> float:
    """The window (seconds) retries are spread over: `spread` at SPREAD_FULL_AT cluster-wide objects and above,
    proportionally less below, never less than SPREAD_FLOOR of it."""
    return spread * min(1.0, max(SPREAD_FLOOR, objects / SPREAD_FULL_AT))


class StreamSupport:
    """Whether the API server serves WatchList streams (sendInitialEvents): asked until it refuses once, then
    lists for the life of the process, said in one log line (shared by every watcher; any thread)."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.refusal = ""
        self._lock = threading.Lock()

    def refuse(self, resource: str, reason: str) -> None:
        with self._lock:
            if not self.enabled:
                return
            self.enabled = False
            self.refusal = f"{resource}: {reason}"
        log.info("the API server does not stream the initial state (WatchList, sendInitialEvents) for %s: %s; "
                 "listing with resourceVersion=0 from its watch cache instead, for the life of this process",
                 resource, reason)


class Backoff:
    """Exponential back-off with jitter: initial, 2x, 4x ... up to maximum, each drawn from [d/2, d)."""

    def __init__(self, initial: float, maximum: float, *, rng: Callable[[], float] = random.random) -> None:
        self.initial = initial
        self.maximum = maximum
        self.rng = rng
        self.failures = 0

    def next(self) -> float:
        d = min(self.maximum, self.initial * float(1 << min(self.failures, 30)))
        self.failures += 1
        return d / 2 + self.rng() * d / 2

    def reset(self) -> None:
        self.failures = 0


# ----------------------------------------------------------------------------------------------
# One resource


@dataclass(slots=True)
class Batch:
    """Changes for the loop. `begin`: a relist starts with these; `end`: the relist is complete."""

    resource: Resource
    changes: list[SlimChange]
    skipped: int = 0
    begin: bool = False
    end: bool = False


@dataclass(slots=True)
class ResourceState:
    """What the status endpoint reports for one resource (written by its thread, read by the loop)."""

    started: float  # monotonic
    synced: bool = False
    resource_version: str = ""
    connected: bool = False  # a watch stream is open
    lists: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    skipped: int = 0
    errors: int = 0
    gone: int = 0
    last_error: str = ""
    last_event_wall: float = 0.0  # time.time() of the last event or bookmark
    last_event: float | None = None  # monotonic
    last_contact: float | None = None  # monotonic: the API server last answered for this resource
    crashes: int = 0
    required: bool = True
    forbidden: int = 0  # 403 or 404 while the API server refuses (or does not serve) the resource; 0: readable
    forbidden_verb: str = ""  # list or watch: what was refused
    forbidden_message: str = ""
    initial_state: str = ""  # how the last initial state came: "stream" (WatchList) or "list" (resourceVersion=0)
    retry_waits: int = 0  # waits spread over the relist window (410, outage, 429)
    last_retry_wait: float = 0.0  # seconds

    def snapshot(self, now: float) -> dict[str, Any]:
        contact = self.last_contact if self.last_contact is not None else self.started
        return {
            "required": self.required,
            "forbidden": bool(self.forbidden),
            "forbidden_code": self.forbidden or None,
            "forbidden_verb": self.forbidden_verb or None,
            "synced": self.synced,
            "resource_version": self.resource_version,
            "connected": self.connected,
            "lists": self.lists,
            "relists": max(0, self.lists - 1),
            "watches": self.watches,
            "watch_restarts": max(0, self.watches - 1),
            "events": self.events,
            "bookmarks": self.bookmarks,
            "skipped": self.skipped,
            "errors": self.errors,
            "gone": self.gone,
            "last_error": self.last_error,
            "last_event_time": self.last_event_wall or None,
            "seconds_since_event": None if self.last_event is None else round(now - self.last_event, 3),
            "seconds_since_contact": round(now - contact, 3),
            "crashes": self.crashes,
            "initial_state": self.initial_state or None,
            "retry_waits": self.retry_waits,
            "last_retry_wait_seconds": round(self.last_retry_wait, 3),
        }


class _Stopped(Exception):
    """The watcher was told to stop."""


class _StreamRefused(Exception):
    """The API server does not serve the WatchList stream (the message says how it showed)."""


_END = object()  # _event's answer to the BOOKMARK that ends a WatchList's initial state


class Watcher:
    """List and watch one resource; `run()` is the body of its thread."""

    def __init__(
        self,
        resource: Resource,
        *,
        http: Http,
        post: Callable[[Batch], None],
        timing: Timing,
        rng: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
        on_access: Callable[[], None] = lambda: None,
        streams: StreamSupport | None = None,
        spread: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.resource = resource
        self.streams = streams if streams is not None else StreamSupport(enabled=timing.watch_list)
        self.spread = spread  # the retry window in seconds (spread_window of the cluster's size now)
        self.http = http
        self._post_to_loop = post
        self.timing = timing
        self.rng = rng
        self.clock = clock
        self.on_access = on_access  # the resource turned forbidden or readable (any thread)
        self.rv: str | None = None  # None: list first (or stream the initial state)
        self._initial = False  # a WatchList's initial events are arriving (the end bookmark is still to come)
        self._initial_began = False
        self._asked_stream = False  # the last request was a WatchList
        self._read_timeout = 0.0  # the watch's read timeout (a WatchList reads its initial state with a shorter one)
        self._list_next = False  # the stream was refused with 403/404: a list names what is missing
        self.state = ResourceState(started=clock(), required=resource.required)
        self._stopping = threading.Event()
        self._slots = threading.Semaphore(SLOTS_IN_FLIGHT)
        self._resp: Any = None
        self._errors = Consolidated(log, f"watch {resource.ident}")

    # -- control (any thread) ----------------------------------------------------------------

    def stop(self) -> None:
        self._stopping.set()
        resp = self._resp
        shutdown = getattr(resp, "shutdown", None)  # urllib3 >= 2.3: unblocks a read in another thread
        if shutdown is not None:
            with contextlib.suppress(Exception):
                shutdown()

    def release_slot(self) -> None:
        self._slots.release()

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> None:
        backoff = Backoff(self.timing.backoff_initial, self.timing.backoff_max, rng=self.rng)
        refused = Backoff(self.timing.forbidden_initial, self.timing.forbidden_max, rng=self.rng)
        gone_in_a_row = 0
        while not self._stopping.is_set():
            retry_after: float | None = None
            try:
                if self.rv is None and (not self.streams.enabled or self._list_next):
                    self._list()
                    self._list_next = False
                    refused.reset()
                if self._watch():
                    backoff.reset()
                    gone_in_a_row = 0
                    continue  # the server ended the stream (timeoutSeconds): watch again at once
                # ended at once with nothing in it (a proxy closing streams?): don't hammer the server
                log.debug("%s: watch ended at once without events; backing off", self.resource.name)
            except _Stopped:
                break
            except _StreamRefused as exc:
                self.rv = None
                self.streams.refuse(self.resource.name, str(exc))
                continue  # list at once: the server is fine, it only lacks the stream
            except ApiGone as exc:
                self.rv = None
                self.state.gone += 1
                gone_in_a_row += 1
                log.info("%s: %s; relisting", self.resource.name, exc)
                if gone_in_a_row == 1:
                    # our position is too old, the server is fine; but a compaction expires every agent's watch
                    # at once: each relists after a random share of the window, not all in the same second
                    self._spread_wait(0.0)
                    continue
                self._failed(exc)
            except ApiUnauthorized as exc:
                self._failed(exc)
                self.http.reload(self.http.generation)
            except ApiError as exc:
                if self._stream_refusal(exc):
                    self.rv = None
                    self.streams.refuse(self.resource.name, str(exc))
                    continue
                if exc.code in (403, 404) and self._asked_stream:
                    self._list_next = True  # a plain list says which verb RBAC refuses, or that it is not served
                    continue
                if exc.code not in (403, 404):
                    self._failed(exc)
                    retry_after = exc.retry_after
                    if retry_after is None and exc.code == 429:
                        retry_after = 1.0  # throttled without a Retry-After: as client-go, at least a second
                else:
                    try:
                        self._refused(exc)
                    except _Stopped:
                        break
                    self._stopping.wait(refused.next())
                    continue
            except (TransportError, OSError, ValueError) as exc:
                self._failed(exc)
            in_a_row = backoff.failures
            delay = backoff.next()
            if retry_after is not None:
                self._spread_wait(retry_after, floor=delay)  # never sooner than the server asked
            elif in_a_row >= 1:
                self._spread_wait(0.0, floor=delay)  # failing again: an outage, whose end the fleet must not share
            else:
                self._stopping.wait(delay)
        self.state.connected = False

    def _spread_wait(self, base: float, *, floor: float = 0.0) -> None:
        """Wait max(floor, base + a random share of the relist window): the fleet's retries spread out."""
        delay = max(floor, base + self.rng() * self.spread())
        self.state.retry_waits += 1
        self.state.last_retry_wait = delay
        self._stopping.wait(delay)

    def _stream_refusal(self, exc: ApiError) -> bool:
        """A WatchList request answered 400 or 422 (an API server without the stream, or with it gated off)."""
        return self._asked_stream and exc.code in (400, 422)

    def _failed(self, exc: BaseException) -> None:
        if self._stopping.is_set():
            return  # stop() shut the stream down under us: not an error
        self.state.errors += 1
        self.state.connected = False
        self.state.last_error = f"{exc.__class__.__name__}: {exc}"
        self._errors.report(f"{self.state.last_error} (keeping the last index; retrying)")

    def _refused(self, exc: ApiError) -> None:
        """403 Forbidden or 404 Not Found: the agent may not read the resource (RBAC), or the API server does not
        serve it. One clear line when it starts (naming the missing rule); retried with back-off meanwhile."""
        if self._stopping.is_set():
            return
        st = self.state
        verb = "list" if self.rv is None else "watch"
        res = self.resource
        st.errors += 1
        st.connected = False
        st.last_error = f"{exc.__class__.__name__}: {exc}"
        if st.forbidden == exc.code and st.forbidden_verb == verb:
            log.debug("%s: still %s", res.name, exc)
            return
        if exc.code == 403:
            what = (f"the API server refuses to let this agent {verb} {res.name} ({exc}): missing RBAC rule "
                    f"{res.rbac_rule(verb)} in the agent's ClusterRole")
        else:
            group = f"{res.api_group}/" if res.api_group else ""
            what = f"the API server does not serve {group}{res.name} ({exc})"
        if res.required:
            message = f"{what}; the cluster zone cannot be answered without {res.name}: not ready until it can"
        else:
            message = f"{what}; the cluster zone is synced without it ({res.without})"
        st.forbidden, st.forbidden_verb, st.forbidden_message = exc.code, verb, message
        if exc.code == 404 and not res.required and st.synced:
            # not served any more (a CRD removed): its objects went with it
            self.rv = None
            self._post(Batch(res, [], begin=True, end=True))
        (log.error if res.required else log.warning)(
            "%s: %s; asking again with back-off (up to every %gs), so a fixed ClusterRole is picked up without "
            "a restart", res.name, message, self.timing.forbidden_max)
        self.on_access()

    def _get(self, params: dict[str, str], *, read: float) -> Any:
        if self._stopping.is_set():
            raise _Stopped
        if self.resource.field_selector:
            params["fieldSelector"] = self.resource.field_selector
        if self.resource.label_selector:
            params["labelSelector"] = self.resource.label_selector
        resp = self.http.get(self.resource.path, params, connect=self.timing.connect_timeout, read=read)
        self.state.last_contact = self.clock()
        if self.state.forbidden:
            log.info("%s: the API server lets this agent read it again", self.resource.name)
            self.state.forbidden, self.state.forbidden_verb, self.state.forbidden_message = 0, "", ""
            self.on_access()
        return resp

    def _list(self) -> None:
        """A full list from the watch cache (resourceVersion=0, as client-go's reflector: never a quorum read of
        etcd), handed to the index as one relist (mark and sweep). The limit is sent as client-go's pager does;
        the watch cache ignores it for resourceVersion=0 and answers in one piece, a server that pages anyway is
        followed through its continue tokens. Each body is decoded item by item as it arrives (ListBody) and
        handed over in a batch per piece read, as a WatchList's events are: neither the body nor the tree of
        its objects is ever held whole."""
        res = self.resource
        params = {"resourceVersion": "0", "limit": str(res.page_size)}
        self._asked_stream = False
        first = True
        while True:
            resp = self._get(params, read=self.timing.request_timeout)
            reader = ListBody()
            changes: list[SlimChange] = []
            skipped = 0
            clean = False
            try:
                for segment in resp.stream(LIST_READ):
                    if self._stopping.is_set():
                        raise _Stopped
                    self.state.last_contact = self.clock()
                    for obj in reader.feed(segment):
                        skipped += self._slim_into(changes, obj)
                    if changes or skipped:  # a batch per piece read, as a WatchList's events come
                        self._post(Batch(res, changes, skipped, begin=first))
                        first, changes, skipped = False, [], 0
                for obj in reader.close():
                    skipped += self._slim_into(changes, obj)
                clean = True
            except ApiError as exc:
                raise ApiError(f"{res.name}: malformed list response: {exc}") from None
            finally:
                if not clean:
                    resp.close()
                resp.release_conn()
            self.state.last_contact = self.clock()
            meta = reader.head.get("metadata")
            if not isinstance(meta, dict) or reader.head.get("items") is not None:  # items not an array
                raise ApiError(f"{res.name}: malformed list response (metadata or items not as a list has them)")
            rv = meta.get("resourceVersion")
            if not isinstance(rv, str) or not rv:
                raise ApiError(f"{res.name}: list response without metadata.resourceVersion")
            self._post(Batch(res, changes, skipped, begin=first))
            first = False
            cont = meta.get("continue")
            if not cont:
                break
            params.pop("resourceVersion", None)  # a continue token carries its own
            params["continue"] = str(cont)
        self._post(Batch(res, [], end=True))
        self.rv = rv
        self.state.resource_version = rv
        self.state.lists += 1
        self.state.initial_state = "list"
        self._wait_applied()
        release_free_heap()  # what the relist's sweep let go of

    def _slim_into(self, changes: list[SlimChange], obj: Any) -> int:
        """Append the slim change of one listed object; 1 when it was invalid (skipped), else 0."""
        try:
            changes.append(change_of(self.resource.kind, ADDED, obj))
        except ObjectError as exc:
            log.warning("skipping invalid object: %s", exc)
            return 1
        return 0

    def _watch(self) -> bool:
        """One watch request, to its end; True when it delivered anything or lasted a while (healthy).

        Without a resourceVersion it is a WatchList (`sendInitialEvents=true`, from resourceVersion 0: the watch
        cache's state, no etcd read): the initial state arrives as ADDED events, handed to the index as one relist,
        up to the BOOKMARK annotated `k8s.io/initial-events-end: "true"`, whose resourceVersion is where the
        stream goes on from. A bookmark without it, or the stream ending before it, means the server does not
        serve the stream (an older API server ignores sendInitialEvents): _StreamRefused.
        """
        timeout = max(1, int(self.timing.watch_timeout * (1 + self.rng())))
        params = {
            "watch": "1",
            "resourceVersion": self.rv or "0",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout),
        }
        initial = self._asked_stream = self.rv is None
        if initial:
            params["sendInitialEvents"] = "true"
            params["resourceVersionMatch"] = "NotOlderThan"
        read = timeout + self.timing.read_slack
        resp = self._get(params, read=min(read, self.timing.initial_events_timeout) if initial else read)
        opened = self.clock()
        self._read_timeout = read
        self._initial, self._initial_began = initial, False
        self._resp = resp
        self.state.watches += 1
        self.state.connected = True
        progressed = False
        clean = False
        try:
            if self._stopping.is_set():
                raise _Stopped
            pending = b""
            for segment in resp.stream(65536):
                if self._stopping.is_set():
                    raise _Stopped
                self.state.last_contact = self.clock()
                lines = (pending + segment).split(b"\n")
                pending = lines.pop()
                if self._events(lines):
                    progressed = True
                if self._initial and self.clock() - opened > self.timing.initial_events_timeout:
                    waited = self.timing.initial_events_timeout
                    raise _StreamRefused(f"no initial-events-end bookmark within {waited:g}s")
            if pending.strip() and self._events([pending]):
                progressed = True
            if self._initial:
                raise _StreamRefused("the stream ended before its initial-events-end bookmark")
            clean = True
        except urllib3.exceptions.ReadTimeoutError:
            if self._initial:
                raise _StreamRefused(f"silent for {self.timing.initial_events_timeout:g}s before its "
                                     "initial-events-end bookmark") from None
            raise
        finally:
            self._initial = False
            self._resp = None
            self.state.connected = False
            if not clean:
                resp.close()
            resp.release_conn()
        return progressed or self.clock() - opened >= HEALTHY_WATCH

    def _events(self, lines: list[bytes]) -> bool:
        """Turn watch lines into one batch for the loop; True when any line was an event or bookmark.
        During a WatchList's initial state the first batch begins a relist and the end bookmark ends it."""
        changes: list[SlimChange] = []
        skipped = 0
        seen = False
        try:
            for line in lines:
                if not line.strip():
                    continue
                seen = True
                change = self._event(line)
                if change is None:
                    continue
                if change is _END:
                    self._post(self._batch(changes, skipped, end=True))
                    changes, skipped = [], 0
                    self._initial_done()
                elif isinstance(change, SlimChange):
                    changes.append(change)
                else:
                    skipped += 1
        finally:
            if changes or skipped:
                self._post(self._batch(changes, skipped))
        return seen

    def _batch(self, changes: list[SlimChange], skipped: int, *, end: bool = False) -> Batch:
        begin = self._initial and not self._initial_began
        if begin:
            self._initial_began = True
        return Batch(self.resource, changes, skipped, begin=begin or (end and not self._initial_began), end=end)

    def _initial_done(self) -> None:
        """The end bookmark of a WatchList: the index holds the whole state; live events follow (read with the
        watch's own timeout from now on)."""
        self._initial = False
        sock = getattr(getattr(self._resp, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.settimeout(self._read_timeout)
        self.state.lists += 1
        self.state.initial_state = "stream"
        self._wait_applied()
        release_free_heap()

    def _event(self, line: bytes) -> SlimChange | ObjectError | object | None:
        try:
            ev = orjson.loads(line)
            typ = ev["type"]
            obj = ev["object"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise ApiError(f"{self.resource.name}: malformed watch event {line[:200]!r}") from None
        if not isinstance(obj, dict):
            raise ApiError(f"{self.resource.name}: watch event without an object")
        if typ == "ERROR":
            code = obj.get("code")
            raise status_error(code if isinstance(code, int) else 0, obj)
        meta = obj.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        now_wall, now = time.time(), self.clock()
        self.state.last_event_wall, self.state.last_event = now_wall, now
        if typ == "BOOKMARK":
            self.state.bookmarks += 1
            if self._initial:
                annotations = meta.get("annotations") if isinstance(meta, dict) else None
                if not isinstance(annotations, dict) or annotations.get(INITIAL_EVENTS_END) != "true":
                    raise _StreamRefused(f"a bookmark without the {INITIAL_EVENTS_END} annotation")
                if not isinstance(rv, str) or not rv:
                    raise ApiError(f"{self.resource.name}: initial-events-end bookmark without a resourceVersion")
                self._advance(rv)
                return _END
            self._advance(rv)
            return None
        if typ not in (ADDED, MODIFIED, DELETED):
            raise ApiError(f"{self.resource.name}: unknown watch event type {typ!r}")
        self.state.events += 1
        if not self._initial:  # an initial event's resourceVersion is its object's, not a point in the stream
            self._advance(rv)
        try:
            return change_of(self.resource.kind, typ, obj)
        except ObjectError as exc:
            log.warning("skipping invalid object: %s", exc)
            return exc

    def _advance(self, rv: Any) -> None:
        if isinstance(rv, str) and rv:
            self.rv = rv
            self.state.resource_version = rv

    def _wait_applied(self) -> None:
        """Block until the loop has applied every batch posted so far."""
        for taken in range(SLOTS_IN_FLIGHT):
            while not self._slots.acquire(timeout=0.25):
                if self._stopping.is_set():
                    for _ in range(taken):
                        self._slots.release()
                    raise _Stopped
        for _ in range(SLOTS_IN_FLIGHT):
            self._slots.release()

    def _post(self, batch: Batch) -> None:
        """Hand a batch to the loop; blocks while SLOTS_IN_FLIGHT batches are still unapplied."""
        while not self._slots.acquire(timeout=0.25):
            if self._stopping.is_set():
                raise _Stopped
        try:
            self._post_to_loop(batch)
        except RuntimeError:  # the loop is closed: we are shutting down
            self._slots.release()
            raise _Stopped from None
        self.state.skipped += batch.skipped
