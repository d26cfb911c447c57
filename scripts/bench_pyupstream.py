#!/usr/bin/env python3
"""A realistic upstream for the benchmarks: a plain Python authoritative server, or a delay in front of another.

Real upstreams are milliseconds away and answer at their own pace; unbound on loopback answers in
microseconds. Two stand-ins, one process each, on 127.0.0.1:PORT (UDP):

    python scripts/bench_pyupstream.py PORT                           # authoritative for bench.test. (dnslib)
    python scripts/bench_pyupstream.py PORT --forward 127.0.0.1:5300 --delay-ms 3   # unbound 3 ms away

The authoritative one answers `hN.bench.test.` (N < 10,000) with `A 10.x.y.z` at TTL 300 (what
scripts/bench_upstream.py's unbound zone serves, at the TTL of a typical public record) and every other
name of the zone NXDOMAIN with its SOA; each answer parsed and built with dnslib, one at a time on
one event loop. `--delay-ms` holds every answer that long (either mode); `--forward` relays each query
to another server and its answer back.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from dnslib import QTYPE, RCODE, RR, SOA, A, DNSRecord

ZONE = "bench.test."
NAMES = 10_000
TTL = 300


def answer(data: bytes) -> bytes | None:
    """The authoritative answer to one query (None for one that does not parse)."""
    try:
        q = DNSRecord.parse(data)
    except Exception:  # noqa: BLE001 - anything unparsable is dropped, as a real server's FORMERR would be
        return None
    r = q.reply()
    name = str(q.q.qname).lower()
    label = name[: -len(ZONE) - 1] if name.endswith("." + ZONE) else ""
    if label.startswith("h") and label[1:].isdigit() and int(label[1:]) < NAMES:
        if q.q.qtype == QTYPE.A:
            i = int(label[1:])
            r.add_answer(RR(q.q.qname, QTYPE.A, ttl=TTL, rdata=A(f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}")))
        else:
            r.add_auth(RR(ZONE, QTYPE.SOA, ttl=TTL, rdata=SOA("ns." + ZONE, "hostmaster." + ZONE,
                                                              (1, 3600, 600, 86400, 3600))))
    else:
        r.header.rcode = RCODE.NXDOMAIN
        r.add_auth(RR(ZONE, QTYPE.SOA, ttl=TTL, rdata=SOA("ns." + ZONE, "hostmaster." + ZONE,
                                                          (1, 3600, 600, 86400, 3600))))
    return r.pack()


class Authoritative(asyncio.DatagramProtocol):
    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        out = answer(data)
        if out is None or self.transport is None:
            return
        if self.delay:
            asyncio.get_running_loop().call_later(self.delay, self.transport.sendto, out, addr)
        else:
            self.transport.sendto(out, addr)


class Relay(asyncio.DatagramProtocol):
    """Queries relayed to `target` after `delay`, answers back to whoever asked (by query ID and address)."""

    def __init__(self, target: tuple[str, int], delay: float) -> None:
        self.target, self.delay = target, delay
        self.transport: asyncio.DatagramTransport | None = None
        self.upstream: asyncio.DatagramTransport | None = None
        self.pending: dict[bytes, list[tuple[str, int]]] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if len(data) < 12 or self.upstream is None:
            return
        self.pending.setdefault(data[:2], []).append(addr)
        asyncio.get_running_loop().call_later(self.delay, self.upstream.sendto, data, self.target)

    def answered(self, data: bytes) -> None:
        waiting = self.pending.get(data[:2])
        if waiting and self.transport is not None:
            self.transport.sendto(data, waiting.pop(0))
            if not waiting:
                del self.pending[data[:2]]


class _Back(asyncio.DatagramProtocol):
    def __init__(self, relay: Relay) -> None:
        self.relay = relay

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.relay.answered(data)


async def serve(port: int, forward: str | None, delay: float) -> None:
    loop = asyncio.get_running_loop()
    if forward:
        host, _, p = forward.rpartition(":")
        relay = Relay((host, int(p)), delay)
        await loop.create_datagram_endpoint(lambda: relay, local_addr=("127.0.0.1", port))
        back, _ = await loop.create_datagram_endpoint(lambda: _Back(relay), local_addr=("127.0.0.1", 0))
        relay.upstream = back
    else:
        await loop.create_datagram_endpoint(lambda: Authoritative(delay), local_addr=("127.0.0.1", port))
    await asyncio.Event().wait()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("port", type=int, help="the UDP port on 127.0.0.1 to answer on")
    ap.add_argument("--forward", metavar="HOST:PORT", help="relay every query to this server instead of answering")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="hold every answer this long (default 0)")
    args = ap.parse_args(argv)
    try:
        asyncio.run(serve(args.port, args.forward, args.delay_ms / 1000))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
