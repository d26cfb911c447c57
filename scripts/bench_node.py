#!/usr/bin/env python3
"""Time the node side in a throwaway network namespace: prepare, first rule install, a steady reconcile, teardown.

    sudo python3 scripts/bench_node.py [--rounds 5]

Needs root (ip netns). Every command runs through `ip netns exec`, which the agent itself (already
inside the node's namespace) does not pay, so these are upper bounds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nodedns.node.firewall import IptablesFirewall, NftablesFirewall, command_runner  # noqa: E402
from nodedns.node.netif import Link, NodeNetwork  # noqa: E402
from tests.support.netns import netns  # noqa: E402

IPS = ("169.254.20.10", "fd00:10:96::a")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for kind, cls in (("iptables", IptablesFirewall), ("nftables", NftablesFirewall)):
        with netns("bench") as ns:
            net = NodeNetwork(link=Link("nodelocaldns", IPS, netns=ns.name),
                              firewall=cls(IPS, health_port=9253, runner=command_runner(prefix=ns.exec_prefix)))
            t = time.perf_counter()
            net.prepare_sync()
            prepare = time.perf_counter() - t
            t = time.perf_counter()
            net.reconcile_sync(True)
            first = time.perf_counter() - t
            t = time.perf_counter()
            for _ in range(args.rounds):
                net.reconcile_sync(True)
            steady = (time.perf_counter() - t) / args.rounds
            t = time.perf_counter()
            net.teardown_sync()
            down = time.perf_counter() - t
        print(f"{kind:9} prepare {prepare * 1000:4.0f} ms  first install {first * 1000:4.0f} ms  "
              f"steady reconcile {steady * 1000:4.0f} ms  teardown {down * 1000:4.0f} ms  (2 local IPs, 24 rules)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
