"""Forward one raw query to the `--fallback-upstream` before the first sync: UDP, then TCP when truncated.

Until the index has been synced once, a cluster-zone name that would be NXDOMAIN may only not
exist *yet*; with `--fallback-upstream ADDR` (e.g. the kube-dns-upstream Service) the resolver
hands such queries here instead of answering SERVFAIL. Deliberately small and self-contained (the
general forwarder is `upstream`): a fresh socket per query (random source port), a random query
ID restored to the client's on the way back, the response must echo our ID and question, one
deadline for the whole exchange. Any failure raises UpstreamError; the resolver answers SERVFAIL.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import struct

from nodedns.dns.wire import question_end
from nodedns.errors import FormatError, UpstreamError

HostPort = tuple[str, int]
TC = 0x0200
QR = 0x8000


class Fallback:
    """`await fallback(query_bytes)` -> the upstream's response with the query's own ID."""

    def __init__(self, address: HostPort, *, timeout: float = 2.0) -> None:
        self.address = address
        self.timeout = timeout
        self.family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.forwarded = 0
        self.failures = 0

    async def __call__(self, query: bytes) -> bytes:
        self.forwarded += 1
        try:
            async with asyncio.timeout(self.timeout):
                return await self._exchange(query)
        except TimeoutError:
            self.failures += 1
            raise UpstreamError(f"fallback {self._where()}: no answer within {self.timeout}s") from None
        except (OSError, asyncio.IncompleteReadError, FormatError) as exc:
            self.failures += 1
            raise UpstreamError(f"fallback {self._where()}: {exc.__class__.__name__}: {exc}") from None
        except UpstreamError:
            self.failures += 1
            raise

    def _where(self) -> str:
        host, port = self.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    async def _exchange(self, query: bytes) -> bytes:
        qend = question_end(query)
        ours = struct.pack("!H", secrets.randbits(16)) + query[2:]
        reply = await self._udp(ours, qend)
        if struct.unpack_from("!H", reply, 2)[0] & TC:
            reply = await self._tcp(ours, qend)
        return query[:2] + reply[2:]

    async def _udp(self, ours: bytes, qend: int) -> bytes:
        loop = asyncio.get_running_loop()
        sock = socket.socket(self.family, socket.SOCK_DGRAM)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, self.address)
            await loop.sock_sendall(sock, ours)
            while True:  # ignore stray datagrams until ours arrives (or the deadline)
                data = await loop.sock_recv(sock, 65535)
                if _matches(data, ours, qend):
                    return data
        finally:
            sock.close()

    async def _tcp(self, ours: bytes, qend: int) -> bytes:
        reader, writer = await asyncio.open_connection(*self.address)
        try:
            writer.write(struct.pack("!H", len(ours)) + ours)
            await writer.drain()
            (n,) = struct.unpack("!H", await reader.readexactly(2))
            data = await reader.readexactly(n)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        if not _matches(data, ours, qend):
            raise UpstreamError(f"fallback {self._where()}: TCP answer does not match the query")
        return data


def _matches(data: bytes, ours: bytes, qend: int) -> bool:
    """A response to our query: same ID, QR set, same single question (case-insensitive)."""
    if len(data) < qend or data[:2] != ours[:2] or not data[2] & 0x80 or data[4:6] != ours[4:6]:
        return False
    return data[12:qend].lower() == ours[12:qend].lower()
