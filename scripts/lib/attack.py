#!/usr/bin/env python3
"""A hostile tenant against the agent as shipped: per flood, the memory it costs, the queries it makes
others lose, the workers it kills (run by scripts/attack).

The agent runs as the DaemonSet's ConfigMap configures it (tests/support/shipped.py: daemonset/configmap.yaml,
`--workers 2`, the default allow list; on 127.0.0.1 with a fake API server and an in-process upstream),
with MALLOC_ARENA_MAX=1 as the DaemonSet sets it. A "good Pod" (127.0.0.1) sends a UDP query for a
cluster name every 20 ms from a fresh socket (so SO_REUSEPORT spreads them over the workers) and counts
the ones not answered within 2 s; the attacker is another Pod (127.0.0.2). The floods, one after the
other (each waits for the agent to settle after the one before):

    pipeline-60k   TCP connections that write 2,000 pipelined queries for a cached 60 KB answer in
                   one write and never read: 6 connections, then 4 rounds of 16
    pipeline-srv   400 connections pipelining 2,000 queries each for a cluster SRV answer (~830 B)
    never-read     2,000 connections that ask for the 60 KB answer and never read, held past the
                   idle timeout; meanwhile the good Pod's TCP queries must be answered
    stop-worker    SIGSTOP on one worker for 20 s (then SIGCONT)
    externalname   queries for an ExternalName Service whose target has a 64-byte label
    forward-60k    6,000 names of the attacker's domain, each a 60 KB answer from the upstream
    srv-64k        a headless Service of 1,500 named ports and 600 endpoints (every `_pN._tcp` SRV
                   answer ~64 KB), every port's SRV asked once, over 8 TCP connections at once
    spray          random 240-byte names (half in the cluster zone, half forwarded) at 15,000 a second
                   from one address for 6 s, within its rate limit: misses, which only the miss
                   budgets hold (the agent's CPU over the spray, per query, printed)
    spray-tcp      the same names over 8 TCP connections of one address for 6 s, each pipelining 32 at
                   a time as fast as they are answered: the miss budgets hold them too (REFUSED)
    namespace-share  20 Pods of one namespace (127.0.0.2 on) asking 1,000 new names a second of a slow
                   domain of their own (answered after 3 s) for 4 s; meanwhile 40 new names of another
                   Pod (the good Pod) must be answered, none REFUSED
    spoof          30,000 queries a second for the good Pod's cached name sent with the good Pod's
                   own address (as a spoofer would, where the CNI allows it) for 6 s: its budgets
                   spent, its own queries get TC=1 and are asked again over TCP (the probe does)
    hosts-blocklist  the agent's --hosts file (re-read every 500 ms) replaced by a 16 MiB blocklist
                   (one name a line, all 0.0.0.0): read, its names answered, the memory it costs
    hosts-junk     the same file replaced by 16 MiB of lines that are no hosts lines: counted,
                   logged once, not a line each
    hosts-fifo     the same file replaced by a FIFO: refused at once, the agent ready throughout, a
                   change of the file after it read again
    shadow-padded  `nodedns shadow` watching the agent's port (root: a packet socket) while 16
                   connections of one Pod send TCP queries padded to 60 KB: the shadow's own growth
                   (the target: 64 MB, far under daemonset-shadow/'s limit) is judged, not the agent's

Printed per flood: the growth of the agent's whole process tree (supervisor, zygote, workers) in RSS,
peak during the flood over the RSS just before it, and the RSS once it settled; for the TCP floods
the kernel's buffers of the agent's connections at the peak (`ss -m`: a cgroup v2 Pod is charged
for them as for RSS, though no RSS shows them); the good Pod's probes sent and lost (a probe that
gets TC=1 is asked again over TCP, as glibc does, and lost only when that fails too); worker
restarts; and PASS or FAIL against the targets: at most 64 MB of growth plus kernel buffers, no
probe lost, no worker restarted (stop-worker: the worker restarted, and no probe lost from 3 s after
the stop on; the ones sent before the supervisor noticed are the price of detection; the hosts
attacks: the tree's peak within three quarters of the DaemonSet's 512 MiB limit, at most 64 MB left
once settled, at most 10 log lines).

    python3 scripts/lib/attack.py                       # every flood at the issue's size (a few minutes)
    python3 scripts/lib/attack.py --quick               # small floods, short holds, idle timeout 1 s (CI)
    python3 scripts/lib/attack.py --attacks pipeline-60k,stop-worker
    python3 scripts/lib/attack.py --attacks srv-64k,spray,namespace-share,spoof   # the tenant's attacks
    python3 scripts/lib/attack.py --sources 20          # the attacker's connections from 20 addresses (Pods)
    python3 scripts/lib/attack.py --set tcp-max-connections=1000   # a ConfigMap key changed (what-if)
    python3 scripts/lib/attack.py --memory-limit 512    # the agent in a memory cgroup of the DaemonSet's limit

With --memory-limit MB (root) the agent's process tree runs in a memory cgroup of that limit (tests/support/memcg.py:
cgroup v2 `memory.max`, else v1 `memory.limit_in_bytes`), as its Pod does: each flood also says the most the
cgroup was charged over the agent's run (its start included) and the processes the kernel killed for the
limit, and passes only with none killed.

The last line is `RESULT {json}` (tests/e2e/test_scripts_smoke.py reads it). Exit 0 whether or not a
target was met: it measures; the tests judge.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import re
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # scripts/lib/ -> the checkout
sys.path.insert(0, str(ROOT))

import dns.flags  # noqa: E402
import dns.message  # noqa: E402
import dns.name  # noqa: E402
import dns.rcode  # noqa: E402
import dns.rdatatype  # noqa: E402
import dns.rrset  # noqa: E402

from nodedns.serve.server import bind_pair  # noqa: E402
from tests.support import manifests as m  # noqa: E402 - the checkout's test helpers
from tests.support import rawdns  # noqa: E402
from tests.support.apiserver import FakeApiServer  # noqa: E402
from tests.support.memcg import MemoryCgroup  # noqa: E402
from tests.support.memcg import available as memcg_available  # noqa: E402
from tests.support.shipped import NODE, ShippedAgent, cluster  # noqa: E402
from tests.support.tenant import (  # noqa: E402
    BIG_TXT,
    EVIL,
    GOOD,
    Flood,
    Prober,
    RssSampler,
    pipelined,
    query,
    tcp_ask,
    tree,
)

GROWTH_LIMIT_MB = 64.0
PROBE_NAME = "web.default.svc.cluster.local"
SRV_NAME = "_http._tcp.big.default.svc.cluster.local"
EVIL_DOMAIN = "attacker.test"
BIG_NAME = f"big.{EVIL_DOMAIN}"
BAD_EXTERNAL = "a" * 64 + ".example.com"  # one label over 63 bytes: the API server lets it through
STOP_GRACE = 3.0  # seconds after a SIGSTOP in which the good Pod's probes may be lost (detection: 2 s)
MB = 1 << 20


@dataclass
class Size:
    """How big each flood is: the issue's figures, or --quick's."""

    pipeline_rounds: tuple[int, ...] = (6, 16, 16, 16, 16)  # connections per round
    pipeline_queries: int = 2000
    srv_connections: int = 400
    never_read: int = 2000
    hold: float = 4.0  # seconds a pipelining round keeps its connections
    stop_seconds: float = 20.0
    external_queries: int = 200
    forward_names: int = 6000
    idle_timeout: float | None = None  # None: the shipped default (10 s)
    wide_ports: int = 1500  # srv-64k: the Service's named ports ...
    wide_endpoints: int = 600  # ... and endpoints
    wide_connections: int = 8
    spray_rate: int = 15_000  # spray: queries a second ...
    spray_seconds: float = 6.0
    namespace_pods: int = 20  # namespace-share: the tenant's Pods ...
    namespace_rate: int = 1000  # ... and their new slow names a second, all together
    namespace_seconds: float = 4.0
    spoof_rate: int = 30_000  # spoof: queries a second in the good Pod's name ...
    spoof_seconds: float = 6.0
    hosts_bytes: int = 16 << 20  # the blocklist and the junk (the most a hosts file may hold)
    padded_seconds: float = 8.0  # shadow-padded: how long the 16 connections send


QUICK = Size(pipeline_rounds=(4, 8), pipeline_queries=500, srv_connections=40, never_read=100, hold=1.5,
             stop_seconds=5.0, external_queries=30, forward_names=150, idle_timeout=1.0, wide_ports=200,
             wide_endpoints=100, wide_connections=4, spray_rate=5000, spray_seconds=3.0, namespace_pods=10,
             namespace_rate=300, namespace_seconds=3.0, spoof_rate=10_000, spoof_seconds=3.0, hosts_bytes=2 << 20,
             padded_seconds=3.0)
ATTACKS = ("pipeline-60k", "pipeline-srv", "never-read", "stop-worker", "externalname", "forward-60k", "srv-64k",
           "spray", "spray-tcp", "namespace-share", "spoof", "hosts-blocklist", "hosts-junk", "hosts-fifo",
           "shadow-padded")
SLOW_DOMAIN = f"slow.{EVIL_DOMAIN}"  # namespace-share: the tenant's names, answered after SLOW_DELAY
SLOW_DELAY = 3.0
TENANT = "tenant"  # namespace-share: the namespace of the attacker's Pods
HOSTS_FILE = "hosts"  # in the run's directory: the hosts attacks' --hosts file
HOSTS_PERIOD = "500ms"  # their --kube-dns-config-period: the file re-read twice a second
LOG_LINES_LIMIT = 10  # a hosts attack passes with at most this many hostswatch log lines
# A hosts file is parsed once, its transient memory given back: a hosts attack is judged on the tree's peak
# against the DaemonSet's memory limit (with a quarter of it to spare) and on what stays (GROWTH_LIMIT_MB).
DAEMONSET_LIMIT_MB = 512.0
HOSTS_PEAK_LIMIT_MB = DAEMONSET_LIMIT_MB * 3 / 4


# ----------------------------------------------------------------------------------------------
# The attacker's upstream: every name of its domain is a 60 KB TXT answer (TC=1 over UDP)


def _txt_rdata(record: str) -> bytes:
    strings = [part.strip('"') for part in record.split('" "')]
    return b"".join(bytes([len(x)]) + x.encode() for x in strings)


# each answer record: the name as a pointer to the question (0xC00C), TXT IN, TTL 300, its rdata
_BIG_RECORDS = b"".join(b"\xc0\x0c" + struct.pack("!HHIH", 16, 1, 300, len(rd)) + rd
                        for rd in (_txt_rdata(r) for r in BIG_TXT))
_EVIL_SUFFIX = b"".join(bytes([len(label)]) + label.encode() for label in EVIL_DOMAIN.split(".")) + b"\x00"
_SLOW_SUFFIX = b"\x04slow" + _EVIL_SUFFIX


def evil_reply(query: bytes, *, tcp: bool) -> bytes | None:
    """The attacker's upstream, by hand (it must keep up with thousands of names): every name of its domain
    is the 61 KB TXT answer over TCP and TC=1 over UDP; any other name NXDOMAIN. None: not a query."""
    if len(query) < 17:
        return None
    end = query.index(b"\x00", 12) + 5  # the question: its name, type and class
    name = query[12:end - 4].lower()
    question = query[12:end]
    ours = name.endswith(_EVIL_SUFFIX) and query[end - 4:end - 2] == b"\x00\x10"
    flags = 0x8400 | (query[2] & 0x01) << 8  # QR, AA, RD copied
    if not ours:
        return query[:2] + struct.pack("!HHHHH", flags | 3, 1, 0, 0, 0) + question
    if not tcp:
        return query[:2] + struct.pack("!HHHHH", flags | 0x0200, 1, 0, 0, 0) + question
    return query[:2] + struct.pack("!HHHHH", flags, 1, len(BIG_TXT), 0, 0) + question + _BIG_RECORDS


class EvilUpstream:
    """UDP and TCP on 127.0.0.1 (one port), in a thread: TC=1 over UDP, the 60 KB answer over TCP."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.udp, self.tcp = bind_pair("127.0.0.1", 0, reuse_port=False)  # one free port for both
        self.port = self.udp.getsockname()[1]
        self.queries = 0
        self.thread = threading.Thread(target=self._run, name="evil-upstream", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> EvilUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self.loop.run_forever()

    async def _start(self) -> None:
        loop = self.loop
        upstream = self

        class Udp(asyncio.DatagramProtocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport

            def datagram_received(self, data: bytes, addr: Any) -> None:
                upstream.queries += 1
                with contextlib.suppress(ValueError):
                    out = evil_reply(data, tcp=False)
                    if out is not None and _SLOW_SUFFIX in data[12:].lower():  # the namespace-share flood's names
                        loop.call_later(SLOW_DELAY, self.transport.sendto, out, addr)  # type: ignore[attr-defined]
                    elif out is not None:
                        self.transport.sendto(out, addr)  # type: ignore[attr-defined]

        await loop.create_datagram_endpoint(Udp, sock=self.udp)
        await asyncio.start_server(self._client, sock=self.tcp)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while True:
                (n,) = struct.unpack("!H", await reader.readexactly(2))
                query = await reader.readexactly(n)
                self.queries += 1
                out = evil_reply(query, tcp=True)
                if out is not None:
                    writer.write(struct.pack("!H", len(out)) + out)
                await writer.drain()
        writer.close()


def tenant_address(i: int) -> str:
    """The address of the tenant's i-th Pod (namespace-share): 127.0.0.2 on."""
    return f"127.0.{(i + 2) // 256}.{(i + 2) % 256}"


def _name_wire(name: str) -> bytes:
    return b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\x00"


def random_queries(count: int, seed: int) -> list[bytes]:
    """`count` queries (type A) for random names of ~240 bytes, half in the cluster zone, half forwarded (to
    the attacker's upstream: NXDOMAIN at once), made by hand before the flood so the sender only sends."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        zone = "default.svc.cluster.local" if n % 2 else EVIL_DOMAIN
        labels = [rng.randbytes(30).hex() for _ in range((236 - len(zone)) // 61)]
        name = ".".join([*labels, rng.randbytes((238 - len(zone) - 61 * len(labels)) // 2).hex(), zone])
        out.append(struct.pack("!HHHHHH", n & 0xFFFF, 0x0100, 1, 0, 0, 0) + _name_wire(name) + b"\x00\x01\x00\x01")
    return out


def send_paced(port: int, source: str, queries: list[bytes], rate: int, seconds: float, sent: Any,
               sockets: int = 8) -> None:
    """`rate` of `queries` a second (cycling through them) from `source` for `seconds`, from `sockets`
    source ports (SO_REUSEPORT spreads them over the workers), never waiting for a reply (replies are read
    and thrown away); run in a process of its own, so the good Pod's probes keep this one's interpreter.
    `sent.value`: how many were sent."""
    socks = []
    for _ in range(sockets):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((source, 0))
        s.setblocking(False)
        socks.append(s)
    n = 0
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate)
        while n < due:
            try:
                socks[n % sockets].sendto(queries[n % len(queries)], ("127.0.0.1", port))
            except BlockingIOError:
                break
            n += 1
        for s in socks:
            with contextlib.suppress(BlockingIOError):
                while s.recv(65535):
                    pass
        time.sleep(0.0005)
    sent.value = n
    for s in socks:
        s.close()


def tree_cpu(pid: int) -> float:
    """CPU seconds (user and system) of a process and every process below it so far."""
    total = 0
    for p in tree(pid):
        with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{p}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def send_tcp(port: int, source: str, queries: list[bytes], seconds: float, counts: Any, connections: int = 8,
             depth: int = 32) -> None:
    """`connections` TCP connections from `source`, each writing `depth` framed queries at a time and reading
    their answers, for `seconds`; run in a process of its own. `counts`: (sent, answered, REFUSED)."""
    def one(i: int, out: list[int]) -> None:
        n = i
        with contextlib.suppress(OSError), \
                socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0)) as s:
            while time.monotonic() < deadline:
                batch = [queries[(n + k * connections) % len(queries)] for k in range(depth)]
                n += depth * connections
                s.sendall(b"".join(rawdns.frame(q) for q in batch))
                out[0] += depth
                for _ in range(depth):
                    answer = rawdns.recv_frame(s, timeout=5)
                    if answer is None:
                        return
                    out[1] += 1
                    out[2] += (answer[3] & 0xF) == 5  # REFUSED

    deadline = time.monotonic() + seconds
    results = [[0, 0, 0] for _ in range(connections)]
    threads = [threading.Thread(target=one, args=(i, results[i])) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(3):
        counts[k] = sum(r[k] for r in results)


def flood_process(port: int, source: str, queries: list[bytes], rate: int, seconds: float) -> int:
    """`send_paced` in a forked process; the number sent."""
    fork = multiprocessing.get_context("fork")
    sent = fork.Value("q", 0)
    proc = fork.Process(target=send_paced, args=(port, source, queries, rate, seconds, sent))
    proc.start()
    proc.join(seconds + 60)
    return int(sent.value)


@dataclass
class Outcome:
    name: str
    growth_mb: float
    settled_mb: float
    probes: int
    lost: int
    lost_late: int  # stop-worker: lost from STOP_GRACE after the stop on
    restarts: int
    notes: list[str] = field(default_factory=list)
    base_mb: float = 0.0  # the process tree's RSS before the flood
    kernel_mb: float = 0.0  # the TCP floods: the kernel's socket buffers of the agent's connections at the peak
    cgroup_peak_mb: float = 0.0  # --memory-limit: the most the agent's memory cgroup was charged over its run
    oom_kills: int = 0  # --memory-limit: processes the kernel killed in it for the limit
    passed: bool = False


class NotReady(Exception):
    """The agent did not get ready before its flood (it died at start, or never said ready)."""


class Run:
    """The agent, its upstream and API server, the measuring threads; the floods as methods."""

    def __init__(self, work: Path, size: Size, sources: list[str], settings: dict[str, str],
                 memory_limit: float | None = None) -> None:
        self.work = work
        self.memory_limit = memory_limit  # MB: the agent's tree in a memory cgroup of that limit (support/memcg.py)
        self.cgroup: MemoryCgroup | None = None
        self.size = size
        self.settings = settings  # --set: keys changed from the ConfigMap's
        self.sources = sources  # the attacker's addresses (its Pods)
        self.kernel_peak = 0
        self.stack = contextlib.ExitStack()

    def __enter__(self) -> Run:
        self.api = self.stack.enter_context(FakeApiServer())
        cluster(self.api)
        endpoints = [m.endpoint(f"10.1.0.{i}") for i in range(1, 10)]
        self.api.put("Service", m.service("big", headless=True, ports=[{"name": "http", "port": 8080}]))
        self.api.put("EndpointSlice", m.endpoint_slice("big-1", "big", endpoints))
        self.api.put("Service", m.service("evil", external_name=BAD_EXTERNAL))
        if self.size.wide_ports:  # srv-64k: the Service author's attack
            named = [{"name": f"p{i}", "port": 1000 + i, "protocol": "TCP"} for i in range(self.size.wide_ports)]
            eps = [m.endpoint(f"10.2.{i // 250}.{i % 250 + 1}", hostname=f"h{i}")
                   for i in range(self.size.wide_endpoints)]
            self.api.put("Service", m.service("wide", headless=True, ports=named))
            self.api.put("EndpointSlice", m.endpoint_slice("wide-1", "wide", eps, ports=named))
        self.api.put("Namespace", m.namespace(TENANT))
        for i in range(self.size.namespace_pods):  # namespace-share: the tenant's Pods on this node
            self.api.put("Pod", m.pod(f"t{i}", TENANT, ip=tenant_address(i), node_name=NODE))
        self.upstream = self.stack.enter_context(EvilUpstream())
        override: dict[str, Any] = dict(self.settings)
        if self.size.idle_timeout is not None:
            override["tcp-idle-timeout"] = f"{int(self.size.idle_timeout * 1000)}ms"
        os.environ["MALLOC_ARENA_MAX"] = "1"  # as daemonset/daemonset.yaml sets it
        if self.memory_limit is not None:
            self.cgroup = MemoryCgroup(self.memory_limit)
            self.stack.callback(self.cgroup.close)  # after the agent has stopped (the stack unwinds in reverse)
        self.agent = self.stack.enter_context(ShippedAgent(self.work, self.api, self.upstream, **override))
        if self.cgroup is not None:  # the supervisor at once: the zygote and the workers it forks are born in it
            self.cgroup.add(tree(self.agent.proc.pid))  # type: ignore[union-attr]
        try:
            self.agent.wait_ready(60)
        except AssertionError as exc:  # gone or never ready (killed for the memory limit, say): said, not a traceback
            kills = self.cgroup.oom_kills() if self.cgroup is not None else 0
            self.stack.close()
            raise NotReady(f"the agent was not ready under the attack's set-up ({kills} OOM kills in its memory "
                           f"cgroup): {str(exc).strip().splitlines()[-1] if str(exc).strip() else exc!r}") from None
        if self.cgroup is not None:
            self.cgroup.add(tree(self.agent.proc.pid))  # type: ignore[union-attr]  # any forked before the move
        self.port = self.agent.port
        self.sampler = RssSampler(self.agent.proc.pid)  # type: ignore[union-attr]
        self.sampler.start()
        self.stack.callback(self.sampler.stop)
        self.prober = Prober(self.port)
        self.prober.start()
        self.stack.callback(self.prober.stop)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    # -- what the agent says ----------------------------------------------------------------

    def metrics(self) -> str:
        return self.agent.get("/metrics")[1]

    def restarts(self) -> int:
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in self.metrics().splitlines()
                       if line.startswith("nodedns_worker_restarts_total")))

    def counter(self, prefix: str) -> int:
        """A metric summed over its labels (0 when the agent has no such metric)."""
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in self.metrics().splitlines()
                       if line.startswith(prefix + "{") or line.startswith(prefix + " ")))

    def socket_bytes(self) -> int:
        """The kernel's buffers of the agent's TCP connections now (`ss -m`: r, the receive queue, + w, the send
        queue, + f, what is reserved ahead: in a cgroup v2 Pod they are charged to its memory too)."""
        out = subprocess.run(["ss", "-tmnH", "state", "all", f"( sport = :{self.port} )"], capture_output=True,
                             text=True, timeout=30).stdout
        return sum(int(r) + int(w) + int(f) for r, f, w in
                   re.findall(r"skmem:\(r(\d+),rb\d+,t\d+,tb\d+,f(\d+),w(\d+),", out))

    def open_tcp(self) -> int:
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in self.metrics().splitlines()
                       if line.startswith("nodedns_tcp_connections_open{")))

    def workers(self) -> list[dict[str, Any]]:
        status = json.loads(self.agent.get("/status")[1])
        workers: list[dict[str, Any]] = status["workers"]["workers"]
        return workers

    def settle(self, timeout: float = 30.0) -> None:
        """Until no TCP connection is open, every worker serves and /readyz says ready."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, KeyError):
                if self.open_tcp() == 0 and all(w["serving"] for w in self.workers()) \
                        and self.agent.get("/readyz", timeout=2)[0] == 200:
                    return
            time.sleep(0.2)

    def warm(self) -> None:
        """The 60 KB answer and the SRV answer cached before the floods ask for them."""
        for _ in range(20):  # each worker has its own forward cache: twenty connections reach both
            tcp_ask(self.port, BIG_NAME, "TXT", timeout=5)
            tcp_ask(self.port, SRV_NAME, "SRV", timeout=5)

    # -- one flood ---------------------------------------------------------------------------

    def measure(self, name: str, body: Callable[[], list[str]]) -> Outcome:
        self.settle()
        time.sleep(0.5)
        before_rss = self.sampler.reset()
        restarts = self.restarts()
        started = time.monotonic()
        notes = body()
        ended = time.monotonic()
        growth = (self.sampler.peak() - before_rss) / MB
        self.settle()
        time.sleep(1.0)
        settled = (self.sampler.now - before_rss) / MB
        probes = self.prober.window(started, ended)
        outcome = Outcome(name, growth, settled, len(probes), sum(not ok for _, ok in probes), 0,
                          self.restarts() - restarts, notes, base_mb=before_rss / MB,
                          kernel_mb=self.kernel_peak / MB)
        charged = growth + self.kernel_peak / MB  # a cgroup v2 Pod is charged for its sockets' buffers too
        if self.cgroup is not None:
            outcome.cgroup_peak_mb, outcome.oom_kills = self.cgroup.peak_mb(), self.cgroup.oom_kills()
            notes.append(f"memory cgroup: peak {outcome.cgroup_peak_mb:.1f} MB of {self.memory_limit:g} MB, "
                         f"{outcome.oom_kills} OOM kills")
            if outcome.oom_kills:
                notes.append("FAIL: the kernel killed a process of the agent for its memory limit")
        if name.startswith("hosts-"):
            outcome.passed = (before_rss / MB + growth) <= HOSTS_PEAK_LIMIT_MB and settled <= GROWTH_LIMIT_MB and \
                outcome.lost == 0 and outcome.restarts == 0 and not any(n.startswith("FAIL") for n in notes)
        elif name == "stop-worker":
            outcome.lost_late = sum(not ok for t, ok in probes if t >= started + STOP_GRACE)
            outcome.passed = charged <= GROWTH_LIMIT_MB and outcome.lost_late == 0 and outcome.restarts >= 1
        else:
            outcome.passed = charged <= GROWTH_LIMIT_MB and outcome.lost == 0 and outcome.restarts == 0 and \
                not any(n.startswith("FAIL") for n in notes)
        return outcome

    def pipeline(self, name: str, rdtype: str, rounds: tuple[int, ...]) -> list[str]:
        payload = pipelined(name, rdtype, self.size.pipeline_queries)
        refused, aborted = self.counter("nodedns_tcp_refused_total"), self.counter("nodedns_tcp_aborted_total")
        for count in rounds:
            flood = Flood(self.port, sources=self.sources)
            flood.open(count, payload)
            time.sleep(self.size.hold)
            self.kernel_peak = max(self.kernel_peak, self.socket_bytes())
            flood.close()
        return [f"{len(payload)} bytes of pipelined queries per connection, {sum(rounds)} connections",
                f"the agent refused {self.counter('nodedns_tcp_refused_total') - refused}, reset "
                f"{self.counter('nodedns_tcp_aborted_total') - aborted}"]

    def never_read(self) -> list[str]:
        idle = self.size.idle_timeout or 10.0
        refused = self.counter("nodedns_tcp_refused_total")
        flood = Flood(self.port, sources=self.sources)
        flood.open(self.size.never_read, pipelined(BIG_NAME, "TXT", 4))
        time.sleep(min(1.0, idle / 2))
        self.kernel_peak = max(self.kernel_peak, self.socket_bytes())
        answered = tried = 0
        deadline = time.monotonic() + idle + 3.0
        while time.monotonic() < deadline:
            tried += 1
            answered += tcp_ask(self.port, PROBE_NAME) is not None
            time.sleep(0.25)
        left = flood.alive()
        held = self.open_tcp()
        flood.close()
        notes = [f"{self.size.never_read} connections ({self.counter('nodedns_tcp_refused_total') - refused} refused "
                 f"by the agent), {left} still open {idle + 3:g}s later (idle timeout {idle:g}s; the agent counts "
                 f"{held} open)", f"the good Pod's TCP queries answered meanwhile: {answered} of {tried}"]
        if left:
            notes.append("FAIL: connections that never read outlived the idle timeout")
        if answered < tried:
            notes.append("FAIL: the good Pod's TCP queries were not all answered")
        return notes

    def stop_worker(self) -> list[str]:
        victim = next(w for w in self.workers() if w["up"])
        pid = int(victim["pid"])
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        restarted_after: float | None = None
        unready: list[str] = []
        try:
            while time.monotonic() - stopped < self.size.stop_seconds:
                with contextlib.suppress(OSError, ValueError, KeyError):
                    code, body = self.agent.get("/readyz", timeout=1)
                    if code != 200 and not unready:
                        unready.append(body.strip().replace("\n", "; "))
                    if restarted_after is None:
                        w = next(w for w in self.workers() if w["worker"] == victim["worker"])
                        if w["pid"] != pid and w["serving"]:
                            restarted_after = time.monotonic() - stopped
                time.sleep(0.1)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        notes = [f"worker {victim['worker']} (pid {pid}) stopped {self.size.stop_seconds:g}s",
                 "serving again after " + (f"{restarted_after:.1f}s (a new process)" if restarted_after is not None
                                          else "never (while stopped)")]
        if unready:
            notes.append(f"/readyz meanwhile: {unready[0][:160]}")
        return notes

    def externalname(self) -> list[str]:
        answers: dict[str, int] = {}
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((EVIL, 0))
            s.settimeout(0.5)
            for i in range(self.size.external_queries):
                s.sendto(query("evil.default.svc.cluster.local", "A", qid=i), ("127.0.0.1", self.port))
                try:
                    data = s.recv(4096)
                    rcode = dns.rcode.to_text(dns.rcode.Rcode(data[3] & 15))
                except OSError:
                    rcode = "timeout"
                answers[rcode] = answers.get(rcode, 0) + 1
                time.sleep(0.01)
        return [f"answers: {answers}"]

    def srv_64k(self) -> list[str]:
        """Every port's SRV answer of the wide Service, once, the ports split over `wide_connections` TCP
        connections asking at once."""
        ports, conns = self.size.wide_ports, self.size.wide_connections
        answered = [0] * conns
        failed: list[str] = []

        def connection(k: int) -> None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=10, source_address=(EVIL, 0)) as s:
                    for i in range(k, ports, conns):
                        s.sendall(rawdns.frame(query(f"_p{i}._tcp.wide.default.svc.cluster.local", "SRV", qid=i)))
                        if rawdns.recv_frame(s, timeout=10) is None:
                            failed.append(f"connection {k}: no answer for port {i}")
                            return
                        answered[k] += 1
            except OSError as exc:
                failed.append(f"connection {k}: {exc}")

        threads = [threading.Thread(target=connection, args=(k,)) for k in range(conns)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(1.5)  # the workers publish their counters once a second
        stored = self.counter("nodedns_cluster_answers_bytes") / MB
        budget = self.counter("nodedns_cluster_answers_max_bytes") / MB
        notes = [f"{ports} ports over {conns} connections: {sum(answered)} SRV answers",
                 f"stored cluster answers {stored:.1f} MB of their {budget:.1f} MB, "
                 f"{self.counter('nodedns_cluster_answers_too_large_total')} built for each query (too large to keep)"]
        if failed:
            notes.append(f"FAIL: {len(failed)} connections failed ({failed[0]})")
        if stored > budget:
            notes.append("FAIL: the stored cluster answers are over their budget")
        return notes

    def spray(self) -> list[str]:
        """Random 240-byte names from one address, within its rate limit: misses."""
        rate, seconds = self.size.spray_rate, self.size.spray_seconds
        queries = random_queries(int(rate * seconds), 39)
        shed = self.counter("nodedns_misses_shed_total")
        cpu = tree_cpu(self.agent.proc.pid)  # type: ignore[union-attr]
        sent = flood_process(self.port, EVIL, queries, rate, seconds)
        cpu = tree_cpu(self.agent.proc.pid) - cpu  # type: ignore[union-attr]
        time.sleep(1.5)
        return [f"{sent} random names from one address in {seconds:g}s ({sent / seconds:,.0f}/s)",
                f"misses shed before the slow path: {self.counter('nodedns_misses_shed_total') - shed}",
                f"the agent's CPU over the spray {cpu:.2f}s ({cpu / max(sent, 1) * 1e6:.1f} us a query)"]

    def spray_tcp(self) -> list[str]:
        """The spray's names over TCP connections of one address, pipelined: misses the miss budgets REFUSE."""
        seconds = self.size.spray_seconds
        queries = random_queries(20_000, 40)
        refused = self.counter("nodedns_misses_shed_replies_total")
        cpu = tree_cpu(self.agent.proc.pid)  # type: ignore[union-attr]
        fork = multiprocessing.get_context("fork")
        counts = fork.Array("q", 3)
        proc = fork.Process(target=send_tcp, args=(self.port, EVIL, queries, seconds, counts))
        proc.start()
        proc.join(seconds + 60)
        cpu = tree_cpu(self.agent.proc.pid) - cpu  # type: ignore[union-attr]
        sent, answered, got_refused = counts[:]
        shed = self.counter("nodedns_misses_shed_replies_total") - refused
        notes = [f"{sent} random names over 8 TCP connections in {seconds:g}s ({answered / seconds:,.0f}/s answered)",
                 f"REFUSED {got_refused}, misses shed {shed}",
                 f"the agent's CPU {cpu:.2f}s ({cpu / max(answered, 1) * 1e6:.1f} us a query)"]
        if answered and not shed:
            notes.append("FAIL: no TCP miss shed")
        return notes

    def namespace_share(self) -> list[str]:
        """The tenant's Pods ask new slow names together; the good Pod's new names meanwhile."""
        pods = [tenant_address(i) for i in range(self.size.namespace_pods)]
        rate, seconds = self.size.namespace_rate, self.size.namespace_seconds
        refused = self.counter("nodedns_upstream_namespace_share_refused_total")
        stop = threading.Event()

        def flood() -> None:
            socks = []
            for address in pods:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind((address, 0))
                s.setblocking(False)
                socks.append(s)
            n, started = 0, time.monotonic()
            while not stop.is_set() and (elapsed := time.monotonic() - started) < seconds:
                while n < int(elapsed * rate):
                    with contextlib.suppress(BlockingIOError):
                        socks[n % len(socks)].sendto(query(f"n{n}.{SLOW_DOMAIN}", "A", qid=n & 0xFFFF),
                                                     ("127.0.0.1", self.port))
                    n += 1
                for s in socks:
                    with contextlib.suppress(BlockingIOError):
                        while s.recv(65535):
                            pass
                time.sleep(0.002)
            for s in socks:
                s.close()

        flooder = threading.Thread(target=flood)
        flooder.start()
        answers: dict[str, int] = {}
        try:
            time.sleep(min(seconds / 2, SLOW_DELAY / 2))  # the slow names pile up, none answered yet
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind((GOOD, 0))
                s.settimeout(2.0)
                for i in range(40):
                    name = f"g{i}-{random.getrandbits(32)}.{EVIL_DOMAIN}"
                    s.sendto(query(name, "A", qid=i), ("127.0.0.1", self.port))
                    try:
                        rcode = dns.rcode.to_text(dns.rcode.Rcode(s.recv(4096)[3] & 15))
                    except OSError:
                        rcode = "timeout"
                    answers[rcode] = answers.get(rcode, 0) + 1
        finally:
            flooder.join()
            stop.set()
        time.sleep(SLOW_DELAY)
        notes = [f"{len(pods)} Pods of namespace {TENANT}, {rate}/s new slow names for {seconds:g}s; refused by the "
                 f"namespace's share: {self.counter('nodedns_upstream_namespace_share_refused_total') - refused}",
                 f"the good Pod's 40 new names meanwhile: {answers}"]
        if answers.get("REFUSED") or answers.get("timeout"):
            notes.append("FAIL: the good Pod's new names were refused or unanswered")
        return notes

    def spoof(self) -> list[str]:
        """Queries for the good Pod's cached name in its own name (address), far over its rate limit."""
        rate, seconds = self.size.spoof_rate, self.size.spoof_seconds
        queries = [query(PROBE_NAME, "A", qid=i) for i in range(1024)]
        slipped = self.counter("nodedns_rate_limited_total")
        truncated = self.prober.truncated
        sent = flood_process(self.port, GOOD, queries, rate, seconds)
        time.sleep(1.5)
        return [f"{sent} queries in the good Pod's name in {seconds:g}s ({sent / seconds:,.0f}/s)",
                f"over its rate limit (TC=1 or dropped): {self.counter('nodedns_rate_limited_total') - slipped}, "
                f"of which dropped beyond the capacity: {self.counter('nodedns_shed_capacity_exhausted_total')}",
                f"the good Pod's probes that got TC=1 and were asked again over TCP: "
                f"{self.prober.truncated - truncated}"]

    # -- the --hosts file and the shadow ----------------------------------------------------------

    def hosts_status(self) -> dict[str, Any]:
        section: dict[str, Any] = json.loads(self.agent.get("/status")[1]).get("hosts") or {}
        return section

    def hosts_file(self, kind: str) -> list[str]:
        """Replace the agent's --hosts file (`kind`: blocklist, junk, fifo) and wait for the next reading."""
        path = self.work / HOSTS_FILE
        before = self.hosts_status()
        log_before = self.agent.log.read_text(errors="replace").count("nodedns.hostswatch")
        started = time.monotonic()
        lines = 0
        if kind == "fifo":
            path.unlink()
            os.mkfifo(path)
        else:
            tmp = path.with_suffix(".new")
            with tmp.open("w") as out:
                written = 0
                while written < self.size.hosts_bytes - 64:
                    text = (f"0.0.0.0 ad{lines}.tracker-{lines % 977}.{EVIL_DOMAIN}\n" if kind == "blocklist"
                            else f"junk{lines} {'x' * 20} not a hosts line\n")
                    out.write(text)
                    written += len(text)
                    lines += 1
            os.replace(tmp, path)

        def read() -> bool:
            st = self.hosts_status()
            return st.get("reloads") != before.get("reloads") or bool(st["files"][0]["error"])

        read_in: float | None = None
        unready = 0
        while time.monotonic() - started < 120:
            unready += self.agent.get("/readyz", timeout=2)[0] != 200
            if read():
                read_in = time.monotonic() - started
                break
            time.sleep(0.2)
        st = self.hosts_status()
        logged = self.agent.log.read_text(errors="replace").count("nodedns.hostswatch") - log_before
        notes = [f"{kind}: {lines} lines" if lines else kind,
                 f"read in {read_in:.1f}s" if read_in is not None else "FAIL: never read",
                 f"{st.get('entries')} entries, table {st.get('bytes', 0) / MB:.1f} MB, skipped "
                 f"{st['files'][0]['skipped']}, error {st['files'][0]['error'][:80]!r}", f"{logged} log lines"]
        if logged > LOG_LINES_LIMIT:
            notes.append("FAIL: a log line per line")
        if unready:
            notes.append(f"FAIL: /readyz not ready {unready} times while it was read")
        if kind == "blocklist":
            name = f"ad{lines - 1}.tracker-{(lines - 1) % 977}.{EVIL_DOMAIN}"
            answer = tcp_ask(self.port, name, timeout=5)
            if answer is None or dns.message.from_wire(answer).answer == []:
                notes.append(f"FAIL: {name} not answered from the file")
        if kind == "fifo":
            path.unlink()  # a regular file again: read at the next period, the FIFO held nothing up
            path.write_text(f"10.9.9.9 back.{EVIL_DOMAIN}\n")
            deadline = time.monotonic() + 10
            back = False
            while not back and time.monotonic() < deadline:
                answer = tcp_ask(self.port, f"back.{EVIL_DOMAIN}", timeout=2)
                back = answer is not None and dns.message.from_wire(answer).answer != []
                time.sleep(0.2)
            notes.append("the file read again after it" if back else "FAIL: the file never read again after it")
        return notes

    def shadow_padded(self) -> list[str]:
        """`nodedns shadow` on lo watching the agent's port; 16 connections of padded TCP queries to the agent."""
        if os.geteuid() != 0:
            return ["skipped: the shadow's packet socket needs root (CAP_NET_RAW)"]
        log = self.work / "shadow.log"
        with log.open("ab") as out:
            shadow = subprocess.Popen([sys.executable, "-m", "nodedns", "shadow", "--manifests",
                                       str(ROOT / "examples" / "cluster.yaml"), "--interface", "lo", "--port",
                                       str(self.port), "--status-listen", "127.0.0.1:0", "--debug-listen",
                                       "127.0.0.1:0", "--upstream", "none"],
                                      stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        try:
            time.sleep(3.0)  # the capture open, the index loaded
            sampler = RssSampler(shadow.pid)
            sampler.start()
            base = sampler.reset()
            q = dns.message.make_query(PROBE_NAME, "A", use_edns=0)
            wire = q.to_wire()
            pad = 60_000 - len(wire) - 4
            frame = wire[:-2] + struct.pack("!HHH", pad + 4, 12, pad) + b"\x00" * pad  # an EDNS padding option
            data = struct.pack("!H", len(frame)) + frame
            stop = threading.Event()
            sent = [0]

            def flood(source: str) -> None:
                while not stop.is_set():
                    with contextlib.suppress(OSError), socket.socket() as c:
                        c.bind((source, 0))
                        c.connect(("127.0.0.1", self.port))
                        while not stop.is_set():
                            c.sendall(data)
                            sent[0] += 1

            threads = [threading.Thread(target=flood, args=(self.sources[i % len(self.sources)],), daemon=True)
                       for i in range(16)]
            for t in threads:
                t.start()
            time.sleep(self.size.padded_seconds)
            stop.set()
            for t in threads:
                t.join(5)
            growth = (sampler.peak() - base) / MB
            sampler.stop()
            alive = shadow.poll() is None
        finally:
            shadow.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                shadow.wait(10)
        notes = [f"16 connections, {sent[0]} queries of 60 KB sent in {self.size.padded_seconds:g}s",
                 f"the shadow grew {growth:.1f} MB over {base / MB:.1f} MB"]
        if growth > GROWTH_LIMIT_MB:
            notes.append("FAIL: the shadow grew past the target")
        if not alive:
            notes.append("FAIL: the shadow died")
        return notes

    def forward(self) -> list[str]:
        answers: dict[str, int] = {}

        async def go() -> None:
            loop = asyncio.get_running_loop()
            gate = asyncio.Semaphore(200)

            async def one(i: int) -> None:
                async with gate:
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    s.setblocking(False)
                    s.bind((EVIL, 0))
                    try:
                        await loop.sock_connect(s, ("127.0.0.1", self.port))
                        await loop.sock_sendall(s, query(f"n{i}.{EVIL_DOMAIN}", "TXT", qid=i & 0xFFFF, edns=True))
                        data = await asyncio.wait_for(loop.sock_recv(s, 4096), 10)
                        rcode = dns.rcode.to_text(dns.rcode.Rcode(data[3] & 15))
                    except (OSError, TimeoutError):
                        rcode = "timeout"
                    finally:
                        s.close()
                    answers[rcode] = answers.get(rcode, 0) + 1

            await asyncio.gather(*(one(i) for i in range(self.size.forward_names)))

        asyncio.run(go())
        return [f"{self.size.forward_names} names, answers: {answers}"]


def hosts_settings(name: str, work: Path) -> dict[str, Any]:
    """The hosts attacks' agent reads a --hosts file (a line of its own at first) twice a second."""
    if not name.startswith("hosts-"):
        return {}
    (work / HOSTS_FILE).write_text(f"10.9.9.1 first.{EVIL_DOMAIN}\n")
    return {"hosts": [str(work / HOSTS_FILE)], "kube-dns-config-period": HOSTS_PERIOD}


def run_attacks(size: Size, attacks: list[str], sources: list[str], settings: dict[str, str],
                memory_limit: float | None = None) -> list[Outcome]:
    """Each flood against an agent of its own (started fresh, the answers it asks for cached first)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    out: list[Outcome] = []
    for name in attacks:
        try:
            outcome = run_attack(name, size, sources, settings, memory_limit)
        except NotReady as exc:
            outcome = Outcome(name, 0.0, 0.0, 0, 0, 0, 0, [f"FAIL: {exc}"])
        out.append(outcome)
        print(line(outcome), flush=True)
    return out


def run_attack(name: str, size: Size, sources: list[str], settings: dict[str, str],
               memory_limit: float | None) -> Outcome:
    """One flood against an agent of its own."""
    with tempfile.TemporaryDirectory(prefix="nodedns-attack.") as tmp, \
            Run(Path(tmp), size, sources, {**settings, **hosts_settings(name, Path(tmp))}, memory_limit) as r:
        r.warm()
        bodies: dict[str, Callable[[], list[str]]] = {
            "pipeline-60k": lambda: r.pipeline(BIG_NAME, "TXT", size.pipeline_rounds),
            "pipeline-srv": lambda: r.pipeline(SRV_NAME, "SRV", (size.srv_connections,)),
            "never-read": r.never_read,
            "stop-worker": r.stop_worker,
            "externalname": r.externalname,
            "forward-60k": r.forward,
            "srv-64k": r.srv_64k,
            "spray": r.spray,
            "spray-tcp": r.spray_tcp,
            "namespace-share": r.namespace_share,
            "spoof": r.spoof,
            "hosts-blocklist": lambda: r.hosts_file("blocklist"),
            "hosts-junk": lambda: r.hosts_file("junk"),
            "hosts-fifo": lambda: r.hosts_file("fifo"),
            "shadow-padded": r.shadow_padded,
        }
        try:
            outcome = r.measure(name, bodies[name])
        except OSError as exc:  # the agent's HTTP listener is gone: it died
            code = r.agent.proc.poll() if r.agent.proc is not None else None
            outcome = Outcome(name, (r.sampler.peak() - r.sampler.base) / MB, 0.0, 0, 0, 0, 0,
                              [f"FAIL: the agent is gone (exit {code}; {exc})"])
        tracebacks = r.agent.log.read_text(errors="replace").count("Traceback")
        if tracebacks:
            outcome.notes.append(f"{tracebacks} tracebacks in the agent's log")
        if os.environ.get("KEEP_LOGS"):
            print(r.agent.log.read_text(errors="replace")[-20000:], file=sys.stderr)
    return outcome


HEADER = (f"{'attack':<14} {'growth MB':>10} {'settled MB':>11} {'probes':>7} {'lost':>5} {'restarts':>9}  result   "
          "(the tree's RSS before; kernel socket buffers at the peak; notes)")


def line(o: Outcome) -> str:
    lost = f"{o.lost}" if o.name != "stop-worker" else f"{o.lost}/{o.lost_late}"
    kernel = f", kernel {o.kernel_mb:.1f} MB" if o.kernel_mb else ""
    return (f"{o.name:<14} {o.growth_mb:>10.1f} {o.settled_mb:>11.1f} {o.probes:>7} {lost:>5} {o.restarts:>9}  "
            f"{'PASS' if o.passed else 'FAIL'}   (RSS {o.base_mb:.1f} MB before{kernel}) " + "; ".join(o.notes))


@contextlib.contextmanager
def quiet_signals() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small floods, short holds, idle timeout 1 s (CI)")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help=f"comma-separated, of {', '.join(ATTACKS)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="change a key of the ConfigMap's config (what-if: e.g. tcp-max-connections=1000)")
    parser.add_argument("--sources", type=int, default=1, metavar="N",
                        help="the attacker's TCP connections come from N addresses (127.0.0.2 on: N Pods of one "
                             "tenant, past the per-client cap); default 1, one Pod")
    parser.add_argument("--memory-limit", type=float, default=None, metavar="MB",
                        help="run the agent in a memory cgroup of MB (the DaemonSet's limit: 512), as its Pod; "
                             "each flood says the cgroup's peak and OOM kills (root)")
    args = parser.parse_args()
    if args.memory_limit is not None:
        why = memcg_available()
        if why is not None:
            parser.error(f"--memory-limit: no memory cgroup can be made here: {why}")
    attacks = [a for a in args.attacks.split(",") if a]
    unknown = [a for a in attacks if a not in ATTACKS]
    if unknown:
        parser.error(f"unknown attacks: {', '.join(unknown)}")
    size = QUICK if args.quick else Size()
    settings = dict(item.split("=", 1) for item in args.set)
    changed = "".join(f", {k}={v}" for k, v in settings.items())
    limit = f", in a memory cgroup of {args.memory_limit:g} MB" if args.memory_limit is not None else ""
    print(f"nodedns under attack ({'quick' if args.quick else 'full'}): the shipped config (--workers 2, allow "
          f"list{changed}){limit}, the attacker on {args.sources} address(es); targets: growth + kernel <= "
          f"{GROWTH_LIMIT_MB:g} MB, no probe lost, no worker restarted")
    print("(lost for stop-worker: all / from 3 s after the stop on)")
    print(HEADER, flush=True)
    with quiet_signals():
        outcomes = run_attacks(size, attacks, [f"127.0.{(i + 2) // 256}.{(i + 2) % 256}" for i in range(args.sources)],
                               settings, args.memory_limit)
    print("RESULT " + json.dumps([o.__dict__ for o in outcomes]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
