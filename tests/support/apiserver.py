"""A test double of the Kubernetes API server that speaks the real list/watch protocol (aiohttp).

    with FakeApiServer() as api:
        api.put("Service", svc)                     # ADDED or MODIFIED; returns the resourceVersion
        api.delete("Service", "default", "web")     # DELETED
        api.write_kubeconfig(tmp_path / "kubeconfig")  # the real client code talks to it
        api.inject("services", "watch", Fault(drop_after=1))

It runs its own event loop in a daemon thread on 127.0.0.1 port 0 (plain HTTP, or TLS given a
certificate) and holds every object of every resource, like etcd behind the API server:

- lists: `limit`/`continue` pages of one consistent snapshot; the list's `metadata.resourceVersion`;
  a continue token whose snapshot was compacted answers 410 Expired.
- lists with `resourceVersion=0` (or `resourceVersionMatch=NotOlderThan`) are served as the API server's
  watch cache serves them: the current state in one piece, `limit` ignored (no continue token).
- WatchList (`watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`):
  with `watch_list="serve"`, ADDED for every object, then a BOOKMARK annotated
  `k8s.io/initial-events-end: "true"` at the state's resourceVersion, then live events; `"422"` (the
  default: a server with the WatchList feature gated off) or `"400"` answers that status; `"ignore"`
  treats it as a plain watch (an older server: initial ADDED events, bookmarks without the annotation).
- accounting: every request in `requests` is classed (`Request.cost`) as a `watch-cache` read (a list
  with resourceVersion 0 or NotOlderThan), a `consistent` read (a list without resourceVersion, with
  `resourceVersionMatch=Exact`, or a continue page: etcd) or a `stream` (a watch), with the bytes sent
  for it (`Request.sent`); `peak_lists` is the most initial-state transfers (lists and WatchLists before
  their end bookmark) in flight at once.
- watches: `?watch=1&resourceVersion=N`: a chunked response, one JSON event per line, replaying
  the retained history after N, then live events; `allowWatchBookmarks` -> BOOKMARK events every
  `bookmark_interval`; `timeoutSeconds` ends the stream cleanly. N older than the retained history
  (`compact()`, or the history window overflowing) -> an ERROR event with a 410 Status (what real
  servers send), or HTTP 410 with `gone_as_http=True`. No N (or "0") -> ADDED for every object first.
- `fieldSelector`: `=`, `==`, `!=` on spec.nodeName, metadata.name, metadata.namespace;
  `labelSelector`: `key`, `!key`, `key=value`, `key==value`, `key!=value`; an object that stops
  matching is sent as DELETED.
- CRDs: ServiceImports (`multicluster.x-k8s.io/v1alpha1`), DNSPolicies and ClusterDNSPolicies
  (`nodedns.io/v1alpha1`) are served like the built-in kinds; `remove_crd("serviceimports")`
  makes their path answer 404 (as a cluster without the CRD: the
  plain `404 page not found`), `install_crd` brings it back; `forbid(resource)` answers 403 (a
  ClusterRole without the grant) and cuts open watches, `allow(resource)` lifts it.
- bearer tokens: with `tokens` set, any other token gets 401.
- RBAC and API discovery: `deny("nodes")` answers every list/watch of a resource 403 Forbidden (the
  real server's Status and message), `deny("endpointslices", 404)` as if the API group were not
  served, `deny(..., verbs=("watch",))` only some verbs; `allow("nodes")` lifts it (a fixed ClusterRole).
- outages: `go_down()` stops listening and cuts every open connection (clients get "connection
  refused", as from a dead API server) while the objects stay and can still be changed;
  `come_back()` listens again on the same port.
- `expire()`: an etcd compaction past every watcher: every open watch gets an ERROR 410 and ends.
- faults, consumed in order per (resource, verb), verb `list`, `continue` (a list page after the
  first) or `watch`: an HTTP status, a delay before answering, a dropped connection after N events,
  a stalled stream (headers, then silence), an ERROR event.
Every request is recorded in `requests` (verb, resource, query, token).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import copy
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from tests.support import cluster_fixture as cf

T = TypeVar("T")


@dataclass(frozen=True)
class Kind:
    kind: str
    resource: str
    api_version: str
    path: str
    namespaced: bool = True


KINDS = {
    k.kind: k
    for k in (
        Kind("Service", "services", "v1", "/api/v1/services"),
        Kind("EndpointSlice", "endpointslices", "discovery.k8s.io/v1", "/apis/discovery.k8s.io/v1/endpointslices"),
        Kind("Namespace", "namespaces", "v1", "/api/v1/namespaces", namespaced=False),
        Kind("Pod", "pods", "v1", "/api/v1/pods"),
        Kind("Node", "nodes", "v1", "/api/v1/nodes", namespaced=False),
        Kind("ServiceImport", "serviceimports", "multicluster.x-k8s.io/v1alpha1",
             "/apis/multicluster.x-k8s.io/v1alpha1/serviceimports"),
        Kind("DNSPolicy", "dnspolicies", "nodedns.io/v1alpha1", "/apis/nodedns.io/v1alpha1/dnspolicies"),
        Kind("ClusterDNSPolicy", "clusterdnspolicies", "nodedns.io/v1alpha1",
             "/apis/nodedns.io/v1alpha1/clusterdnspolicies", namespaced=False),
        Kind("ConfigMap", "configmaps", "v1", "/api/v1/configmaps"),
    )
}
# namespaced paths (`/api/v1/namespaces/{namespace}/configmaps`): a list or watch of one namespace's objects
NAMESPACED_PATHS = {"ConfigMap": "/api/v1/namespaces/{namespace}/configmaps"}
# status subresources: a JSON merge patch of `status` (with metadata.resourceVersion as a precondition)
STATUS_PATHS = {"DNSPolicy": "/apis/nodedns.io/v1alpha1/namespaces/{namespace}/dnspolicies/{name}/status",
                "ClusterDNSPolicy": "/apis/nodedns.io/v1alpha1/clusterdnspolicies/{name}/status"}
BY_RESOURCE = {k.resource: k for k in KINDS.values()}


@dataclass
class Fault:
    """One misbehaviour for the next matching request."""

    status: int = 0  # answer with this HTTP status and a Status body
    reason: str = ""
    delay: float = 0.0  # wait this long before answering (a slow server)
    drop_after: int | None = None  # watch: abort the connection after this many events (no final chunk)
    stall: float = 0.0  # watch: headers, then silence for this long (no events, no bookmarks)
    error_event: int = 0  # watch: send an ERROR event with this code, then end the stream
    body: bytes | None = None  # answer 200 with exactly these bytes (list), or stream them and end (watch)
    retry_after: int | None = None  # with status: a Retry-After header (seconds), as API Priority and Fairness sends


WATCH_CACHE = "watch-cache"
CONSISTENT = "consistent"
STREAM = "stream"


def cost_of(verb: str, query: Mapping[str, str]) -> str:
    """How the real API server serves a request: from its watch cache, from etcd (a consistent, quorum read), or
    as a stream. A list without resourceVersion, with resourceVersionMatch=Exact, or a continue page is etcd's."""
    if verb in ("watch", "watchlist"):
        return STREAM
    if verb == "continue" or not query.get("resourceVersion") or query.get("resourceVersionMatch") == "Exact":
        return CONSISTENT
    return WATCH_CACHE


