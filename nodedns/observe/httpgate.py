"""Admission to the HTTP listeners: what one listener allows, connection caps, the pace, unread replies.

`HttpLimits` is what one listener allows (docs/hardening.md has the threat model; the status
listener's "Bounded work" is nodedns.observe.status's docstring). `Gate` is one listener's
admission: per listener at most `max_connections` from other hosts and `max_local_connections`
from this node (loopback, or a connection whose source is its own destination address: the kubelet
probing the local IP), `max_per_client` per client address, beyond that closed at once; a token
bucket per client class (this node / other hosts) that paces requests; a watchdog that aborts a
reply nobody reads for `send_timeout`. `Guarded` puts the gate in front of aiohttp's protocol and,
on the status listener, answers one `GET /healthz` by hand on a connection over the caps, so a flood
cannot fail the kubelet's liveness probe. `ServerLog` is aiohttp's server logger per listener:
malformed requests counted in the gate and logged once a minute. The counts are the "http" section.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from nodedns.runtime.logutil import Consolidated
from nodedns.serve.limits import Pace

log = logging.getLogger("nodedns.status")
endpoint_errors = Consolidated(log, "status endpoint error")  # one for the whole status server (status.py too)


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What one HTTP listener allows (module docstring); tests shrink them."""

    max_body: int = 64 << 10
    max_connections: int = 128  # from other hosts, per listener
    max_local_connections: int = 64  # from this node, per listener
    max_per_client: int = 16
    head_timeout: float = 5.0
    body_timeout: float = 5.0
    send_timeout: float = 10.0
    rate: float = 10.0  # requests a second per client class (probes and scrapes need well under 1)
    burst: int = 20
    max_wait: float = 2.0
    max_reply: int = 1 << 20
    max_explains: int = 2
    render_interval: float = 0.25
    refresh_interval: float = 1.0  # the --workers supervisor gathers its workers' counters
    render_burst: int = 5
    max_line: int = 8190
    max_headers: int = 64


def from_this_node(transport: asyncio.BaseTransport) -> tuple[str, bool]:
    """(client address, whether it is this node): a Unix socket, loopback, or a source address that is
    the connection's own destination address (a process of this host asking a local address)."""
    peer = transport.get_extra_info("peername")
    if not isinstance(peer, tuple) or not peer:
        return "unix", True
    client = str(peer[0])
    sock = transport.get_extra_info("sockname")
    own = str(sock[0]) if isinstance(sock, tuple) and sock else ""
    try:
        loopback = ipaddress.ip_address(client.partition("%")[0]).is_loopback
    except ValueError:
        loopback = False
    return client, loopback or client == own


@dataclass(slots=True)
class _Conn:
    transport: asyncio.Transport
    client: str
    local: bool
    buffered: int = 0
    stalled_since: float | None = None


