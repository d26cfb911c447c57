"""The benchmarks' upstream and peers: an authoritative unbound zone and unbound/dnsmasq forwarder configs.

Used by scripts/bench-cache (run as a script) and scripts/bench-tail (imported):

    python scripts/lib/bench_upstream.py WORK UP_PORT UB_PORT NX_SHARE

writes into WORK: upstream.conf (unbound on 127.0.0.1:UP_PORT, `bench.test.` with 10,000 A names
h0..h9999 and an SOA, `.` static so it never recurses), unbound.conf (a caching forwarder on
UB_PORT in front of it, the 2,000 cluster names as local-data), dnsmasq-cluster.conf, cluster.yaml
(the same 2,000 ClusterIP Services for nodedns --manifests), and the dnsperf query files
queries.txt / prime.txt (1,000 hot names, NX_SHARE of NXDOMAIN names) and cluster.txt /
prime-cluster.txt.
"""

from __future__ import annotations

import argparse
import json
import random
import sys

CLUSTER_SERVICES = 2000
UPSTREAM_NAMES = 10_000
HOT_NAMES = 1000


def cluster_names(services: int = CLUSTER_SERVICES) -> list[tuple[str, str]]:
    """(name, ClusterIP) of the benchmark's Services, all in namespace `bench`."""
    return [(f"svc-{i}.bench.svc.cluster.local", f"10.96.{i // 250}.{i % 250 + 1}") for i in range(services)]


def service_objects(cluster: list[tuple[str, str]]) -> list[dict[str, object]]:
    """The Namespace and the ClusterIP Services of `cluster_names` as API objects."""
    items: list[dict[str, object]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}]
    items += [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": name.split(".")[0], "namespace": "bench"},
               "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip]}} for name, ip in cluster]
    return items


def unbound_common(work: str) -> str:
    return f"""  do-daemonize: no
  use-syslog: no
  logfile: ""
  username: ""
  chroot: ""
  directory: "{work}"
  pidfile: ""
  num-threads: 1
  access-control: 127.0.0.0/8 allow
  verbosity: 0
"""


def write_upstream(work: str, up_port: int) -> None:
    """upstream.conf: the authoritative zone every forwarder asks."""
    with open(f"{work}/upstream.conf", "w") as f:
        f.write(f"server:\n  interface: 127.0.0.1\n  port: {up_port}\n{unbound_common(work)}")
        f.write('  local-zone: "." static\n')  # never recurse (loop probes, health checks): loopback only
        f.write('  local-zone: "bench.test." static\n')
        f.write('  local-data: "bench.test. 3600 IN SOA ns.bench.test. hostmaster.bench.test. 1 3600 600 86400 3600"\n')
        for i in range(UPSTREAM_NAMES):
            f.write(f'  local-data: "h{i}.bench.test. 3600 IN A 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"\n')


def write_unbound(work: str, ub_port: int, up_port: int, cluster: list[tuple[str, str]], *, extra: str = "",
                  conf: str = "unbound.conf") -> None:
    """A caching unbound forwarder in front of the upstream, `cluster` as its local data; `extra`: more
    server: options (e.g. the TTL cap and prefetch of bench-tail)."""
    with open(f"{work}/{conf}", "w") as f:
        f.write(f"server:\n  interface: 127.0.0.1\n  port: {ub_port}\n{unbound_common(work)}")
        f.write('  do-not-query-localhost: no\n  module-config: "iterator"\n  msg-cache-size: 16m\n'
                '  rrset-cache-size: 16m\n  qname-minimisation: no\n')
        f.write(extra)
        f.write('  local-zone: "cluster.local." static\n')
        for name, ip in cluster:
            f.write(f'  local-data: "{name}. 5 IN A {ip}"\n')
        f.write(f'forward-zone:\n  name: "."\n  forward-addr: 127.0.0.1@{up_port}\n')


def hot_queries(rng: random.Random, nx_share: float, lines: int = 50_000) -> tuple[list[str], list[str]]:
    """(dnsperf query lines over 1,000 hot names with `nx_share` NXDOMAIN names, every name once)."""
    hot = [f"h{i}.bench.test" for i in rng.sample(range(UPSTREAM_NAMES), HOT_NAMES)]
    nx = [f"nx{i}.bench.test" for i in range(100)]
    queries = [f"{rng.choice(nx) if rng.random() < nx_share else rng.choice(hot)} A\n" for _ in range(lines)]
    return queries, [f"{name} A\n" for name in hot + nx]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", help="the directory to write into")
    ap.add_argument("up_port", type=int, help="the upstream's port")
    ap.add_argument("ub_port", type=int, help="the unbound forwarder's port")
    ap.add_argument("nx_share", type=float, help="the share of NXDOMAIN names in queries.txt")
    args = ap.parse_args(argv)
    work, up_port, ub_port, nx_share = args.work, args.up_port, args.ub_port, args.nx_share
    cluster = cluster_names()
    write_upstream(work, up_port)
    write_unbound(work, ub_port, up_port, cluster)
    with open(f"{work}/dnsmasq-cluster.conf", "w") as f:
        f.write("local-ttl=5\n")
        f.writelines(f"host-record={name},{ip}\n" for name, ip in cluster)
    with open(f"{work}/cluster.yaml", "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": service_objects(cluster)}, f)  # JSON is YAML
    rng = random.Random(4)
    with open(f"{work}/cluster.txt", "w") as f:
        f.writelines(f"{rng.choice(cluster)[0]} A\n" for _ in range(50_000))
    with open(f"{work}/prime-cluster.txt", "w") as f:
        f.writelines(f"{name} A\n" for name, _ in cluster)
    queries, prime = hot_queries(rng, nx_share)
    with open(f"{work}/queries.txt", "w") as f:
        f.writelines(queries)
    with open(f"{work}/prime.txt", "w") as f:
        f.writelines(prime)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
