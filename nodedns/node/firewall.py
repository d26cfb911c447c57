"""Conntrack bypass for the local IPs: node-cache's NOTRACK/ACCEPT rule set, applied with iptables or nftables.

Per local IP, for UDP and TCP (the table and why each rule: docs/node.md "Conntrack bypass"): raw PREROUTING
and OUTPUT NOTRACK for queries to and replies from port 53 (and the kubelet's probes of the status port),
filter INPUT and OUTPUT ACCEPT.

Building the rules is pure (`iptables_rules`, `nftables_script`: exact argv lists and an exact nft script).
The backends (`IptablesFirewall`, `NftablesFirewall`) run the tools through a `Runner`, synchronously: the
caller runs them in a worker thread. Our iptables rules carry our comments, which is how we find our own
(a crashed predecessor's too) and never touch anyone else's; nftables uses one table (`table inet nodedns`)
replaced in one transaction. A held xtables lock is waited for (`-w`) and retried with backoff, then counted
as `iptables_lock`; a refusal for lack of NET_ADMIN is never retried and is counted as `permission`.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from nodedns.errors import NetifError
from nodedns.names import is_ipv6

log = logging.getLogger("nodedns.firewall")

SKIP_COMMENT = "nodedns: skip conntrack"
ALLOW_COMMENT = "nodedns: allow DNS traffic"
NFT_TABLE = "nodedns"  # `table inet nodedns`
DNS_PORT = 53
XTABLES_WAIT_SECONDS = 5
LOCK_EXIT_STATUS = 4
LOCK_RETRY_DELAYS = (0.2, 0.5, 1.0)  # then give up until the next reconcile
PERMISSION = NetifError.PERMISSION  # the failure cause of a tool refused for lack of privilege
PERMISSION_TEXTS = ("Permission denied", "you must be root", "Operation not permitted")
NO_NET_ADMIN = NetifError.NO_NET_ADMIN
COMMAND_TIMEOUT = 30.0

Report = tuple[list[str], list[NetifError]]  # (what was changed, what failed)


# ----------------------------------------------------------------------------------------------
# Pure rule building


@dataclass(frozen=True, slots=True)
class IptablesRule:
    """One rule: `{iptables|ip6tables} -t TABLE -I CHAIN *ARGS`."""

    family: int  # 4 or 6: which binary
    table: str  # raw | filter
    chain: str  # PREROUTING | INPUT | OUTPUT
    args: tuple[str, ...]

    def __str__(self) -> str:
        binary = "ip6tables" if self.family == 6 else "iptables"
        return f"{binary} -t {self.table} {self.chain} {shlex.join(self.args)}"


def _spec(proto: str, direction: str, ip: str, port: int, target: str, comment: str) -> tuple[str, ...]:
    addr, port_flag = ("-d", "--dport") if direction == "to" else ("-s", "--sport")
    return ("-p", proto, addr, ip, port_flag, str(port), "-m", "comment", "--comment", comment, "-j", target)


def iptables_rules(
    local_ips: Iterable[str], *, dns_port: int = DNS_PORT, health_port: int | None = None
) -> tuple[IptablesRule, ...]:
    """node-cache's rule set for each local IP, in node-cache's order (IPv6 IPs get ip6tables rules)."""
    rules: list[IptablesRule] = []
    for ip in local_ips:
        fam = 6 if is_ipv6(ip) else 4

        def rule(table: str, chain: str, spec: tuple[str, ...], fam: int = fam) -> None:
            rules.append(IptablesRule(fam, table, chain, spec))

        for proto in ("tcp", "udp"):
            rule("raw", "PREROUTING", _spec(proto, "to", ip, dns_port, "NOTRACK", SKIP_COMMENT))
        for proto in ("tcp", "udp"):
            rule("filter", "INPUT", _spec(proto, "to", ip, dns_port, "ACCEPT", ALLOW_COMMENT))
        for proto in ("tcp", "udp"):
            rule("raw", "OUTPUT", _spec(proto, "from", ip, dns_port, "NOTRACK", SKIP_COMMENT))
        for proto in ("tcp", "udp"):
            rule("filter", "OUTPUT", _spec(proto, "from", ip, dns_port, "ACCEPT", ALLOW_COMMENT))
        for proto in ("tcp", "udp"):
            rule("raw", "OUTPUT", _spec(proto, "to", ip, dns_port, "NOTRACK", SKIP_COMMENT))
        if health_port is not None:
            rule("raw", "OUTPUT", _spec("tcp", "to", ip, health_port, "NOTRACK", SKIP_COMMENT))
            rule("raw", "OUTPUT", _spec("tcp", "from", ip, health_port, "NOTRACK", SKIP_COMMENT))
    return tuple(rules)


# Our chains in `table inet nodedns`: name -> (hook, priority, the iptables table/chain it mirrors).
NFT_CHAINS: tuple[tuple[str, str, str, str], ...] = (
    ("raw_prerouting", "prerouting", "raw", "raw PREROUTING"),
    ("raw_output", "output", "raw", "raw OUTPUT"),
    ("filter_input", "input", "filter", "filter INPUT"),
    ("filter_output", "output", "filter", "filter OUTPUT"),
)
_NFT_CHAIN_OF = {"raw PREROUTING": "raw_prerouting", "raw OUTPUT": "raw_output",
                 "filter INPUT": "filter_input", "filter OUTPUT": "filter_output"}


def _nft_rule(rule: IptablesRule) -> str:
    """The nft statement equivalent to one iptables rule from `iptables_rules`."""
    a = rule.args
    proto, addr_flag, ip, port_flag, port, comment, target = a[1], a[2], a[3], a[4], a[5], a[9], a[11]
    fam = "ip6" if rule.family == 6 else "ip"
    addr = "daddr" if addr_flag == "-d" else "saddr"
    port_key = "dport" if port_flag == "--dport" else "sport"
    verdict = "notrack" if target == "NOTRACK" else "accept"
    return f'{fam} {addr} {ip} {proto} {port_key} {port} {verdict} comment "{comment}"'


def nftables_rules(
    local_ips: Iterable[str], *, dns_port: int = DNS_PORT, health_port: int | None = None
) -> dict[str, list[str]]:
    """Chain name -> the nft rule statements in it: the same rules as `iptables_rules`, one for one."""
    chains: dict[str, list[str]] = {name: [] for name, *_ in NFT_CHAINS}
    for rule in iptables_rules(local_ips, dns_port=dns_port, health_port=health_port):
        chains[_NFT_CHAIN_OF[f"{rule.table} {rule.chain}"]].append(_nft_rule(rule))
    return chains


def nftables_script(
    local_ips: Iterable[str], *, dns_port: int = DNS_PORT, health_port: int | None = None, table: str = NFT_TABLE
) -> str:
    """One `nft -f` transaction that creates or atomically replaces `table inet <table>`.

    `table X` + `delete table X` first makes the replace work whether or not the table exists; the
    kernel applies the whole file or nothing.
    """
    chains = nftables_rules(local_ips, dns_port=dns_port, health_port=health_port)
    lines = [f"table inet {table}", f"delete table inet {table}", f"table inet {table} {{"]
    for name, hook, priority, mirrors in NFT_CHAINS:
        lines.append(f"\tchain {name} {{")
        lines.append(f"\t\t# iptables {mirrors}")
        lines.append(f"\t\ttype filter hook {hook} priority {priority}; policy accept;")
        lines.extend(f"\t\t{stmt}" for stmt in chains[name])
        lines.append("\t}")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# Running the tools


@dataclass(frozen=True, slots=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str], str | None], Result]


def command_runner(
    *, prefix: Sequence[str] = (), env: Mapping[str, str] | None = None, timeout: float = COMMAND_TIMEOUT
) -> Runner:
    """A Runner executing argv (after `prefix`, e.g. `ip netns exec NS`) with optional stdin text.

    A missing binary or a timeout comes back as a Result with returncode 127 or 124, never raises.
    """

    def run(argv: Sequence[str], stdin: str | None = None) -> Result:
        cmd = [*prefix, *argv]
        try:
            p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout,
                               env=None if env is None else dict(env), check=False)
        except FileNotFoundError as exc:
            return Result(127, "", f"{cmd[0]}: not found ({exc.strerror})")
        except subprocess.TimeoutExpired:
            return Result(124, "", f"{shlex.join(cmd)}: timed out after {timeout:g}s")
        return Result(p.returncode, p.stdout, p.stderr)

    return run


def _first_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0] if text else ""


def is_permission_error(r: Result) -> bool:
    """The tool was refused for lack of privilege (iptables: "Permission denied (you must be root)", exit
    status 4; nft: "Operation not permitted"): the process lacks NET_ADMIN. Never transient."""
    return r.returncode != 0 and any(text in r.stderr for text in PERMISSION_TEXTS)


def is_lock_error(r: Result) -> bool:
    """iptables could not get the xtables lock, or hit another transient resource problem (exit status 4),
    but not a refusal for lack of privilege (also exit status 4): transient, retried."""
    if is_permission_error(r):
        return False
    return r.returncode == LOCK_EXIT_STATUS or "xtables lock" in r.stderr


def _cause(r: Result, tool: str) -> str:
    """The failure cause a result is counted under: permission, iptables_lock, or the tool's name."""
    if is_permission_error(r):
        return PERMISSION
    return "iptables_lock" if is_lock_error(r) else tool


