"""Network namespaces for the node tests: made with `ip netns`, named `nd6-...` (or the prefix given),
always removed.

    with netns("node") as ns:             # nd6-node-1a2b3c, loopback up
        ns.run("ip", "addr")              # `ip netns exec nd6-node-1a2b3c ip addr`

Only root can make them: `requires_netns` skips outside CI when that is missing; in CI, where these
tests must run, they run anyway and fail.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.helpers import IN_CI

PREFIX = "nd6"


def _netns_missing_reason() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root (these tests run as root in CI)"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    return None


NETNS_MISSING = _netns_missing_reason()
# Outside CI a missing prerequisite skips; in CI the tests run anyway and fail loudly.
requires_netns = pytest.mark.skipif(NETNS_MISSING is not None and not IN_CI, reason=NETNS_MISSING or "")


def run(*argv: str, check: bool = True, timeout: float = 20.0, stdin: str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=stdin, env=env, check=False)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} -> {r.returncode}: {r.stderr.strip()}")
    return r


class Netns:
    def __init__(self, role: str, prefix: str = PREFIX) -> None:
        self.prefix = prefix  # every helper's tests use their own, so parallel runs never collide
        self.name = f"{prefix}-{role}-{secrets.token_hex(3)}"

    @property
    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def run(self, *argv: str, check: bool = True, timeout: float = 20.0, stdin: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return run(*self.exec_prefix, *argv, check=check, timeout=timeout, stdin=stdin, env=env)

    def links(self) -> list[str]:
        out = self.run("ip", "-o", "link", "show").stdout
        return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]

    def rules(self, binary: str = "iptables") -> list[str]:
        """Every rule line of the raw and filter tables (`-S`), for one iptables binary."""
        lines: list[str] = []
        for table in ("raw", "filter"):
            lines.extend(line for line in self.run(binary, "-t", table, "-S").stdout.splitlines()
                         if line.startswith("-A "))
        return lines

    def nft_ruleset(self) -> str:
        return self.run("nft", "list", "ruleset").stdout


@contextlib.contextmanager
def netns(role: str, prefix: str = PREFIX) -> Iterator[Netns]:
    """A fresh namespace with loopback up; deleted (with everything in it) on exit."""
    ns = Netns(role, prefix)
    run("ip", "netns", "add", ns.name)
    try:
        ns.run("ip", "link", "set", "lo", "up")
        yield ns
    finally:
        run("ip", "netns", "delete", ns.name, check=False)
        etc = Path("/etc/netns") / ns.name
        if etc.exists():
            shutil.rmtree(etc, ignore_errors=True)


def veth_pair(node: Netns, pod: Netns, *, node_ip: str, pod_ip: str, prefixlen: int = 30,
              routes: Sequence[str] = (), pod_ipv6: str | None = None) -> None:
    """A veth pair between the namespaces, addressed, with `routes` (host addresses) reached via the node.

    `pod_ipv6` gives the pod side a global IPv6 address at once (no DAD), so glibc's AI_ADDRCONFIG
    always sees IPv6 configured and sends AAAA queries; without it that depends on a race with the
    kernel's address setup."""
    tag = secrets.token_hex(3)
    n_if, p_if = f"{node.prefix}n{tag}", f"{node.prefix}p{tag}"
    run("ip", "link", "add", n_if, "netns", node.name, "type", "veth", "peer", "name", p_if, "netns", pod.name)
    node.run("ip", "addr", "add", f"{node_ip}/{prefixlen}", "dev", n_if)
    node.run("ip", "link", "set", n_if, "up")
    pod.run("ip", "addr", "add", f"{pod_ip}/{prefixlen}", "dev", p_if)
    if pod_ipv6 is not None:
        pod.run("ip", "-6", "addr", "add", f"{pod_ipv6}/64", "dev", p_if, "nodad")
    pod.run("ip", "link", "set", p_if, "up")
    for dest in routes:
        pod.run("ip", "route", "add", dest, "via", node_ip)
