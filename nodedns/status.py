"""The HTTP status endpoint (aiohttp; the only aiohttp importer): health, readiness, metrics, status, explainer.

Every route is in `ROUTES`, and one middleware turns errors into answers: a bad parameter is a 400
with the reason in the body, an unexpected exception a 500 with a short body (the traceback goes to
the log, consolidated), an unknown path a 404, a wrong method a 405.

    GET /              a self-contained HTML overview that refreshes itself from /status
    GET /healthz       200 "ok" while the event loop answers and every DNS listener is open, else 503
    GET /readyz        200 "ready" when listeners are bound, the index synced and no shutdown is under
                       way (and no part reports a reason); else 503 with one reason per line
    GET /metrics       Prometheus text (CoreDNS names where CoreDNS measures the same; see metrics.py)
    GET /status        JSON: version, effective config, listeners, queries, index, caches, parts
    GET /debug/lookup  ?name=&type=[&client=IP]: the explainer's JSON (off with --no-debug: 404)
    POST /debug/explain  {"name", "pod" | "podRef", "types"}: a Pod's glibc resolver simulated
                       (`nodedns explain`; off with --no-debug: 404)
    POST <path>        body routes the wiring adds (e.g. /v1/resolv-conf, issue 5): a pure function of
                       the request body returning (status, content_type, body, warnings)

The server reads state through a `Source` (observe.Observer) and never blocks the DNS path: every
handler runs on the event loop and does a bounded amount of work; the explainer's upstream queries
are bounded by its timeout. No access log: Prometheus scrapes every few seconds.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from nodedns.errors import HostResolvConfError, ManifestError, ObjectError, PodNotFound, PodSpecError
from nodedns.explain import Explainer
from nodedns.logutil import Consolidated
from nodedns.metrics import CONTENT_TYPE, Histogram
from nodedns.names import canonical_ip
from nodedns.wire import QT

log = logging.getLogger(__name__)
_errors = Consolidated(log, "status endpoint error")

MAX_BODY = 4 << 20
MAX_NAME = 255
LOOKUP_PARAMS = ("name", "type", "client")
REFRESH_SECONDS = 3


class Source(Protocol):
    """What the server reads (observe.Observer). It may also have `async refresh()`, awaited before
    /metrics and /status (the --workers supervisor gathers its workers' counters there)."""

    def liveness(self) -> list[str]: ...

    def readiness(self) -> list[str]: ...

    def status(self) -> dict[str, Any]: ...

    def metrics(self) -> bytes: ...


class Reply(Protocol):
    """What a body route's function returns (resolvconf.HttpReply has this shape)."""

    @property
    def status(self) -> int: ...

    @property
    def content_type(self) -> str: ...

    @property
    def body(self) -> str: ...

    @property
    def warnings(self) -> tuple[str, ...]: ...


BodyHandler = Callable[[bytes], Reply]


class BadParam(Exception):
    """A request parameter is missing or invalid: answered 400 with this message."""


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    handler: str  # name of the StatusServer method
    doc: str
    debug: bool = False  # only with debug routes on


ROUTES: tuple[Route, ...] = (
    Route("GET", "/", "page", "HTML overview, refreshing itself"),
    Route("GET", "/healthz", "healthz", "liveness: the loop answers and the DNS listeners are open"),
    Route("GET", "/readyz", "readyz", "readiness: listeners bound, index synced, not shutting down"),
    Route("GET", "/metrics", "metrics", "Prometheus text format"),
    Route("GET", "/status", "status", "JSON status document"),
    Route("GET", "/debug/lookup", "lookup", "how the agent answers ?name=&type=[&client=IP]", debug=True),
    Route("POST", "/debug/explain", "explain_pod",
          'a Pod\'s resolver simulated: JSON {"name", "pod": {...} | "podRef": "ns/name", "types": [...]}',
          debug=True),
)


def _json_default(value: Any) -> Any:
    if isinstance(value, Histogram):
        return value.summary()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, default=_json_default) + "\n"


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
        _errors.report(exc)
        return web.Response(status=500, text="internal error (logged by the agent)\n")


