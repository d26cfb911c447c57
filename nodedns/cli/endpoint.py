"""Where `nodedns lookup`, `nodedns explain` and `nodedns top` reach the agent's debug listener, and one request to it.

An endpoint is `http://HOST:PORT` (or `HOST:PORT`) or `unix:/PATH`, as `--debug-listen` takes it.
Without `--debug`, the commands try, in order: `$NODEDNS_DEBUG`; the Unix socket
`/run/nodedns/debug.sock` when it exists (what `kubectl exec` into the DaemonSet's pod finds when
the agent listens there); `http://127.0.0.1:9254` (`--debug-listen`'s default). Stdlib only
(http.client): these commands stay light.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import stat
import urllib.parse
from collections.abc import Mapping
from typing import Any

ENV = "NODEDNS_DEBUG"
DEFAULT_SOCKET = "/run/nodedns/debug.sock"
DEFAULT_TCP = "http://127.0.0.1:9254"
UNIX = "unix:"
TIMEOUT = 15.0
HELP = (f"the agent's debug listener: http://HOST:PORT or unix:/PATH (default ${ENV}, else {UNIX}{DEFAULT_SOCKET} "
        f"when it exists, else {DEFAULT_TCP})")


def candidates(explicit: str | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The endpoints to try, in order: the one given, else $NODEDNS_DEBUG, else the defaults."""
    if explicit:
        return [explicit]
    environ = os.environ if environ is None else environ
    if environ.get(ENV):
        return [environ[ENV]]
    out = []
    try:
        if stat.S_ISSOCK(os.stat(DEFAULT_SOCKET).st_mode):
            out.append(UNIX + DEFAULT_SOCKET)
    except OSError:
        pass
    return [*out, DEFAULT_TCP]


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def connection(endpoint: str, timeout: float = TIMEOUT) -> tuple[http.client.HTTPConnection, str]:
    """A connection to `endpoint` and the path prefix its URL had. ValueError: not an endpoint."""
    if endpoint.startswith(UNIX):
        path = endpoint[len(UNIX):]
        if not path:
            raise ValueError(f"{endpoint!r}: use unix:/PATH")
        return _UnixConnection(path, timeout), ""
    url = endpoint if "://" in endpoint else "http://" + endpoint
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"{endpoint!r}: use http://HOST:PORT or unix:/PATH")
    return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout), parts.path.rstrip("/")


def request(endpoint: str, method: str, path: str, body: bytes | None = None,
            headers: Mapping[str, str] | None = None, timeout: float = TIMEOUT) -> tuple[int, str, str]:
    """(HTTP status, content type, body text) of one request. OSError when the agent cannot be reached,
    ValueError for an endpoint that is not one."""
    conn, prefix = connection(endpoint, timeout)
    try:
        conn.request(method, prefix + path, body=body, headers=dict(headers or {}))
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type", ""), resp.read().decode("utf-8", "replace")
    except http.client.HTTPException as exc:
        raise OSError(f"not an HTTP answer: {exc!r}") from None
    finally:
        conn.close()


def ask(explicit: str | None, method: str, path: str, body: bytes | None = None,
        headers: Mapping[str, str] | None = None) -> tuple[str, int, str, str]:
    """(endpoint that answered, status, content type, body): the first candidate that can be reached.
    Raises the last OSError (ValueError for a bad explicit endpoint)."""
    error: OSError | None = None
    for endpoint in candidates(explicit):
        try:
            return (endpoint, *request(endpoint, method, path, body, headers))
        except OSError as exc:
            error = exc
    assert error is not None
    raise error


def unreachable(explicit: str | None, exc: Exception) -> str:
    """The message for an agent that cannot be reached."""
    where = explicit or " or ".join(candidates(None))
    return (f"cannot reach the agent's debug listener at {where}: {getattr(exc, 'strerror', None) or exc} "
            "(is it running, and with --debug-listen? On a node: kubectl -n kube-system exec ds/nodedns -- "
            "nodedns lookup NAME)")


def no_route(endpoint: str, route: str) -> str:
    """The message for a 404 on a debug route."""
    return (f"{endpoint} has no {route}: the agent runs with --no-debug, or this is its status listener (the "
            f"debug routes are on --debug-listen, default {DEFAULT_TCP}), or not a nodedns agent")


class Failed(Exception):
    """The agent could not be asked, or did not answer what was asked: the message and the exit status."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def check(where: str, code: int, text: str, route: str, *, asked: str = "question", ok: tuple[int, ...] = (200,),
          missing: tuple[int, ...] = (404,), reason: str | None = None) -> None:
    """Raise `Failed` for the debug listener's answer unless its status is `ok`: no such route (a `missing`
    status), the question rejected (400, exit status 2), any other status (with `reason`, else the start
    of the body)."""
    if code in missing:
        raise Failed(no_route(where, route))
    if code == 400:
        raise Failed(f"the agent rejected the {asked}: {text.strip().removeprefix('bad request: ')}", 2)
    if code not in ok:
        raise Failed(f"{where} answered HTTP {code}: {reason if reason is not None else text.strip()[:200]}")


def reach(explicit: str | None, method: str, path: str, body: bytes | None = None,
          headers: Mapping[str, str] | None = None) -> tuple[str, int, str, str]:
    """`ask`, with an agent that cannot be reached (or a bad endpoint) raised as `Failed`."""
    try:
        return ask(explicit, method, path, body, headers)
    except (OSError, ValueError) as exc:
        raise Failed(unreachable(explicit, exc)) from None


def json_of(where: str, text: str) -> Any:
    """The JSON body of a 200; `Failed` when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise Failed(f"{where} did not answer JSON (is it a nodedns agent?)") from None


def agent_line(data: Mapping[str, Any], where: str) -> str:
    """Which agent answered: its node, process and DNS addresses, as every debug route names it (the
    first line of what `nodedns lookup`, `explain` and `top` print), and where it was reached."""
    url = where if where.startswith(UNIX) or "://" in where else f"http://{where}"
    agent = data.get("agent")
    if not isinstance(agent, Mapping):
        return f"agent:    not named by {url} (an older nodedns, or not a nodedns agent)"
    dns = ", ".join(str(a) for a in agent.get("dns") or ()) or "none"
    return f"agent:    node {agent.get('node')}, pid {agent.get('pid')}, DNS {dns} (debug listener {url})"