class Gate:
    """One listener's admission: connection caps, the pace, the watchdog for replies nobody reads."""

    def __init__(self, name: str, limits: HttpLimits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.limits = limits
        self.clock = clock
        self.conns: dict[asyncio.Transport, _Conn] = {}
        self.per_client: dict[str, int] = {}
        self.open = {False: 0, True: 0}  # by "from this node"
        self.paces = {local: Pace(limits.rate, limits.burst, clock=clock) for local in (False, True)}
        self.counts = {"accepted": 0, "refused": 0, "stalled": 0, "body_timeouts": 0, "too_large": 0, "busy": 0,
                       "requests": 0, "malformed": 0, "probes_over_cap": 0}
        self.probing = 0  # connections over the caps given their one chance at GET /healthz (`Guarded`)
        self._watchdog: asyncio.TimerHandle | None = None

    def admit(self, transport: asyncio.Transport) -> bool:
        client, local = from_this_node(transport)
        cap = self.limits.max_local_connections if local else self.limits.max_connections
        if self.open[local] >= cap or self.per_client.get(client, 0) >= self.limits.max_per_client:
            self.counts["refused"] += 1
            return False
        self.counts["accepted"] += 1
        self.open[local] += 1
        self.per_client[client] = self.per_client.get(client, 0) + 1
        self.conns[transport] = _Conn(transport, client, local)
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().call_later(1.0, self._watch)
        return True

    def release(self, transport: asyncio.Transport) -> None:
        conn = self.conns.pop(transport, None)
        if conn is None:
            return
        self.open[conn.local] -= 1
        left = self.per_client[conn.client] - 1
        if left:
            self.per_client[conn.client] = left
        else:
            del self.per_client[conn.client]

    def _watch(self) -> None:
        """Abort connections whose reply has not moved for `send_timeout` (a client that does not read)."""
        self._watchdog = None
        now = self.clock()
        for conn in list(self.conns.values()):
            size = conn.transport.get_write_buffer_size()
            if size == 0:
                conn.stalled_since = None
            elif conn.stalled_since is None or size < conn.buffered:
                conn.stalled_since = now
            elif now - conn.stalled_since >= self.limits.send_timeout:
                self.counts["stalled"] += 1
                conn.transport.abort()
                self.release(conn.transport)
            conn.buffered = size
        if self.conns:
            self._watchdog = asyncio.get_running_loop().call_later(1.0, self._watch)

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def pace(self, request: web.Request) -> float | None:
        """Seconds this request waits for its turn; None: too long, answer 503."""
        self.counts["requests"] += 1
        local = True
        if request.transport is not None:
            local = from_this_node(request.transport)[1]
        wait = self.paces[local].reserve(self.limits.max_wait)
        if wait is None:
            self.counts["busy"] += 1
        return wait

    def state(self) -> dict[str, Any]:
        return {"open": self.open[False] + self.open[True], "open_local": self.open[True], **self.counts}


PROBE_SLOTS = 256  # connections over the caps that may still ask GET /healthz at once
PROBE_WAIT = 1.0  # seconds such a connection has to send its request head
PROBE_HEAD = 4096  # bytes of request head it may send
_PROBE_LINE = (b"GET /healthz HTTP/1.1", b"GET /healthz HTTP/1.0")


class Guarded(asyncio.Protocol):
    """The aiohttp protocol behind the gate: a connection over a cap never reaches aiohttp.

    With `liveness` (the status listener), such a connection gets one request: `GET /healthz` is
    answered here, by hand, from the event loop's own view (`liveness()`, the reasons as /healthz
    gives them), and the connection closed; anything else is aborted. Liveness is about the event
    loop, not the HTTP load: a flood that holds every connection slot (a host-network Pod shares the
    kubelet's address, so no per-client cap can tell them apart) does not fail the kubelet's probe.
    At most PROBE_SLOTS such connections at once, each for PROBE_WAIT seconds and PROBE_HEAD bytes."""

    def __init__(self, gate: Gate, make: Callable[[], asyncio.Protocol],
                 liveness: Callable[[], list[str]] | None = None) -> None:
        self.gate = gate
        self.make = make
        self.liveness = liveness
        self.inner: asyncio.Protocol | None = None
        self.transport: asyncio.Transport | None = None
        self._probe: bytearray | None = None  # the head of an over-cap connection's one request
        self._probe_timer: asyncio.TimerHandle | None = None

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, base)  # a stream transport (uvloop's do not subclass asyncio's)
        if not self.gate.admit(transport):
            if self.liveness is None or self.gate.probing >= PROBE_SLOTS:
                transport.abort()
                return
            self.gate.probing += 1
            self.transport = transport
            self._probe = bytearray()
            self._probe_timer = asyncio.get_running_loop().call_later(PROBE_WAIT, self._end_probe)
            return
        self.transport = transport
        self.inner = self.make()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.data_received(data)
        elif self._probe is not None:
            self._probe_data(data)

    def _probe_data(self, data: bytes) -> None:
        assert self._probe is not None and self.transport is not None and self.liveness is not None
        self._probe += data
        head_end = self._probe.find(b"\r\n\r\n")
        if head_end < 0:
            if len(self._probe) > PROBE_HEAD or b"\r\n" in self._probe and not self._probe.startswith(_PROBE_LINE):
                self._end_probe()
            return
        if not self._probe.startswith(_PROBE_LINE) or self._probe.find(b"\r\n") != len(_PROBE_LINE[0]):
            self._end_probe()
            return
        reasons = self.liveness()
        body = ("not alive:\n" + "".join(f"- {r}\n" for r in reasons) if reasons else "ok\n").encode()
        status = b"503 Service Unavailable" if reasons else b"200 OK"
        self.transport.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; charset=utf-8\r\n"
                             b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
        self.gate.counts["probes_over_cap"] += 1
        self._finish_probe()
        self.transport.close()

    def _end_probe(self) -> None:
        """No GET /healthz in time (or something else): gone, as any connection over the caps."""
        if self._probe is None or self.transport is None:
            return
        self._finish_probe()  # counted as refused when the gate turned it away
        self.transport.abort()

    def _finish_probe(self) -> None:
        if self._probe_timer is not None:
            self._probe_timer.cancel()
            self._probe_timer = None
        if self._probe is not None:
            self._probe = None
            self.gate.probing -= 1

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._probe is not None:
            self._finish_probe()
            self.transport = None
            return
        if self.transport is not None and self.inner is not None:
            self.gate.release(self.transport)
        if self.inner is not None:
            self.inner.connection_lost(exc)
            self.inner = None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()


class ServerLog:
    """aiohttp's server logger for one listener (AppRunner's `logger`): a malformed request (a parse error:
    both Transfer-Encoding and Content-Length, a bad header, a bad method) is counted in the gate and
    logged once per interval with the count (consolidated), never a traceback per request; any other
    error aiohttp reports goes to the status endpoint errors (one traceback per interval)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.malformed = Consolidated(log, f"malformed HTTP request on the {gate.name} listener")

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 - logging.Logger's name
        return log.isEnabledFor(level)

    def debug(self, msg: str, *args: Any, exc_info: Any = None, **kw: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            self._malformed(exc_info)
        elif log.isEnabledFor(logging.DEBUG):
            log.debug(msg, *args)

    def info(self, msg: str, *args: Any, **kw: Any) -> None:
        log.info(msg, *args)

    def warning(self, msg: str, *args: Any, **kw: Any) -> None:
        log.warning(msg, *args)

    def exception(self, msg: str, *args: Any, exc_info: Any = None, **kw: Any) -> None:
        self.error(msg, *args, exc_info=exc_info, **kw)

    def error(self, msg: str, *args: Any, exc_info: Any = None, **kw: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            self._malformed(exc_info)
        elif isinstance(exc_info, BaseException):
            endpoint_errors.report(exc_info)
        else:
            endpoint_errors.report(msg % args if args else msg)

    def _malformed(self, exc: HttpProcessingError) -> None:
        self.gate.counts["malformed"] += 1
        text = " ".join(str(getattr(exc, "message", "") or exc).split())[:200]
        self.malformed.report(f"{exc.__class__.__name__}: {text}")
