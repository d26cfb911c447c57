"""Building blocks of scripts/bench-cluster: a generated cluster, a query mix, CPU time, dnsperf output.

    python scripts/lib/bench_cluster.py manifest OUT.yaml [--services N]
    python scripts/lib/bench_cluster.py queries OUT.txt [--services N] [--lines N]
    python scripts/lib/bench_cluster.py free-port            # a port free for UDP and TCP on 127.0.0.1
    python scripts/lib/bench_cluster.py wait-ready PORT [--timeout S]
    python scripts/lib/bench_cluster.py cputime PID          # utime+stime in microseconds
    python scripts/lib/bench_cluster.py dnsperf FILE         # "completed qps" from a dnsperf report
    python scripts/lib/bench_cluster.py p99 FILE             # p99 latency (ms) from `dnsperf -v` lines

Stdlib only (PyYAML for the manifest, dnspython for the readiness probe), so the pieces are cheap
to test. The other benchmarks take their common parts from here too: `stop` (a process ended, killed
if it will not) and `export_tree` (a commit's files, for a side-by-side run against it). The cluster
is deterministic: the same N gives the same objects and the same queries.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # scripts/lib/ -> the checkout
ZONE = "cluster.local"
NAMESPACES = 10


def kind_of(i: int) -> str:
    """Service i is ClusterIP (60%), headless (30%) or ExternalName (10%)."""
    r = i % 10
    return "clusterip" if r < 6 else "headless" if r < 9 else "external"


def service_name(i: int) -> tuple[str, str]:
    return f"ns-{i % NAMESPACES}", f"svc-{i}"


def cluster(services: int) -> list[dict[str, Any]]:
    """Namespaces, Services and EndpointSlices of a cluster with `services` Services."""
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{n}"}} for n in range(NAMESPACES)
    ]
    for i in range(services):
        ns, name = service_name(i)
        meta = {"name": name, "namespace": ns}
        ports = [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "grpc", "port": 9000, "protocol": "TCP"}]
        kind = kind_of(i)
        if kind == "external":
            objs.append({"apiVersion": "v1", "kind": "Service", "metadata": meta,
                         "spec": {"type": "ExternalName", "externalName": f"backend-{i}.example.com"}})
            continue
        spec: dict[str, Any] = {"type": "ClusterIP", "ports": ports}
        if kind == "clusterip":
            spec["clusterIPs"] = [f"10.96.{i // 250}.{i % 250 + 1}", f"fd00:10:96::{i + 1:x}"]
        else:
            spec["clusterIPs"] = ["None"]
        objs.append({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec})
        endpoints = []
        for e in range(3):
            ep: dict[str, Any] = {"addresses": [f"10.{100 + i // 250}.{i % 250}.{e + 1}"],
                                  "conditions": {"ready": True}}
            if kind == "headless":
                ep["hostname"] = f"{name}-{e}"
            endpoints.append(ep)
        objs.append({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-abcde", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4", "endpoints": endpoints,
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "grpc", "port": 9000,
                                                                          "protocol": "TCP"}],
        })
    return objs


def queries(services: int, lines: int, seed: int = 1) -> list[str]:
    """A dnsperf query file: A, AAAA and SRV of ClusterIP and headless services, ~5% NXDOMAIN."""
    rnd = random.Random(seed)
    clusterip = [i for i in range(services) if kind_of(i) == "clusterip"]
    headless = [i for i in range(services) if kind_of(i) == "headless"]
    out = []
    for n in range(lines):
        roll = rnd.random()
        if roll < 0.05:
            ns, _ = service_name(n)
            out.append(f"missing-{n}.{ns}.svc.{ZONE} A")
            continue
        if roll < 0.70 or not headless:
            ns, name = service_name(rnd.choice(clusterip))
            qtype = "A" if roll < 0.45 else "AAAA" if roll < 0.58 else "SRV"
        else:
            ns, name = service_name(rnd.choice(headless))
            qtype = "A" if roll < 0.88 else "SRV"
        prefix = "_http._tcp." if qtype == "SRV" and rnd.random() < 0.5 else ""
        out.append(f"{prefix}{name}.{ns}.svc.{ZONE} {qtype}")
    return out


def cputime_us(pid: int) -> int:
    """utime+stime of a process in microseconds (from /proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5), counted after the comm
    return ticks * 1_000_000 // os.sysconf("SC_CLK_TCK")


