#!/usr/bin/env python3
"""Memory of the forward cache under large answers: this tree against a baseline revision (run by hand).

An upstream double answers any of `--names` names under attacker.example with TXT records of about
`--size` bytes (TC=1 over UDP, whole over TCP, as a real server does). `nodedns serve` from each tree
(one process, the default 32 MiB budget unless `--budget`) is asked every name once over TCP by a few
client threads; printed: the agent's RSS growth over the run, per name asked, the forward cache's
entries and bytes from /status, and the growth against the baseline's. The attack measured on the
shipped agent: 6,000 names with 60 KB answers took a worker to 455 MB (~85 KB RSS a name).

    python3 scripts/bench_cache_memory.py                               # 6,000 x 60 KB, baseline main
    python3 scripts/bench_cache_memory.py --size 15000 --names 6000     # answers the cache may keep
    python3 scripts/bench_cache_memory.py --names 300 --baseline HEAD   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import dns.message  # noqa: E402
import dns.query  # noqa: E402
from bench_cluster import export_tree, stop  # noqa: E402

from tests.support.helpers import EXAMPLE, free_port  # noqa: E402
from tests.support.upstream_double import UpstreamDouble  # noqa: E402


def kib(pid: int, field: str) -> int:
    m = re.search(rf"^{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    return int(m.group(1)) if m else 0


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - our own loopback URL
        return str(resp.read().decode())


def ask_all(port: int, names: list[str], clients: int) -> int:
    """Ask every name once over TCP from `clients` threads; the answers that were not NOERROR."""
    failed = [0]
    lock = threading.Lock()
    todo = list(names)

    def client() -> None:
        while True:
            with lock:
                if not todo:
                    return
                name = todo.pop()
            try:
                r = dns.query.tcp(dns.message.make_query(name, "TXT"), "127.0.0.1", port=port, timeout=10)
                ok = r.rcode() == 0 and bool(r.answer)
            except (OSError, dns.exception.DNSException):
                ok = False
            if not ok:
                with lock:
                    failed[0] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failed[0]


def run_tree(tree: Path, upstream: str, names: list[str], budget: str | None, clients: int) -> dict[str, Any]:
    port, status, debug = free_port(), free_port(), free_port()
    cmd = [sys.executable, "-m", "nodedns", "serve", "--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}",
           "--status-listen", f"127.0.0.1:{status}", "--debug-listen", f"127.0.0.1:{debug}", "--upstream", upstream,
           "--lameduck", "0s", "--insight", "off", "--cache-success", "100000", "--cache-success-ttl", "1h"]
    if budget is not None:
        cmd += ["--cache-max-bytes", budget]
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise SystemExit(f"the agent of {tree} exited {proc.returncode}: {err[-2000:]}")
            try:
                if get(f"http://127.0.0.1:{status}/readyz").startswith("ready"):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the agent of {tree} was not ready in 60s")
            time.sleep(0.05)
        ask_all(port, names[:20], 2)  # warm: the first forwarding loads what it needs
        before = kib(proc.pid, "VmRSS")
        started = time.monotonic()
        failed = ask_all(port, names, clients)
        took = time.monotonic() - started
        after = kib(proc.pid, "VmRSS")
        caches = json.loads(get(f"http://127.0.0.1:{debug}/status"))["cache"]["caches"][0]
        return {"growth_kib": after - before, "peak_kib": kib(proc.pid, "VmHWM"), "failed": failed, "seconds": took,
                "entries": caches["entries"]["success"], "bytes": caches.get("bytes")}
    finally:
        stop(proc)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--names", type=int, default=6000, help="names asked, each once (default 6000)")
    p.add_argument("--size", type=int, default=60_000, help="bytes of TXT records per answer (default 60000)")
    p.add_argument("--budget", default=None, help="--cache-max-bytes for this tree (default: the agent's default)")
    p.add_argument("--clients", type=int, default=8, help="client threads asking over TCP")
    p.add_argument("--baseline", default="main", help="git revision to compare with (default main; 'none': skip)")
    args = p.parse_args()
    per = max(1, args.size // 250)
    txt = [f'"{j:04d}' + "x" * 236 + '"' for j in range(per)]
    names = [f"n{i}.attacker.example" for i in range(args.names)]
    with tempfile.TemporaryDirectory(prefix="bench-cache-memory-") as tmp, \
            UpstreamDouble({name: {"TXT": txt} for name in names}) as up:
        print(f"{args.names:,} names, {per} TXT records of 240 bytes each (~{per * 250 / 1000:.0f} KB an answer), "
              f"asked once each over TCP by {args.clients} clients", flush=True)
        trees: list[tuple[str, Path, str | None]] = []
        if args.baseline != "none":
            trees.append((f"baseline ({args.baseline})", export_tree(args.baseline, Path(tmp) / "baseline"), None))
        trees.append(("this tree", ROOT, args.budget))
        print(f"\n{'agent':<24} {'RSS growth MiB':>15} {'KiB a name':>11} {'entries':>8} {'cache MiB':>10} "
              f"{'failed':>7} {'vs baseline':>12}")
        base: float | None = None
        for name, tree, budget in trees:
            r = run_tree(tree, up.address, names, budget, args.clients)
            growth = r["growth_kib"] / 1024
            cache_mib = f"{r['bytes'] / 2**20:.1f}" if isinstance(r["bytes"], int) else "-"
            ratio = f"{growth / base:.2f}x" if base else "1.00x"
            base = base or (growth if growth > 0 else None)
            print(f"{name:<24} {growth:>15.1f} {r['growth_kib'] / args.names:>11.1f} {r['entries']:>8,} "
                  f"{cache_mib:>10} {r['failed']:>7} {ratio:>12}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
