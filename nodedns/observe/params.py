"""The debug routes' parameters read and checked: /debug/lookup's and /debug/top's queries, /debug/explain's body.

Each function returns the parameters a handler of nodedns.observe.status needs, or raises
`BadParam` with the reason, which the error middleware answers as a 400 with that reason in the body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from nodedns.dns.wire import QT
from nodedns.names import canonical_ip
from nodedns.observe.explain import MAX_TYPES

MAX_NAME = 255
LOOKUP_PARAMS = ("name", "type", "client")


class BadParam(Exception):
    """A request parameter is missing or invalid: answered 400 with this message."""


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


TOP_PARAMS = ("sort", "namespace", "limit")
TOP_SORTS = ("queries", "nxdomain", "waste")
MAX_TOP_LIMIT = 1000


def top_params(query: Mapping[str, str]) -> tuple[str, str | None, int]:
    """(sort, namespace, limit) from /debug/top's query string; BadParam with the reason."""
    unknown = sorted(set(query) - set(TOP_PARAMS))
    if unknown:
        raise BadParam(f"unknown parameter {unknown[0]!r} (use {', '.join(TOP_PARAMS)})")
    sort = query.get("sort", "queries") or "queries"
    if sort not in TOP_SORTS:
        raise BadParam(f"sort must be one of {', '.join(TOP_SORTS)} (got {sort!r})")
    namespace = query.get("namespace", "").strip() or None
    if namespace is not None and (len(namespace) > 63 or not namespace.replace("-", "a").isalnum()
                                  or namespace != namespace.lower()):
        raise BadParam(f"namespace {namespace!r} is not a namespace name")
    text = query.get("limit", "50") or "50"
    if not text.isdigit() or not 1 <= int(text) <= MAX_TOP_LIMIT:
        raise BadParam(f"limit must be a whole number from 1 to {MAX_TOP_LIMIT}")
    return sort, namespace, int(text)


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
    if len(types) > MAX_TYPES:
        raise BadParam(f"at most {MAX_TYPES} types per request (got {len(types)})")
    try:
        qtypes = tuple(dict.fromkeys(QT.from_text(t) for t in types))
    except ValueError as exc:
        raise BadParam(str(exc)) from None
    return name.strip(), pod_ref, req.get("pod"), qtypes
