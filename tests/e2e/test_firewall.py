"""The conntrack-bypass rules: node-cache's exact set, the nft equivalent, the backends' checks, retries and cleanup."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from nodedns.node import firewall
from nodedns.node.firewall import (
    ALLOW_COMMENT,
    SKIP_COMMENT,
    IptablesFirewall,
    IptablesRule,
    NftablesFirewall,
    Result,
    command_runner,
    iptables_rules,
    nftables_rules,
    nftables_script,
)
from tests.support.netns import Netns, netns, requires_netns

IP = "169.254.20.10"


def spec(proto: str, addr: str, port_flag: str, port: int, target: str, comment: str) -> tuple[str, ...]:
    return ("-p", proto, addr, IP, port_flag, str(port), "-m", "comment", "--comment", comment, "-j", target)


# node-cache `initIptables` for one local IP, health port 8080, in its order.
NODE_CACHE_RULES = [
    ("raw", "PREROUTING", spec("tcp", "-d", "--dport", 53, "NOTRACK", SKIP_COMMENT)),
    ("raw", "PREROUTING", spec("udp", "-d", "--dport", 53, "NOTRACK", SKIP_COMMENT)),
    ("filter", "INPUT", spec("tcp", "-d", "--dport", 53, "ACCEPT", ALLOW_COMMENT)),
    ("filter", "INPUT", spec("udp", "-d", "--dport", 53, "ACCEPT", ALLOW_COMMENT)),
    ("raw", "OUTPUT", spec("tcp", "-s", "--sport", 53, "NOTRACK", SKIP_COMMENT)),
    ("raw", "OUTPUT", spec("udp", "-s", "--sport", 53, "NOTRACK", SKIP_COMMENT)),
    ("filter", "OUTPUT", spec("tcp", "-s", "--sport", 53, "ACCEPT", ALLOW_COMMENT)),
    ("filter", "OUTPUT", spec("udp", "-s", "--sport", 53, "ACCEPT", ALLOW_COMMENT)),
    ("raw", "OUTPUT", spec("tcp", "-d", "--dport", 53, "NOTRACK", SKIP_COMMENT)),
    ("raw", "OUTPUT", spec("udp", "-d", "--dport", 53, "NOTRACK", SKIP_COMMENT)),
    ("raw", "OUTPUT", spec("tcp", "-d", "--dport", 8080, "NOTRACK", SKIP_COMMENT)),
    ("raw", "OUTPUT", spec("tcp", "-s", "--sport", 8080, "NOTRACK", SKIP_COMMENT)),
]


def test_iptables_rules_are_node_caches_rule_set_with_comments() -> None:
    rules = iptables_rules([IP], health_port=8080)
    assert [(r.table, r.chain, r.args) for r in rules] == NODE_CACHE_RULES
    assert {r.family for r in rules} == {4}


@pytest.mark.parametrize(
    ("ips", "health_port", "per_family"),
    [
        (["169.254.20.10"], 9253, {4: 12}),
        (["169.254.20.10"], None, {4: 10}),
        (["169.254.20.10", "10.96.0.10"], 9253, {4: 24}),
        (["fd00::a"], 9253, {6: 12}),
        (["169.254.20.10", "fd00::a"], 9253, {4: 12, 6: 12}),
    ],
    ids=["link-local", "no-health-port", "link-local-and-kube-dns", "ipv6", "dual-stack"],
)
def test_iptables_rules_cover_every_local_ip_in_its_family(
    ips: list[str], health_port: int | None, per_family: dict[int, int]
) -> None:
    rules = iptables_rules(ips, health_port=health_port)
    counts: dict[int, int] = {}
    for r in rules:
        counts[r.family] = counts.get(r.family, 0) + 1
        assert r.args[3] in ips
    assert counts == per_family


def test_an_ipv6_rule_prints_as_an_ip6tables_command() -> None:
    rule = iptables_rules(["fd00::a"])[0]
    assert str(rule) == ("ip6tables -t raw PREROUTING -p tcp -d fd00::a --dport 53 "
                         "-m comment --comment 'nodedns: skip conntrack' -j NOTRACK")


def test_nft_rules_mirror_the_iptables_rules_one_for_one() -> None:
    chains = nftables_rules([IP, "fd00::a"], health_port=8080)
    assert chains["raw_prerouting"][:2] == [
        f'ip daddr {IP} tcp dport 53 notrack comment "{SKIP_COMMENT}"',
        f'ip daddr {IP} udp dport 53 notrack comment "{SKIP_COMMENT}"',
    ]
    assert chains["filter_input"][2:] == [
        f'ip6 daddr fd00::a tcp dport 53 accept comment "{ALLOW_COMMENT}"',
        f'ip6 daddr fd00::a udp dport 53 accept comment "{ALLOW_COMMENT}"',
    ]
    assert chains["raw_output"][4:6] == [
        f'ip daddr {IP} tcp dport 8080 notrack comment "{SKIP_COMMENT}"',
        f'ip saddr {IP} tcp sport 8080 notrack comment "{SKIP_COMMENT}"',
    ]
    assert sum(map(len, chains.values())) == len(iptables_rules([IP, "fd00::a"], health_port=8080)) == 24


def test_nft_script_replaces_one_dedicated_table_atomically() -> None:
    script = nftables_script([IP], health_port=None)
    lines = script.splitlines()
    assert lines[:3] == ["table inet nodedns", "delete table inet nodedns", "table inet nodedns {"]
    assert "\t\ttype filter hook prerouting priority raw; policy accept;" in lines
    assert "\t\ttype filter hook input priority filter; policy accept;" in lines
    assert sum(1 for line in lines if "notrack" in line) == 6
    assert sum(1 for line in lines if line.strip().startswith("ip ") and "accept comment" in line) == 4


# ----------------------------------------------------------------------------------------------
# Backends against a scripted runner


class Script:
    """A Runner answering from rules `(predicate, Result)`; records every call."""

    def __init__(self, answers: Sequence[tuple[Callable[[list[str]], bool], Result | list[Result]]]) -> None:
        self.answers = [(pred, list(res) if isinstance(res, list) else res) for pred, res in answers]
        self.calls: list[tuple[list[str], str | None]] = []

    def __call__(self, argv: Sequence[str], stdin: str | None = None) -> Result:
        argv = list(argv)
        self.calls.append((argv, stdin))
        for pred, res in self.answers:
            if pred(argv):
                if isinstance(res, list):
                    return res.pop(0) if len(res) > 1 else res[0]
                return res
        raise AssertionError(f"unexpected command {argv}")


OK = Result(0, "", "")
MISSING = Result(1, "", "iptables: Bad rule (does a matching rule exist in that chain?).\n")
LOCKED = Result(4, "", "Another app is currently holding the xtables lock. Stopped waiting after 5s.\n")


def op(flag: str) -> Callable[[list[str]], bool]:
    return lambda argv: flag in argv


def test_ensure_checks_every_rule_and_inserts_only_the_missing_ones() -> None:
    first = iptables_rules([IP], health_port=9253)[0]
    run = Script([
        (lambda a: "-C" in a and a[-len(first.args):] == list(first.args) and "PREROUTING" in a, OK),
        (op("-C"), MISSING),
        (op("-I"), OK),
    ])
    fw = IptablesFirewall([IP], health_port=9253, runner=run, sleep=lambda s: None)
    added, errors = fw.ensure()
    assert errors == []
    assert len(added) == 11 and str(first) not in added
    inserts = [argv for argv, _ in run.calls if "-I" in argv]
    assert inserts[0][:7] == ["iptables", "-w", "5", "-t", "raw", "-I", "PREROUTING"]


def test_lock_contention_is_retried_with_backoff_then_succeeds() -> None:
    slept: list[float] = []
    run = Script([(op("-C"), [LOCKED, LOCKED, OK])])
    fw = IptablesFirewall([IP], runner=run, lock_retry_delays=(0.2, 0.5, 1.0), sleep=slept.append)
    added, errors = fw.ensure()
    assert (added, errors) == ([], [])
    assert slept == [0.2, 0.5]


@pytest.mark.parametrize(
    ("answer", "cause"),
    [
        (LOCKED, "iptables_lock"),
        (Result(2, "", "iptables v1.8.9 (nf_tables): unknown option \"--comment\"\n"), "iptables"),
        (Result(127, "", "iptables: not found"), "iptables"),
    ],
    ids=["lock-held-throughout", "rejected-rule", "binary-missing"],
)
def test_failures_are_reported_by_cause_and_do_not_stop_the_other_rules(answer: Result, cause: str) -> None:
    run = Script([(op("-C"), MISSING), (op("-I"), answer)])
    fw = IptablesFirewall([IP], runner=run, lock_retry_delays=(0.01,), sleep=lambda s: None)
    added, errors = fw.ensure()
    assert added == []
    assert len(errors) == 10 and {e.cause for e in errors} == {cause}


NO_ROOT = Result(4, "", "iptables v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied "
                        "(you must be root)\n")


def test_permission_denied_is_no_lock_it_is_not_retried_and_it_names_net_admin() -> None:
    """iptables says exit status 4 for a held lock and for a process without NET_ADMIN alike: only the lock
    is waited out; the refusal is counted as `permission` and named, never logged as a busy lock."""
    slept: list[float] = []
    run = Script([(op("-C"), NO_ROOT)])
    fw = IptablesFirewall([IP], runner=run, lock_retry_delays=(0.2, 0.5, 1.0), sleep=slept.append)
    added, errors = fw.ensure()
    assert slept == [] and len(run.calls) == 10  # one try per rule, no backoff
    assert added == [] and {e.cause for e in errors} == {"permission"}
    assert "Permission denied (you must be root)" in errors[0].reason and "NET_ADMIN" in errors[0].reason
    removed, errors = IptablesFirewall([IP], runner=Script([(op("-S"), NO_ROOT)]), sleep=slept.append).remove()
    assert slept == [] and removed == [] and {e.cause for e in errors} == {"permission"}


def test_nft_refused_for_lack_of_privilege_is_counted_as_permission() -> None:
    refused = Result(1, "", "Operation not permitted (you must be root)\nnetlink: Error: cache initialization failed\n")
    added, errors = NftablesFirewall([IP], runner=Script([(op("list"), refused)])).ensure()
    assert added == [] and [e.cause for e in errors] == ["permission"] and "NET_ADMIN" in errors[0].reason


NODE_CACHE = "NodeLocal DNS Cache: skip conntrack"
LISTING = f"""-P OUTPUT ACCEPT
-A OUTPUT -d 169.254.20.10/32 -p udp -m udp --dport 53 -m comment --comment "{SKIP_COMMENT}" -j NOTRACK
-A OUTPUT -d 169.254.20.10/32 -p udp -m udp --dport 53 -m comment --comment "{SKIP_COMMENT}" -j NOTRACK
-A OUTPUT -d 10.0.0.99/32 -p tcp -m tcp --dport 53 -m comment --comment "{SKIP_COMMENT}" -j NOTRACK
-A OUTPUT -d 169.254.20.10/32 -p udp -m udp --dport 53 -m comment --comment "{NODE_CACHE}" -j NOTRACK
-A OUTPUT -p tcp -j NOTRACK
"""


ACCEPTS = f"""-P INPUT ACCEPT
-A INPUT -d 169.254.20.10/32 -p udp -m udp --dport 53 -m comment --comment "{ALLOW_COMMENT}" -j ACCEPT
-A INPUT -p udp -m udp --dport 53 -j ACCEPT
"""


def test_remove_deletes_every_rule_with_our_comment_and_nothing_else() -> None:
    run = Script([
        (lambda a: a[0] == "iptables" and "-S" in a and "OUTPUT" in a and "raw" in a, Result(0, LISTING, "")),
        (lambda a: a[0] == "iptables" and "-S" in a and "INPUT" in a and "filter" in a, Result(0, ACCEPTS, "")),
        (op("-S"), Result(0, "-P INPUT ACCEPT\n", "")),
        (op("-D"), OK),
    ])
    removed, errors = IptablesFirewall([IP], runner=run).remove()
    assert errors == []
    deletes = [argv[argv.index("-D"):] for argv, _ in run.calls if "-D" in argv]
    assert len(deletes) == 4  # the duplicate and the stale predecessor rule too; node-cache's and the plain ones stay
    assert deletes[2][:4] == ["-D", "OUTPUT", "-d", "10.0.0.99/32"]
    assert sum(SKIP_COMMENT in d for d in deletes) == 3 and sum(ALLOW_COMMENT in d for d in deletes) == 1
    assert len(removed) == 4


def test_a_check_that_fails_otherwise_than_missing_is_an_error_not_an_insert() -> None:
    run = Script([(op("-C"), Result(-9, "", "")), (op("-I"), OK)])
    added, errors = IptablesFirewall([IP], runner=run).ensure()
    assert added == [] and len(errors) == 10 and {e.cause for e in errors} == {"iptables"}
    assert not [argv for argv, _ in run.calls if "-I" in argv]


def test_remove_ignores_a_family_we_do_not_use_when_its_tool_is_missing() -> None:
    run = Script([
        (lambda a: a[0] == "ip6tables", Result(127, "", "ip6tables: not found")),
        (op("-S"), Result(0, "", "")),
    ])
    assert IptablesFirewall([IP], runner=run).remove() == ([], [])


def nft_listing(chains: dict[str, int]) -> Result:
    import json

    items: list[dict[str, object]] = [{"table": {"family": "inet", "name": "nodedns"}}]
    for name, n in chains.items():
        items.append({"chain": {"family": "inet", "table": "nodedns", "name": name}})
        items.extend({"rule": {"chain": name, "comment": SKIP_COMMENT}} for _ in range(n))
    return Result(0, json.dumps({"nftables": items}), "")


NO_TABLE = Result(1, "", "Error: No such file or directory\nlist table inet nodedns\n")


@pytest.mark.parametrize(
    ("listing", "applies"),
    [
        (NO_TABLE, True),
        (nft_listing({"raw_prerouting": 2, "raw_output": 6, "filter_input": 2, "filter_output": 2}), False),
        (nft_listing({"raw_prerouting": 1, "raw_output": 6, "filter_input": 2, "filter_output": 2}), True),
        (nft_listing({"raw_prerouting": 2, "raw_output": 6, "filter_input": 2}), True),
    ],
    ids=["table-missing", "table-intact", "rule-deleted", "chain-deleted"],
)
def test_nft_ensure_replaces_the_table_only_when_it_differs(listing: Result, applies: bool) -> None:
    run = Script([(op("list"), listing), (op("-f"), OK)])
    fw = NftablesFirewall([IP], health_port=9253, runner=run)
    added, errors = fw.ensure()
    assert errors == []
    applied = [stdin for argv, stdin in run.calls if "-f" in argv]
    assert bool(added) is applies and len(applied) == int(applies)
    if applies:
        assert applied[0] == fw.script


def test_nft_failure_is_counted_as_nftables() -> None:
    run = Script([(op("list"), NO_TABLE), (op("-f"), Result(1, "", "Error: Could not process rule: No such file\n"))])
    added, errors = NftablesFirewall([IP], runner=run).ensure()
    assert added == [] and [e.cause for e in errors] == ["nftables"]


def test_command_runner_turns_a_missing_binary_into_a_result() -> None:
    r = command_runner()(["nodedns-no-such-binary-nd6"], None)
    assert r.returncode == 127 and "not found" in r.stderr


# ----------------------------------------------------------------------------------------------
# Applied for real inside a network namespace


@pytest.fixture
def node() -> Iterator[Netns]:
    with netns("fw") as ns:
        yield ns


def ours(lines: list[str]) -> list[str]:
    return [line for line in lines if SKIP_COMMENT in line or ALLOW_COMMENT in line]


@requires_netns
def test_iptables_rules_apply_idempotently_come_back_and_go_away_in_a_netns(node: Netns) -> None:
    run = command_runner(prefix=node.exec_prefix)
    node.run("iptables", "-t", "raw", "-I", "OUTPUT", "-p", "udp", "--dport", "5353", "-j", "NOTRACK")  # not ours
    fw = IptablesFirewall([IP, "fd00::a"], health_port=9253, runner=run)
    added, errors = fw.ensure()
    assert errors == [] and len(added) == 24
    assert len(ours(node.rules("iptables"))) == 12 and len(ours(node.rules("ip6tables"))) == 12
    assert fw.installed() == 24
    assert fw.ensure() == ([], [])  # nothing doubles
    node.run("iptables", "-t", "raw", "-D", "PREROUTING", *NODE_CACHE_RULES[1][2][:4], "--dport", "53",
             "-m", "comment", "--comment", SKIP_COMMENT, "-j", "NOTRACK")
    added, errors = fw.ensure()
    assert errors == [] and added == [str(IptablesRule(4, "raw", "PREROUTING", NODE_CACHE_RULES[1][2]))]
    removed, errors = fw.remove()
    assert errors == [] and len(removed) == 24
    assert ours(node.rules("iptables")) == [] and ours(node.rules("ip6tables")) == []
    assert "-A OUTPUT -p udp -m udp --dport 5353 -j NOTRACK" in node.rules("iptables")


@requires_netns
def test_nftables_table_applies_comes_back_and_goes_away_in_a_netns(node: Netns) -> None:
    run = command_runner(prefix=node.exec_prefix)
    node.run("nft", "add", "table", "inet", "someoneelse")
    fw = NftablesFirewall([IP, "fd00::a"], health_port=9253, runner=run)
    added, errors = fw.ensure()
    assert errors == [] and added == ["table inet nodedns (24 rules)"]
    ruleset = node.nft_ruleset()
    assert f'ip daddr {IP} udp dport 53 notrack comment "{SKIP_COMMENT}"' in ruleset
    assert f'ip6 saddr fd00::a tcp sport 53 accept comment "{ALLOW_COMMENT}"' in ruleset
    assert fw.installed() == 24 and fw.ensure() == ([], [])
    handle = next(line.split("# handle ")[1] for line in node.run("nft", "-a", "list", "chain", "inet", "nodedns",
                                                                   "raw_prerouting").stdout.splitlines()
                  if "notrack" in line)
    node.run("nft", "delete", "rule", "inet", "nodedns", "raw_prerouting", "handle", handle)
    added, errors = fw.ensure()
    assert errors == [] and added and fw.installed() == 24
    assert fw.remove() == (["table inet nodedns"], [])
    assert "nodedns" not in node.nft_ruleset() and "table inet someoneelse" in node.nft_ruleset()
    assert fw.remove() == ([], [])


@requires_netns
@pytest.mark.skipif(shutil.which("iptables-legacy") is None, reason="iptables-legacy (which takes the lock) missing")
def test_a_held_xtables_lock_is_waited_out_and_retried(node: Netns, tmp_path: Path) -> None:
    lockfile = tmp_path / "xtables.lock"
    fd = os.open(lockfile, os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    slept: list[float] = []

    def release_then_sleep(delay: float) -> None:
        slept.append(delay)
        fcntl.flock(fd, fcntl.LOCK_UN)  # the other holder lets go while we back off

    try:
        run = command_runner(prefix=node.exec_prefix, env={**os.environ, "XTABLES_LOCKFILE": str(lockfile)})
        fw = IptablesFirewall([IP], runner=run, binaries=("iptables-legacy", "ip6tables-legacy"),
                              xtables_wait=1, lock_retry_delays=(0.1,), sleep=release_then_sleep)
        added, errors = fw.ensure()
    finally:
        os.close(fd)
    assert slept == [0.1]
    assert errors == [] and len(added) == 10
    assert len(ours(node.rules("iptables-legacy"))) == 10


def test_make_builds_the_backend_the_flag_names() -> None:
    assert isinstance(firewall.make("iptables", [IP], health_port=None), IptablesFirewall)
    assert isinstance(firewall.make("nftables", [IP], health_port=None), NftablesFirewall)
    assert firewall.make("none", [IP], health_port=None) is None