class StatusServer:
    """The aiohttp application and its listener."""

    def __init__(
        self,
        source: Source,
        *,
        explainer: Explainer | None = None,
        debug: bool = True,
        body_routes: Mapping[str, BodyHandler] | None = None,
    ) -> None:
        self.source = source
        self.explainer = explainer
        self.debug = debug
        self.body_routes = dict(body_routes or {})
        self._runner: web.AppRunner | None = None
        self.bound: list[tuple[str, int]] = []

    # -- the application -------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[error_middleware], client_max_size=MAX_BODY)
        for route in ROUTES:
            if route.debug and (not self.debug or self.explainer is None):
                continue
            app.router.add_route(route.method, route.path, getattr(self, route.handler))
        for path, fn in self.body_routes.items():
            app.router.add_route("POST", path, self._body_route(fn))
        return app

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> None:
        """Listen; `reuse_port` lets a successor bind the same port beside us (hand-over)."""
        runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port, reuse_port=reuse_port or None)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.bound = [(str(a[0]), int(a[1])) for a in runner.addresses]
        log.info("status on http://%s:%d/", *self.bound[0])

    @property
    def url(self) -> str:
        host, port = self.bound[0]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    # -- handlers --------------------------------------------------------------------------

    async def _fresh(self) -> None:
        refresh = getattr(self.source, "refresh", None)
        if refresh is not None:
            await refresh()

    async def healthz(self, request: web.Request) -> web.Response:
        reasons = self.source.liveness()
        if reasons:
            return web.Response(status=503, text="not alive:\n" + "".join(f"- {r}\n" for r in reasons))
        return web.Response(text="ok\n")

    async def readyz(self, request: web.Request) -> web.Response:
        reasons = self.source.readiness()
        if reasons:
            return web.Response(status=503, text="not ready:\n" + "".join(f"- {r}\n" for r in reasons))
        return web.Response(text="ready\n")

    async def metrics(self, request: web.Request) -> web.Response:
        await self._fresh()
        return web.Response(body=self.source.metrics(), headers={"Content-Type": CONTENT_TYPE})

    async def status(self, request: web.Request) -> web.Response:
        await self._fresh()
        return web.Response(text=dumps(self.source.status()), content_type="application/json")

    async def lookup(self, request: web.Request) -> web.Response:
        assert self.explainer is not None
        name, qtype, client = lookup_params(request.query)
        try:
            result = await self.explainer.explain(name, qtype, client)
        except ValueError as exc:
            raise BadParam(str(exc)) from None
        return web.Response(text=dumps(result), content_type="application/json")

    async def explain_pod(self, request: web.Request) -> web.Response:
        """`nodedns explain`: 200 the explanation; 400 a bad request or not a Pod; 404 (JSON, reason
        PodNotFound) a podRef the index does not hold; 422 a Pod the API server would reject (its field
        errors); 500 the node's resolv.conf is unusable."""
        assert self.explainer is not None
        name, pod_ref, manifest, qtypes = explain_params(await request.read())
        try:
            result = await self.explainer.explain_pod(name, pod_ref=pod_ref, manifest=manifest, qtypes=qtypes)
        except ValueError as exc:
            raise BadParam(str(exc)) from None
        except PodNotFound as exc:
            return web.json_response({"error": str(exc), "reason": "PodNotFound"}, status=404)
        except (ManifestError, ObjectError) as exc:
            raise BadParam(f"not a Pod: {exc}") from None
        except PodSpecError as exc:
            return web.json_response({"errors": [{"field": f, "message": m} for f, m in exc.errors]}, status=422)
        except HostResolvConfError as exc:
            return web.json_response({"error": f"the node's resolv.conf cannot be used: {exc}"}, status=500)
        return web.Response(text=dumps(result), content_type="application/json")

    async def page(self, request: web.Request) -> web.Response:
        await self._fresh()
        return web.Response(text=render_page(self.source.status()), content_type="text/html")

    def _body_route(self, fn: BodyHandler) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            body = await request.read()
            reply = fn(body)
            resp = web.Response(status=reply.status, text=reply.body)
            resp.headers["Content-Type"] = reply.content_type
            for w in reply.warnings:
                resp.headers.add("Warning", w)
            return resp

        return handle


