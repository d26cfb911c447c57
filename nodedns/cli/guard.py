"""`nodedns guard`: when the agent stops answering on its local IPs, take them and its rules away
(nodedns.node.guard)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, NamedTuple

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
    p.add_argument("--config", metavar="FILE",
                   help="the agent's config file (its --config, the DaemonSet's ConfigMap): the interface "
                        "(setup-interface), the firewall and the cluster zone (for the probe name) are read from it; "
                        "--interface, --firewall and --probe-name win")
    p.add_argument("--interface", metavar="NAME", help="the agent's interface (--setup-interface)")
    p.add_argument("--local-ip", required=True, action="append", metavar="IP[,IP...]",
                   help="the agent's local IPs (--local-ip), comma-separated or repeated")
    p.add_argument("--firewall", choices=("iptables", "nftables", "none"),
                   help="the agent's conntrack-bypass rules (--firewall)")
    p.add_argument("--probe-name", metavar="NAME",
                   help=f"the TXT name asked (default dns-version.<cluster zone>: {DEFAULT_PROBE}, or the zone of "
                        "--config's cluster-domain)")
    p.add_argument("--probe-interval", default="0.5s", metavar="DURATION", help="between rounds (default 0.5s)")
    p.add_argument("--failures", default="3", metavar="N",
                   help="unanswered rounds in a row before falling back, and answered ones before guarding again "
                        "(default 3)")
    p.set_defaults(run=run)


class Settings(NamedTuple):
    """What the guard guards and how, from its flags and the agent's config file (`settings`)."""

    local_ips: list[str]
    interface: str
    firewall: str
    probe_name: str
    interval: float
    failures: int


def settings(args: argparse.Namespace) -> Settings:
    """The guard's settings; ValueError with the message for the user (one line naming the flag)."""
    from nodedns.config import parse_duration
    from nodedns.names import canonical_ip

    ips: list[str] = []
    for item in args.local_ip:
        for text in filter(None, (part.strip() for part in item.split(","))):
            ip = canonical_ip(text)
            if ip is None:
                raise ValueError(f"--local-ip: {text!r} is not an IP address")
            ips.append(ip)
    interface, fw, probe = args.interface, args.firewall, args.probe_name
    if args.config is not None:  # the agent's own file: what it sets up is what is guarded
        from nodedns.config import from_sources
        from nodedns.errors import ConfigError

        try:
            cfg = from_sources({"config": args.config, "local-ip": ips}, environ={})
        except ConfigError as exc:
            raise ValueError(f"--config {args.config}: {exc.reason if exc.key == 'config' else exc}") from None
        interface = interface or cfg.setup_interface
        fw = fw or cfg.firewall
        probe = probe or f"dns-version.{cfg.cluster_domain}"
    if interface is None:
        raise ValueError("--interface: give the agent's interface, or --config with its setup-interface")
    if fw is None:
        raise ValueError("--firewall: give the agent's firewall, or --config (its firewall key)")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,15}", interface):
        raise ValueError("--interface: must be a Linux interface name (1-15 characters)")
    try:
        interval = parse_duration(args.probe_interval)
    except ValueError as exc:
        raise ValueError(f"--probe-interval: {exc}") from None
    if not 0.05 <= interval <= 60:
        raise ValueError("--probe-interval: must be between 50ms and 60s")
    if not args.failures.isdigit() or not 1 <= int(args.failures) <= 100:
        raise ValueError("--failures: must be a whole number from 1 to 100")
    probe = probe or DEFAULT_PROBE
    name = probe.strip().rstrip(".")
    if not name or any(not 0 < len(label) <= 63 for label in name.split(".")) or not name.isascii():
        raise ValueError(f"--probe-name: {probe!r} is not a DNS name")
    return Settings(ips, interface, fw, name, interval, int(args.failures))


def run(args: argparse.Namespace) -> int:
    try:
        s = settings(args)
    except ValueError as exc:
        return _usage(str(exc))

    import asyncio
    import signal

    from nodedns.node import firewall, guard
    from nodedns.node.netif import Link
    from nodedns.runtime import logutil

    logutil.setup("info", "text")
    g = guard.Guard(link=Link(s.interface, s.local_ips), rules=firewall.make(s.firewall, s.local_ips, health_port=None),
                    local_ips=s.local_ips, probe_name=s.probe_name, interval=s.interval, failures=s.failures)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until guard.main handles it: never an exit
    return asyncio.run(guard.main(g))


def _usage(message: str) -> int:
    print(f"nodedns guard: error: {message}", file=sys.stderr)
    return 2
