"""One Pod spraying misses against the shipped agent (daemonset/configmap.yaml: 2 workers, the rate limit, the
miss budgets): random 240-byte names, in the cluster zone and outside it, from one address within its rate
limit. Another Pod resolving a cached name meanwhile loses none of its answers; the sprayer's misses beyond
its budget are shed before the slow path (TC=1, counted); no worker restarts."""

from __future__ import annotations

import multiprocessing
import random
import socket
import struct
import time
from pathlib import Path
from typing import Any

from tests.support.apiserver import FakeApiServer
from tests.support.shipped import ShippedAgent, cluster, configmap_config
from tests.support.tenant import EVIL, Prober, udp_drops
from tests.support.upstream_double import UpstreamDouble

SPRAY_RATE = 15_000  # queries a second from the sprayer: within its rate limit (10,000 a worker, 2 workers)
SPRAY_SECONDS = 6.0
SOCKETS = 8  # the sprayer's source ports: SO_REUSEPORT spreads them over both workers


def random_name(rng: random.Random, zone: str) -> str:
    """A name of 240 bytes or so ending in `zone`: labels of 60 random hex digits."""
    labels = [rng.randbytes(30).hex() for _ in range((236 - len(zone)) // 61)]
    tail = 238 - len(zone) - 61 * len(labels)
    return ".".join([*labels, *([rng.randbytes(tail // 2).hex()] if tail > 1 else []), zone])


def spray_queries(count: int) -> list[bytes]:
    """`count` queries for new names, half in the cluster zone, half forwarded (made before the spray, so
    the sender only sends)."""
    rng = random.Random(39)
    zones = ["default.svc.cluster.local", "spray.example"]
    out = []
    for n in range(count):  # by hand: dnspython takes longer to make them than the spray lasts
        name = b"".join(bytes([len(label)]) + label.encode() for label in random_name(rng, zones[n % 2]).split("."))
        out.append(struct.pack("!HHHHHH", n & 0xFFFF, 0x0100, 1, 0, 0, 0) + name + b"\x00\x00\x01\x00\x01")
    return out


def spray(port: int, rate: int, seconds: float, sent: Any, queries: list[bytes]) -> None:
    """`rate` of `queries` a second from EVIL, never waiting for a reply (the replies are read and thrown
    away so the socket buffers never fill); `sent.value`: how many were sent."""
    socks = []
    for _ in range(SOCKETS):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((EVIL, 0))
        s.setblocking(False)
        socks.append(s)
    try:
        started = time.monotonic()
        n = 0
        while (elapsed := time.monotonic() - started) < seconds and n < len(queries):
            due = min(int(elapsed * rate), len(queries))
            while n < due:
                try:
                    socks[n % SOCKETS].sendto(queries[n], ("127.0.0.1", port))
                except BlockingIOError:
                    break
                n += 1
            for s in socks:
                try:
                    while s.recv(65535):
                        pass
                except BlockingIOError:
                    pass
            time.sleep(0.0005)
        sent.value = n
    finally:
        for s in socks:
            s.close()


def probe(port: int, seconds: float, out: Any) -> None:
    """The good Pod for `seconds` (tests.support.tenant.Prober: a cached cluster name every 20 ms, lost if not
    answered in 2 s); its (sent at, answered) sent on `out` once every probe is decided."""
    victim = Prober(port)
    victim.start()
    time.sleep(seconds)
    victim.stop()
    out.send(list(victim.results))


def test_the_shipped_configmap_budgets_misses_per_client_and_per_namespace() -> None:
    config = configmap_config()
    assert 0 < config["miss-limit"] < config["miss-limit-namespace"] < config["rate-limit"]


def test_a_pod_spraying_misses_costs_another_pod_none_of_its_cached_answers(tmp_path: Path) -> None:
    with FakeApiServer() as api, UpstreamDouble() as up:
        cluster(api)
        up.mode = "nxdomain"
        with ShippedAgent(tmp_path, api, up) as agent:
            agent.wait_ready()
            queries = spray_queries(int(SPRAY_RATE * SPRAY_SECONDS))
            fork = multiprocessing.get_context("fork")
            # the good Pod and the sprayer in processes of their own: neither waits on this one's interpreter,
            # busy with the upstream double
            results, mine = fork.Pipe(duplex=False)
            victim = fork.Process(target=probe, args=(agent.port, 1.0 + SPRAY_SECONDS + 3.0, mine))
            victim.start()
            time.sleep(1.0)  # its name stored in both workers
            drops = udp_drops(agent.port)
            started = time.monotonic()
            sent = fork.Value("q", 0)
            sprayer = fork.Process(target=spray, args=(agent.port, SPRAY_RATE, SPRAY_SECONDS, sent, queries))
            sprayer.start()
            sprayer.join(SPRAY_SECONDS + 30)
            ended = time.monotonic()
            assert results.poll(30), "the good Pod's results"
            probes = [(t, ok) for t, ok in results.recv() if started <= t < ended]
            victim.join(10)
            lost = [t - started for t, ok in probes if not ok]
            # a probe lost with datagrams dropped at the agent's sockets waited behind the spray in a full queue
            assert len(probes) > SPRAY_SECONDS / 0.02 / 2 and lost == [], \
                (len(probes), lost, f"dropped at the agent's sockets: {udp_drops(agent.port) - drops}")
            assert sent.value > SPRAY_RATE * SPRAY_SECONDS / 3, sent.value  # a spray, even on a busy machine
            shed = agent.metric("nodedns_misses_shed_total", budget="client") or 0
            assert shed > 0  # beyond its budget the sprayer's misses never reached the slow path
            assert (agent.metric("nodedns_misses_shed_replies_total", action="slip") or 0) > 0  # TC=1, not dropped
            restarts = [line for line in agent.get("/metrics")[1].splitlines()
                        if line.startswith("nodedns_worker_restarts_total{") and not line.endswith(" 0.0")]
            assert restarts == []