def dnsperf_summary(text: str) -> tuple[int, float]:
    """(queries completed, queries per second) from a dnsperf report."""
    completed = re.search(r"Queries completed:\s+(\d+)", text)
    qps = re.search(r"Queries per second:\s+([\d.]+)", text)
    if not completed or not qps:
        raise ValueError("not a dnsperf report")
    return int(completed.group(1)), float(qps.group(1))


def p99_ms(text: str) -> float:
    """The 99th percentile latency in ms of the `> RCODE name type seconds` lines of `dnsperf -v`."""
    lat = sorted(float(line.rsplit(None, 1)[1]) for line in text.splitlines() if line.startswith("> "))
    if not lat:
        raise ValueError("no per-query lines (run dnsperf with -v)")
    return lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000


def free_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1 right now (tests.support.ports: under the test
    suite, from the range of the xdist worker that runs this script)."""
    sys.path.insert(0, str(ROOT))
    from tests.support.ports import free_port as pick

    return pick()


def wait_ready(port: int, timeout: float) -> bool:
    """True once the server on 127.0.0.1:port answers NXDOMAIN for a missing name (index loaded)."""
    import dns.exception
    import dns.message
    import dns.query
    import dns.rcode

    deadline = time.monotonic() + timeout
    q = dns.message.make_query(f"probe.no-such-namespace.svc.{ZONE}", "A")
    while time.monotonic() < deadline:
        try:
            if dns.query.udp(q, "127.0.0.1", port=port, timeout=0.3).rcode() == dns.rcode.NXDOMAIN:
                return True
        except (dns.exception.Timeout, OSError):
            pass
        time.sleep(0.05)
    return False


def stop(proc: subprocess.Popen[Any], timeout: float = 20.0, sig: int = signal.SIGTERM) -> None:
    """End `proc`: `sig`, then SIGKILL if it has not exited within `timeout` seconds; reaped either way."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def export_tree(rev: str, dest: Path, root: Path = ROOT) -> Path:
    """The files of commit `rev` of the repository at `root`, written under `dest` (git archive)."""
    data = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", rev], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("manifest")
    m.add_argument("out")
    m.add_argument("--services", type=int, default=300)
    q = sub.add_parser("queries")
    q.add_argument("out")
    q.add_argument("--services", type=int, default=300)
    q.add_argument("--lines", type=int, default=1000)
    sub.add_parser("free-port")
    w = sub.add_parser("wait-ready")
    w.add_argument("port", type=int)
    w.add_argument("--timeout", type=float, default=30.0)
    c = sub.add_parser("cputime")
    c.add_argument("pid", type=int)
    d = sub.add_parser("dnsperf")
    d.add_argument("file")
    l99 = sub.add_parser("p99")
    l99.add_argument("file")
    args = p.parse_args(argv)

    if args.cmd == "manifest":
        import yaml

        Path(args.out).write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                                  "items": cluster(args.services)}), encoding="utf-8")
    elif args.cmd == "queries":
        Path(args.out).write_text("\n".join(queries(args.services, args.lines)) + "\n", encoding="utf-8")
    elif args.cmd == "free-port":
        print(free_port())
    elif args.cmd == "wait-ready":
        return 0 if wait_ready(args.port, args.timeout) else 1
    elif args.cmd == "cputime":
        print(cputime_us(args.pid))
    elif args.cmd == "dnsperf":
        completed, qps = dnsperf_summary(Path(args.file).read_text())
        print(completed, f"{qps:.0f}")
    elif args.cmd == "p99":
        print(f"{p99_ms(Path(args.file).read_text()):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
