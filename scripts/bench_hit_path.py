#!/usr/bin/env python3
"""Hit-path cost of counting: server CPU per cached answer, this tree against a baseline revision.

Starts `nodedns serve` on the generated cluster of scripts/bench-cluster.sh (300 Services; its
query mix: A/AAAA/SRV of ClusterIP and headless services, ~5% NXDOMAIN) from each tree in turn
(pinned to CPU 1), primes its stored answers, runs dnsperf (pinned to CPU 0, EDNS queries as
resolvers send them) for a fixed time, so every answer comes from the UDP hit path, and divides the
server's user+system CPU time by the answers dnsperf got. Rounds alternate between the variants so
drift on a shared machine hits all of them alike; the table shows the median of the rounds.

    python3 scripts/bench_hit_path.py                      # baseline: git revision "main"
    python3 scripts/bench_hit_path.py --baseline HEAD~2 --seconds 10 --rounds 5
    python3 scripts/bench_hit_path.py --micro              # in-process: ns per hit-path call, no sockets
    python3 scripts/bench_hit_path.py --autopath --query-log ''   # --autopath on against off
    python3 scripts/bench_hit_path.py --variant "--rate-limit 1000000" --query-log ''   # other flags
    python3 scripts/bench_hit_path.py --baseline-tree ../other-checkout --query-log ''  # a built checkout

`--micro` starts the agent of each tree in a subprocess and times the Python hit path on a stored
answer with reads and sends that cost nothing (`hitpath.serve` on a stand-in socket; a tree from
before it: `datagram_received` with sendto a no-op): the Python work of the hit path alone (what
counting could slow down), without the syscall noise of a shared machine.

Needs dnsperf (Debian package `dnsperf`) and git; taskset is used when present.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_cluster  # noqa: E402 - the cluster benchmark's building blocks (same directory)

SERVICES = 300  # the generated cluster of scripts/bench-cluster.sh
QUERY_LINES = 2000


@dataclass
class Variant:
    name: str
    tree: Path
    extra: tuple[str, ...] = ()


def pin(cpu: int) -> list[str]:
    return ["taskset", "-c", str(cpu)] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []


def dnsperf(port: int, qfile: Path, seconds: float, clients: int, *, edns: bool) -> tuple[int, float]:
    cmd = [*pin(0), "dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(qfile), "-c", str(clients),
           "-q", "100", "-l", str(seconds)] + (["-e"] if edns else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    return bench_cluster.dnsperf_summary(out)


def run_once(v: Variant, manifest: Path, qfile: Path, seconds: float, clients: int,
             edns: bool) -> tuple[float, float]:
    """(server CPU microseconds per answer, QPS) of one run."""
    port = bench_cluster.free_port()
    env = dict(os.environ, PYTHONPATH=str(v.tree))
    cmd = [*pin(1), sys.executable, "-m", "nodedns", "serve", "--manifests", str(manifest), "--listen",
           f"127.0.0.1:{port}", "--status-listen", "none", "--workers", "1", "--upstream", "none", *v.extra]
    proc = subprocess.Popen(cmd, cwd=v.tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not bench_cluster.wait_ready(port, 30):
            raise RuntimeError(f"{v.name}: the agent did not sync within 30s")
        dnsperf(port, qfile, 2, clients, edns=edns)  # prime every stored answer
        before = bench_cluster.cputime_us(proc.pid)
        completed, qps = dnsperf(port, qfile, seconds, clients, edns=edns)
        return (bench_cluster.cputime_us(proc.pid) - before) / completed, qps
    finally:
        bench_cluster.stop(proc, timeout=10)


MICRO = r"""
import asyncio, sys, time, uvloop
from nodedns import config as cfgmod
from nodedns.app.agent import Agent

N, REPEAT = int(sys.argv[1]), int(sys.argv[2])
extra = sys.argv[3:]

async def main():
    raw = {"manifests": "examples/cluster.yaml", "listen": "127.0.0.1:0", "status-listen": "none"}
    i = 0
    while i < len(extra):  # --flag VALUE, or a --switch
        if i + 1 < len(extra) and not extra[i + 1].startswith("--"):
            raw[extra[i].lstrip("-")] = extra[i + 1]
            i += 2
        else:
            raw[extra[i].lstrip("-")] = True
            i += 1
    agent = Agent(cfgmod.build(raw, environ={}))
    await agent.start()
    proto = agent.server.udp[0][1]
    # web.default.svc.cluster.local A, RD, EDNS 1232 (built by hand: the baseline may lack helpers)
    qname = b"".join(bytes((len(p),)) + p for p in b"web.default.svc.cluster.local".split(b".")) + b"\0"
    q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x01" + qname + b"\x00\x01\x00\x01"
    q += b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00"
    addr = ("127.0.0.1", 9)
    out = []
    if hasattr(proto, "datagram_received"):  # a tree from before the hit path was one function: per datagram
        proto.datagram_received(q, addr)  # stores the answer
        await asyncio.sleep(0.05)
        proto.sendto = lambda data, addr: None
        f = proto.datagram_received
        for _ in range(REPEAT):
            t = time.perf_counter()
            for _ in range(N):
                f(q, addr)
            out.append((time.perf_counter() - t) / N * 1e9)
    else:  # nodedns.serve.hitpath.serve, a batch a call, on a socket whose reads and sends cost nothing
        from nodedns.serve import hitpath
        proto.general(q, addr)  # stores the answer
        await asyncio.sleep(0.05)

        class Free:
            recvfrom = {65535: (q, addr)}.get  # every read gets the query (a batch is always full)
            sendto = {}.get  # a send that does nothing

        sock, hits = Free(), proto.tally.hits if proto.tally is not None else None
        serve, calls = hitpath.serve, N // hitpath.BATCH
        for _ in range(REPEAT):
            t = time.perf_counter()
            for _ in range(calls):
                serve(sock, proto.table, proto.allowed, proto.counts, proto.max_udp, hits, None)
            out.append((time.perf_counter() - t) / (calls * hitpath.BATCH) * 1e9)
    print(" ".join(f"{x:.1f}" for x in out))
    agent.request_stop()
    await agent.shutdown()

