"""dnstap: the queries and answers a DNS server sees, as protobuf messages in Frame Streams, sent to a collector.

`Dnstap` (`--dnstap unix:/PATH` or `tcp:ADDR:PORT`) encodes a `dnstap.Dnstap` protobuf (the schema of
dnstap.proto, written here by hand: a handful of fields, no protobuf library) for each message:
CLIENT_QUERY and CLIENT_RESPONSE for a client's query and our answer (`client`), FORWARDER_QUERY and
FORWARDER_RESPONSE for what we ask an upstream and what it answers (`forwarder`), the zone each was
forwarded for in `query_zone`. Frames go in a bounded queue (`QUEUE_FRAMES`); one task connects to the
collector, makes the bidirectional Frame Streams handshake (READY with the content type
`protobuf:dnstap.Dnstap`, the collector's ACCEPT, START), and writes the queued frames, waiting for each
batch to drain. Answering only appends to the queue: a slow collector fills it and an absent one leaves
it full, and then each new frame is dropped and counted (`dropped`), never waited for. The task
reconnects after a failure (`RECONNECT` seconds apart at most) and sends STOP (and waits briefly for
FINISH) when the agent stops. CoreDNS's `dnstap` plugin and unbound send the same frames; `dnstap-read`
(BIND) and `fstrm_capture` read them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections import deque
from typing import Any

log = logging.getLogger("nodedns.dnstap")

CONTENT_TYPE = b"protobuf:dnstap.Dnstap"
# Frame Streams control frames (fstrm's control.h)
FSTRM_ACCEPT, FSTRM_START, FSTRM_STOP, FSTRM_READY, FSTRM_FINISH = 1, 2, 3, 4, 5
FSTRM_CONTENT_TYPE = 1  # the control field that carries a content type
MAX_CONTROL = 512  # bytes of a control frame we read at most

# dnstap.proto: Message.Type, SocketFamily, SocketProtocol
CLIENT_QUERY, CLIENT_RESPONSE, FORWARDER_QUERY, FORWARDER_RESPONSE = 5, 6, 7, 8
INET, INET6 = 1, 2
PROTOCOLS = {"udp": 1, "tcp": 2, "dot": 3}
DNSTAP_MESSAGE = 1  # Dnstap.Type MESSAGE

QUEUE_FRAMES = 10_000  # frames waiting for the collector at most; beyond, new frames are dropped (counted)
BATCH = 256  # frames written before waiting for the socket to drain
HANDSHAKE_TIMEOUT = 2.0  # seconds to connect and to get the collector's ACCEPT
RECONNECT = 5.0  # seconds between two connection attempts at most (from 0.25 s, doubling)
STOP_TIMEOUT = 1.0  # seconds the STOP waits for the collector's FINISH and the last frames to go


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _uint(number: int, n: int) -> bytes:
    return _key(number, 0) + _varint(n)


def _bytes(number: int, data: bytes) -> bytes:
    return _key(number, 2) + _varint(len(data)) + data


def _fixed32(number: int, n: int) -> bytes:
    return _key(number, 5) + struct.pack("<I", n)


def _address(host: str) -> tuple[int, bytes] | None:
    """(SocketFamily, packed address) of an IP address text; None for anything else (a Unix socket)."""
    for family, code in ((socket.AF_INET, INET), (socket.AF_INET6, INET6)):
        with contextlib.suppress(OSError, ValueError):
            return code, socket.inet_pton(family, host.split("%", 1)[0])
    return None


def encode(mtype: int, *, identity: bytes, version: bytes, proto: str, query_addr: tuple[str, int] | None,
           response_addr: tuple[str, int] | None, query_time: float, query_message: bytes | None = None,
           response_time: float | None = None, response_message: bytes | None = None,
           zone: str | None = None) -> bytes:
    """One `dnstap.Dnstap` protobuf of type MESSAGE holding one `Message` (field numbers of dnstap.proto)."""
    msg = bytearray(_uint(1, mtype))
    family = None
    for addr in (query_addr, response_addr):
        packed = _address(addr[0]) if addr is not None else None
        if packed is not None:
            family = packed[0]
    if family is not None:
        msg += _uint(2, family)
    msg += _uint(3, PROTOCOLS.get(proto, 1))
    for number, addr in ((4, query_addr), (5, response_addr)):
        packed = _address(addr[0]) if addr is not None else None
        if packed is not None:
            msg += _bytes(number, packed[1])
    for number, addr in ((6, query_addr), (7, response_addr)):
        if addr is not None and addr[1] and _address(addr[0]) is not None:  # 0: not known (a TCP client's)
            msg += _uint(number, addr[1] & 0xFFFF)
    msg += _uint(8, int(query_time)) + _fixed32(9, int((query_time % 1) * 1e9) % 1_000_000_000)
    if query_message is not None:
        msg += _bytes(10, query_message)
    if zone is not None:
        msg += _bytes(11, wire_name(zone))
    if response_time is not None:
        msg += _uint(12, int(response_time)) + _fixed32(13, int((response_time % 1) * 1e9) % 1_000_000_000)
    if response_message is not None:
        msg += _bytes(14, response_message)
    return _bytes(1, identity) + _bytes(2, version) + _bytes(14, bytes(msg)) + _uint(15, DNSTAP_MESSAGE)


def wire_name(zone: str) -> bytes:
    """A zone in wire form (query_zone is a DNS name in wire format): `.` is the root."""
    out = bytearray()
    for label in zone.strip(".").split("."):
        if label:
            raw = label.encode("ascii", "replace")[:63]
            out += bytes([len(raw)]) + raw
    return bytes(out) + b"\0"


def control(ctype: int, *, content_type: bool = True) -> bytes:
    """A Frame Streams control frame: the escape (a zero length), its length, its type, the content type."""
    body = struct.pack("!I", ctype)
    if content_type:
        body += struct.pack("!II", FSTRM_CONTENT_TYPE, len(CONTENT_TYPE)) + CONTENT_TYPE
    return struct.pack("!II", 0, len(body)) + body


async def read_control(reader: asyncio.StreamReader) -> int:
    """The type of the next control frame the collector sends. Raises ConnectionError for anything else."""
    escape, length = struct.unpack("!II", await reader.readexactly(8))
    if escape != 0 or not 4 <= length <= MAX_CONTROL:
        raise ConnectionError("the collector did not answer with a Frame Streams control frame")
    body = await reader.readexactly(length)
    return int(struct.unpack("!I", body[:4])[0])


class Dnstap:
    """The frames for one collector: the bounded queue the answering path appends to, the task that sends
    them (module docstring), and what /status shows ("dnstap" section)."""

    def __init__(self, endpoint: str, *, identity: str, version: str, queue_frames: int = QUEUE_FRAMES) -> None:
        self.endpoint = endpoint  # unix:/PATH or tcp:ADDR:PORT (config._dnstap_endpoint's text)
        self.identity = identity.encode()
        self.version = version.encode()
        self.queue: deque[bytes] = deque()
        self.queue_frames = queue_frames
        self._wake = asyncio.Event()
        self._stopping = False
        self.connected = False
        self.frames = 0  # frames written to a collector
        self.dropped = 0  # frames dropped: the queue full (a slow or absent collector)
        self.connections = 0  # handshakes that succeeded
        self.errors = 0  # connection attempts and connections that failed
        self.last_error = ""
        self.by_type = {"client_query": 0, "client_response": 0, "forwarder_query": 0, "forwarder_response": 0}
        self._task: asyncio.Task[None] | None = None

    # -- what the answering path calls (never waits) --------------------------------------------

    def put(self, frame: bytes) -> None:
        if len(self.queue) >= self.queue_frames:
            self.dropped += 1
            return
        self.queue.append(frame)
        self._wake.set()

    def client(self, query: bytes, response: bytes, addr: Any, proto: str, elapsed: float, zone: str) -> None:
        """A client's query and our answer to it: CLIENT_QUERY and CLIENT_RESPONSE."""
        now = time.time()
        asked = now - elapsed
        client = (str(addr[0]), int(addr[1])) if isinstance(addr, tuple) and len(addr) >= 2 else None
        common: dict[str, Any] = {"identity": self.identity, "version": self.version, "proto": proto,
                                  "query_addr": client, "response_addr": None, "query_time": asked, "zone": zone}
        self.put(encode(CLIENT_QUERY, query_message=query, **common))
        self.put(encode(CLIENT_RESPONSE, response_time=now, response_message=response, **common))
        self.by_type["client_query"] += 1
        self.by_type["client_response"] += 1

    def forwarder(self, query: bytes, response: bytes | None, server: tuple[str, int], proto: str,
                  sent: float, received: float, zone: str) -> None:
        """What we asked an upstream (FORWARDER_QUERY) and, when it answered, its answer (FORWARDER_RESPONSE);
        `sent` and `received` are time.time() values."""
        common: dict[str, Any] = {"identity": self.identity, "version": self.version, "proto": proto,
                                  "query_addr": None, "response_addr": server, "query_time": sent, "zone": zone}
        self.put(encode(FORWARDER_QUERY, query_message=query, **common))
        self.by_type["forwarder_query"] += 1
        if response is not None:
            self.put(encode(FORWARDER_RESPONSE, response_time=received, response_message=response, **common))
            self.by_type["forwarder_response"] += 1

    # -- the sending task -------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run(), name="dnstap")

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.endpoint.startswith("unix:"):
            return await asyncio.open_unix_connection(self.endpoint[len("unix:"):])
        host, _, port = self.endpoint[len("tcp:"):].rpartition(":")
        return await asyncio.open_connection(host.strip("[]"), int(port))

    async def _session(self) -> None:
        """One connection: the handshake, then the frames as they come, until an error or the stop."""
        async with asyncio.timeout(HANDSHAKE_TIMEOUT):
            reader, writer = await self._connect()
        try:
            writer.write(control(FSTRM_READY))
            async with asyncio.timeout(HANDSHAKE_TIMEOUT):
                await writer.drain()
                if await read_control(reader) != FSTRM_ACCEPT:
                    raise ConnectionError("the collector did not ACCEPT the content type " + CONTENT_TYPE.decode())
            writer.write(control(FSTRM_START))
            self.connected = True
            self.connections += 1
            if self.last_error:
                log.info("dnstap: connected to %s again", self.endpoint)
                self.last_error = ""
            while True:
                if not self.queue:
                    if self._stopping:
                        break
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                batch = [self.queue.popleft() for _ in range(min(BATCH, len(self.queue)))]
                writer.write(b"".join(struct.pack("!I", len(f)) + f for f in batch))
                await writer.drain()  # a slow collector holds this task, never an answer: the queue fills
                self.frames += len(batch)
            writer.write(control(FSTRM_STOP, content_type=False))
            async with asyncio.timeout(STOP_TIMEOUT):
                await writer.drain()
                await read_control(reader)  # FINISH
        finally:
            self.connected = False
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def run(self) -> None:
        delay = 0.25
        while not self.stopping():
            try:
                await self._session()
                delay = 0.25
            except asyncio.CancelledError:
                raise
            except (OSError, TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
                self.errors += 1
                reason = f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__
                if reason != self.last_error:
                    log.warning("dnstap: %s: %s; frames are dropped (counted) until it works", self.endpoint, reason)
                self.last_error = reason
            if self.stopping():
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT)

    def stopping(self) -> bool:
        return self._stopping

    async def close(self) -> None:
        """Send what is queued, then STOP (within STOP_TIMEOUT), and end the task."""
        self._stopping = True
        self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT + HANDSHAKE_TIMEOUT)
        except (TimeoutError, Exception):  # noqa: BLE001 - a collector that never finishes: cut it
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def status(self) -> dict[str, Any]:
        """The "dnstap" section of /status and /metrics."""
        return {"endpoint": self.endpoint, "connected": self.connected, "frames": self.frames,
                "dropped": self.dropped, "queued": len(self.queue), "queue_max": self.queue_frames,
                "connections": self.connections, "errors": self.errors, "last_error": self.last_error,
                "messages": dict(self.by_type)}
