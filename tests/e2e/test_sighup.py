"""SIGHUP never stops anything: the agent (one process, or the --workers supervisor, its zygote and its
workers) re-reads the upstream files at once and says so in one line; `nodedns guard` says it ignores it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import dns.rcode

from tests.support.agentproc import AgentProcess
from tests.support.apiserver import FakeApiServer
from tests.support.helpers import EXAMPLE, nodedns_cmd, query, subprocess_env, wait_for
from tests.support.shipped import ShippedAgent, cluster
from tests.support.tenant import tree
from tests.support.upstream_double import UpstreamDouble

OLD = {"only-old.example": {"A": ["192.0.2.1"]}}
NEW = {"only-new.example": {"A": ["192.0.2.2"]}}


def answered(port: int, name: str) -> bool:
    try:
        return query("127.0.0.1", port, name, "A", timeout=2.0).rcode() == dns.rcode.NOERROR
    except Exception:  # noqa: BLE001 - a timeout: not answered
        return False


def test_sighup_makes_one_agent_reread_the_upstream_files_at_once(tmp_path: Path) -> None:
    with UpstreamDouble(OLD) as old, UpstreamDouble(NEW) as new:
        # the timer would re-read the kube-dns ConfigMap only after an hour: what follows is the signal's doing
        args = ["--manifests", str(EXAMPLE), "--upstream", old.address, "--kube-dns-config-dir", str(tmp_path),
                "--kube-dns-config-period", "1h"]
        with AgentProcess(args, log=tmp_path / "agent.log") as agent:
            agent.wait_ready()
            assert answered(agent.port, "only-old.example")
            (tmp_path / "upstreamNameservers").write_text(json.dumps([new.address]))
            assert agent.proc is not None
            agent.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: answered(agent.port, "only-new.example"), timeout=10, what="the new upstream used")
            assert agent.alive() and agent.get("/readyz")[0] == 200
            log = agent.log_text()
            assert f"SIGHUP: re-reading {tmp_path} now; other settings take a restart" in log
            assert f"upstream config reloaded: . -> {new.address}" in log
            assert agent.stop() == 0


STARTING_UP = """
import os, signal, sys
from nodedns.app.run import run_agent
from nodedns.config import from_sources
from nodedns.errors import ConfigError

def make(config):  # the agent being built: its own SIGHUP handler is not in yet
    os.kill(os.getpid(), signal.SIGHUP)
    signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the signal is delivered by now
    raise ConfigError("upstream", "given up after the SIGHUP, on purpose")

sys.exit(run_agent(from_sources({"manifests": sys.argv[1]}), make=make))
"""


def test_a_sighup_while_the_agent_starts_up_kills_nothing() -> None:
    """A SIGHUP that comes while the agent is still being made (a reload sent to every process of a node, a
    terminal closing) is no exit: the start-up goes on to its own end (here a config error, exit 2)."""
    r = subprocess.run([sys.executable, "-c", STARTING_UP, str(EXAMPLE)], env=subprocess_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, f"exit {r.returncode}: {r.stderr[-500:]}"
    assert "given up after the SIGHUP, on purpose" in r.stderr


def test_sighup_to_any_process_of_the_shipped_agent_stops_none_and_every_worker_rereads(tmp_path: Path) -> None:
    kube_dns = tmp_path / "kube-dns"
    kube_dns.mkdir()
    with FakeApiServer() as api, UpstreamDouble(OLD) as old, UpstreamDouble(NEW) as new:
        cluster(api)
        override = {"kube-dns-config-dir": str(kube_dns), "kube-dns-config-period": "1h"}
        with ShippedAgent(tmp_path, api, old, **override) as agent:
            agent.wait_ready()
            assert agent.proc is not None
            supervisor = agent.proc.pid
            wait_for(lambda: len(tree(supervisor)) == 4, timeout=10, what="supervisor, zygote and two workers")
            processes = tree(supervisor)
            (kube_dns / "upstreamNameservers").write_text(json.dumps([new.address]))
            agent.proc.send_signal(signal.SIGHUP)
            # the supervisor and both workers re-read it (each forwards on its own)
            wait_for(lambda: agent.log.read_text().count(f"upstream config reloaded: . -> {new.address}") == 3,
                     timeout=10, what="the supervisor and both workers reloaded")
            assert all(answered(agent.port, "only-new.example") for _ in range(20))  # new sockets: both workers
            log = agent.log.read_text()
            assert f"SIGHUP: re-reading {kube_dns} now, and so do its 2 workers; other settings take a restart" in log
            for pid in processes[1:]:  # the zygote first, then each worker
                os.kill(pid, signal.SIGHUP)
            wait_for(lambda: all(f"worker {n}: SIGHUP: re-reading" in agent.log.read_text() for n in (0, 1)),
                     timeout=10, what="each worker said so")
            # nobody died, nobody was started again (a zygote that died would be noticed in ms: its workers killed)
            assert stays(lambda: tree(supervisor) == processes and not any(zombie(pid) for pid in processes), 1.0)
            assert agent.get("/readyz")[0] == 200
            assert agent.stop() == 0


def stays(predicate: Callable[[], bool], seconds: float) -> bool:
    """`predicate` holds on every look for `seconds` (a thing that must not happen, watched for a while)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            return False
        time.sleep(0.02)
    return predicate()


def zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_sighup_is_ignored_by_the_guard_with_one_line() -> None:
    argv = nodedns_cmd("guard", "--interface", "nd-hup", "--local-ip", "127.0.0.1", "--firewall", "none",
                       "--probe-interval", "0.1s")
    with subprocess.Popen(argv, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        assert proc.stdout is not None
        try:
            line = proc.stdout.readline()
            assert "probing 127.0.0.1:53" in line, line
            proc.send_signal(signal.SIGHUP)
            line = proc.stdout.readline()
            said = "SIGHUP: ignored (the guard reads its flags and --config file once; a change takes a restart)"
            assert said in line
            assert proc.poll() is None
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
