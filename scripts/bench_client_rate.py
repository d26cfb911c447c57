#!/usr/bin/env python3
"""What one Pod's glibc resolver sends: the measurement the shipped per-client rate limit is set from (as root).

A network namespace holds the agent (127.0.0.1:53, the example cluster, an upstream double for the
names outside) and a Pod's resolv.conf as the kubelet writes it for ClusterFirst (`search
default.svc.cluster.local svc.cluster.local cluster.local`, `options ndots:5`). A small C program
calls glibc's getaddrinfo (AF_UNSPEC: A and AAAA) in that namespace:

- per lookup: the queries one external name costs (every search domain first: 8) and one cluster
  Service by its short name (2);
- a start-up burst: `--burst` threads each resolve a different external name at the same moment
  (a connection pool filling up), and how many queries that makes within one second;
- a loop: one thread, then `--threads` threads, resolving external names back to back for
  `--seconds` with every answer from the node-local cache: the most a Pod that does nothing but
  resolve can send (no application does that; it bounds any that resolves a name per request).

Each figure is printed as queries a second beside the ConfigMap's `rate-limit` (per client and per
answering process, in one-second windows: docs/hardening.md "Rate limit").

    sudo python3 scripts/bench_client_rate.py
    sudo python3 scripts/bench_client_rate.py --burst 200 --threads 8 --seconds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import yaml  # noqa: E402
from bench_cluster import stop  # noqa: E402

from tests.support.helpers import EXAMPLE, nodedns_cmd, subprocess_env  # noqa: E402
from tests.support.netns import Netns, netns  # noqa: E402

POD_RESOLV_CONF = "nameserver 127.0.0.1\nsearch default.svc.cluster.local svc.cluster.local cluster.local\n" \
                  "options ndots:5\n"
UPSTREAM_PORT = 5300
CLIENT_C = r"""
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char **names; static int count; static double seconds; static pthread_barrier_t start;
static long done[256];

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