def _reason(what: str, r: Result) -> str:
    text = f"{what}: exit status {r.returncode}: {_first_line(r.stderr) or 'no message'}"
    return f"{text} ({NO_NET_ADMIN})" if is_permission_error(r) else text


class IptablesFirewall:
    """The rule set through `iptables`/`ip6tables` (whichever backend they use: nf_tables or legacy)."""

    kind = "iptables"

    def __init__(
        self,
        local_ips: Sequence[str],
        *,
        dns_port: int = DNS_PORT,
        health_port: int | None = None,
        runner: Runner | None = None,
        binaries: tuple[str, str] = ("iptables", "ip6tables"),
        xtables_wait: int = XTABLES_WAIT_SECONDS,
        lock_retry_delays: Sequence[float] = LOCK_RETRY_DELAYS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rules = iptables_rules(local_ips, dns_port=dns_port, health_port=health_port)
        self.families = sorted({r.family for r in self.rules})
        self.run = runner or command_runner()
        self.binaries = {4: binaries[0], 6: binaries[1]}
        self.xtables_wait = xtables_wait
        self.lock_retry_delays = tuple(lock_retry_delays)
        self.sleep = sleep

    def describe(self) -> list[str]:
        return [str(r) for r in self.rules]

    def _iptables(self, family: int, *args: str, retry: bool = True) -> Result:
        argv = [self.binaries[family], "-w", str(self.xtables_wait), *args]
        r = self.run(argv, None)
        for delay in self.lock_retry_delays if retry else ():
            if not is_lock_error(r):
                break
            log.info("xtables lock is busy (%s); retrying in %gs", _first_line(r.stderr), delay)
            self.sleep(delay)
            r = self.run(argv, None)
        return r

    def _failure(self, what: str, r: Result) -> NetifError:
        return NetifError(_cause(r, "iptables"), _reason(what, r))

    def ensure(self) -> Report:
        """Check every rule (`-C`); insert the missing ones at the top of their chain (`-I`)."""
        added: list[str] = []
        errors: list[NetifError] = []
        for rule in self.rules:
            r = self._iptables(rule.family, "-t", rule.table, "-C", rule.chain, *rule.args)
            if r.returncode == 0:
                continue
            if r.returncode != 1:  # 1 = no such rule; anything else is a failed check
                errors.append(self._failure(f"checking {rule}", r))
                continue
            r = self._iptables(rule.family, "-t", rule.table, "-I", rule.chain, *rule.args)
            if r.returncode == 0:
                added.append(str(rule))
            else:
                errors.append(self._failure(f"adding {rule}", r))
        return added, errors

    def owned_rules(self, family: int, *, retry: bool = True) -> tuple[list[tuple[str, list[str]]], list[NetifError]]:
        """(table, `-D` argv) for every rule carrying our comments in the chains we use, duplicates included."""
        found: list[tuple[str, list[str]]] = []
        errors: list[NetifError] = []
        for table, chain in (("raw", "PREROUTING"), ("raw", "OUTPUT"), ("filter", "INPUT"), ("filter", "OUTPUT")):
            r = self._iptables(family, "-t", table, "-S", chain, retry=retry)
            if r.returncode != 0:
                errors.append(self._failure(f"listing {table} {chain}", r))
                continue
            for line in r.stdout.splitlines():
                if f'"{SKIP_COMMENT}"' not in line and f'"{ALLOW_COMMENT}"' not in line:
                    continue
                words = shlex.split(line)
                if len(words) > 2 and words[0] == "-A":
                    found.append((table, ["-D", *words[1:]]))
        return found, errors

    def remove(self, *, retry: bool = True) -> Report:
        """Delete every rule with our comment, in both families (also a crashed predecessor's, for other IPs)."""
        removed: list[str] = []
        errors: list[NetifError] = []
        for family in (4, 6):
            rules, errs = self.owned_rules(family, retry=retry)
            if family not in self.families:
                # ip6tables may be missing or IPv6 off; a family we do not use is cleaned only when possible
                errs = []
            errors.extend(errs)
            for table, argv in rules:
                r = self._iptables(family, "-t", table, *argv, retry=retry)
                desc = f"{self.binaries[family]} -t {table} {shlex.join(argv[1:])}"
                if r.returncode == 0:
                    removed.append(desc)
                else:
                    errors.append(self._failure(f"removing {desc}", r))
        return removed, errors

    def installed(self) -> int:
        """How many of our rules are in place right now (listing, not checking one by one)."""
        return sum(len(self.owned_rules(f, retry=False)[0]) for f in self.families)


class NftablesFirewall:
    """The rule set as one nftables table, `table inet nodedns`, replaced and removed atomically."""

    kind = "nftables"

    def __init__(
        self,
        local_ips: Sequence[str],
        *,
        dns_port: int = DNS_PORT,
        health_port: int | None = None,
        runner: Runner | None = None,
        binary: str = "nft",
        table: str = NFT_TABLE,
    ) -> None:
        self.table = table
        self.script = nftables_script(local_ips, dns_port=dns_port, health_port=health_port, table=table)
        self.expected = {name: len(stmts) for name, stmts in
                         nftables_rules(local_ips, dns_port=dns_port, health_port=health_port).items()}
        self.run = runner or command_runner()
        self.binary = binary

    def describe(self) -> list[str]:
        return self.script.splitlines()[2:]

    def _listing(self) -> tuple[dict[str, int] | None, NetifError | None]:
        """Chain -> number of rules with our comments in our table; None when the table is absent."""
        r = self.run([self.binary, "-j", "list", "table", "inet", self.table], None)
        if r.returncode != 0:
            if "No such file or directory" in r.stderr:
                return None, None
            return None, _nft_error(f"listing table inet {self.table}", r)
        counts: dict[str, int] = {}
        try:
            for item in json.loads(r.stdout).get("nftables", []):
                if "chain" in item:
                    counts.setdefault(item["chain"]["name"], 0)
                elif "rule" in item and item["rule"].get("comment") in (SKIP_COMMENT, ALLOW_COMMENT):
                    counts[item["rule"]["chain"]] = counts.get(item["rule"]["chain"], 0) + 1
        except (ValueError, AttributeError, KeyError, TypeError) as exc:
            return None, NetifError("nftables", f"cannot read `nft -j list table` output: {exc}")
        return counts, None

    def ensure(self) -> Report:
        """Replace the table when it is missing or any chain lost or gained a rule."""
        counts, err = self._listing()
        if err is not None:
            return [], [err]
        if counts == self.expected:
            return [], []
        r = self.run([self.binary, "-f", "-"], self.script)
        if r.returncode != 0:
            return [], [_nft_error(f"applying table inet {self.table}", r)]
        return [f"table inet {self.table} ({sum(self.expected.values())} rules)"], []

    def remove(self, *, retry: bool = True) -> Report:
        counts, err = self._listing()
        if err is not None:
            return [], [err]
        if counts is None:
            return [], []
        r = self.run([self.binary, "delete", "table", "inet", self.table], None)
        if r.returncode != 0 and "No such file or directory" not in r.stderr:
            return [], [_nft_error(f"deleting table inet {self.table}", r)]
        return [f"table inet {self.table}"], []

    def installed(self) -> int:
        counts, _ = self._listing()
        return sum(counts.values()) if counts else 0


def _nft_error(what: str, r: Result) -> NetifError:
    if is_permission_error(r):
        return NetifError(PERMISSION, f"{what}: {_first_line(r.stderr)} ({NO_NET_ADMIN})")
    return NetifError("nftables", f"{what}: {_first_line(r.stderr)}")


Firewall = IptablesFirewall | NftablesFirewall


def make(
    kind: str, local_ips: Sequence[str], *, health_port: int | None, runner: Runner | None = None
) -> Firewall | None:
    """The backend `--firewall KIND` names for these local IPs; None for `none`."""
    if kind == "iptables":
        return IptablesFirewall(local_ips, health_port=health_port, runner=runner)
    if kind == "nftables":
        return NftablesFirewall(local_ips, health_port=health_port, runner=runner)
    return None
