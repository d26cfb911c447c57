#!/usr/bin/env python3
"""The soak test's cluster: the API server double (tests/support/apiserver.py) with a small cluster and a steady
stream of EndpointSlice updates, for scripts/soak.

    scripts/lib/soak_feeder.py WORKDIR [--services 200] [--rate 10]

Writes WORKDIR/kubeconfig and WORKDIR/queries.txt (dnsperf input: A, AAAA-less NODATA, SRV, PTR and
NXDOMAIN names of that cluster), prints "ready", then changes RATE EndpointSlices a second (an
endpoint's address moves, round robin over the services) until SIGTERM/SIGINT, and prints the number
of updates made. Bookmarks every 5 s, watches end after the agent's timeoutSeconds as on a real API
server.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # scripts/lib/ -> the checkout
sys.path.insert(0, str(ROOT))

from tests.support.apiserver import FakeApiServer, endpoint_slice, namespace, service  # noqa: E402

NAMESPACES = ("default", "prod", "staging", "monitoring")
ENDPOINTS = 5  # per slice


def ips(svc: int, generation: int) -> list[str]:
    return [f"10.{(svc >> 8) & 255}.{svc & 255}.{(generation * ENDPOINTS + e) % 250 + 1}" for e in range(ENDPOINTS)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--services", type=int, default=200)
    parser.add_argument("--rate", type=float, default=10.0, help="EndpointSlice updates per second")
    args = parser.parse_args()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    with FakeApiServer(bookmark_interval=5.0, history=50_000) as api:
        api.load("Namespace", [namespace(ns) for ns in NAMESPACES])
        names = [(NAMESPACES[i % len(NAMESPACES)], f"svc-{i}") for i in range(args.services)]
        api.load("Service", [service(ns, name, [f"10.96.{i >> 8}.{i & 255}"], [("http", 80)])
                             if i % 2 == 0 else service(ns, name, None, [("http", 80)])  # half headless
                             for i, (ns, name) in enumerate(names)])
        api.load("EndpointSlice", [endpoint_slice(ns, f"{name}-1", name, ips(i, 0))
                                   for i, (ns, name) in enumerate(names)])
        api.write_kubeconfig(args.workdir / "kubeconfig")
        with (args.workdir / "queries.txt").open("w") as out:
            for i, (ns, name) in enumerate(names):
                out.write(f"{name}.{ns}.svc.cluster.local A\n")
                out.write(f"_http._tcp.{name}.{ns}.svc.cluster.local SRV\n")
                if i % 10 == 0:
                    out.write(f"{name}.{ns}.svc.cluster.local AAAA\n")  # NODATA: IPv4-only services
                    out.write(f"missing-{i}.{ns}.svc.cluster.local A\n")  # NXDOMAIN
                    if i % 2 == 0:
                        out.write(f"{i & 255}.{i >> 8}.96.10.in-addr.arpa PTR\n")
        print("ready", flush=True)

        updates = 0
        interval = 1.0 / args.rate
        next_at = time.monotonic()
        while not stop.is_set():
            i = updates % len(names)
            ns, name = names[i]
            api.put("EndpointSlice", endpoint_slice(ns, f"{name}-1", name, ips(i, updates // len(names) + 1)))
            updates += 1
            next_at += interval
            stop.wait(max(0.0, next_at - time.monotonic()))
        print(f"updates {updates}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
