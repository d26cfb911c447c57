"""`nodedns guard`: when it falls back, when it never does, how small it stays.

The decisions run against a scripted prober and recording stand-ins for the interface and the rules
(no root needed); the probe itself against a real agent on 127.0.0.1; the process as it runs
(`nodedns guard ...`), for what it loads and its memory. The netns end to end (an agent killed or
hung under load, the kube-proxy fallback measured) is tests/e2e/test_failover.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from nodedns.errors import NetifError
from nodedns.node.guard import Guard
from nodedns.node.netif import HostPort, probe, probe_query, probe_reply
from nodedns.node.netif import Link as NodeLink
from tests.support.helpers import EXAMPLE, ROOT, nodedns_cmd, running_agent, subprocess_env, wait_for
from tests.support.netns import netns, requires_netns
from tests.support.node_fakes import Recorder

IPS = ("169.254.20.10", "10.96.0.10")


class Link:
    name = "nodelocaldns"

    def __init__(self, rec: Recorder, *, fail: bool = False) -> None:
        self.rec = rec
        self.fail = fail

    def remove_addresses(self) -> tuple[list[str], list[NetifError]]:
        self.rec.note("addresses removed")
        if self.fail:
            return [], [NetifError("address_remove", "netlink said no")]
        return [f"removed address {ip}/32 from nodelocaldns" for ip in IPS], []


class Rules:
    kind = "iptables"

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    def remove(self, *, retry: bool = True) -> tuple[list[str], list[NetifError]]:
        self.rec.note("rules removed")
        return ["iptables -t raw PREROUTING ..."] * 24, []


class Script:
    """A prober answering from a script: "ok" (every IP answers), "dead" (none does), "half" (the first only)."""

    def __init__(self, steps: str) -> None:
        self.steps = list(steps.split())

    async def __call__(self, targets: Sequence[HostPort], qname: str) -> list[tuple[HostPort, str]]:
        step = self.steps.pop(0) if self.steps else "ok"
        if step == "boom":
            raise OSError("no buffer space")
        if step == "ok":
            return []
        dead = targets if step == "dead" else targets[1:]
        return [(t, "no answer in 0.5s") for t in dead]


def guard_for(steps: str, rec: Recorder, *, link: Link | None = None) -> Guard:
    return Guard(link=link or Link(rec), rules=Rules(rec), local_ips=IPS, probe_name="dns-version.cluster.local",
                 interval=0.5, failures=3, prober=Script(steps))


def rounds(guard: Guard, n: int) -> None:
    async def go() -> None:
        for _ in range(n):
            await guard.round()

    asyncio.run(go())


@pytest.mark.parametrize(("steps", "fallbacks"), [
    ("dead " * 10, 0),
    ("ok ok dead dead dead", 0),
    ("ok ok ok dead dead dead", 1),
    ("ok ok ok half half half", 1),
    ("ok ok ok dead dead ok dead dead ok dead dead", 0),
    ("ok ok ok dead dead dead dead dead dead", 1),
    ("ok ok ok dead dead dead ok ok dead dead dead", 1),
    ("ok ok ok dead dead dead ok ok ok dead dead dead", 2),
], ids=["agent-absent-at-start-never-acts", "not-armed-before-three-answers", "three-unanswered-in-a-row",
        "one-local-ip-unanswered-counts", "an-answer-resets-the-count", "one-fallback-then-waits",
        "after-a-fallback-two-answers-do-not-arm", "armed-again-after-three-answers"])
def test_the_guard_falls_back_only_after_seeing_the_agent_answer_and_then_fail_in_a_row(steps: str,
                                                                                        fallbacks: int) -> None:
    rec = Recorder()
    guard = guard_for(steps, rec)
    rounds(guard, len(steps.split()))
    assert guard.fallbacks == fallbacks
    assert [c for c, _ in rec.calls] == ["rules removed", "addresses removed"] * fallbacks  # rules first


def test_a_fallback_is_one_loud_line_saying_what_went(caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder()
    guard = guard_for("ok ok ok dead dead dead", rec)
    with caplog.at_level("INFO", "nodedns.guard"):
        rounds(guard, 6)
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1
    assert errors[0].startswith("the agent did not answer 3 rounds in a row (169.254.20.10:53: no answer in 0.5s; "
                                "10.96.0.10:53: no answer in 0.5s): fell back to the cluster DNS in ")
    assert "removed 24 rules and addresses 169.254.20.10/32, 10.96.0.10/32" in errors[0]


def test_the_guard_survives_its_own_errors_and_keeps_probing(caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder()
    guard = guard_for("boom ok ok ok boom dead dead dead dead dead dead dead dead dead ok", rec,
                      link=Link(rec, fail=True))
    guard.interval = 0.01

    async def go() -> None:
        task = asyncio.create_task(guard.run())
        while guard.prober.steps:  # type: ignore[attr-defined]  # noqa: ASYNC110 - the script empties itself
            await asyncio.sleep(0.01)
        guard.stop()
        await task

    with caplog.at_level("WARNING", "nodedns.guard"):
        asyncio.run(asyncio.wait_for(go(), 10))
    assert guard.fallbacks == 2 and guard.answered >= 1  # incomplete: tried once more, then it waits
    assert "guard error: OSError: no buffer space" in caplog.text
    assert "the fallback is incomplete, trying again after the next 3 unanswered rounds: address_remove: " \
           "netlink said no" in caplog.text


@pytest.mark.parametrize(("before", "after", "rounds_after", "fallbacks"), [
    ("dead", "dead dead dead", 1, 0),
    ("ok ok ok", "ok", 1, 0),
    ("ok ok ok", "dead dead dead ok", 3, 1),
], ids=["not-armed-leaves-at-once", "answering-leaves-after-one-round", "hung-agent-falls-back-first"])
def test_sigterm_leaves_once_there_is_nothing_to_guard(before: str, after: str, rounds_after: int,
                                                       fallbacks: int) -> None:
    rec = Recorder()
    guard = guard_for(f"{before} {after}", rec)
    guard.interval = 0.01
    script: Script = guard.prober  # type: ignore[assignment]

    async def go() -> None:
        for _ in before.split():
            await guard.round()
        guard.stop()  # SIGTERM: the Pod is being deleted
        await guard.run()

    asyncio.run(asyncio.wait_for(go(), 10))
    assert len(after.split()) - len(script.steps) == rounds_after and guard.fallbacks == fallbacks


# ----------------------------------------------------------------------------------------------
# The probe


def test_the_probe_is_answered_by_a_running_agent_and_not_by_a_closed_port() -> None:
    with running_agent({"manifests": str(EXAMPLE)}) as agent:
        assert asyncio.run(probe(agent.host, agent.port, "dns-version.cluster.local", wait=1)) is None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert asyncio.run(probe("127.0.0.1", port, "dns-version.cluster.local", wait=1)) == \
        "refused: nothing listens there"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # bound, never reads: a hung agent
        silent.bind(("127.0.0.1", 0))
        assert asyncio.run(probe("127.0.0.1", silent.getsockname()[1], "x.cluster.local", wait=0.2)) == \
            "no answer in 0.2s"


@pytest.mark.parametrize(("flags_rcode", "why"), [
    (0x8100, None), (0x8103, None), (0x8102, "answered SERVFAIL"), (0x8105, "answered REFUSED"),
], ids=["noerror", "nxdomain", "servfail", "refused"])
def test_only_noerror_and_nxdomain_count_as_answers(flags_rcode: int, why: str | None) -> None:
    query, question = probe_query("dns-version.cluster.local", 0x1234)
    reply = bytearray(query)
    reply[2:4] = flags_rcode.to_bytes(2, "big")
    assert probe_reply(bytes(reply), 0x1234, question) == why
    assert probe_reply(bytes(reply), 0x4321, question) == "not an answer to the probe"


# ----------------------------------------------------------------------------------------------
# The process


def test_the_command_line_is_exactly_the_documented_interface() -> None:
    out = subprocess.run(nodedns_cmd("guard", "--help"), env=subprocess_env(), capture_output=True, text=True,
                         timeout=30).stdout
    usage = " ".join(out.split("\n\n")[0].split())
    assert usage == ("usage: nodedns guard [-h] [--config FILE] [--interface NAME] --local-ip IP[,IP...] "
                     "[--firewall {iptables,nftables,none}] [--probe-name NAME] [--probe-interval DURATION] "
                     "[--failures N]")


@pytest.mark.parametrize(("args", "message"), [
    (["--local-ip", "169.254.20.300"], "--local-ip: '169.254.20.300' is not an IP address"),
    (["--probe-interval", "soon"], "--probe-interval: 'soon' is not a duration"),
    (["--failures", "0"], "--failures: must be a whole number from 1 to 100"),
    (["--interface", "a-name-much-too-long"], "--interface: must be a Linux interface name"),
], ids=["bad-ip", "bad-interval", "zero-failures", "long-interface"])
def test_bad_arguments_exit_2_naming_the_flag(args: list[str], message: str) -> None:
    base = {"--interface": "nodelocaldns", "--local-ip": "169.254.20.10", "--firewall": "none"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = [a for kv in base.items() for a in kv]
    r = subprocess.run(nodedns_cmd("guard", *argv), env=subprocess_env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and message in r.stderr, r.stderr


@pytest.mark.parametrize(("config", "flags", "message"), [
    ("firewall: iptables\n", [], "--interface: give the agent's interface, or --config with its setup-interface"),
    ("setup-interface: [nodelocaldns\n", [], "is not valid YAML"),
    ("setup-interface: nodelocaldns\nfirewal: iptables\n", [], "firewal: unknown key"),
    (None, [], "--config"),
], ids=["no-interface", "not-yaml", "unknown-key", "no-file"])
def test_a_config_that_does_not_say_what_to_guard_exits_2_naming_it(tmp_path: Path, config: str | None,
                                                                   flags: list[str], message: str) -> None:
    path = tmp_path / "config.yaml"
    if config is not None:
        path.write_text(config)
    r = subprocess.run(nodedns_cmd("guard", "--config", str(path), "--local-ip", "169.254.20.10", *flags),
                       env=subprocess_env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


MODULES = r"""
import json, os, signal, sys, threading
from nodedns.cli import main
threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
code = main(sys.argv[1:])
peak = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0].split()[1]
print(json.dumps({"code": code, "modules": sorted(sys.modules), "peak_kib": int(peak)}))
"""


def guard_run(tmp_path: Path) -> dict[str, object]:
    """`nodedns guard` for 1.5 s (no agent there: it waits), then SIGTERM: exit code, modules loaded, peak RSS.
    As the DaemonSet runs it: the interface and the firewall from the agent's config file."""
    config = tmp_path / "config.yaml"
    config.write_text("setup-interface: nd-guardtest\nfirewall: none\ncluster-domain: cluster.local\n")
    r = subprocess.run([sys.executable, "-c", MODULES, "guard", "--config", str(config), "--local-ip",
                        "127.0.0.1", "--probe-interval", "0.1s"],
                       env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    result: dict[str, object] = json.loads(r.stdout.splitlines()[-1])
    return result


def test_the_guard_loads_neither_the_index_nor_the_kubernetes_client_and_stops_on_sigterm(tmp_path: Path) -> None:
    result = guard_run(tmp_path)
    assert result["code"] == 0
    modules = set(result["modules"])  # type: ignore[arg-type]
    assert "nodedns.node.guard" in modules and "nodedns.node.netif" in modules  # it did run
    heavy = {"nodedns.cluster.index", "nodedns.cluster.apisync", "kubernetes", "nodedns.serve.resolver", "nodedns.app",
             "nodedns.cluster.records",
             "nodedns.dns.wire", "dnslib", "aiohttp", "prometheus_client", "uvloop", "orjson"}  # YAML: its config
    assert modules & heavy == set()


def test_the_guard_fits_its_containers_memory_limit(tmp_path: Path) -> None:
    import yaml

    ds = next(d for d in yaml.safe_load_all((ROOT / "daemonset" / "daemonset.yaml").read_text()) if d)
    guard = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "guard")
    limit = guard["resources"]["limits"]["memory"]
    m = re.fullmatch(r"(\d+)Mi", limit)
    assert m, limit
    peak_mib = int(guard_run(tmp_path)["peak_kib"]) / 1024  # type: ignore[call-overload]
    assert peak_mib < int(m.group(1)) * 0.75, f"peak {peak_mib:.1f} MiB against a limit of {limit}"