@dataclass
class Request:
    verb: str  # list | continue | watch | watchlist (a watch with sendInitialEvents)
    resource: str
    query: dict[str, str]
    token: str | None
    at: float = 0.0  # time.monotonic() it arrived
    sent: int = 0  # bytes of body sent for it

    @property
    def cost(self) -> str:
        return cost_of(self.verb, self.query)

    @property
    def bookmarks(self) -> bool:
        return self.query.get("allowWatchBookmarks") in ("true", "1")


@dataclass
class _Obj:
    rv: int
    body: bytes
    fields: dict[str, str]


@dataclass
class _Event:
    rv: int
    type: str
    body: bytes
    fields: dict[str, str]
    prev_fields: dict[str, str] | None  # the fields before a MODIFIED


@dataclass
class _Store:
    kind: Kind
    objects: dict[tuple[str, str], _Obj] = field(default_factory=dict)
    history: collections.deque[_Event] = field(default_factory=collections.deque)
    compacted: int = 0  # the newest resourceVersion whose event is forgotten
    watchers: set[asyncio.Queue[_Event]] = field(default_factory=set)
    transports: set[asyncio.BaseTransport] = field(default_factory=set)


EXPIRED = "EXPIRED"  # a queue marker: the watch gets an ERROR 410 event and ends
INITIAL_END = "INITIAL-END"  # a backlog marker: the WatchList's end-of-initial-state bookmark goes here
INITIAL_END_ANNOTATION = "k8s.io/initial-events-end"
LIST_CHUNK = 256 * 1024
LABEL = "label:"  # the fields of an object's labels: "label:<key>"


