"""`POST /v1/resolv-conf` answered without touching a socket: a Pod as JSON in, its /etc/resolv.conf out
(nodedns.podconf.resolvconf forms it), the API server's errors and the kubelet's warnings as HTTP.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from nodedns.errors import HostResolvConfError, ManifestError, PodSpecError
from nodedns.podconf.resolvconf import MAX_HTTP_BODY_BYTES, KubeletDNS, pod_dns


class HttpReply(NamedTuple):
    """What `handle_http` answers: the route copies each field into the response.

    `warnings` are values for `Warning` response headers, in the RFC 9111 form the API server uses:
    `299 - "<Kind>: <text>"` (quotes and backslashes escaped, non-ASCII as backslash escapes).
    """

    status: int
    content_type: str
    body: str
    warnings: tuple[str, ...] = ()


def handle_http(body: bytes, settings: KubeletDNS, host_text: str | None) -> HttpReply:
    """Answer `POST /v1/resolv-conf` (body: one Pod as JSON) without touching a socket.

    200 text/plain; charset=utf-8: the rendered file; `warnings` holds one `Warning` header value each.
    400 text/plain: the body is not UTF-8 JSON, or not a Pod (wrong kind, not an object).
    413 text/plain: the body is over 3 MiB, the API server's limit.
    422 application/json: `{"errors": [{"field": "spec.dnsConfig.searches[1]", "message": "..."}]}`,
        every field the API server would reject, in its order.
    500 text/plain: the node's resolv.conf is unusable (the kubelet could not form DNS for any pod).
    """
    if len(body) > MAX_HTTP_BODY_BYTES:
        return _text(413, f"request body is larger than {MAX_HTTP_BODY_BYTES >> 20} MiB\n")
    try:
        pod = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return _text(400, f"request body is not UTF-8: {exc.reason} at byte {exc.start}\n")
    except (json.JSONDecodeError, RecursionError) as exc:
        return _text(400, f"request body is not JSON: {exc}\n")
    try:
        result = pod_dns(pod, settings, host_text)
    except ManifestError as exc:
        return _text(400, f"request body is not a Pod: {exc}\n")
    except PodSpecError as exc:
        errors = [{"field": path, "message": message} for path, message in exc.errors]
        return HttpReply(422, "application/json", json.dumps({"errors": errors}))
    except HostResolvConfError as exc:
        return _text(500, f"the node's resolv.conf cannot be used: {exc}\n")
    headers = tuple(f"299 - {_header_quote(w.line())}" for w in result.warnings)
    return HttpReply(200, "text/plain; charset=utf-8", result.render(), headers)


def _text(status: int, body: str) -> HttpReply:
    return HttpReply(status, "text/plain; charset=utf-8", body)


def _header_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.encode("ascii", "backslashreplace").decode("ascii") + '"'
