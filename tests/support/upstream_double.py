"""An authoritative upstream DNS server for tests: UDP and TCP on 127.0.0.1 port 0, in a thread.

    with UpstreamDouble({"example.com": {"A": ["192.0.2.1"]}}) as up:
        up.mode = "drop"                      # answer | delay | drop | truncate | nxdomain | servfail
                                              # | spoof | forward
        up.per_name["slow.example"] = "delay"  # a mode for one name only
        up.delay = 0.5
        up.forward_to = (host, port)          # mode "forward": relay every query there (a loop)
        up.count("example.com", "A")          # queries seen for a name (any transport)

Names not in the zone get NXDOMAIN with the SOA (TTL `soa_ttl`, MINIMUM `soa_minimum`). Modes:
answer normally; delay by `delay` s; drop (never answer); truncate (TC=1 over UDP, full over TCP);
nxdomain / servfail for every name; spoof (a forged answer from another port, one with a wrong
ID and one with the right ID but another question come first, the real answer 50 ms later);
forward (relay to `forward_to`); close (over TLS: the connection is closed under the query, unanswered).

As a process of its own (a stand-in upstream in a network namespace, on a fixed port):

    python -m tests.support.upstream_double --listen 127.0.0.1:53 --zone '{"www.example.test": {"A": ["192.0.2.80"]}}'
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

SPOOF_ADDRESS = "6.6.6.6"


class UpstreamDouble:
    def __init__(
        self,
        zone: Mapping[str, Mapping[str, list[str]]] | None = None,
        *,
        ttl: int = 300,
        soa_ttl: int = 60,
        soa_minimum: int = 30,
        origin: str = "example",
        host: str = "127.0.0.1",
        port: int = 0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.records: dict[str, dict[str, list[str]]] = {
            _norm(name): {t.upper(): list(v) for t, v in types.items()} for name, types in (zone or {}).items()
        }
        self.ttls: dict[str, int] = {}
        self.ttl = ttl
        self.soa_ttl = soa_ttl
        self.soa_minimum = soa_minimum
        self.origin = origin
        self.mode = "answer"
        self.per_name: dict[str, str] = {}
        self.delay = 0.3
        self.forward_to: tuple[str, int] | None = None
        self.seen: Counter[tuple[str, str]] = Counter()
        self.seen_over: Counter[tuple[str, str]] = Counter()  # (name, "udp" | "tcp")
        self.transports: Counter[str] = Counter()
        self.sources: list[tuple[int, int]] = []  # (query ID, client source port) of each UDP query
        self.loop: asyncio.AbstractEventLoop
        self.host = host
        self.port = port
        self._fixed_port = port
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self.tls_context = tls  # also serve DNS over TLS (RFC 7858) on tls_port with this server context
        self.tls_port = 0
        self.tls_connections = 0  # TLS connections accepted (handshakes done)
        self._tls: asyncio.Server | None = None
        self._tls_writers: set[asyncio.StreamWriter] = set()
        self._tls_wedged: set[asyncio.StreamWriter] = set()  # connections read but never answered again
        self.tls_close_after_answer = False  # close each TLS connection once it has written one answer
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="upstream-double", daemon=True)
        self._stop: asyncio.Event

    # -- control ---------------------------------------------------------------------------

    def start(self) -> UpstreamDouble:
        self._thread.start()
        if not self._ready.wait(10):
            raise TimeoutError("upstream double did not start")
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)

    def __enter__(self) -> UpstreamDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def set(self, name: str, rdtype: str, values: list[str], ttl: int | None = None) -> None:
        self.records.setdefault(_norm(name), {})[rdtype.upper()] = list(values)
        if ttl is not None:
            self.ttls[_norm(name)] = ttl

    def count(self, name: str, rdtype: str | None = None, *, transport: str | None = None) -> int:
        n = _norm(name)
        if transport is not None:
            return self.seen_over[(n, transport)]
        return sum(c for (qn, qt), c in self.seen.items() if qn == n and (rdtype is None or qt == rdtype.upper()))

    # -- serving ---------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        for _ in range(50):  # a UDP port whose TCP twin is free too
            udp_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            udp_sock.bind((self.host, self._fixed_port))
            self.port = udp_sock.getsockname()[1]
            try:
                self._tcp = await asyncio.start_server(self._tcp_client, self.host, self.port)
            except OSError:
                udp_sock.close()
                continue
            break
        self._udp, _ = await self.loop.create_datagram_endpoint(lambda: _UDP(self), sock=udp_sock)
        if self.tls_context is not None:
            self._tls = await asyncio.start_server(self._tls_client, self.host, 0, ssl=self.tls_context)
            self.tls_port = self._tls.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        self._udp.close()
        self._tcp.close()
        if self._tls is not None:
            self._tls.close()
            for w in list(self._tls_writers):
                w.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(w.wait_closed(), 1.0)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._tcp.wait_closed(), 2)

    def _mode(self, q: dns.message.Message) -> str:
        name = _norm(q.question[0].name.to_text()) if q.question else ""
        return self.per_name.get(name, self.mode)

    def answer(self, q: dns.message.Message, *, tcp: bool) -> dns.message.Message:
        r = dns.message.make_response(q)
        r.flags |= dns.flags.AA
        r.flags |= dns.flags.RA
        mode = self._mode(q)
        question = q.question[0]
        name = _norm(question.name.to_text())
        rdtype = dns.rdatatype.to_text(question.rdtype)
        if mode == "servfail":
            r.set_rcode(dns.rcode.SERVFAIL)
            return r
        if mode == "truncate" and not tcp:
            r.flags |= dns.flags.TC
            return r
        types = self.records.get(name)
        if types is None or mode == "nxdomain":
            r.set_rcode(dns.rcode.NXDOMAIN)
            r.authority.append(self._soa())
            return r
        values = types.get(rdtype)
        if not values:
            cname = types.get("CNAME")
            if cname:
                r.answer.append(_rrset(question.name.to_text(), "CNAME", self.ttls.get(name, self.ttl), cname))
                return r
            r.authority.append(self._soa())  # NODATA
            return r
        r.answer.append(_rrset(question.name.to_text(), rdtype, self.ttls.get(name, self.ttl), values))
        return r

    def _soa(self) -> dns.rrset.RRset:
        text = f"ns.{self.origin}. hostmaster.{self.origin}. 1 7200 1800 86400 {self.soa_minimum}"
        return _rrset(self.origin, "SOA", self.soa_ttl, [text])

    def _record(self, q: dns.message.Message, transport: str) -> None:
        if q.question:
            qq = q.question[0]
            self.seen[(_norm(qq.name.to_text()), dns.rdatatype.to_text(qq.rdtype))] += 1
            self.seen_over[(_norm(qq.name.to_text()), transport)] += 1
        self.transports[transport] += 1

    async def handle_udp(self, data: bytes, addr: Any, transport: asyncio.DatagramTransport) -> None:
        try:
            q = dns.message.from_wire(data)
        except Exception:  # noqa: BLE001 - garbage: no answer
            return
        self._record(q, "udp")
        self.sources.append((q.id, addr[1]))
        mode = self._mode(q)
        if mode == "drop":
            return
        if mode == "delay":
            await asyncio.sleep(self.delay)
        if mode == "forward" and self.forward_to is not None:
            relayed = await self._relay(data)
            if relayed is not None:
                transport.sendto(data[:2] + relayed[2:], addr)
            return
        r = self.answer(q, tcp=False)
        if mode == "spoof":
            forged = dns.message.make_response(q)
            forged.answer.append(_rrset(q.question[0].name.to_text(), "A", 3600, [SPOOF_ADDRESS]))
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
                other.bind((self.host, 0))
                other.sendto(forged.to_wire(), addr)
            wrong = dns.message.make_response(q)
            wrong.id = (q.id + 1) & 0xFFFF
            wrong.answer.append(_rrset(q.question[0].name.to_text(), "A", 3600, [SPOOF_ADDRESS]))
            transport.sendto(wrong.to_wire(), addr)
            lure = dns.message.make_response(dns.message.make_query("lure.example.net", "A"))
            lure.id = q.id  # the right ID from the right address, but the answer to another question
            lure.answer.append(_rrset("lure.example.net", "A", 3600, [SPOOF_ADDRESS]))
            transport.sendto(lure.to_wire(), addr)
            await asyncio.sleep(0.05)
        transport.sendto(_udp_wire(q, r), addr)

    async def _relay(self, data: bytes) -> bytes | None:
        assert self.forward_to is not None
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, self.forward_to)
            relay_id = random.getrandbits(16).to_bytes(2, "big")
            await loop.sock_sendall(sock, relay_id + data[2:])
            return await asyncio.wait_for(loop.sock_recv(sock, 65535), 3.0)
        except (OSError, TimeoutError):
            return None
        finally:
            sock.close()

    @property
    def tls_address(self) -> str:
        return f"{self.host}:{self.tls_port}"

    def drop_tls_connections(self) -> int:
        """Close every open TLS connection (as a server's idle timeout does); how many were open."""
        writers = list(self._tls_writers)
        for w in writers:
            self.loop.call_soon_threadsafe(w.close)
        return len(writers)

    def wedge_tls_connections(self) -> int:
        """The TLS connections open now stay open and are read, but never answered again (a wedged
        server process, a middlebox that lost the flow); new ones are answered. How many were open."""
        writers = list(self._tls_writers)
        self._tls_wedged.update(writers)
        return len(writers)

    async def _tls_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """DNS over TLS: each query answered in a task of its own, so a delayed name's answer comes after
        later queries' (pipelined, answered out of order, as RFC 7766 allows)."""
        self.tls_connections += 1
        self._tls_writers.add(writer)
        tasks: set[asyncio.Task[None]] = set()

        async def one(q: dns.message.Message) -> None:
            mode = self._mode(q)
            if mode == "drop":
                return
            if mode == "delay":
                await asyncio.sleep(self.delay)
            if writer in self._tls_wedged or writer.is_closing():
                return
            if mode == "close":  # over TLS: the connection closed under the query, unanswered
                writer.close()
                return
            out = self.answer(q, tcp=True).to_wire(max_size=65535)
            writer.write(len(out).to_bytes(2, "big") + out)
            if self.tls_close_after_answer:
                writer.close()

        try:
            while True:
                size = int.from_bytes(await reader.readexactly(2), "big")
                q = dns.message.from_wire(await reader.readexactly(size))
                self._record(q, "tls")
                task = asyncio.create_task(one(q))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            self._tls_writers.discard(writer)
            self._tls_wedged.discard(writer)
            writer.close()

    async def _tcp_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(2), "big")
                data = await reader.readexactly(size)
                q = dns.message.from_wire(data)
                self._record(q, "tcp")
                mode = self._mode(q)
                if mode == "drop":
                    continue
                if mode == "delay":
                    await asyncio.sleep(self.delay)
                out = self.answer(q, tcp=True).to_wire(max_size=65535)
                writer.write(len(out).to_bytes(2, "big") + out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


class _UDP(asyncio.DatagramProtocol):
    def __init__(self, double: UpstreamDouble) -> None:
        self.double = double
        self.transport: asyncio.DatagramTransport | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        assert self.transport is not None
        task = asyncio.get_running_loop().create_task(self.double.handle_udp(data, addr, self.transport))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


def _udp_wire(q: dns.message.Message, r: dns.message.Message) -> bytes:
    """The answer as a real server sends it over UDP: TC=1 and no records when it does not fit."""
    limit = max(512, q.payload) if q.edns >= 0 else 512
    wire = r.to_wire(max_size=65535)
    if len(wire) <= limit:
        return wire
    short = dns.message.make_response(q)
    short.flags |= dns.flags.TC | dns.flags.AA
    return short.to_wire()


def _norm(name: str) -> str:
    return name.strip().lower().rstrip(".")


def _rrset(name: str, rdtype: str, ttl: int, values: list[str]) -> dns.rrset.RRset:
    owner = name if name.endswith(".") else name + "."
    return dns.rrset.from_text_list(owner, ttl, dns.rdataclass.IN, rdtype, values)


def main() -> None:
    import argparse
    import json
    import signal

    parser = argparse.ArgumentParser(description="a stand-in upstream DNS server (tests only)")
    parser.add_argument("--listen", default="127.0.0.1:53", help="ADDR:PORT for UDP and TCP")
    parser.add_argument("--zone", default="{}", help='JSON: {"name": {"A": ["192.0.2.1"]}}')
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with UpstreamDouble(json.loads(args.zone), host=host, port=int(port)):
        print(f"serving on {host}:{port}", flush=True)
        stop.wait()


if __name__ == "__main__":
    main()