uvloop.run(main())
"""


def micro(variants: list[Variant], rounds: int) -> None:
    results: dict[str, list[float]] = {v.name: [] for v in variants}
    for _ in range(rounds):
        for v in variants:
            env = dict(os.environ, PYTHONPATH=str(v.tree))
            proc = subprocess.run([*pin(1), sys.executable, "-c", MICRO, "100000", "5", *v.extra], cwd=v.tree,
                                  env=env, capture_output=True, text=True, timeout=300)
            if proc.returncode:
                raise RuntimeError(f"{v.name}: {proc.stderr[-2000:]}")
            out = proc.stdout
            results[v.name].extend(float(x) for x in out.split())
    base = min(results[variants[0].name])
    print(f"\n{'variant':<34} {'ns/call (min)':>14} {'median':>8} {'vs baseline':>12}")
    for v in variants:
        xs = results[v.name]
        print(f"{v.name:<34} {min(xs):>14.0f} {statistics.median(xs):>8.0f} {(min(xs) / base - 1) * 100:>+11.1f}%")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", default="main", help="git revision to compare with (default main)")
    p.add_argument("--baseline-tree", type=Path, default=None, metavar="DIR",
                   help="a checkout to compare with instead of a revision (its C hit path built in place, as "
                        "scripts/install-venv.sh builds it: an exported revision has none)")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--no-edns", action="store_true", help="plain queries only (default: EDNS, as resolvers send)")
    p.add_argument("--query-log", default="1%", help="also measure this tree with --query-log RATE ('' = skip)")
    p.add_argument("--variant", action="append", default=[], metavar="FLAGS",
                   help="also measure this tree with these serve flags, e.g. '--rate-limit 1000000' (repeatable)")
    p.add_argument("--micro", action="store_true", help="time the hit path in-process instead (no dnsperf)")
    p.add_argument("--autopath", action="store_true",
                   help="also measure this tree with --autopath (the bench client is no Pod: plain answers)")
    args = p.parse_args()
    if not args.micro and shutil.which("dnsperf") is None:
        print("bench_hit_path: dnsperf is not installed (apt-get install dnsperf)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="nodedns-bench-") as tmp:
        if args.baseline_tree is not None:
            base, label = args.baseline_tree.resolve(), str(args.baseline_tree)
        else:
            base, label = bench_cluster.export_tree(args.baseline, Path(tmp) / "baseline"), args.baseline
        variants = [Variant(f"baseline ({label})", base), Variant("this tree", ROOT)]
        if args.query_log:
            variants.append(Variant(f"this tree, --query-log {args.query_log}", ROOT,
                                    ("--query-log", args.query_log)))
        if args.autopath:
            variants.append(Variant("this tree, --autopath", ROOT, ("--autopath", "--node-name", "bench-node")))
        variants += [Variant(f"this tree, {flags}", ROOT, tuple(flags.split())) for flags in args.variant]
        if args.micro:
            micro(variants, args.rounds)
            return 0
        manifest = Path(tmp) / "cluster.yaml"
        subprocess.run([sys.executable, str(Path(__file__).parent / "bench_cluster.py"), "manifest", str(manifest),
                        "--services", str(SERVICES)], check=True)
        qfile = Path(tmp) / "queries.txt"
        qfile.write_text("\n".join(bench_cluster.queries(SERVICES, QUERY_LINES)) + "\n")
        results: dict[str, list[tuple[float, float]]] = {v.name: [] for v in variants}
        for r in range(args.rounds):
            for v in variants:
                us, qps = run_once(v, manifest, qfile, args.seconds, args.clients, not args.no_edns)
                results[v.name].append((us, qps))
                print(f"round {r + 1} {v.name}: {us:.2f} us/answer, {qps:,.0f} QPS", file=sys.stderr)
    base_us = statistics.median(u for u, _ in results[variants[0].name])
    print(f"\n{'variant':<34} {'CPU us/answer':>14} {'vs baseline':>12} {'QPS':>10}")
    for v in variants:
        us = statistics.median(u for u, _ in results[v.name])
        qps = statistics.median(q for _, q in results[v.name])
        print(f"{v.name:<34} {us:>14.2f} {(us / base_us - 1) * 100:>+11.1f}% {qps:>10,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
