#!/usr/bin/env python3
"""DNS latency while a client floods the agent's HTTP listeners: the quiet and the flood p99 side by side.

    python3 scripts/bench_http_flood.py                        # the ConfigMap's workers, 6 rounds of 3 s
    python3 scripts/bench_http_flood.py --workers 1 --rounds 8 --seconds 2

Starts `nodedns serve` on examples/cluster.yaml with the DaemonSet's allow list (the default rules of
--node-name node-a), --workers as daemonset/configmap.yaml sets it unless given, and both HTTP
listeners on 127.0.0.1. Rounds alternate quiet and flood. In every round a prober (a thread here)
sends --qps UDP queries for a stored cluster name at an even pace and times each answer (a query
unanswered after 1 s counts as 1 s). In flood rounds another process keeps --connections requests in
flight (from a second before the prober starts: a sustained flood, past the paces' bursts), in turn:
GET /metrics (status listener), GET /status, GET /debug/lookup with a client's search
list, POST /debug/explain of a Pod with 4 types (debug listener) -- each connection asks again as soon
as it has its answer. Printed: each round's p50/p99, the median p99 of each phase, their ratio, and
what the flood got (HTTP status counts). The target: flood p99 <= 1.5 x quiet p99.

Interleaving the phases and comparing medians keeps a busy machine's noise (other processes, CPU
frequency) out of the ratio. `measure()` is what tests/e2e/test_http_flood.py runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cluster.yaml"
NAME = "web.default.svc.cluster.local"
CLIENT = "10.244.0.21"  # a Pod of the example cluster
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "flood", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "busybox"}],
                "dnsConfig": {"searches": ["a.example", "b.example", "c.example"]}}}
LOST = 1.0  # seconds a lost query counts as


def free_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1 right now (tests.support.ports: under the test
    suite, from the range of the xdist worker that runs this script)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.ports import free_port as pick

    return pick()


def configmap_workers() -> int:
    import yaml

    docs = [d for d in yaml.safe_load_all((ROOT / "daemonset" / "configmap.yaml").read_text()) if d]
    cfg = yaml.safe_load(next(d for d in docs if d["kind"] == "ConfigMap")["data"]["config.yaml"])
    return int(cfg.get("workers", 1))


def query_wire(name: str) -> bytes:
    out = struct.pack("!HHHHHH", 0, 0x0100, 1, 0, 0, 0)
    out += b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\x00"
    return out + struct.pack("!HH", 1, 1)


# ----------------------------------------------------------------------------------------------
# The prober: an even pace of UDP queries, each timed


def probe(port: int, qps: int, seconds: float) -> tuple[list[float], int]:
    """(latencies in seconds, queries lost) of `qps` queries a second for `seconds`."""
    wire = query_wire(NAME)
    socks = []
    for _ in range(8):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)
    sent: dict[tuple[int, int], float] = {}
    latencies: list[float] = []
    interval = 1.0 / qps
    start = time.perf_counter()
    next_send = start
    end = start + seconds
    qid = random.randrange(65536)
    n = 0
    try:
        while True:
            now = time.perf_counter()
            if now >= end + LOST or (now >= end and not sent):
                break
            while now < end and now >= next_send:
                qid = (qid + 1) & 0xFFFF
                i = n % len(socks)
                with contextlib.suppress(BlockingIOError):
                    socks[i].sendto(qid.to_bytes(2, "big") + wire[2:], ("127.0.0.1", port))
                    sent[(i, qid)] = time.perf_counter()
                n += 1
                next_send += interval
            for key, _ in sel.select(max(0.0, min(next_send - time.perf_counter(), 0.005))):
                i = key.data
                while True:
                    try:
                        data = socks[i].recv(4096)
                    except (BlockingIOError, InterruptedError):
                        break
                    at = sent.pop((i, int.from_bytes(data[:2], "big")), None)
                    if at is not None:
                        latencies.append(time.perf_counter() - at)
    finally:
        sel.close()
        for s in socks:
            s.close()
    return latencies, len(sent)


def p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


# ----------------------------------------------------------------------------------------------
# The flood: another process, --connections requests always in flight


def flood_main(status: str, debug: str, connections: int) -> None:
    """The flood process (`--flood STATUS DEBUG N`): "on", "off" and "stop" lines on stdin; at "stop",
    the HTTP status counts as one JSON line on stdout."""
    import aiohttp

    counts: Counter[str] = Counter()
    on = asyncio.Event()
    stop = asyncio.Event()
    targets = [
        ("GET", status + "/metrics", None),
        ("GET", debug + "/status", None),
        ("GET", debug + f"/debug/lookup?name=db.prod&type=A&client={CLIENT}", None),
        ("POST", debug + "/debug/explain", json.dumps({"name": "nothing", "pod": POD,
                                                        "types": ["A", "AAAA", "MX", "TXT"]}).encode()),
    ]

    async def worker(session: aiohttp.ClientSession, k: int) -> None:
        n = k
        while not stop.is_set():
            if not on.is_set():
                await asyncio.sleep(0.02)
                continue
            method, url, body = targets[n % len(targets)]
            n += 1
            try:
                async with session.request(method, url, data=body, timeout=aiohttp.ClientTimeout(total=10)) as r:
                    await r.read()
                    counts[str(r.status)] += 1
            except (TimeoutError, aiohttp.ClientError):
                counts["error"] += 1
                await asyncio.sleep(0.05)

    async def control() -> None:
        loop = asyncio.get_running_loop()
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if line == "on":
                on.set()
            elif line == "off":
                on.clear()
            else:
                stop.set()
                return

    async def main() -> None:
        conn = aiohttp.TCPConnector(limit=connections)
        async with aiohttp.ClientSession(connector=conn) as session:
            await asyncio.gather(control(), *(worker(session, k) for k in range(connections)))

    asyncio.run(main())
    print(json.dumps(dict(counts)), flush=True)


class Flood:
    """The flood process, switched on and off between rounds."""

    def __init__(self, status: str, debug: str, connections: int) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--flood", status, debug,
                                      str(connections)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def say(self, word: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()

    def stop(self) -> dict[str, int]:
        try:
            out, _ = self.proc.communicate("stop\n", timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return {}
        lines = out.strip().splitlines()
        counts: dict[str, int] = json.loads(lines[-1]) if lines else {}
        return counts


# ----------------------------------------------------------------------------------------------
# The run


def raise_priority(nice: int) -> int | None:
    """This thread's nice value set to `nice` (what a process it starts inherits); the one it had, or
    None when it may not (a negative value needs root: CAP_SYS_NICE)."""
    old = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except PermissionError:
        return None
    return old


def start_agent(workers: int, extra: list[str], nice: int = 0) -> tuple[subprocess.Popen[bytes], int, str, str]:
    """The agent (its workers inherit its priority: `nice`, when this process may set it)."""
    port, sport, dport = free_port(), free_port(), free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    old = raise_priority(nice) if nice else None  # the agent inherits this thread's priority
    try:
        proc = subprocess.Popen([sys.executable, "-m", "nodedns", "serve", "--manifests", str(EXAMPLE), "--node-name",
                                 "node-a", "--listen", f"127.0.0.1:{port}", "--status-listen", f"127.0.0.1:{sport}",
                                 "--debug-listen", f"127.0.0.1:{dport}", "--workers", str(workers), "--lameduck",
                                 "0s", "--log-level", "warning", *extra],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    finally:
        if old is not None:
            os.setpriority(os.PRIO_PROCESS, 0, old)
    status, debug = f"http://127.0.0.1:{sport}", f"http://127.0.0.1:{dport}"
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the agent exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        with contextlib.suppress(OSError):
            if urllib.request.urlopen(status + "/readyz", timeout=1).status == 200:  # noqa: S310 - loopback
                break
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the agent did not get ready in 30 s")
        time.sleep(0.1)
    return proc, port, status, debug


def measure(*, workers: int, rounds: int = 6, seconds: float = 3.0, qps: int = 500, connections: int = 16,
            extra: list[str] | None = None, report: Any = None, nice: int = 0) -> dict[str, Any]:
    """Quiet and flood rounds, interleaved; the p99s per round, their medians and the ratio.

    `nice` < 0 (as root): the agent and the prober run at that priority, the flood at the usual one,
    so that what else the machine runs (a test suite's other workers) is not what is measured: the
    agent's own handling of the flood against its DNS answers is."""
    proc, port, status, debug = start_agent(workers, extra or [], nice)
    flood = Flood(status, debug, connections)  # at the usual priority
    old = raise_priority(nice) if nice else None  # the prober (this thread) at the agent's
    quiet: list[float] = []
    flooded: list[float] = []
    rows = []
    codes: dict[str, int] = {}
    try:
        probe(port, qps, 1.0)  # warm: the answer stored, the sockets hot
        for r in range(2 * rounds):
            phase = "flood" if r % 2 else "quiet"
            if phase == "flood":
                flood.say("on")
                time.sleep(1.0)  # a sustained flood: the paces' bursts are spent before the prober starts
            latencies, lost = probe(port, qps, seconds)
            if phase == "flood":
                flood.say("off")
                time.sleep(0.5)  # the requests in flight finish before the next quiet round
            values = latencies + [LOST] * lost
            row = {"phase": phase, "p50": p(values, 0.50), "p99": p(values, 0.99), "answered": len(latencies),
                   "lost": lost}
            rows.append(row)
            (flooded if phase == "flood" else quiet).append(row["p99"])
            if report is not None:
                report(row)
    finally:
        if old is not None:
            os.setpriority(os.PRIO_PROCESS, 0, old)
        codes = flood.stop()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stderr is not None:
            proc.stderr.close()
    q, f = statistics.median(quiet), statistics.median(flooded)
    return {"rounds": rows, "quiet_p99": q, "flood_p99": f, "ratio": f / q, "http": codes, "workers": workers}


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--flood":
        flood_main(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    ap.add_argument("--workers", type=int, default=None, help="default: daemonset/configmap.yaml's")
    ap.add_argument("--rounds", type=int, default=6, help="rounds of each phase (default 6)")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of a round (default 3)")
    ap.add_argument("--qps", type=int, default=500, help="the prober's queries a second (default 500)")
    ap.add_argument("--connections", type=int, default=16, help="HTTP requests the flood keeps in flight")
    ap.add_argument("--agent-arg", action="append", default=[], help="one more `nodedns serve` argument")
    args = ap.parse_args()
    workers = args.workers if args.workers is not None else configmap_workers()
    print(f"nodedns serve --workers {workers}; prober {args.qps} q/s for {NAME}; flood {args.connections} "
          f"connections (/metrics, /status, /debug/lookup, /debug/explain); {args.rounds} rounds of each phase, "
          f"{args.seconds:g} s each, interleaved")

    def show(row: dict[str, Any]) -> None:
        print(f"  {row['phase']:<5}  p50 {row['p50'] * 1e3:7.3f} ms  p99 {row['p99'] * 1e3:7.3f} ms  "
              f"answered {row['answered']:5d}  lost {row['lost']}", flush=True)

    res = measure(workers=workers, rounds=args.rounds, seconds=args.seconds, qps=args.qps,
                  connections=args.connections, extra=args.agent_arg, report=show)
    print(f"DNS p99, median of {args.rounds} rounds:  quiet {res['quiet_p99'] * 1e3:.3f} ms   "
          f"flood {res['flood_p99'] * 1e3:.3f} ms   flood / quiet {res['ratio']:.2f}x   (target <= 1.50x)")
    print(f"the flood's HTTP answers: {dict(sorted(res['http'].items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