def _fields(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    labels = meta.get("labels") or {}
    return {
        "metadata.name": str(meta.get("name", "")),
        "metadata.namespace": str(meta.get("namespace", "")),
        "spec.nodeName": str(spec.get("nodeName", "") if isinstance(spec, Mapping) else ""),
        **{LABEL + str(k): str(v) for k, v in (labels.items() if isinstance(labels, Mapping) else ())},
    }


Selector = list[tuple[str, bool | None, str]]  # (field, equal? or None: exists / "!" key: absent, value)


def parse_label_selector(text: str) -> Selector:
    """`a,!b,c=d,e!=f` -> [(label field, equal? or None for existence, value)]."""
    out: Selector = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "!=" in part:
            key, value = part.split("!=", 1)
            out.append((LABEL + key.strip(), False, value.strip()))
        elif "=" in part:
            key, value = part.replace("==", "=").split("=", 1)
            out.append((LABEL + key.strip(), True, value.strip()))
        elif part.startswith("!"):
            out.append(("!" + LABEL + part[1:].strip(), None, ""))
        elif " " in part or "(" in part:
            raise ValueError(f"unsupported label selector {part!r}")
        else:
            out.append((LABEL + part, None, ""))
    return out


def parse_selector(text: str) -> Selector:
    """`a=b,c!=d` -> [(field, equal?, value)]; an unsupported field raises ValueError (like a 400)."""
    out: Selector = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "!=" in part:
            key, value = part.split("!=", 1)
            eq = False
        elif "==" in part:
            key, value = part.split("==", 1)
            eq = True
        elif "=" in part:
            key, value = part.split("=", 1)
            eq = True
        else:
            raise ValueError(f"invalid selector {part!r}")
        if key not in ("spec.nodeName", "metadata.name", "metadata.namespace"):
            raise ValueError(f"field label not supported: {key}")
        out.append((key, eq, value))
    return out


def _matches(selector: Selector, fields: Mapping[str, str] | None) -> bool:
    if fields is None:
        return False
    for k, eq, v in selector:
        if eq is None:
            if (k[1:] not in fields) if k.startswith("!") else (k in fields):
                continue
            return False
        if eq and k.startswith(LABEL) and k not in fields:
            return False
        if (fields.get(k, "") == v) != eq:
            return False
    return True


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class FakeApiServer:
    """The API server double; see the module docstring."""

    def __init__(
        self,
        *,
        tokens: Iterable[str] | None = None,
        history: int = 10_000,
        bookmark_interval: float | None = None,
        gone_as_http: bool = False,
        tls: tuple[str, str] | None = None,
        track_sent: bool = False,
        watch_list: str = "422",
        page_cached_lists: bool = False,
    ) -> None:
        self.tokens = set(tokens) if tokens is not None else None
        self.history_limit = history
        self.bookmark_interval = bookmark_interval
        self.gone_as_http = gone_as_http
        self.tls = tls
        self.track_sent = track_sent
        if watch_list not in ("serve", "422", "400", "ignore"):
            raise ValueError(f"watch_list: serve, 422, 400 or ignore, not {watch_list!r}")
        self.watch_list = watch_list
        self.page_cached_lists = page_cached_lists  # page resourceVersion=0 lists too (a newer server's cache)
        self.lists_in_flight = 0
        self.peak_lists = 0
        self.sent: dict[int, float] = {}  # resourceVersion -> time.monotonic() the event was written
        self.rv = 1000
        self.stores = {k.resource: _Store(k) for k in KINDS.values()}
        self.faults: dict[tuple[str, str], collections.deque[Fault]] = collections.defaultdict(collections.deque)
        self.denied: dict[str, tuple[int, frozenset[str]]] = {}  # resource -> (403 | 404, verbs)
        self.requests: list[Request] = []
        self.open_watches = 0
        self.absent: set[str] = set()  # resources whose CRD is not installed: 404
        self.status_patches: list[tuple[str, str, str, Any]] = []  # (kind, namespace, name, the patch) applied
        self._snapshots: dict[int, tuple[int, list[bytes]]] = {}
        self._snap_id = 0
        self.loop: asyncio.AbstractEventLoop
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self.down = False  # an outage (go_down): a request that slipped in as it began is cut, never answered
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-apiserver", daemon=True)
        self.port = 0
        self._stopped: asyncio.Event

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> FakeApiServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise TimeoutError("fake API server did not start")
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(10)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        app = web.Application()
        for kind in KINDS.values():
            app.router.add_get(kind.path, self._handler(kind))
        for kind_name, path in NAMESPACED_PATHS.items():
            app.router.add_get(path, self._handler(KINDS[kind_name]))
        for kind_name, path in STATUS_PATHS.items():
            app.router.add_patch(path, self._status_handler(KINDS[kind_name]))
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        self._runner = runner
        await self._listen(0)
        self.port = runner.addresses[0][1]
        self._ready.set()
        await self._stopped.wait()
        await self._cut_connections()  # watch streams too: left to the runner, a slow one outlived the loop
        await runner.cleanup()

    async def _cut_connections(self) -> None:
        """Abort every open connection (watch streams, idle keep-alive ones), three sweeps 50 ms apart (a
        connection accepted as the listener closed gets its handler late), and let the loop close their
        sockets: none is left for the garbage collector to find open in a later test."""
        assert self._runner is not None and self._runner.server is not None
        for _ in range(3):
            for handler in list(self._runner.server.connections):
                if handler.transport is not None:
                    handler.transport.abort()
            await asyncio.sleep(0.05)

    async def _listen(self, port: int) -> None:
        assert self._runner is not None
        ctx = None
        if self.tls is not None:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(*self.tls)
        self._site = web.TCPSite(self._runner, "127.0.0.1", port, ssl_context=ctx, reuse_address=True)
        await self._site.start()

    def go_down(self) -> None:
        """An outage: stop listening and cut every open connection; the objects stay (and may change)."""

        async def down() -> None:
            assert self._site is not None
            self.down = True
            await self._site.stop()
            self._site = None
            for store in self.stores.values():
                store.transports.clear()
            await self._cut_connections()

        asyncio.run_coroutine_threadsafe(down(), self.loop).result(30)

    def come_back(self) -> None:
        """The end of an outage: listen again on the same port."""
        async def up() -> None:
            self.down = False
            await self._listen(self.port)

        asyncio.run_coroutine_threadsafe(up(), self.loop).result(30)

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def write_kubeconfig(
        self, path: str | Path, *, token: str | None = None, token_file: str | None = None, ca_file: str | None = None
    ) -> str:
        cluster: dict[str, Any] = {"server": self.url}
        if ca_file:
            cluster["certificate-authority"] = ca_file
        user: dict[str, Any] = {}
        if token:
            user["token"] = token
        if token_file:
            user["tokenFile"] = token_file
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": cluster}],
            "users": [{"name": "fake", "user": user}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
        Path(path).write_text(json.dumps(doc, indent=2))
        return str(path)

    # -- state (any thread) -------------------------------------------------------------------

    def _call(self, fn: Callable[[], T]) -> T:
        if threading.current_thread() is self._thread:
            return fn()

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def put(self, kind: str, obj: Mapping[str, Any]) -> int:
        """Create or replace an object (ADDED or MODIFIED); the new resourceVersion."""
        return self._call(lambda: self._put(kind, obj))

    def delete(self, kind: str, namespace: str, name: str) -> int | None:
        """Delete an object (DELETED); its final resourceVersion, None when it did not exist."""
        return self._call(lambda: self._delete(kind, namespace, name))

    def load(self, kind: str, objs: Iterable[Mapping[str, Any]]) -> None:
        """Many objects at once (no watcher sees them as events: for initial state; no copies are made)."""
        objs = list(objs)

        def run() -> None:
            store = self.stores[KINDS[kind].resource]
            for obj in objs:
                self.rv += 1
                body, key, fields = self._prepare(store.kind, obj, self.rv, copy_obj=False)
                store.objects[key] = _Obj(self.rv, body, fields)
            store.compacted = self.rv

        self._call(run)

    def compact(self) -> None:
        """Forget every past event: a watch or continue token from before now gets 410."""

        def run() -> None:
            for store in self.stores.values():
                store.history.clear()
                store.compacted = self.rv

        self._call(run)

    def expire(self) -> None:
        """An etcd compaction past every watcher: each open watch gets an ERROR 410 event and ends, and any
        resourceVersion given out so far is too old (the next list's is not)."""

        def run() -> None:
            self.rv += 1
            for store in self.stores.values():
                store.history.clear()
                store.compacted = self.rv
                for q in store.watchers:
                    q.put_nowait(_Event(self.rv, EXPIRED, b"", {}, None))

        self._call(run)

    def inject(self, resource: str, verb: str, fault: Fault, times: int = 1) -> None:
        def run() -> None:
            for _ in range(times):
                self.faults[(resource, verb)].append(fault)

        self._call(run)

    def deny(self, resource: str, code: int = 403, verbs: Iterable[str] = ("list", "watch")) -> None:
        """Answer `code` (403: RBAC says no; 404: not served) to these verbs on the resource until `allow()`."""
        value = (code, frozenset(verbs))

        def run() -> None:
            self.denied[resource] = value

        self._call(run)

    def allow(self, resource: str) -> None:
        self._call(lambda: self.denied.pop(resource, None))

    def kick(self, resource: str | None = None) -> int:
        """Drop every open watch connection (of one resource, or all) abruptly; how many were dropped."""

        def run() -> int:
            n = 0
            for store in self.stores.values():
                if resource in (None, store.kind.resource):
                    for t in list(store.transports):
                        t.abort()  # type: ignore[attr-defined]
                        n += 1
                    store.transports.clear()
            return n

        return self._call(run)

    def set_tokens(self, tokens: Iterable[str] | None) -> None:
        value = set(tokens) if tokens is not None else None

        def run() -> None:
            self.tokens = value

        self._call(run)

    def remove_crd(self, resource: str) -> None:
        """Uninstall a CRD: its objects go (as the API server deletes them), its path answers 404."""

        def run() -> None:
            store = self.stores[resource]
            for key in sorted(store.objects):
                self._delete(store.kind.kind, *key)
            self.absent.add(resource)
            for t in list(store.transports):
                t.abort()  # type: ignore[attr-defined]
            store.transports.clear()

        self._call(run)

    def install_crd(self, resource: str) -> None:
        self._call(lambda: self.absent.discard(resource))

    def forbid(self, resource: str) -> None:
        """Take the grant away: lists and watches of the resource answer 403 (until `allow()`); open
        watches are cut."""

        def run() -> None:
            self.denied[resource] = (403, frozenset(("list", "watch")))
            store = self.stores[resource]
            for t in list(store.transports):
                t.abort()  # type: ignore[attr-defined]
            store.transports.clear()

        self._call(run)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The object as stored now (None: absent)."""

        def run() -> dict[str, Any] | None:
            obj = self.stores[KINDS[kind].resource].objects.get((namespace, name))
            return None if obj is None else json.loads(obj.body)

        return self._call(run)

    def count(self, kind: str) -> int:
        return self._call(lambda: len(self.stores[KINDS[kind].resource].objects))

    def reset_accounting(self) -> None:
        """Forget the requests seen so far and the peak of concurrent lists (a scenario starts)."""

        def run() -> None:
            self.requests = []
            self.peak_lists = self.lists_in_flight

        self._call(run)

    def set_watch_list(self, mode: str) -> None:
        self._call(lambda: setattr(self, "watch_list", mode))

    def requests_for(self, resource: str, verb: str | None = None) -> list[Request]:
        return self._call(lambda: [r for r in self.requests if r.resource == resource and verb in (None, r.verb)])

    # -- state (loop thread) --------------------------------------------------------------------

    def _prepare(
        self, kind: Kind, obj: Mapping[str, Any], rv: int, *, copy_obj: bool = True
    ) -> tuple[bytes, tuple[str, str], dict[str, str]]:
        o = copy.deepcopy(dict(obj)) if copy_obj else dict(obj)
        o.setdefault("kind", kind.kind)
        o.setdefault("apiVersion", kind.api_version)
        meta = o.setdefault("metadata", {})
        if kind.namespaced:
            meta.setdefault("namespace", "default")
        meta.setdefault("uid", f"uid-{meta.get('namespace', '')}-{meta['name']}")
        meta.setdefault("creationTimestamp", "2024-01-01T00:00:00Z")
        meta["resourceVersion"] = str(rv)
        key = (str(meta.get("namespace", "")), str(meta["name"]))
        return json.dumps(o, separators=(",", ":")).encode(), key, _fields(o)

    def _record(self, store: _Store, ev: _Event) -> None:
        store.history.append(ev)
        while len(store.history) > self.history_limit:
            store.compacted = store.history.popleft().rv
        for q in store.watchers:
            q.put_nowait(ev)

    def _put(self, kind_name: str, obj: Mapping[str, Any]) -> int:
        store = self.stores[KINDS[kind_name].resource]
        self.rv += 1
        body, key, fields = self._prepare(store.kind, obj, self.rv)
        old = store.objects.get(key)
        store.objects[key] = _Obj(self.rv, body, fields)
        typ = "MODIFIED" if old is not None else "ADDED"
        self._record(store, _Event(self.rv, typ, body, fields, old.fields if old is not None else None))
        return self.rv

    def _delete(self, kind_name: str, namespace: str, name: str) -> int | None:
        store = self.stores[KINDS[kind_name].resource]
        old = store.objects.pop((namespace, name), None)
        if old is None:
            return None
        self.rv += 1
        obj = json.loads(old.body)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        body = json.dumps(obj, separators=(",", ":")).encode()
        self._record(store, _Event(self.rv, "DELETED", body, old.fields, None))
        return self.rv

    # -- HTTP --------------------------------------------------------------------------------

    def _handler(self, kind: Kind) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.StreamResponse:
            if self.down and request.transport is not None:  # accepted just before the outage began
                request.transport.abort()
            return await self._handle(kind, request)

        return handle

    @staticmethod
    def _json(code: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> web.Response:
        return web.Response(status=code, body=json.dumps(body).encode(), content_type="application/json",
                            headers=headers)

    def _status_handler(self, kind: Kind) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.StreamResponse:
            return self._patch_status(kind, request.match_info.get("namespace", ""), request.match_info["name"],
                                      request.headers.get("Content-Type", ""), await request.read(),
                                      request.headers.get("Authorization", ""))

        return handle

    def _patch_status(self, kind: Kind, namespace: str, name: str, content_type: str, body: bytes,
                      auth: str) -> web.Response:
        """PATCH of a status subresource: a JSON merge patch; only `status` changes (as the real status
        subresource); metadata.resourceVersion, when given, must be the object's (else 409 Conflict)."""
        token = auth.split(" ", 1)[1].strip() if auth.lower().startswith("bearer ") else None
        resource = f"{kind.resource}/status"
        self.requests.append(Request("patch", resource, {}, token, at=time.monotonic(), sent=len(body)))
        if self.tokens is not None and token not in self.tokens:
            return self._json(401, status_body(401, "Unauthorized", "Unauthorized"))
        denied = self.denied.get(resource)
        if denied is not None and "patch" in denied[1]:
            return self._json(denied[0], status_body(denied[0], "Forbidden" if denied[0] == 403 else "NotFound",
                                                     f'{kind.resource}.nodedns.io "{name}" is forbidden: cannot patch '
                                                     f'resource "{resource}"'))
        if content_type.split(";")[0].strip() != "application/merge-patch+json":
            return self._json(415, status_body(415, "UnsupportedMediaType", f"the body of the request was in an "
                                               f"unknown format: {content_type}"))
        store = self.stores[kind.resource]
        old = store.objects.get((namespace, name))
        if old is None:
            return self._json(404, status_body(404, "NotFound", f'{kind.resource}.nodedns.io "{name}" not found'))
        try:
            patch = json.loads(body)
        except ValueError:
            return self._json(400, status_body(400, "BadRequest", "the patch is not JSON"))
        want_rv = (patch.get("metadata") or {}).get("resourceVersion")
        if want_rv and want_rv != str(old.rv):
            return self._json(409, status_body(
                409, "Conflict", f'Operation cannot be fulfilled on {kind.resource}.nodedns.io "{name}": the object '
                "has been modified; please apply your changes to the latest version and try again"))
        obj = json.loads(old.body)
        status = obj.get("status") or {}
        for k, v in (patch.get("status") or {}).items():
            if v is None:
                status.pop(k, None)
            else:
                status[k] = v
        obj["status"] = status
        self.status_patches.append((kind.kind, namespace, name, patch))
        self._put(kind.kind, obj)
        return self._json(200, json.loads(store.objects[(namespace, name)].body))

    async def _handle(self, kind: Kind, request: web.Request) -> web.StreamResponse:
        q = dict(request.query)
        namespace = request.match_info.get("namespace")
        if namespace is not None:  # a namespaced path: that namespace's objects only
            q["fieldSelector"] = ",".join(filter(None, (q.get("fieldSelector", ""),
                                                        f"metadata.namespace={namespace}")))
        auth = request.headers.get("Authorization", "")
        token = auth.split(" ", 1)[1].strip() if auth.lower().startswith("bearer ") else None
        watch = q.get("watch") in ("1", "true")
        verb = "watch" if watch else ("continue" if q.get("continue") else "list")
        if watch and q.get("sendInitialEvents") == "true":
            verb = "watchlist"
        record = Request(verb, kind.resource, q, token, at=time.monotonic())
        self.requests.append(record)
        response = await self._answer(kind, request, q, token, verb, record)
        if isinstance(response, web.Response) and response.body is not None and not record.sent:
            record.sent = len(response.body)  # type: ignore[arg-type]
        return response

    async def _answer(
        self, kind: Kind, request: web.Request, q: dict[str, str], token: str | None, verb: str, record: Request,
    ) -> web.StreamResponse:
        watch = verb in ("watch", "watchlist")
        if self.tokens is not None and token not in self.tokens:
            return self._json(401, status_body(401, "Unauthorized", "Unauthorized"))
        if kind.resource in self.absent:
            return web.Response(status=404, text="404 page not found\n")
        denied = self.denied.get(kind.resource)
        rbac_verb = {"continue": "list", "watchlist": "watch"}.get(verb, verb)
        if denied is not None and rbac_verb in denied[1]:
            if denied[0] == 404:
                return self._json(404, status_body(404, "NotFound", "the server could not find the requested resource"))
            group = kind.api_version.rpartition("/")[0]
            qualified = f"{kind.resource}.{group}" if group else kind.resource
            return self._json(403, status_body(
                403, "Forbidden", f'{qualified} is forbidden: User "system:serviceaccount:kube-system:nodedns" '
                f'cannot {rbac_verb} resource "{kind.resource}" in API group "{group}" at the cluster scope'))
        faults = self.faults.get((kind.resource, verb))
        fault = faults.popleft() if faults else Fault()
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.status:
            reason = fault.reason or {410: "Expired", 500: "InternalError", 429: "TooManyRequests"}.get(
                fault.status, "Failure")
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else None
            return self._json(fault.status, status_body(fault.status, reason, f"injected {fault.status}"), headers)
        if fault.body is not None and verb != "watch":
            return web.Response(status=200, body=fault.body, content_type="application/json")
        try:
            selector = parse_selector(q.get("fieldSelector", "")) + parse_label_selector(q.get("labelSelector", ""))
        except ValueError as exc:
            return self._json(400, status_body(400, "BadRequest", str(exc)))
        store = self.stores[kind.resource]
        initial_events = False
        if verb == "watchlist" and self.watch_list != "ignore":
            if self.watch_list in ("422", "400"):
                code = int(self.watch_list)
                return self._json(code, status_body(
                    code, "Invalid" if code == 422 else "BadRequest",
                    f'{kind.kind}List.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is '
                    "forbidden for watch unless the WatchList feature gate is enabled"))
            if q.get("resourceVersionMatch") != "NotOlderThan" or q.get("allowWatchBookmarks") != "true":
                return self._json(422, status_body(
                    422, "Invalid", "sendInitialEvents: Forbidden: sendInitialEvents requires "
                    "resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true"))
            initial_events = True
        if watch:
            return await self._watch(request, store, q, selector, fault, record, initial_events)
        return await self._list(request, store, q, selector, record)

    async def _list(
        self, request: web.Request, store: _Store, q: Mapping[str, str], selector: Selector, record: Request,
    ) -> web.StreamResponse:
        kind = store.kind
        limit = int(q.get("limit", "0") or 0)
        if (q.get("resourceVersion") and not q.get("continue") and q.get("resourceVersionMatch") != "Exact"
                and not self.page_cached_lists):
            limit = 0  # the watch cache serves resourceVersion=0 / NotOlderThan lists whole
        if q.get("continue"):
            try:
                token = json.loads(base64.b64decode(q["continue"]))
                snap_id, offset, snap_rv = int(token["id"]), int(token["off"]), int(token["rv"])
            except (ValueError, KeyError, TypeError):
                return self._json(400, status_body(400, "BadRequest", "invalid continue token"))
            snap = self._snapshots.get(snap_id)
            if snap is None or snap_rv < store.compacted:
                self._snapshots.pop(snap_id, None)
                return self._json(410, status_body(
                    410, "Expired", "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."))
            rv, items = snap
        else:
            rv = self.rv
            items = [o.body for _, o in sorted(store.objects.items()) if _matches(selector, o.fields)]
            offset = 0
            snap_id = 0
            if limit and len(items) > limit:
                self._snap_id += 1
                snap_id = self._snap_id
                self._snapshots[snap_id] = (rv, items)
        end = offset + limit if limit else len(items)
        page = items[offset:end]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if end < len(items):
            meta["continue"] = base64.b64encode(
                json.dumps({"id": snap_id, "off": end, "rv": rv}).encode()).decode()
            meta["remainingItemCount"] = len(items) - end
        else:
            self._snapshots.pop(snap_id, None)
        head = json.dumps({"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta})
        body = head[:-1].encode() + b',"items":[' + b",".join(page) + b"]}"
        if len(body) <= LIST_CHUNK:
            record.sent = len(body)
            return web.Response(status=200, body=body, content_type="application/json")
        # a large list goes out in chunks, so lists sent at the same time are seen at the same time (peak_lists)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.content_length = len(body)
        self._list_started()
        try:
            await resp.prepare(request)
            for off in range(0, len(body), LIST_CHUNK):
                await resp.write(body[off:off + LIST_CHUNK])
                record.sent = off + min(LIST_CHUNK, len(body) - off)
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.lists_in_flight -= 1
        return resp

    def _list_started(self) -> None:
        self.lists_in_flight += 1
        self.peak_lists = max(self.peak_lists, self.lists_in_flight)

    async def _watch(
        self, request: web.Request, store: _Store, q: Mapping[str, str], selector: Selector, fault: Fault,
        record: Request, initial_events: bool = False,
    ) -> web.StreamResponse:
        kind = store.kind
        rv_text = q.get("resourceVersion", "")
        deadline = time.monotonic() + float(q.get("timeoutSeconds", "1800") or 1800)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        initial: list[_Event] = []
        if initial_events or rv_text in ("", "0"):
            start = self.rv
            initial = [_Event(o.rv, "ADDED", o.body, o.fields, None) for _, o in sorted(store.objects.items())]
        else:
            try:
                start = int(rv_text)
            except ValueError:
                return self._json(400, status_body(400, "BadRequest", f"invalid resourceVersion {rv_text!r}"))
            if start < store.compacted:
                msg = f"too old resource version: {start} ({store.compacted + 1})"
                if self.gone_as_http:
                    return self._json(410, status_body(410, "Expired", msg))
                fault = Fault(error_event=410)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        if fault.error_event:
            await resp.prepare(request)
            reason = "Expired" if fault.error_event == 410 else "InternalError"
            ev = {"type": "ERROR", "object": status_body(fault.error_event, reason, f"injected {fault.error_event}")}
            await resp.write(json.dumps(ev).encode() + b"\n")
            await resp.write_eof()
            return resp
        if fault.body is not None:
            await resp.prepare(request)
            await resp.write(fault.body)
            await resp.write_eof()
            return resp
        if fault.stall:
            await resp.prepare(request)
            await asyncio.sleep(fault.stall)
            return resp
        # subscribe and take the backlog in one step (no event in both), before the client sees headers
        queue: asyncio.Queue[_Event] = asyncio.Queue()
        store.watchers.add(queue)
        backlog: collections.deque[_Event] = collections.deque(initial)
        if initial_events:  # the end of the initial state, at the resourceVersion it was taken at
            backlog.append(_Event(start, INITIAL_END, b"", {}, None))
        backlog.extend(e for e in store.history if e.rv > start)
        transport = request.transport
        if transport is not None:
            if self.down:  # the outage began while this watch was being set up: cut, as go_down cut the rest
                transport.abort()
            store.transports.add(transport)
        self.open_watches += 1
        sent = 0
        streaming_initial = initial_events
        if streaming_initial:
            self._list_started()
        try:
            await resp.prepare(request)
            next_bookmark = time.monotonic() + (self.bookmark_interval or 0)
            while True:
                if backlog:
                    ev = backlog.popleft()
                    if ev.type == INITIAL_END:
                        end_meta = {"resourceVersion": str(ev.rv), "annotations": {INITIAL_END_ANNOTATION: "true"}}
                        end_object = {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": end_meta}
                        end_bookmark = {"type": "BOOKMARK", "object": end_object}
                        line = json.dumps(end_bookmark).encode() + b"\n"
                        await resp.write(line)
                        record.sent += len(line)
                        streaming_initial = False
                        self.lists_in_flight -= 1
                        continue
                else:
                    now = time.monotonic()
                    wait = deadline - now
                    if bookmarks and self.bookmark_interval:
                        wait = min(wait, next_bookmark - now)
                    if wait <= 0 and now >= deadline:
                        break
                    if transport is None or transport.is_closing():
                        return resp  # the client went away
                    wait = min(wait, 0.1)
                    try:
                        ev = await asyncio.wait_for(queue.get(), max(wait, 0))
                    except TimeoutError:
                        if bookmarks and self.bookmark_interval and time.monotonic() >= next_bookmark:
                            bm = {"type": "BOOKMARK", "object": {"kind": kind.kind, "apiVersion": kind.api_version,
                                                                 "metadata": {"resourceVersion": str(self.rv)}}}
                            line = json.dumps(bm).encode() + b"\n"
                            await resp.write(line)
                            record.sent += len(line)
                            next_bookmark = time.monotonic() + self.bookmark_interval
                        continue
                typ = ev.type
                if typ == EXPIRED:
                    msg = f"too old resource version: {start} ({ev.rv})"
                    line = json.dumps({"type": "ERROR", "object": status_body(410, "Expired", msg)}).encode() + b"\n"
                    await resp.write(line)
                    record.sent += len(line)
                    break
                now_match = _matches(selector, ev.fields)
                if typ == "MODIFIED" and not _matches(selector, ev.prev_fields):
                    typ = "ADDED" if now_match else typ
                if not now_match:
                    if typ == "MODIFIED" and _matches(selector, ev.prev_fields):
                        typ = "DELETED"
                    else:
                        continue
                if self.track_sent:
                    self.sent[ev.rv] = time.monotonic()
                line = b'{"type":"' + typ.encode() + b'","object":' + ev.body + b"}\n"
                await resp.write(line)
                record.sent += len(line)
                sent += 1
                if fault.drop_after is not None and sent >= fault.drop_after:
                    assert request.transport is not None
                    request.transport.abort()  # no terminating chunk: a dropped connection
                    return resp
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            store.watchers.discard(queue)
            if transport is not None:
                store.transports.discard(transport)
            self.open_watches -= 1
            if streaming_initial:
                self.lists_in_flight -= 1
        return resp


# -- object builders (on top of tests/support/cluster_fixture.py) -------------------------------------------


def namespace(name: str) -> dict[str, Any]:
    return cf.namespace(name)


def service(ns: str, name: str, cluster_ips: list[str] | None, ports: list[tuple[str, int]] | None = None,
            **spec: Any) -> dict[str, Any]:
    """A ClusterIP Service (cluster_ips), or headless (None); extra spec fields as keywords."""
    obj = cf.service(ns, name, cluster_ips=cluster_ips or ["None"],
                     ports=[cf.port(number, pname, target=number) for pname, number in ports or [("http", 80)]])
    obj["spec"].update(spec)
    return obj


def endpoint_slice(ns: str, name: str, service_name: str, ips: list[str], *, ready: bool = True,
                   port: tuple[str, int] = ("http", 8080), node: str = "node-1",
                   address_type: str = "IPv4") -> dict[str, Any]:
    """One slice of `service_name`, an endpoint per IP (targetRef `<service>-<i>`, on `node`)."""
    eps = [cf.endpoint(ip, ready=ready, pod=f"{service_name}-{i}") | {"nodeName": node} for i, ip in enumerate(ips)]
    return cf.endpoint_slice(ns, name, service_name, address_type, eps, [cf.port(port[1], port[0])])


def pod(ns: str, name: str, ip: str, node: str) -> dict[str, Any]:
    obj = cf.pod(ns, name, ip)
    obj["spec"]["nodeName"] = node
    return obj
