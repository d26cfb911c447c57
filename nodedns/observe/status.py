"""The HTTP listeners' applications (aiohttp): the route table and its handlers, on the status and debug listeners.

One route table (`ROUTES`, each route naming its listener) serves two listeners: the status listener
(`/healthz`, `/readyz`, `/metrics`: for probes and Prometheus, reachable by Pods) and the debug listener
(`/`, `/status`, `/debug/*`, and the POST body routes the wiring adds, each a pure function of the body
returning (status, content_type, body, warnings)). One error middleware: a bad parameter is a 400 with the
reason, an unexpected exception a short 500 (traceback in the log), an unknown path a 404 (a debug path on the
status listener says where it is served), a wrong method a 405.

Every request is bounded (`httpgate.HttpLimits`: connections, time, size, pace, shared renderings of /metrics
and /status, the explainer's turns); httpgate holds the connection caps and the pace. Every count is in the
"http" section of /status and /metrics. The routes: docs/status.md "Routes"; each limit and what happens
beyond it: docs/status.md "Bounded work".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

import orjson
from aiohttp import web

from nodedns.config import UNIX_PREFIX, Endpoint, endpoint_text
from nodedns.errors import HostResolvConfError, ManifestError, ObjectError, PodNotFound, PodSpecError
from nodedns.metrics.counters import Histogram
from nodedns.metrics.registry import CONTENT_TYPE
from nodedns.observe.explain import Explainer
from nodedns.observe.history import History
from nodedns.observe.httpgate import Gate, Guarded, HttpLimits, ServerLog, endpoint_errors
from nodedns.observe.page import render_page
from nodedns.observe.params import BadParam, explain_params, lookup_params, top_params
from nodedns.serve.limits import Pace

log = logging.getLogger("nodedns.status")

STATUS = "status"
DEBUG = "debug"
LISTENERS = (STATUS, DEBUG)
T = TypeVar("T")


class Source(Protocol):
    """What the server reads (observe.Observer). It may also have `async refresh()`, awaited before
    /metrics and /status are rendered (the --workers supervisor gathers its workers' counters there), and
    `warnings()`, what /readyz says under `warnings:` (200 or 503 alike)."""

    def liveness(self) -> list[str]: ...

    def readiness(self) -> list[str]: ...

    def status(self) -> dict[str, Any]: ...

    def metrics(self) -> bytes: ...


class BodyReply(Protocol):
    """What a body route's function returns (an HTTP reply; resolvhttp.HttpReply has this shape)."""

    @property
    def status(self) -> int: ...

    @property
    def content_type(self) -> str: ...

    @property
    def body(self) -> str: ...

    @property
    def warnings(self) -> tuple[str, ...]: ...


BodyHandler = Callable[[bytes], BodyReply]
# GET /debug/top: (sort, namespace or None, limit) -> the insight document (InsightFeed.document)
TopDocument = Callable[[str, str | None, int], Mapping[str, Any]]
# GET /debug/shadow: (limit) -> the shadow's document (nodedns shadow: nodedns.shadow.agent.Capture.shadow_document)
ShadowDocument = Callable[[int], Mapping[str, Any]]
SHADOW_LIMIT = 50  # mismatches /debug/shadow lists at most


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    handler: str  # name of the StatusServer method
    doc: str
    listener: str = DEBUG
    explainer: bool = False  # needs the explainer, and the /debug/* routes on (not --no-debug)
    debug_route: bool = False  # a /debug/* route: off with --no-debug
    top: bool = False  # needs the insight document (`top=`), and the /debug/* routes on
    shadow: bool = False  # needs the shadow document (`shadow=`: nodedns shadow), and the /debug/* routes on


ROUTES: tuple[Route, ...] = (
    Route("GET", "/healthz", "healthz", "liveness: the loop answers and the DNS listeners are open", STATUS),
    Route("GET", "/readyz", "readyz", "readiness: listeners bound, index synced, not shutting down", STATUS),
    Route("GET", "/metrics", "metrics", "Prometheus text format", STATUS),
    Route("GET", "/", "page", "the status page: charts of the last 15 minutes and the figures now, refreshing itself"),
    Route("GET", "/status", "status_doc", "JSON status document"),
    Route("GET", "/debug/history", "history_doc", "JSON: the last 15 minutes, a point every 5 s (the page's charts)",
          debug_route=True),
    Route("GET", "/debug/lookup", "lookup", "how the agent answers ?name=&type=[&client=IP]", explainer=True),
    Route("POST", "/debug/explain", "explain_pod",
          'a Pod\'s resolver simulated: JSON {"name", "pod": {...} | "podRef": "ns/name", "types": [...]}',
          explainer=True),
    Route("GET", "/debug/top", "top_doc", "per-Pod DNS insight ?sort=queries|nxdomain|waste&namespace=NS&limit=N",
          debug_route=True, top=True),
    Route("GET", "/debug/shadow", "shadow_doc", "nodedns shadow: its answers against the node's DNS ?limit=N",
          debug_route=True, shadow=True),
)


def _json_default(value: Any) -> Any:
    if isinstance(value, Histogram):
        return value.summary()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def dumps(value: Any) -> str:
    """Indented JSON (orjson: a large explanation is encoded in well under a millisecond)."""
    return orjson.dumps(value, default=_json_default, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() \
        + "\n"


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BadParam as exc:
        return web.Response(status=400, text=f"bad request: {exc}\n")
    except web.HTTPException:
        raise
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - one broken request must not show a traceback to the client
        endpoint_errors.report(exc)
        return web.Response(status=500, text="internal error (logged by the agent)\n")


class _Rendered(Generic[T]):
    """A result shared by the requests that come too fast for their own: as many as the pace allows
    are made afresh (a burst, then one per interval), the requests in between get the latest one;
    concurrent requests share one making."""

    def __init__(self, make: Callable[[], Awaitable[T]], pace: Pace) -> None:
        self.make = make
        self.pace = pace
        self.value: T | None = None
        self.made = False
        self.renders = 0
        self.shared = 0  # requests answered with an earlier result
        self._pending: asyncio.Future[T] | None = None

    async def get(self) -> T:
        if self._pending is None:
            if self.made and self.pace.reserve(0.0) is None:
                self.shared += 1
                return cast(T, self.value)
            self._pending = asyncio.ensure_future(self._make())
        else:
            self.shared += 1
        return await asyncio.shield(self._pending)

    async def _make(self) -> T:
        try:
            value = await self.make()
            self.renders += 1
            self.value, self.made = value, True
            return value
        finally:
            self._pending = None


@dataclass(slots=True)
class _Listener:
    role: str
    endpoint: Endpoint
    gate: Gate
    runner: web.AppRunner | None = None
    servers: list[asyncio.AbstractServer] = field(default_factory=list)
    bound: list[tuple[str, int]] = field(default_factory=list)
    unix_path: str | None = None
    unix_inode: int | None = None
    error: str = ""


class StatusServer:
    """The aiohttp applications (one per listener role) and their listeners."""

    def __init__(
        self,
        source: Source,
        *,
        explainer: Explainer | None = None,
        top: TopDocument | None = None,
        shadow: ShadowDocument | None = None,
        debug: bool = True,
        body_routes: Mapping[str, BodyHandler] | None = None,
        limits: HttpLimits | None = None,
        history: History | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.history = history if history is not None else History()
        self.explainer = explainer
        self.top = top
        self.shadow = shadow
        self.debug = debug
        self.body_routes = dict(body_routes or {})
        self.limits = limits or HttpLimits()
        self.clock = clock
        self.listeners: dict[str, _Listener] = {}
        lim = self.limits
        self._metrics = _Rendered(self._render_metrics, Pace(1 / lim.render_interval, lim.render_burst, clock=clock))
        self._status = _Rendered(self._render_status, Pace(1 / lim.render_interval, lim.render_burst, clock=clock))
        # the --workers supervisor asks its workers for their counters: at most once a second (after a
        # burst), so a flood of scrapes costs the processes that answer DNS nothing more
        self._gathered = _Rendered(self._refresh, Pace(1 / lim.refresh_interval, lim.render_burst, clock=clock))
        self._explains = asyncio.Semaphore(self.limits.max_explains)
        self.explains_busy = 0

    # -- the applications ------------------------------------------------------------------

    def app(self, role: str | None = None, gate: Gate | None = None) -> web.Application:
        """The application one listener serves (`role`: "status" or "debug"; None: every route, for an
        application embedded elsewhere or a test client)."""
        gate = gate if gate is not None else Gate(role or DEBUG, self.limits, clock=self.clock)
        app = web.Application(middlewares=[error_middleware, self._paced(gate)], client_max_size=self.limits.max_body)
        for route in ROUTES:
            if (route.explainer or route.debug_route) and not self.debug:
                continue
            if route.explainer and self.explainer is None:
                continue
            if route.top and self.top is None:
                continue
            if route.shadow and self.shadow is None:
                continue
            if role is None or route.listener == role:
                app.router.add_route(route.method, route.path, getattr(self, route.handler))
            elif role == STATUS:
                app.router.add_route("*", route.path, self._elsewhere)
        for path, fn in self.body_routes.items():
            if role != STATUS:
                app.router.add_route("POST", path, self._body_route(fn))
            else:
                app.router.add_route("*", path, self._elsewhere)
        return app

    def _paced(self, gate: Gate) -> Any:
        @web.middleware
        async def paced(request: web.Request, handler: Handler) -> web.StreamResponse:
            if request.path == "/healthz" and request.method == "GET":
                # liveness is about the event loop, not the HTTP load: never paced, never queued
                gate.counts["requests"] += 1
                return await handler(request)
            wait = gate.pace(request)
            if wait is None:
                # after the longest wait, not at once: a client that asks again at once is held as long as
                # one that waits its turn, so refusing it costs as little as serving it
                await asyncio.sleep(self.limits.max_wait)
                return web.Response(status=503, text="busy: too many requests; try again in a second\n",
                                    headers={"Retry-After": "1"})
            if wait > 0:
                await asyncio.sleep(wait)
            length = request.content_length
            if length is not None and length > self.limits.max_body:
                gate.counts["too_large"] += 1
                return web.Response(status=413, text=f"request body over {self.limits.max_body} bytes\n")
            try:
                response = await handler(request)
            except web.HTTPRequestEntityTooLarge:
                gate.counts["too_large"] += 1
                raise
            except TimeoutError:
                gate.counts["body_timeouts"] += 1
                return web.Response(status=408, text=f"the request body did not arrive within "
                                                     f"{self.limits.body_timeout:g}s\n")
            body = getattr(response, "body", None)
            if isinstance(body, bytes) and len(body) > self.limits.max_reply:
                endpoint_errors.report(f"{request.path}: a reply of {len(body)} bytes is over {self.limits.max_reply}")
                return web.Response(status=500, text=f"the reply is over {self.limits.max_reply} bytes\n")
            return response

        return paced

    # -- listeners -------------------------------------------------------------------------

    async def listen(self, role: str, endpoint: Endpoint, *, reuse_port: bool = False) -> None:
        """Serve `role`'s routes on `endpoint` (ADDR:PORT or unix:/PATH). `reuse_port` lets a successor
        bind the same port beside us (hand-over). Raises OSError when it cannot listen."""
        listener = _Listener(role, endpoint, Gate(role, self.limits, clock=self.clock))
        self.listeners[role] = listener
        runner = web.AppRunner(self.app(role, listener.gate), access_log=None, shutdown_timeout=2.0,
                               keepalive_timeout=self.limits.head_timeout, lingering_time=self.limits.body_timeout,
                               max_line_size=self.limits.max_line, max_field_size=self.limits.max_line,
                               max_headers=self.limits.max_headers, logger=ServerLog(listener.gate))
        await runner.setup()
        make = runner.server
        assert make is not None
        gate = listener.gate
        liveness = self.source.liveness if role == STATUS else None  # /healthz is the status listener's

        def factory() -> asyncio.Protocol:
            return Guarded(gate, make, liveness)

        loop = asyncio.get_running_loop()
        try:
            if isinstance(endpoint, str):
                sock = bind_unix(endpoint[len(UNIX_PREFIX):])
                listener.unix_path = sock.getsockname()
                listener.unix_inode = os.stat(listener.unix_path).st_ino
                listener.servers.append(await loop.create_unix_server(factory, sock=sock))
                listener.bound = []
            else:
                host, port = endpoint
                server = await loop.create_server(factory, host, port, reuse_port=reuse_port or None, backlog=128)
                listener.servers.append(server)
                listener.bound = [(str(s.getsockname()[0]), int(s.getsockname()[1])) for s in server.sockets]
        except BaseException as exc:
            listener.error = str(exc)
            await runner.cleanup()
            raise
        listener.runner = runner
        log.info("%s listener on %s", role, self.url_of(role))

    def url_of(self, role: str) -> str:
        """`http://host:port` of a TCP listener, `unix:/path` of a Unix socket one."""
        listener = self.listeners[role]
        if listener.unix_path is not None:
            return UNIX_PREFIX + listener.unix_path
        host, port = listener.bound[0]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def bound(self) -> list[tuple[str, int]]:
        """The status listener's addresses."""
        listener = self.listeners.get(STATUS)
        return listener.bound if listener is not None else []

    @property
    def url(self) -> str:
        return self.url_of(STATUS)

    @property
    def debug_url(self) -> str:
        return self.url_of(DEBUG)

    def failed(self, role: str, endpoint: Endpoint, error: str) -> None:
        """Record a listener that could not start (shown in the "http" section)."""
        self.listeners[role] = _Listener(role, endpoint, Gate(role, self.limits, clock=self.clock), error=error)

    async def stop(self) -> None:
        for listener in list(self.listeners.values()):
            for server in listener.servers:
                server.close()
            listener.servers = []
            listener.gate.close()
            if listener.runner is not None:
                runner, listener.runner = listener.runner, None
                await runner.cleanup()
            if listener.unix_path is not None:
                _unlink_if_ours(listener.unix_path, listener.unix_inode)
                listener.unix_path = None

    def status(self) -> dict[str, Any]:
        """The "http" section of /status and /metrics (contract in nodedns.metrics.registry)."""
        out = []
        for role in LISTENERS:
            listener = self.listeners.get(role)
            if listener is None:
                continue
            serving = listener.runner is not None
            entry: dict[str, Any] = {"listener": role, "address": endpoint_text(listener.endpoint),
                                     "listening": serving, **listener.gate.state()}
            if listener.error:
                entry["error"] = listener.error
            out.append(entry)
        return {"listeners": out,
                "renders": {"metrics": self._metrics.renders, "status": self._status.renders},
                "shared": {"metrics": self._metrics.shared, "status": self._status.shared},
                "explains_busy": self.explains_busy}

    # -- handlers --------------------------------------------------------------------------

    async def _refresh(self) -> None:
        refresh = getattr(self.source, "refresh", None)
        if refresh is not None:
            await refresh()

    async def _fresh(self) -> None:
        await self._gathered.get()

    async def _render_metrics(self) -> bytes:
        await self._fresh()
        return self.source.metrics()

    async def _render_status(self) -> tuple[dict[str, Any], str]:
        await self._fresh()
        doc = self.source.status()
        return doc, dumps(doc)

    async def healthz(self, request: web.Request) -> web.Response:
        reasons = self.source.liveness()
        if reasons:
            return web.Response(status=503, text="not alive:\n" + "".join(f"- {r}\n" for r in reasons))
        return web.Response(text="ok\n")

    async def readyz(self, request: web.Request) -> web.Response:
        reasons = self.source.readiness()
        warned = getattr(self.source, "warnings", None)
        warnings: list[str] = warned() if warned is not None else []
        said = ("warnings:\n" + "".join(f"- {w}\n" for w in warnings)) if warnings else ""
        if reasons:
            return web.Response(status=503, text="not ready:\n" + "".join(f"- {r}\n" for r in reasons) + said)
        return web.Response(text="ready\n" + said)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=await self._metrics.get(), headers={"Content-Type": CONTENT_TYPE})

    async def status_doc(self, request: web.Request) -> web.Response:
        return web.Response(text=(await self._status.get())[1], content_type="application/json")

    async def page(self, request: web.Request) -> web.Response:
        status = (await self._status.get())[0]
        return web.Response(text=render_page(status, self.history.document()), content_type="text/html")

    async def history_doc(self, request: web.Request) -> web.Response:
        return web.Response(text=dumps(self.history.document()), content_type="application/json")

    async def _elsewhere(self, request: web.Request) -> web.Response:
        return web.Response(status=404, text=f"{request.path} is served on the debug listener (--debug-listen, "
                                             "default 127.0.0.1:9254), not on the status listener\n")

    @contextlib.asynccontextmanager
    async def _explaining(self) -> AsyncIterator[bool]:
        """A turn of the explainer (`max_explains` at once); False when none came within `max_wait`."""
        try:
            await asyncio.wait_for(self._explains.acquire(), self.limits.max_wait)
        except TimeoutError:
            self.explains_busy += 1
            yield False
            return
        try:
            yield True
        finally:
            self._explains.release()

    async def lookup(self, request: web.Request) -> web.Response:
        assert self.explainer is not None
        name, qtype, client = lookup_params(request.query)
        async with self._explaining() as turn:
            if not turn:
                return _busy()
            try:
                result = await self.explainer.explain(name, qtype, client)
            except ValueError as exc:
                raise BadParam(str(exc)) from None
        return web.Response(text=dumps(result), content_type="application/json")

    async def top_doc(self, request: web.Request) -> web.Response:
        """`nodedns top`: per-Pod DNS insight (nodedns.observe.insight); 400 for a bad parameter."""
        assert self.top is not None
        sort, namespace, limit = top_params(request.query)
        try:
            doc = self.top(sort, namespace, limit)
        except ValueError as exc:
            raise BadParam(str(exc)) from None
        return web.Response(text=dumps(doc), content_type="application/json")

    async def shadow_doc(self, request: web.Request) -> web.Response:
        """`nodedns shadow --report`: the counts and the last mismatches (nodedns.shadow.judge); 400 for a bad
        limit."""
        assert self.shadow is not None
        text = request.query.get("limit", str(SHADOW_LIMIT))
        if not text.isdigit() or not 0 <= int(text) <= SHADOW_LIMIT:
            raise BadParam(f"limit must be a number from 0 to {SHADOW_LIMIT}")
        return web.Response(text=dumps(self.shadow(int(text))), content_type="application/json")

    async def _read_body(self, request: web.Request) -> bytes:
        """The request body within `body_timeout` (TimeoutError: 408) and `max_body` (413)."""
        async with asyncio.timeout(self.limits.body_timeout):
            return await request.read()

    async def explain_pod(self, request: web.Request) -> web.Response:
        """`nodedns explain`: 200 the explanation; 400 a bad request or not a Pod; 404 (JSON, reason
        PodNotFound) a podRef the index does not hold; 422 a Pod the API server would reject (its field
        errors); 500 the node's resolv.conf is unusable; 503 the explainer is busy."""
        assert self.explainer is not None
        name, pod_ref, manifest, qtypes = explain_params(await self._read_body(request))
        async with self._explaining() as turn:
            if not turn:
                return _busy()
            try:
                result = await self.explainer.explain_pod(name, pod_ref=pod_ref, manifest=manifest, qtypes=qtypes)
            except ValueError as exc:
                raise BadParam(str(exc)) from None
            except PodNotFound as exc:
                return web.json_response({"error": str(exc), "reason": "PodNotFound"}, status=404)
            except (ManifestError, ObjectError) as exc:
                raise BadParam(f"not a Pod: {exc}") from None
            except PodSpecError as exc:
                return web.json_response({"errors": [{"field": f, "message": m} for f, m in exc.errors]},
                                         status=422)
            except HostResolvConfError as exc:
                return web.json_response({"error": f"the node's resolv.conf cannot be used: {exc}"}, status=500)
        return web.Response(text=dumps(result), content_type="application/json")

    def _body_route(self, fn: BodyHandler) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            body = await self._read_body(request)
            reply = fn(body)
            resp = web.Response(status=reply.status, text=reply.body)
            resp.headers["Content-Type"] = reply.content_type
            for w in reply.warnings:
                resp.headers.add("Warning", w)
            return resp

        return handle


def _busy() -> web.Response:
    return web.Response(status=503, text="busy: the explainer is answering other requests; try again\n",
                        headers={"Retry-After": "1"})


def bind_unix(path: str) -> socket.socket:
    """A listening Unix socket at `path`, mode 0600 (root only); a stale socket file there is replaced
    (a newer agent takes the path over from an older one; the older one keeps its open socket)."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _unlink_if_ours(path: str, inode: int | None) -> None:
    """Remove our socket file, not one a newer agent has bound at the same path since."""
    with contextlib.suppress(OSError):
        if inode is not None and os.lstat(path).st_ino == inode:
            os.unlink(path)
