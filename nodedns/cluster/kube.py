"""Keep the index in sync with the Kubernetes API: state from the watch cache, then a watch, per resource, in threads.

Each `Watcher` runs the watch loop of one resource in its own named daemon thread, with blocking
HTTP through the `kubernetes` package (its configuration loaders and its urllib3 pool; raw JSON
streams, never client model objects):

    no resourceVersion yet       the state from the watch cache: a WatchList stream (sendInitialEvents,
                                 resourceVersion=0) to its initial-events-end bookmark, else (a server
                                 that refused it: 422/400, or a bookmark without the annotation; for the
                                 life of the process) a list with resourceVersion=0; one relist batch
                                 per page or stream read, the index sweeps what it did not name
    watch from resourceVersion   allowWatchBookmarks, timeoutSeconds; every event and bookmark
                                 moves the resourceVersion (a WatchList goes on as the watch)
      ADDED/MODIFIED/DELETED     slim `Change` to the index
      BOOKMARK                   resourceVersion only
      ERROR 410 or HTTP 410      relist after a random share of the relist window (--kube-relist-spread
                                 scaled to the cluster: a compaction expires the whole fleet at once)
      HTTP 429 or 503            wait Retry-After plus a random share of the window
      ERROR other, HTTP 5xx,     count, back off with jitter, watch again from the last
      dropped connection         resourceVersion (failing again: an outage, spread over the window)
      silent stream              the read timeout (a bit over timeoutSeconds) fires: as above
      stream ends cleanly        watch again at once from the last resourceVersion (with
                                 back-off if it ended within a second and carried nothing)
      HTTP 401                   reload the credentials (the projected token rotates), back off
      HTTP 403 or 404            the resource is refused (RBAC) or not served: one log line naming
                                 the missing rule, asked again with its own back-off (1 s .. 60 s);
                                 an optional resource (this node's Node and Pods, ServiceImports) is
                                 synced without it (a condition in status(), never a readiness
                                 blocker); a 404 on an optional one also drops what an earlier list
                                 gave (a CRD removed takes its objects with it); a required one
                                 keeps the agent unready with a reason naming resource and verb

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
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import orjson
import urllib3
from urllib3.exceptions import HTTPError as TransportError

from nodedns.cluster import objects as k8s
from nodedns.cluster.index import ADDED, DELETED, MODIFIED, Change, Index, change_of
from nodedns.errors import ApiError, ApiGone, ApiUnauthorized, ConfigError, ObjectError
from nodedns.runtime.heap import release_free_heap
from nodedns.runtime.logutil import Consolidated

log = logging.getLogger("nodedns.kube")

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
USER_AGENT = "nodedns"
SLOTS_IN_FLIGHT = 4  # batches per resource handed to the loop and not yet applied
ERROR_BODY_MAX = 64 * 1024
HEALTHY_WATCH = 1.0  # seconds: a watch that ends sooner without any event is retried with back-off
RETRY_AFTER_MAX = 600.0  # seconds: a larger Retry-After is taken as this
INITIAL_EVENTS_END = "k8s.io/initial-events-end"  # the annotation of the BOOKMARK that ends a WatchList's initial state
# the cluster size at which --kube-relist-spread is the whole window: the Services, EndpointSlices and Namespaces
# of a 5,000-node cluster (10,000 + 10,500 + 1,000); a smaller cluster spreads over its share of it
SPREAD_FULL_AT = 20_000
SPREAD_FLOOR = 0.05  # the smallest share of the window (a tiny cluster still spreads over a little)


M_ARENA_MAX = -8  # glibc's mallopt parameter
WATCH_ARENAS = 2


def limit_arenas(arenas: int = WATCH_ARENAS) -> None:
    """At most `arenas` glibc malloc arenas for the process (`mallopt(M_ARENA_MAX)`); a no-op without
    glibc, and when MALLOC_ARENA_MAX is set in the environment (the operator's choice wins).

    glibc gives every thread that allocates its own arena (up to 8 per core), each keeping what was
    freed in it: the watch threads (one per resource) would hold one each. Their allocations are
    serialized by the GIL anyway, so sharing two costs no speed; at 5,000 nodes it saves ~3 MB of
    RSS (~6 MB PSS). Called before the first watch thread starts.
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(M_ARENA_MAX, arenas)


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
IMPORTED_SLICES = Resource(k8s.IMPORTED_SLICE, "imported-endpointslices", "/apis/discovery.k8s.io/v1/endpointslices",
                           page_size=100, label_selector=k8s.MCS_SERVICE_NAME_LABEL)


def resources(*, pods: str, node_name: str, multicluster: bool = False) -> tuple[Resource, ...]:
    """Services, EndpointSlices, Namespaces; all Pods in `pods verified` mode, else this node's Pods;
    this node's own Node (a list and watch narrowed to it by `metadata.name`: zone, region, Pod CIDRs);
    with `multicluster`, ServiceImports and the imported EndpointSlices."""
    out = [SERVICES, ENDPOINTSLICES, NAMESPACES]
    if multicluster:
        out += [SERVICE_IMPORTS, IMPORTED_SLICES]
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
# Where the API server is, and the credentials


class ApiSource:
    """A kubeconfig file, or the in-cluster service account; `load()` (re)reads it into a Configuration."""

    def __init__(
        self,
        *,
        kubeconfig: str | None = None,
        service_account_dir: str = SERVICE_ACCOUNT_DIR,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.service_account_dir = service_account_dir
        self.environ = os.environ if environ is None else environ

    def describe(self) -> str:
        if self.kubeconfig:
            return f"kubeconfig {self.kubeconfig}"
        return f"in-cluster service account ({self.service_account_dir})"

    def load(self) -> Any:
        """A fresh `kubernetes.client.Configuration`; raises ConfigError naming the source."""
        from kubernetes import client, config
        from kubernetes.config import incluster_config

        load_kube_config: Any = config.load_kube_config  # the loaders are untyped
        in_cluster_loader: Any = incluster_config.InClusterConfigLoader
        cfg = client.Configuration()
        try:
            if self.kubeconfig:
                if not os.path.isfile(self.kubeconfig):
                    raise ConfigError("kubeconfig", f"{self.kubeconfig}: no such file")
                load_kube_config(config_file=self.kubeconfig, client_configuration=cfg, persist_config=False)
            else:
                if not self.environ.get("KUBERNETES_SERVICE_HOST"):
                    raise ConfigError(
                        "kubeconfig",
                        "no cluster source: not in a cluster (KUBERNETES_SERVICE_HOST is unset); "
                        "give --kubeconfig FILE or --manifests FILE",
                    )
                in_cluster_loader(
                    token_filename=os.path.join(self.service_account_dir, "token"),
                    cert_filename=os.path.join(self.service_account_dir, "ca.crt"),
                    environ=self.environ,
                ).load_and_set(cfg)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - the loaders raise many kinds; all mean "unusable"
            raise ConfigError("kubeconfig", f"{self.describe()}: {exc}") from None
        if not getattr(cfg, "host", ""):
            raise ConfigError("kubeconfig", f"{self.describe()}: no API server address")
        return cfg


class Http:
    """Blocking GETs to the API server, for the watcher threads only: auth header, raw responses."""

    def __init__(self, source: ApiSource) -> None:
        self.source = source
        self._lock = threading.Lock()
        self.generation = 0
        self.reloads = 0
        self._set(source.load())

    def _set(self, cfg: Any) -> None:
        from kubernetes.client import rest

        self.cfg = cfg
        self.base = str(cfg.host).rstrip("/")
        self.pool: urllib3.PoolManager = rest.RESTClientObject(cfg).pool_manager
        self.generation += 1

    def reload(self, seen: int) -> None:
        """Re-read the source (a rotated token) unless another thread already did since generation `seen`."""
        with self._lock:
            if self.generation != seen:
                return
            old = self.pool
            try:
                self._set(self.source.load())
            except ConfigError as exc:
                log.warning("cannot reload API credentials: %s", exc)
                return
            self.reloads += 1
            old.clear()

    def headers(self) -> dict[str, str]:
        out = {"Accept": "application/json", "User-Agent": USER_AGENT}
        # auth_settings() runs the loaders' refresh hook: in-cluster it re-reads the token file each minute
        for setting in self.cfg.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                out[str(setting["key"])] = str(setting["value"])
        return out

    def get(self, path: str, params: Mapping[str, str], *, connect: float, read: float) -> Any:
        """The open response (status 200, body unread), or ApiError/ApiGone/ApiUnauthorized."""
        url = f"{self.base}{path}?{urlencode(params)}"
        resp = self.pool.request(
            "GET",
            url,
            headers=self.headers(),
            preload_content=False,
            timeout=urllib3.Timeout(connect=connect, read=read),
            retries=False,
            redirect=False,
        )
        if resp.status == 200:
            return resp
        try:
            body = resp.read(ERROR_BODY_MAX)
        finally:
            resp.release_conn()
        raise status_error(resp.status, body, retry_after=retry_after_of(resp.headers.get("Retry-After")))

    def close(self) -> None:
        self.pool.clear()


def retry_after_of(value: str | None) -> float | None:
    """A Retry-After header in seconds (the API server sends delta-seconds); None when absent or a date."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX) if seconds == seconds else None


def status_error(code: int, body: bytes | Mapping[str, Any], *, retry_after: float | None = None) -> ApiError:
    """The exception for an HTTP error or an ERROR watch event carrying a Status object."""
    status: Any = body
    if isinstance(body, bytes):
        try:
            status = json.loads(body)
        except ValueError:
            status = {}
    message = ""
    reason = ""
    if isinstance(status, Mapping):
        message = str(status.get("message") or "")
        reason = str(status.get("reason") or "")
        details = status.get("details")
        if retry_after is None and isinstance(details, Mapping) and isinstance(details.get("retryAfterSeconds"), int):
            retry_after = min(max(float(details["retryAfterSeconds"]), 0.0), RETRY_AFTER_MAX)
    text = f"{code} {reason or 'error'}" + (f": {message}" if message else "")
    if code == 410 or reason in ("Expired", "Gone"):
        return ApiGone(text, code=410)
    if code == 401:
        return ApiUnauthorized(text, code=401)
    return ApiError(text, code=code, retry_after=retry_after)


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
    changes: list[Change]
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
        self._errors = Consolidated(log, f"watch {resource.name}")

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
        followed through its continue tokens."""
        res = self.resource
        params = {"resourceVersion": "0", "limit": str(res.page_size)}
        self._asked_stream = False
        first = True
        while True:
            resp = self._get(params, read=self.timing.request_timeout)
            try:
                data = resp.read()
            finally:
                resp.release_conn()
            self.state.last_contact = self.clock()
            body = orjson.loads(data)
            del data
            meta = body.get("metadata") if isinstance(body, dict) else None
            items = body.get("items") if isinstance(body, dict) else None
            if not isinstance(meta, dict) or not isinstance(items, list | None):
                raise ApiError(f"{res.name}: malformed list response")
            rv = meta.get("resourceVersion")
            if not isinstance(rv, str) or not rv:
                raise ApiError(f"{res.name}: list response without metadata.resourceVersion")
            changes: list[Change] = []
            skipped = 0
            for obj in items or ():
                try:
                    changes.append(change_of(res.kind, ADDED, obj))
                except ObjectError as exc:
                    skipped += 1
                    log.warning("skipping invalid object: %s", exc)
            del body, items
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
        release_free_heap()  # the pages, and what the relist's sweep let go of

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
        changes: list[Change] = []
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
                elif isinstance(change, Change):
                    changes.append(change)
                else:
                    skipped += 1
        finally:
            if changes or skipped:
                self._post(self._batch(changes, skipped))
        return seen

    def _batch(self, changes: list[Change], skipped: int, *, end: bool = False) -> Batch:
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

    def _event(self, line: bytes) -> Change | ObjectError | object | None:
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


# ----------------------------------------------------------------------------------------------
# All resources, on the loop


@dataclass(slots=True)
class _Supervised:
    watcher: Watcher
    task: asyncio.Task[None] | None = None
    thread: threading.Thread | None = None


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
            w = Watcher(res, http=self.http, post=self._post, timing=self.timing, rng=self.rng, clock=self.clock,
                        on_access=self._access_changed, streams=self.streams, spread=self.spread)
            sup = _Supervised(w)
            self._watchers[res.name] = sup
            sup.task = asyncio.create_task(self._supervise(sup), name=f"watch:{res.name}")
        if not self.resources:
            self._set_synced()

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
        while not self._stopping:
            done: asyncio.Future[None] = self._loop.create_future()
            sup.thread = threading.Thread(target=self._thread_main, args=(w, done), name=f"watch-{w.resource.name}",
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
        sup = self._watchers[batch.resource.name]
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
                    log.info("%s listed", batch.resource.name)
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
        states = [s.watcher.state for s in self._watchers.values()]
        if all(st.synced or (not st.required and st.forbidden) for st in states):
            self._set_synced()

    def _set_synced(self) -> None:
        self.index.mark_synced()
        self.synced_after = self.clock() - self.started
        self.synced.set()
        counts = ", ".join(f"{k} {v}" for k, v in self.index.counts().items())
        without = [name for name, s in self._watchers.items() if not s.watcher.state.synced]
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
