"""`nodedns guard`: when the agent stops answering on its local IPs, take them and its rules away
(nodedns.node.guard)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

DEFAULT_PROBE = "dns-version.cluster.local"


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "guard",
        help="fall back to the cluster DNS when the agent stops answering",
        description="Probe DNS on each local IP; after --failures unanswered rounds in a row, remove the local IPs "
                    "from the interface and the conntrack-bypass rules, so kube-proxy hands the kube-dns ClusterIP "
                    "back to the cluster DNS. The agent puts them back once it answers. Runs beside `nodedns serve` "
                    "(its own container in the DaemonSet Pod).",
    )
    p.add_argument("--interface", required=True, metavar="NAME", help="the agent's interface (--setup-interface)")
    p.add_argument("--local-ip", required=True, action="append", metavar="IP[,IP...]",
                   help="the agent's local IPs (--local-ip), comma-separated or repeated")
    p.add_argument("--firewall", required=True, choices=("iptables", "nftables", "none"),
                   help="the agent's conntrack-bypass rules (--firewall)")
    p.add_argument("--probe-name", default=DEFAULT_PROBE, metavar="NAME",
                   help=f"the TXT name asked (default {DEFAULT_PROBE}: dns-version.<cluster zone>)")
    p.add_argument("--probe-interval", default="0.5s", metavar="DURATION", help="between rounds (default 0.5s)")
    p.add_argument("--failures", default="3", metavar="N",
                   help="unanswered rounds in a row before falling back, and answered ones before guarding again "
                        "(default 3)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from nodedns.config import parse_duration
    from nodedns.names import canonical_ip

    ips: list[str] = []
    for item in args.local_ip:
        for text in filter(None, (part.strip() for part in item.split(","))):
            ip = canonical_ip(text)
            if ip is None:
                return _usage(f"--local-ip: {text!r} is not an IP address")
            ips.append(ip)
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,15}", args.interface):
        return _usage("--interface: must be a Linux interface name (1-15 characters)")
    try:
        interval = parse_duration(args.probe_interval)
    except ValueError as exc:
        return _usage(f"--probe-interval: {exc}")
    if not 0.05 <= interval <= 60:
        return _usage("--probe-interval: must be between 50ms and 60s")
    if not args.failures.isdigit() or not 1 <= int(args.failures) <= 100:
        return _usage("--failures: must be a whole number from 1 to 100")
    name = args.probe_name.strip().rstrip(".")
    if not name or any(not 0 < len(label) <= 63 for label in name.split(".")) or not name.isascii():
        return _usage(f"--probe-name: {args.probe_name!r} is not a DNS name")

    import asyncio
    import signal

    from nodedns.node import firewall, guard
    from nodedns.node.netif import Link
    from nodedns.runtime import logutil

    logutil.setup("info", "text")
    g = guard.Guard(link=Link(args.interface, ips), rules=firewall.make(args.firewall, ips, health_port=None),
                    local_ips=ips, probe_name=name, interval=interval, failures=int(args.failures))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until guard.main handles it: never an exit
    return asyncio.run(guard.main(g))


def _usage(message: str) -> int:
    print(f"nodedns guard: error: {message}", file=sys.stderr)
    return 2