def lookup_params(query: Mapping[str, str]) -> tuple[str, int, str | None]:
    """(name, qtype, client) from /debug/lookup's query string; BadParam with the reason."""
    unknown = sorted(set(query) - set(LOOKUP_PARAMS))
    if unknown:
        raise BadParam(f"unknown parameter {unknown[0]!r} (use {', '.join(LOOKUP_PARAMS)})")
    name = query.get("name", "").strip()
    if not name:
        raise BadParam("name is required: /debug/lookup?name=web.default.svc.cluster.local&type=A")
    if len(name) > MAX_NAME:
        raise BadParam(f"name is longer than {MAX_NAME} characters")
    try:
        qtype = QT.from_text(query.get("type", "A") or "A")
    except ValueError as exc:
        raise BadParam(str(exc)) from None
    client = query.get("client")
    if client is not None:
        client = client.strip()
        if canonical_ip(client) is None:
            raise BadParam(f"client {client!r} is not an IP address")
    return name, qtype, client


EXPLAIN_KEYS = ("name", "pod", "podRef", "types")


def explain_params(body: bytes) -> tuple[str, str | None, object, tuple[int, ...]]:
    """(name, podRef, Pod manifest, qtypes) from /debug/explain's JSON body; BadParam with the reason."""
    try:
        req = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadParam(f"the body is not JSON: {exc}") from None
    if not isinstance(req, dict):
        raise BadParam('the body must be a JSON object: {"name": ..., "pod": {...} | "podRef": "ns/name"}')
    unknown = sorted(set(req) - set(EXPLAIN_KEYS))
    if unknown:
        raise BadParam(f"unknown key {unknown[0]!r} (use {', '.join(EXPLAIN_KEYS)})")
    name = req.get("name")
    if not isinstance(name, str) or not name.strip():
        raise BadParam("name is required (a string)")
    if len(name) > MAX_NAME:
        raise BadParam(f"name is longer than {MAX_NAME} characters")
    pod_ref = req.get("podRef")
    if pod_ref is not None and not isinstance(pod_ref, str):
        raise BadParam("podRef must be a string: namespace/name")
    types = req.get("types", ["A", "AAAA"])
    if isinstance(types, str):
        types = [t for t in types.split(",") if t.strip()]
    if not isinstance(types, list) or not types or not all(isinstance(t, str) for t in types):
        raise BadParam("types must be a list of record types, e.g. [\"A\", \"AAAA\"]")
    try:
        qtypes = tuple(dict.fromkeys(QT.from_text(t) for t in types))
    except ValueError as exc:
        raise BadParam(str(exc)) from None
    return name.strip(), pod_ref, req.get("pod"), qtypes


# ----------------------------------------------------------------------------------------------
# The HTML page


# What an absent part means, in words a newcomer understands (the page's Python and script share them).
ABSENT = {
    "sync": "not used: the cluster objects come from a manifest file, not the API server",
    "cache": "no upstream configured: names outside the cluster are refused, nothing is cached",
    "upstream": "no upstream configured: names outside the cluster are refused",
    "node": "not managed: no interface or firewall rules (--setup-interface, --firewall)",
}


def _section_state(st: Mapping[str, Any], name: str = "upstream") -> str:
    if st.get("present") is False:
        return ABSENT.get(name, "not configured")
    if st.get("unready"):
        return "; ".join(str(r) for r in st["unready"])
    return "ok"


