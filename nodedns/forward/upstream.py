"""Forwarding to upstream resolvers: groups and policies, the UDP/TCP/TLS exchange, health checks, EDNS memory.

`Forwarder.query(qname, key)` sends the query in a cache key to the group that serves the name (the longest
matching stub domain, else the root group) and returns the upstream's response bytes. Bounds and guarantees:
one try and one retry on another server (ordered by the group's policy over the servers that are up), each
within `timeout`; a fresh UDP socket and a random ID per try, only the server's own reply with our ID and
question accepted (the rest counted and dropped); TC asked again over TCP (`force_tcp` groups: TCP only); a
`tls://` server over one verified, pipelined connection (nodedns.forward.tls), never a plain fallback; at most
`max_concurrent` in flight (`UpstreamBusy`); a failing server checked every `health_check`, down after
`MAX_FAILS` failures until a check succeeds; a server that refuses EDNS remembered for `EDNS_LAME_TTL`.
Forwarding to one of our own listen addresses is refused.

Routes: nodedns.forward.routes; loop probes: nodedns.forward.loops. The behaviour as an operator meets it:
docs/cache.md "Upstreams", docs/operators.md "DNS over TLS to the upstreams".
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodedns.config import TLS_PREFIX, TLSUpstream, tls_context
from nodedns.dns.keys import key_flags, key_question, make_key
from nodedns.dns.queries import answers_query, build_query
from nodedns.dns.wire import KF_DO, KF_EDNS, KF_RD, QT, RCODE
from nodedns.errors import ConfigError, UpstreamBusy, UpstreamError
from nodedns.forward.tls import MAX_TIMEOUTS as TLS_MAX_TIMEOUTS
from nodedns.forward.tls import TLSConnection
from nodedns.forward.zones import Zone
from nodedns.metrics.counters import Histogram
from nodedns.metrics.slots import rcode_label
from nodedns.names import canonical_ip
from nodedns.runtime.dnstap import Dnstap
from nodedns.runtime.tasks import Tasks

log = logging.getLogger("nodedns.upstream")


HostPort = tuple[str, int]
MAX_FAILS = 2  # CoreDNS forward's max_fails default


HEALTH_KEY = make_key(b"\x00" + QT.NS.to_bytes(2, "big") + b"\x00\x01", KF_RD)  # ". IN NS", RD
EDNS_LAME_TTL = 900.0  # seconds an EDNS-intolerant server is asked without EDNS (unbound's infra-host-ttl)
EDNS_REFUSALS = (RCODE.FORMERR, RCODE.NOTIMP)  # answers to an OPT record that mean "no EDNS here"
YXDOMAIN = 6
TLS_IDLE = 10.0  # seconds a DNS-over-TLS connection with nothing in flight stays open (CoreDNS forward's expire)


def _addr_text(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(eq=False)
class Server:
    """One upstream server and its health."""

    host: str
    port: int
    fails: int = 0
    checking: bool = False
    down_since: float | None = None
    queries: int = 0
    errors: int = 0
    health_failures: int = 0
    durations: dict[str, Histogram] = field(default_factory=dict)  # by response rcode (CoreDNS's label)
    plain_until: float = 0.0  # EDNS-intolerant: asked without EDNS until then (the forwarder's clock)
    edns_fallbacks: int = 0  # times it answered FORMERR/NOTIMP to EDNS and then answered without
    tls_name: str | None = None  # DNS over TLS, the certificate verified for this name; None: plain UDP/TCP
    conn: TLSConnection | None = None  # the open DNS-over-TLS connection
    opening: asyncio.Lock = field(default_factory=asyncio.Lock)  # one TLS handshake at a time
    tls_connections: int = 0  # TLS connections opened (handshakes that verified)
    tls_reused: int = 0  # queries sent on a connection already open
    tls_error: str = ""  # the last TLS failure (handshake, verification), "" once one works
    tls_abandoned: int = 0  # connections abandoned as wedged (TLSConnection.timed_out)
    tls_closed_by_server: int = 0  # connections the server closed
    tls_retried: int = 0  # queries re-sent on a new connection after theirs closed under them

    @property
    def text(self) -> str:
        return TLS_PREFIX + _addr_text(self.host, self.port) if self.tls_name is not None else \
            _addr_text(self.host, self.port)

    @property
    def address(self) -> HostPort:
        """The route entry this server came from: (host, port), or a TLSUpstream."""
        if self.tls_name is None:
            return self.host, self.port
        return TLSUpstream(self.host, self.port, self.tls_name)

    @property
    def family(self) -> socket.AddressFamily:
        return socket.AF_INET6 if ":" in self.host else socket.AF_INET


@dataclass(frozen=True)
class Loop:
    """A forwarding loop seen through a group: our probe `probe` came back `seen` times."""

    probe: str
    seen: int
    since: float  # time.monotonic()


@dataclass(eq=False)
class Group:
    """The servers for one zone ("" is the root) and how to use them."""

    zone: str
    servers: list[Server]
    force_tcp: bool = False
    rr: int = 0
    loop: Loop | None = None  # names routed here get SERVFAIL (the resolver's decision) until it is cleared
    settings: Zone = field(default_factory=Zone)  # the zone's policy and max-concurrent (nodedns.forward.zones)
    inflight: int = 0  # this zone's queries in flight (at most settings.max_concurrent)
    busy: int = 0  # queries refused at its max-concurrent
    failfast: int = 0  # queries failed at once: every server of the zone down
    down_since: float | None = None  # time.monotonic() since every server of the zone is down

    @property
    def route(self) -> tuple[tuple[HostPort, ...], bool]:
        return tuple(s.address for s in self.servers), self.force_tcp

    @property
    def label(self) -> str:
        return self.zone or "."


@dataclass(frozen=True)
class Routes:
    """What to forward where: the root servers and the stub domains (zone -> servers, force_tcp)."""

    root: tuple[HostPort, ...] = ()
    root_force_tcp: bool = False
    stubs: Mapping[str, tuple[tuple[HostPort, ...], bool]] = field(default_factory=dict)
    zones: Mapping[str, Zone] = field(default_factory=dict)  # each zone's settings ("" the root); none: the flags'


class Forwarder:
    """Upstream groups, the exchange with them, and their health."""

    def __init__(
        self,
        *,
        routes: Routes,
        policy: str = "random",
        timeout: float = 2.0,
        max_concurrent: int = 1000,
        health_check: float = 0.5,
        udp_size: int = 1232,
        own_addresses: Sequence[HostPort] = (),
        tls_servername: str | None = None,
        tls_ca: str | None = None,
        tls_idle: float = TLS_IDLE,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.tls_servername = tls_servername  # the certificate name of tls:// upstreams without #NAME
        self.tls_ca = tls_ca
        self.tls_idle = tls_idle
        self._tls_context: ssl.SSLContext | None = None
        self.policy = policy
        self.timeout = timeout
        self.max_concurrent = max_concurrent
        self.health_check = health_check
        self.udp_size = udp_size
        self.own: tuple[HostPort, ...] = tuple(own_addresses)
        self.rng = rng or random.Random()
        self.inflight = 0
        self.root: Group | None = None
        self.stubs: dict[str, Group] = {}
        self.stats = {"queries": 0, "busy": 0, "timeouts": 0, "errors": 0, "spoofed": 0, "mismatched": 0,
                      "tcp_fallback": 0, "health_checks": 0, "health_failures": 0, "all_down": 0,
                      "edns_fallback": 0, "tls_handshake_failures": 0, "tls_abandoned": 0,
                      "tls_closed_by_server": 0, "tls_retried": 0}
        self._tasks = Tasks()
        self._zoned = False  # the routes carry zone settings (else each group takes the flags')
        self.tap: Dnstap | None = None  # --dnstap: FORWARDER_QUERY/RESPONSE of each zone's share of queries
        self.configure(routes)

    # -- configuration ---------------------------------------------------------------------

    def set_own_addresses(self, addresses: Sequence[HostPort]) -> None:
        """Our bound listen addresses; forwarding to any of them is refused."""
        self.own = tuple(addresses)
        self.check_routes(self.routes())

    def is_own(self, host: str, port: int) -> bool:
        for own_host, own_port in self.own:
            if port != own_port:
                continue
            if host == own_host:
                return True
            if own_host in ("0.0.0.0", "::") and (host.startswith("127.") or host in ("::1", own_host)):
                return True
        return False

    def check_routes(self, routes: Routes) -> None:
        """Raise ConfigError when a route leads back to this agent."""
        for host, port in routes.root:
            if self.is_own(host, port):
                raise ConfigError("upstream", f"{_addr_text(host, port)} is this agent's own listen address")
        for zone, (servers, _tcp) in routes.stubs.items():
            for host, port in servers:
                if self.is_own(host, port):
                    raise ConfigError("stub-domain",
                                      f"{zone}: {_addr_text(host, port)} is this agent's own listen address")

    def configure(self, routes: Routes) -> None:
        """Replace the routes; servers that stay keep their health state. Raises ConfigError."""
        self.check_routes(routes)
        self._zoned = bool(routes.zones)
        known = {(s.host, s.port, s.tls_name): s for g in self.groups() for s in g.servers}

        kept_known = dict(known)

        def servers(addrs: Sequence[HostPort]) -> list[Server]:
            out: list[Server] = []
            for addr in dict.fromkeys(addrs):
                host, port = addr
                tls = (addr.name or self.tls_servername or host) if isinstance(addr, TLSUpstream) else None
                server = kept_known.get((host, port, tls))
                if server is None:  # one Server (one health state) for every zone naming it
                    server = kept_known[(host, port, tls)] = Server(host, port, tls_name=tls)
                out.append(server)
            return out

        def make_group(zone: str, addrs: Sequence[HostPort], tcp: bool) -> Group:
            settings = routes.zones.get(zone) or Zone(name=zone, policy=self.policy,
                                                      max_concurrent=self.max_concurrent, force_tcp=tcp)
            g = previous.get(zone)
            if g is None:
                return Group(zone, servers(addrs), tcp, settings=settings)
            # the same object: its queries in flight (which hold it) and its counters go on
            g.servers, g.force_tcp, g.settings, g.loop = servers(addrs), tcp, settings, None
            return g

        previous = {g.zone: g for g in self.groups()}
        loops = {g.zone: (g.route, g.loop) for g in self.groups() if g.loop is not None}
        self.root = make_group("", routes.root, routes.root_force_tcp) if routes.root else None
        self.stubs = {zone: make_group(zone, addrs, tcp) for zone, (addrs, tcp) in routes.stubs.items() if addrs}
        kept = {id(s) for g in self.groups() for s in g.servers}
        for gone in known.values():  # a server no route names any more: its TLS connection closes
            if id(gone) not in kept and gone.conn is not None:
                gone.conn.close()
        for group in self.groups():  # a route that did not change still loops; a changed one is probed again
            route, loop = loops.get(group.zone, (None, None))
            if route == group.route:
                group.loop = loop

    def routes(self) -> Routes:
        root = tuple(s.address for s in self.root.servers) if self.root else ()
        return Routes(
            root=root,
            root_force_tcp=self.root.force_tcp if self.root else False,
            stubs={z: (tuple(s.address for s in g.servers), g.force_tcp) for z, g in self.stubs.items()},
            zones={g.zone: g.settings for g in self.groups()} if self._zoned else {},
        )

    def groups(self) -> list[Group]:
        return ([self.root] if self.root else []) + list(self.stubs.values())

    def group_for(self, qname: str) -> Group | None:
        """The longest stub domain containing qname, else the root group."""
        if self.stubs:
            name = qname
            while name:
                group = self.stubs.get(name)
                if group is not None:
                    return group
                name = name.partition(".")[2]
        return self.root

    def routable(self, qname: str) -> bool:
        return self.group_for(qname) is not None

    def looping(self, qname: str) -> bool:
        """The route for qname leads back to us (a loop probe came back): nothing is forwarded there."""
        group = self.group_for(qname)
        return group is not None and group.loop is not None

    def mark_loop(self, probe: str, seen: int) -> Group | None:
        """Our loop probe `probe` came back `seen` times: its group loops. The group when newly marked."""
        group = self.group_for(probe)
        if group is None or group.loop is not None:
            return None
        group.loop = Loop(probe, seen, time.monotonic())
        return group

    def loops(self) -> list[Group]:
        return [g for g in self.groups() if g.loop is not None]

    def unreachable(self, qname: str) -> bool:
        """Every server of the group for qname is down (health checks failing)."""
        group = self.group_for(qname)
        return group is not None and self.all_down(group)

    def all_down(self, group: Group) -> bool:
        return self.health_check > 0 and all(self.down(s) for s in group.servers)

    def zone_for(self, qname: str) -> Zone | None:
        """The settings of the zone that forwards qname (None: no upstream for it)."""
        group = self.group_for(qname)
        return group.settings if group is not None else None

    # -- queries ---------------------------------------------------------------------------

    def down(self, server: Server) -> bool:
        return self.health_check > 0 and server.fails >= MAX_FAILS

    def order(self, group: Group) -> list[Server]:
        """The servers to try, first and retry, by policy over those that are up.

        When every server of the group is down, one try only (CoreDNS's "spray": one of them anyway,
        so the answer is never refused for a stale health state), bounded by one timeout: clients
        get their SERVFAIL (or stale answer) within --upstream-timeout, not two.
        """
        up = [s for s in group.servers if not self.down(s)]
        if not up:
            self.stats["all_down"] += 1
            return [self.rng.choice(group.servers)]
        if group.settings.policy == "random":
            picked = self.rng.sample(up, min(2, len(up)))
        elif group.settings.policy == "round_robin":
            start = group.rr % len(up)
            group.rr += 1
            picked = (up[start:] + up[:start])[:2]
        else:
            picked = up[:2]
        return picked if len(picked) > 1 else picked * 2

    async def query(self, qname: str, key: bytes, *, probe: bool = False) -> bytes:
        """The upstream's answer to `key` (its first question is qname). A zone whose every server is down
        fails at once, except for a loop probe (`probe`): a forwarding loop is what makes them look down,
        so the probe that finds it gets its one try (`order`)."""
        group = self.group_for(qname)
        if group is None:
            raise UpstreamError(f"no upstream for {qname or '.'}")
        if not probe and self.all_down(group):  # fail fast: no try waits out a timeout while health checks fail
            group.failfast += 1
            self.stats["all_down"] += 1
            raise UpstreamError(f"every upstream of zone {group.label} is down")
        if group.inflight >= group.settings.max_concurrent:
            group.busy += 1
            self.stats["busy"] += 1
            raise UpstreamBusy()
        group.inflight += 1
        self.inflight += 1
        self.stats["queries"] += 1
        rate = group.settings.dnstap
        tap = group.label if self.tap is not None and (rate >= 1.0 or self.rng.random() < rate) else None
        try:
            last: UpstreamError | None = None
            for server in self.order(group):
                started = time.perf_counter()
                try:
                    response = await self.exchange(server, key, force_tcp=group.force_tcp, tap=tap)
                except UpstreamError as exc:
                    last = exc
                    self._failed(server, group, exc)
                    continue
                if server.fails:
                    self._recovered(server)
                rcode = rcode_label(response[3] & 0x0F)
                hist = server.durations.get(rcode)
                if hist is None:
                    hist = server.durations[rcode] = Histogram()
                hist.observe(time.perf_counter() - started)
                return response
            assert last is not None
            raise last
        finally:
            group.inflight -= 1
            self.inflight -= 1

    async def exchange(self, server: Server, key: bytes, *, force_tcp: bool = False, tap: str | None = None) -> bytes:
        """One try with one server: UDP (TCP when truncated or forced). Raises UpstreamError.

        Without EDNS to a server remembered as EDNS-intolerant; a FORMERR or NOTIMP to our OPT
        record is asked again without it, and the server remembered when that works.
        """
        question = key_question(key)
        kflags = key_flags(key)
        if kflags & KF_EDNS and server.plain_until > self.clock():
            kflags &= ~(KF_EDNS | KF_DO)
        response = await self._exchange(server, question, kflags, force_tcp, tap)
        if not kflags & KF_EDNS or response[3] & 0x0F not in EDNS_REFUSALS:
            return response
        plain = await self._exchange(server, question, kflags & ~(KF_EDNS | KF_DO), force_tcp, tap)
        if plain[3] & 0x0F in (RCODE.NOERROR, RCODE.NXDOMAIN, YXDOMAIN):
            if server.plain_until <= self.clock():
                log.warning("upstream %s answers %s to EDNS and works without it: asked without EDNS for "
                            "%gs", server.text, RCODE.name(response[3] & 0x0F), EDNS_LAME_TTL)
            server.plain_until = self.clock() + EDNS_LAME_TTL
            server.edns_fallbacks += 1
            self.stats["edns_fallback"] += 1
        return plain

    async def _exchange(self, server: Server, question: bytes, kflags: int, force_tcp: bool,
                        tap: str | None = None) -> bytes:
        """One query to one server; with `tap` (the zone's label) the query and its answer go to dnstap."""
        qid = secrets.randbits(16)
        msg = build_query(question, qid, kflags, self.udp_size)
        if tap is None or self.tap is None:
            return await self._try(server, msg, qid, question, force_tcp)
        proto = "dot" if server.tls_name is not None else "tcp" if force_tcp else "udp"
        sent = time.time()
        response: bytes | None = None
        try:
            response = await self._try(server, msg, qid, question, force_tcp)
            return response
        finally:
            self.tap.forwarder(msg, response, (server.host, server.port), proto, sent, time.time(), tap)

    async def _try(self, server: Server, msg: bytes, qid: int, question: bytes, force_tcp: bool) -> bytes:
        server.queries += 1
        on: list[tuple[TLSConnection, float]] = []  # the TLS connections tried, each with when it was sent there
        try:
            async with asyncio.timeout(self.timeout):
                if server.tls_name is not None:
                    return await self._tls(server, msg, qid, question, on)
                if not force_tcp:
                    response = await self._udp(server, msg, qid, question)
                    if not response[2] & 0x02:
                        return response
                    self.stats["tcp_fallback"] += 1
                return await self._tcp(server, msg, qid, question)
        except TimeoutError:
            self.stats["timeouts"] += 1
            if on and on[-1][0].timed_out(on[-1][1], self.timeout / 2):
                server.tls_abandoned += 1
                self.stats["tls_abandoned"] += 1
                self._tls_failed(server, "a connection stopped answering (a query timed out with nothing "
                                         f"read on it, or {TLS_MAX_TIMEOUTS} timeouts in a row): abandoned, "
                                         "its queries re-sent on a new one")
            raise UpstreamError(f"{server.text}: timed out after {self.timeout:g}s") from None
        except ssl.SSLCertVerificationError as exc:
            self.stats["errors"] += 1
            raise UpstreamError(self._tls_failed(
                server, f"the TLS certificate does not verify for {server.tls_name}: "
                        f"{exc.verify_message or exc.reason or exc}")) from None
        except ssl.SSLError as exc:
            self.stats["errors"] += 1
            raise UpstreamError(self._tls_failed(server, f"TLS failed: {exc.reason or exc}")) from None
        except OSError as exc:
            self.stats["errors"] += 1
            raise UpstreamError(f"{server.text}: {exc.strerror or exc}") from None
        except asyncio.IncompleteReadError:
            self.stats["errors"] += 1
            raise UpstreamError(f"{server.text}: connection closed mid-answer") from None

    async def _udp(self, server: Server, msg: bytes, qid: int, question: bytes) -> bytes:
        loop = asyncio.get_running_loop()
        sock = socket.socket(server.family, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            sock.bind(("::" if server.family == socket.AF_INET6 else "0.0.0.0", 0))
        except OSError:
            sock.close()
            raise
        answer: asyncio.Future[bytes] = loop.create_future()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Reply(self, server, qid, question, answer), sock=sock
        )
        try:
            transport.sendto(msg, (server.host, server.port))
            return await answer
        finally:
            transport.close()

    async def _tls(self, server: Server, msg: bytes, qid: int, question: bytes,
                   on: list[tuple[TLSConnection, float]]) -> bytes:
        """One query on the server's DNS-over-TLS connection (opened when there is none; `on` ends with
        the one it waits on). When that connection closes under it (the server closed it, or it was
        abandoned as wedged) the query is re-sent on a new one: once after a connection that answered
        nothing, again after each one that answered something (a server that closes after each answer
        gets every query of a burst answered, a connection at a time), all within the query's timeout."""
        barren = 0  # connections that closed under this query having answered nothing
        while True:
            conn = server.conn
            if conn is not None and not conn.closed:
                server.tls_reused += 1
            else:
                conn = await self._tls_open(server)
            on.append((conn, asyncio.get_running_loop().time()))
            try:
                return await conn.ask(msg, qid, question)
            except ConnectionError:
                await conn.settled()
                conn.close()  # a write that failed on a connection the server has not closed yet
                if not conn.answered:
                    barren += 1
                    if barren > 1:
                        raise
            server.tls_retried += 1
            self.stats["tls_retried"] += 1

    async def _tls_open(self, server: Server) -> TLSConnection:
        async with server.opening:
            conn = server.conn
            if conn is not None and not conn.closed:
                return conn  # another query opened it meanwhile
            if self._tls_context is None:
                self._tls_context = tls_context(self.tls_ca)
            try:
                reader, writer = await asyncio.open_connection(
                    server.host, server.port, ssl=self._tls_context, server_hostname=server.tls_name,
                    ssl_handshake_timeout=max(self.timeout, 0.01))
            except ssl.SSLError:
                self.stats["tls_handshake_failures"] += 1
                raise
            if server.tls_error:
                log.warning("upstream %s: TLS works again", server.text)
                server.tls_error = ""
            server.tls_connections += 1
            conn = server.conn = TLSConnection(self, server, reader, writer)
            return conn

    def _tls_failed(self, server: Server, reason: str) -> str:
        """Log a TLS failure of `server` once per new reason; the error text."""
        if reason != server.tls_error:
            log.warning("upstream %s: %s", server.text, reason)
            server.tls_error = reason
        return f"{server.text}: {reason}"

    async def _tcp(self, server: Server, msg: bytes, qid: int, question: bytes) -> bytes:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        try:
            writer.write(len(msg).to_bytes(2, "big") + msg)
            await writer.drain()
            while True:
                size = int.from_bytes(await reader.readexactly(2), "big")
                data = await reader.readexactly(size)
                if answers_query(data, qid, question):
                    return data
                self.stats["mismatched"] += 1
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    # -- health ----------------------------------------------------------------------------

    def _failed(self, server: Server, group: Group, exc: UpstreamError) -> None:
        server.errors += 1
        server.fails += 1
        log.debug("upstream %s failed: %s", server.text, exc)
        if self.health_check > 0 and not server.checking:
            server.checking = True
            self._tasks.spawn(self._check(server, group), f"health-check {server.text}")

    def _recovered(self, server: Server) -> None:
        if self.down(server):
            log.warning("upstream %s is back", server.text)
        server.fails = 0
        server.down_since = None

    async def _check(self, server: Server, group: Group) -> None:
        """Probe a failing server every health_check until it answers."""
        try:
            while server.fails:
                await asyncio.sleep(self.health_check)
                self.stats["health_checks"] += 1
                try:
                    await self.exchange(server, HEALTH_KEY, force_tcp=group.force_tcp)
                except UpstreamError as exc:
                    self.stats["health_failures"] += 1
                    server.health_failures += 1
                    was_down = self.down(server)
                    server.fails += 1
                    if not was_down and self.down(server):
                        server.down_since = asyncio.get_running_loop().time()
                        log.warning("upstream %s is down (%d failures in a row, last: %s)",
                                    server.text, server.fails, exc)
                    continue
                self._recovered(server)
        finally:
            server.checking = False

    # -- hand-over -------------------------------------------------------------------------

    def export_edns(self) -> list[tuple[str, int, float]]:
        """What this forwarder remembers of EDNS-intolerant servers: (host, port, seconds left)."""
        now = self.clock()
        seen = {(s.host, s.port, s.plain_until - now) for g in self.groups() for s in g.servers if s.plain_until > now}
        return sorted(seen)

    def load_edns(self, remembered: Sequence[tuple[str, int, float]]) -> int:
        """Take a predecessor's `export_edns`: its EDNS-intolerant servers that are ours too are asked without
        EDNS for the time it had left; how many servers that was."""
        now = self.clock()
        left = {(str(h), int(p)): float(t) for h, p, t in remembered}
        taken = 0
        for group in self.groups():
            for server in group.servers:
                t = left.get((server.host, server.port))
                if t is not None and 0 < t <= EDNS_LAME_TTL and server.plain_until < now + t:
                    server.plain_until = now + t
                    taken += 1
        return taken

    async def close(self) -> None:
        closing = []
        for group in self.groups():
            for server in group.servers:
                if server.conn is not None:
                    closing.append(server.conn.writer)
                    server.conn.close()
        await self._tasks.cancel_all()
        for writer in closing:  # the TLS close_notify goes out while the loop still runs
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    def zone_state(self, group: Group) -> str:
        """up (every server up), degraded (some down), down (every server down: its names fail at once),
        loop (our probe came back through it: its names get SERVFAIL)."""
        if group.loop is not None:
            return "loop"
        down = sum(1 for s in group.servers if self.down(s))
        now = time.monotonic()
        if down and down == len(group.servers) and self.health_check > 0:
            if group.down_since is None:
                group.down_since = now
            return "down"
        group.down_since = None
        return "degraded" if down else "up"

    def zone_status(self, group: Group) -> dict[str, Any]:
        """One zone's row of /status ("upstream" section, "zones"): its state, upstreams and bound. The settings
        are texts and the counts numbers, so the rows of --workers processes merge by zone (numbers summed:
        the node's queries in flight against the node's bound)."""
        z = group.settings
        c = z.cache
        row: dict[str, Any] = {
            "zone": group.label, "state": self.zone_state(group),
            "upstreams": ", ".join(s.text for s in group.servers),
            "inflight": group.inflight, "max_concurrent": z.max_concurrent, "busy": group.busy,
            "failfast": group.failfast, "policy": z.policy,
            "protocol": "force-tcp" if group.force_tcp else "prefer-udp",
            "cache": f"max-ttl {c.success_ttl}s, min-ttl {c.min_ttl}s, denial-ttl {c.denial_ttl}s, "
                     f"servfail-ttl {c.servfail_ttl}s",
            "serve_stale": f"{c.stale_mode} for {c.serve_stale:g}s" if c.stale_mode != "off" else "off",
            "stale_nxdomain": f"{c.stale_nxdomain:g}s",
            "filter_aaaa": "--filter-aaaa" if z.filter_aaaa is None else ("on" if z.filter_aaaa else "off"),
            "query_log": f"{z.query_log:.4%}", "dnstap": f"{z.dnstap:.4%}",
        }
        if group.down_since is not None:
            row["down_since"] = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                              time.gmtime(time.time() - (time.monotonic() - group.down_since)))
        return row

    def status(self) -> dict[str, Any]:
        """The "upstream" section of /status and /metrics (provider contract in nodedns.metrics.registry)."""
        upstreams: list[dict[str, Any]] = []
        seen: set[int] = set()
        for g in self.groups():
            for srv in g.servers:
                entry: dict[str, Any] = {
                    "to": srv.text, "zone": g.label, "healthy": not self.down(srv), "fails": srv.fails,
                    "queries": srv.queries, "errors": srv.errors, "force_tcp": g.force_tcp,
                    "edns": srv.plain_until <= self.clock(),
                }
                if srv.tls_name is not None:
                    conn = srv.conn if srv.conn is not None and not srv.conn.closed else None
                    entry["tls"] = {"name": srv.tls_name, "open": conn is not None,
                                    "connections": srv.tls_connections, "reused": srv.tls_reused,
                                    "error": srv.tls_error, "abandoned": srv.tls_abandoned,
                                    "closed_by_server": srv.tls_closed_by_server, "retried": srv.tls_retried,
                                    "connection": conn.state() if conn is not None else None}
                if id(srv) not in seen:  # a server in several groups: its counters once
                    seen.add(id(srv))
                    entry["healthcheck_failures"] = srv.health_failures
                    entry["duration"] = dict(srv.durations)
                    entry["edns_fallbacks"] = srv.edns_fallbacks
                upstreams.append(entry)
        now = time.monotonic()
        loops = [{"zone": g.label, "to": ", ".join(s.text for s in g.servers),
                  "seconds": round(now - g.loop.since, 3)} for g in self.groups() if g.loop is not None]
        out: dict[str, Any] = {
            "upstreams": upstreams,
            "zones": [self.zone_status(g) for g in self.groups()],
            "loops": loops,
            "healthcheck_broken": self.stats["all_down"],
            "max_concurrent_rejects": self.stats["busy"],
            "policy": self.policy,
            "inflight": self.inflight,
            **self.stats,
        }
        down = [z["zone"] for z in out["zones"] if z["state"] == "down"]
        if down:
            out["conditions"] = [{"type": "ZoneUpstreamsDown", "zone": zone,
                                  "message": f"every upstream of zone {zone} is down: its names get a stale answer "
                                             "or SERVFAIL at once until a health check passes"} for zone in down]
        if loops:
            out["unready"] = [f'forwarding loop through the upstreams of zone "{loop["zone"]}" ({loop["to"]}): '
                              "names forwarded there get SERVFAIL until the upstream config changes"
                              for loop in loops]
        return out


class _Reply(asyncio.DatagramProtocol):
    """Receives the one answer to one UDP query; counts and drops everything else."""

    def __init__(self, fw: Forwarder, server: Server, qid: int, question: bytes, answer: asyncio.Future[bytes]):
        self.fw = fw
        self.server = server
        self.qid = qid
        self.question = question
        self.answer = answer

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if addr[1] != self.server.port or canonical_ip(addr[0]) != self.server.host:
            self.fw.stats["spoofed"] += 1
            return
        if not answers_query(data, self.qid, self.question):
            self.fw.stats["mismatched"] += 1
            return
        if not self.answer.done():
            self.answer.set_result(data)

    def error_received(self, exc: Exception) -> None:
        if not self.answer.done():
            self.answer.set_exception(exc if isinstance(exc, OSError) else OSError(str(exc)))