static int resolve(const char *name) {
    struct addrinfo hints, *res; memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC; hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(name, NULL, &hints, &res) != 0) return 0;
    freeaddrinfo(res); return 1;
}
static void *one(void *arg) {
    long i = (long)arg; pthread_barrier_wait(&start); done[i % 256] += resolve(names[i]); return NULL;
}
static void *loop(void *arg) {
    long i = (long)arg, k = i; double end = now() + seconds;
    while (now() < end) { done[i] += resolve(names[k % count]); k += 7; }
    return NULL;
}
int main(int argc, char **argv) {
    /* burst N NAMES... | loop THREADS SECONDS NAMES... */
    int threads = atoi(argv[2]); pthread_t t[4096]; double t0, t1; long ok = 0;
    if (strcmp(argv[1], "burst") == 0) { names = argv + 3; count = argc - 3; }
    else { seconds = atof(argv[3]); names = argv + 4; count = argc - 4; }
    pthread_barrier_init(&start, NULL, strcmp(argv[1], "burst") == 0 ? threads + 1 : 1);
    int burst = strcmp(argv[1], "burst") == 0;
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, burst ? one : loop, (void *)i);
    if (strcmp(argv[1], "burst") == 0) pthread_barrier_wait(&start);
    t0 = now();
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    t1 = now();
    for (int i = 0; i < 256; i++) ok += done[i];
    printf("%ld %.6f\n", ok, t1 - t0);
    return 0;
}
"""
METRICS = """
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:9253/metrics", timeout=5).read().decode()
print(sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith("coredns_dns_requests_total{")))
"""


def shipped_rate_limit() -> int:
    docs = [d for d in yaml.safe_load_all((ROOT / "daemonset" / "configmap.yaml").read_text()) if d]
    cm = next(d for d in docs if d.get("kind") == "ConfigMap")
    return int(yaml.safe_load(cm["data"]["config.yaml"]).get("rate-limit", 0))


@contextlib.contextmanager
def agent_in(ns: Netns, names: list[str], log: Path) -> Iterator[None]:
    zone = json.dumps({n: {"A": ["192.0.2.10"]} for n in names})
    up = subprocess.Popen([*ns.exec_prefix, sys.executable, "-m", "tests.support.upstream_double", "--listen",
                           f"127.0.0.1:{UPSTREAM_PORT}", "--zone", zone], env=subprocess_env(), cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with log.open("ab") as out:
        agent = subprocess.Popen([*ns.exec_prefix, *nodedns_cmd(
            "serve", "--manifests", str(EXAMPLE), "--listen", "127.0.0.1:53", "--status-listen", "127.0.0.1:9253",
            "--debug-listen", "none", "--upstream", f"127.0.0.1:{UPSTREAM_PORT}", "--lameduck", "0s",
            "--cache-success-ttl", "1h")], env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while ns.run("getent", "ahosts", "web.default.svc.cluster.local", check=False).returncode != 0:
            if agent.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the agent did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield
    finally:
        for proc in (agent, up):
            stop(proc, timeout=10)


def queries(ns: Netns) -> float:
    return float(ns.run(sys.executable, "-c", METRICS, env=subprocess_env()).stdout.strip())


def run_client(ns: Netns, binary: Path, *args: str) -> tuple[int, float]:
    out = ns.run(str(binary), *args, timeout=120).stdout.split()
    return int(out[0]), float(out[1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--burst", type=int, default=100, help="threads resolving a name each at once (default 100)")
    p.add_argument("--threads", type=int, default=4, help="threads of the busiest loop (default 4)")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds each loop runs (default 2)")
    args = p.parse_args()
    if shutil.which("gcc") is None:
        raise SystemExit("needs gcc")
    limit = shipped_rate_limit()
    names = [f"ext{i}.example.org" for i in range(max(args.burst, 64))]
    with tempfile.TemporaryDirectory(prefix="bench-client-rate-") as tmp, netns("rate") as ns:
        src, binary = Path(tmp) / "client.c", Path(tmp) / "client"
        src.write_text(CLIENT_C)
        subprocess.run(["gcc", "-O2", "-pthread", "-o", str(binary), str(src)], check=True)
        etc = Path("/etc/netns") / ns.name
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "resolv.conf").write_text(POD_RESOLV_CONF)
        try:
            with agent_in(ns, names, Path(tmp) / "agent.log"):
                run_client(ns, binary, "loop", "1", "0.5", *names)  # every answer now from the cache
                before = queries(ns)
                run_client(ns, binary, "burst", "1", names[0])
                external = queries(ns) - before
                before = queries(ns)
                run_client(ns, binary, "burst", "1", "web")
                short = queries(ns) - before
                print(f"queries a lookup: external name {external:.0f}, a Service by its short name {short:.0f} "
                      f"(glibc, ndots:5, three search domains)")
                print(f"the ConfigMap's rate-limit: {limit:,} queries a second per client (per answering process)\n")
                print(f"{'client':<44} {'lookups':>8} {'seconds':>8} {'queries/s':>10} {'of limit':>9}")
                before = queries(ns)
                n, took = run_client(ns, binary, "burst", str(args.burst), *names[:args.burst])
                sent = queries(ns) - before
                # the burst's queries all fall within one or two one-second windows: count them whole
                print(f"{f'start-up burst: {args.burst} names at once':<44} {n:>8} {took:>8.3f} {sent:>10,.0f} "
                      f"{sent / limit:>8.0%}")
                for threads in (1, args.threads):
                    before = queries(ns)
                    n, took = run_client(ns, binary, "loop", str(threads), str(args.seconds), *names)
                    rate = (queries(ns) - before) / took
                    label = f"back to back, {threads} thread{'s' if threads > 1 else ''}"
                    print(f"{label:<44} {n:>8} {took:>8.3f} {rate:>10,.0f} {rate / limit:>8.0%}")
        finally:
            shutil.rmtree(etc, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