def test_the_docs_show_the_guard_as_run() -> None:
    text = (ROOT / "docs" / "node.md").read_text()
    assert "nodedns guard --config FILE --local-ip IP[,IP...]" in text
    assert "nodedns guard --interface NAME --local-ip IP[,IP...] --firewall iptables|nftables|none" in text


# ----------------------------------------------------------------------------------------------
# The process on a node: its flags decide what happens to the address on the interface

RESPONDER = r"""
import socket, sys, time
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("0.0.0.0", 53))
answers, delay, seen = int(sys.argv[1]), float(sys.argv[2]), 0
print("listening", flush=True)
while True:
    data, addr = sock.recvfrom(512)
    seen += 1
    print(f"probe {seen}", flush=True)
    if seen <= answers:  # the first ones answered NOERROR after `delay`, then silence (a hung agent)
        time.sleep(delay)
        sock.sendto(data[:2] + bytes([data[2] | 0x80, 0]) + data[4:], addr)
"""


@requires_netns
@pytest.mark.parametrize(("ips", "answers", "delay", "flags"), [
    (("169.254.20.10", "10.96.0.10"), 2, 0.0, ["--failures", "1", "--probe-interval", "0.2s"]),
    (("169.254.20.10",), 1, 0.7, ["--failures", "1", "--probe-interval", "1.5s"]),
], ids=["failures-1", "a-late-answer-within-the-interval"])
def test_the_guard_takes_the_addresses_away_as_its_flags_say(tmp_path: Path, ips: tuple[str, ...], answers: int,
                                                           delay: float, flags: list[str]) -> None:
    """One round answered on every local IP arms `--failures 1` (the default, 3, never would), and one
    unanswered round then takes the addresses off the interface. An answer that comes 0.7 s late counts
    with `--probe-interval 1.5s` (a probe waits up to the interval; with the default 0.5s it would not)."""
    with netns("guard") as node:
        NodeLink("nodelocaldns", ips, netns=node.name).ensure()  # as the agent makes it
        script = tmp_path / "responder.py"
        script.write_text(RESPONDER)
        log, probes = tmp_path / "guard.log", tmp_path / "probes.log"
        with probes.open("w") as out:
            responder = subprocess.Popen([*node.exec_prefix, sys.executable, str(script), str(answers), str(delay)],
                                         stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: "listening" in probes.read_text(), 10, "the responder listening")
            with log.open("w") as out:
                guard = subprocess.Popen([*node.exec_prefix, *nodedns_cmd(
                    "guard", "--interface", "nodelocaldns", "--local-ip", ",".join(ips), "--firewall", "none",
                    *flags)], env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)
            try:
                wait_for(lambda: not any(ip in node.run("ip", "-o", "addr", "show", "dev", "nodelocaldns").stdout
                                         for ip in ips), 15, "the guard taking the addresses away")
                assert "nodelocaldns" in node.links()  # the link stays
                assert "falling back after 1 unanswered rounds in a row" in log.read_text()
            finally:
                guard.terminate()
                guard.wait(10)
        finally:
            responder.kill()
            responder.wait(10)