def _upstreams(status: Mapping[str, Any]) -> list[tuple[str, str]]:
    up = status.get("upstream", {})
    ups = up.get("upstreams", []) if isinstance(up, Mapping) else []
    return [(str(u.get("to", "?")), "healthy" if u.get("healthy") else "DOWN") for u in ups if isinstance(u, Mapping)]


def render_page(status: Mapping[str, Any]) -> str:
    """The overview page with the current figures; its script refreshes them from /status."""
    e = html.escape
    q = status.get("queries", {})
    ca = status.get("cluster_answers", {})
    ix = status.get("index", {})
    ratio = ca.get("hit_ratio")
    hit_share = (q.get("hit_path", 0) / q["total"]) if q.get("total") else None
    rcodes = "".join(f"<tr><td>{e(str(k))}</td><td class=n>{v}</td></tr>" for k, v in q.get("by_rcode", {}).items())
    paths = "".join(f"<tr><td>{e(str(k))}</td><td class=n>{v}</td></tr>" for k, v in q.get("by_path", {}).items())
    counts = "".join(f"<tr><td>{e(str(k))}</td><td class=n>{v}</td></tr>"
                     for k, v in ix.get("counts", {}).items())
    ups = _upstreams(status)
    up_rows = "".join(f"<tr><td>{e(to)}</td><td>{e(h)}</td></tr>" for to, h in ups) or \
        f"<tr><td colspan=2>{e(_section_state(status.get('upstream', {})))}</td></tr>"
    parts = "".join(f"<tr><td>{e(name)}</td><td>{e(_section_state(status.get(name, {}), name))}</td></tr>"
                    for name in ("sync", "cache", "upstream", "node"))
    unready = "".join(f"<li>{e(str(r))}</li>" for r in status.get("unready", []))
    listeners = ", ".join(e(str(ls.get("server"))) for ls in status.get("listeners", []))
    fmt_ratio = f"{ratio * 100:.1f}%" if isinstance(ratio, float) else "n/a"
    fmt_share = f"{hit_share * 100:.1f}%" if hit_share is not None else "n/a"
    return _PAGE.format(
        version=e(str(status.get("version", ""))),
        state=e(str(status.get("state", ""))),
        ready="ready" if status.get("ready") else "NOT READY",
        ready_class="ok" if status.get("ready") else "bad",
        unready=unready,
        listeners=listeners,
        total=q.get("total", 0),
        hit_share=fmt_share,
        hit_ratio=fmt_ratio,
        synced="synced" if ix.get("synced") else "NOT synced",
        generation=ix.get("generation", 0),
        since=ix.get("seconds_since_change", ""),
        rcodes=rcodes,
        paths=paths,
        counts=counts,
        upstreams=up_rows,
        parts=parts,
        refresh=REFRESH_SECONDS,
        absent=json.dumps(ABSENT),
    )


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>nodedns {version}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<noscript><meta http-equiv="refresh" content="{refresh}"></noscript>
<style>
body{{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}}
h1{{font-size:1.3em;margin:0 0 .2em}} h2{{font-size:1em;margin:0 0 .4em}}
.grid{{display:grid;grid-template-columns:repeat(auto-fill,minmax(16em,1fr));gap:1em}}
.card{{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.8em 1em}}
.big{{font-size:1.8em;font-weight:600}} .ok{{color:#17803d}} .bad{{color:#b42318}}
table{{border-collapse:collapse;width:100%}} td{{padding:1px 4px;border-bottom:1px solid #eee}}
td.n{{text-align:right;font-variant-numeric:tabular-nums}} small{{color:#666}}
</style></head><body>
<h1>nodedns <span id=version>{version}</span></h1>
<p>state <b id=state>{state}</b> &middot; <b id=ready class="{ready_class}">{ready}</b>
&middot; listeners <span id=listeners>{listeners}</span></p>
<ul id=unready class=bad>{unready}</ul>
<div class=grid>
<div class=card><h2>Query rate</h2><div class=big><span id=qps>&ndash;</span> q/s</div>
<small><span id=total>{total}</span> queries since start</small></div>
<div class=card><h2>Hit ratio</h2><div class=big id=hit_ratio>{hit_ratio}</div>
<small>stored cluster answers; <span id=hit_share>{hit_share}</span> of all queries
answered on the hit path</small></div>
<div class=card><h2>Sync</h2><div class=big id=synced>{synced}</div>
<small>generation <span id=generation>{generation}</span>, last change <span id=since>{since}</span> s ago</small>
</div>
<div class=card><h2>Rcodes</h2><table id=rcodes>{rcodes}</table></div>
<div class=card><h2>Paths</h2><table id=paths>{paths}</table></div>
<div class=card><h2>Upstream health</h2><table id=upstreams>{upstreams}</table></div>
<div class=card><h2>Index</h2><table id=counts>{counts}</table></div>
<div class=card><h2>Parts</h2><table id=parts>{parts}</table></div>
</div>
<p><small>refreshes every {refresh}s from <a href="status">/status</a> &middot; <a href="metrics">/metrics</a>
&middot; <a href="readyz">/readyz</a></small></p>
<script>
"use strict";
let last = null;
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({{"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}})[c]);
const rows = (obj) => Object.entries(obj || {{}}).map(([k, v]) =>
  "<tr><td>" + esc(k) + "</td><td class=n>" + esc(v) + "</td></tr>").join("");
const absent = {absent};
const part = (s, n) => !s ? "?" : s.present === false ? (absent[n] || "not configured") :
  (s.unready && s.unready.length ? s.unready.join("; ") : "ok");
async function tick() {{
  try {{
    const r = await fetch("status", {{cache: "no-store"}});
    const s = await r.json();
    const now = performance.now(), q = s.queries;
    if (last) {{ $("qps").textContent = ((q.total - last.total) * 1000 / (now - last.t)).toFixed(1); }}
    last = {{t: now, total: q.total}};
    $("state").textContent = s.state; $("total").textContent = q.total;
    $("ready").textContent = s.ready ? "ready" : "NOT READY"; $("ready").className = s.ready ? "ok" : "bad";
    $("unready").innerHTML = s.unready.map((x) => "<li>" + esc(x) + "</li>").join("");
    const ca = s.cluster_answers;
    $("hit_ratio").textContent = ca.hit_ratio === null ? "n/a" : (ca.hit_ratio * 100).toFixed(1) + "%";
    $("hit_share").textContent = q.total ? (q.hit_path * 100 / q.total).toFixed(1) + "%" : "n/a";
    $("synced").textContent = s.index.synced ? "synced" : "NOT synced";
    $("generation").textContent = s.index.generation; $("since").textContent = s.index.seconds_since_change;
    $("rcodes").innerHTML = rows(q.by_rcode); $("paths").innerHTML = rows(q.by_path);
    $("counts").innerHTML = rows(s.index.counts);
    const ups = (s.upstream && s.upstream.upstreams) || [];
    $("upstreams").innerHTML = ups.length ? ups.map((u) => "<tr><td>" + esc(u.to) + "</td><td>" +
      (u.healthy ? "healthy" : "DOWN") + "</td></tr>").join("") :
      "<tr><td>" + esc(part(s.upstream, "upstream")) + "</td></tr>";
    $("parts").innerHTML = ["sync", "cache", "upstream", "node"].map((n) =>
      "<tr><td>" + n + "</td><td>" + esc(part(s[n], n)) + "</td></tr>").join("");
  }} catch (e) {{ $("state").textContent = "unreachable"; }}
}}
tick(); setInterval(tick, {refresh} * 1000);
</script>
</body></html>
"""
