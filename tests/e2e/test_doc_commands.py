"""Every shell command README.md and docs/*.md show runs as shown against examples/, with the output shown.

Which lines are commands, and how the output shown is compared with the output got: tests/support/doccommands.py
(the extraction rules and the comparison, tested in tests/unit/test_doccommands.py). Each command is a
test case, named after its file and line, run in document order.

Where they run: as a reader who followed the README runs them, in a checkout with the virtual
environment active (its bin/ first on PATH), from the repository root, with `bash -c`, each in a
fresh shell. All of them inside one network namespace made for this test: it has its own loopback,
so the ports the documents name (5353, 9253, 9254, ...) are free whatever else runs on the machine,
and its own /etc/resolv.conf (`ip netns exec` binds /etc/netns/NAME/resolv.conf), which names a
stand-in upstream in the namespace (127.0.0.2:53, `UPSTREAM_ZONE`), so the agent's default
upstream — the nameservers of /etc/resolv.conf — answers without the internet.

The agent they talk to: for each document, the README's quick-start agent (the serve part of its
first set-up command) is started before the document's first command; a `nodedns serve` command
in a document replaces it from there on (the previous one is stopped, this one started as shown,
in the background, and waited for until its status listener says ready; the log lines the document
shows for it must be in its log); a `serve` the document shows failing, `(exit N)`, runs as any
other command, beside the running agent. Commands after a `serve` run against that agent, also when
a test case is selected alone.

Skipped, with the reason printed (`-ra`): the commands in `SKIPS` — those that need a real cluster
(kubectl, an API server), root on a real node, a container registry, or that run something this
suite already runs (the set-up commands, the tests, the benchmarks in small). Every other command
runs. Root is needed for the namespace: outside CI without root the whole module skips.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.doccommands import (
    COMMANDS,
    DOCS,
    DocCommand,
    compare,
    deploy_dir,
    readme_serve,
    skip_reason,
    status_address,
)
from tests.support.helpers import IN_CI, ROOT
from tests.support.netns import Netns, netns, requires_netns

pytestmark = requires_netns


# The upstream the namespace's /etc/resolv.conf names: the names the documents ask outside the cluster.
UPSTREAM = "127.0.0.2"
UPSTREAM_ZONE = {
    "api.example.com": {"A": ["192.0.2.80"]},
    "www.example.com": {"A": ["192.0.2.81"]},
    # docs/beyond.md: the kube-dns federation's target for queue.prod (node-a: zone-a, region-1)
    "queue.prod.myfed.svc.zone-a.region-1.fed.example.com": {"A": ["198.51.100.7"]},
}


def is_serve(command: str) -> bool:
    """An agent a document starts: `nodedns serve`, or `nodedns shadow` (not its --report)."""
    words = shlex.split(command, comments=True)
    return len(words) >= 2 and Path(words[0]).name == "nodedns" and (
        words[1] == "serve" or (words[1] == "shadow" and "--report" not in words))


def venv_bin() -> Path:
    return Path(sys.executable).parent


def as_run(command: str) -> str:
    """The command as it runs here: `.venv/bin/` is this interpreter's bin/ when the checkout has no .venv."""
    if not (ROOT / ".venv" / "bin").is_dir():
        command = command.replace(".venv/bin/", f"{venv_bin()}/")
    return command


def shell_env() -> dict[str, str]:
    """The reader's shell with the virtual environment active (`. .venv/bin/activate`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "NODEDNS_"))}
    env["VIRTUAL_ENV"] = str(venv_bin().parent)
    env["PATH"] = os.pathsep.join([str(venv_bin()), env.get("PATH", "/usr/bin:/bin")])
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONUNBUFFERED"] = "1"  # the order of stdout and stderr lines as a terminal shows it
    env.pop("PYTHONHOME", None)
    return env


class Reader:
    """The namespace, the stand-in upstream, and the agent the commands talk to."""

    def __init__(self, ns: Netns, logs: Path) -> None:
        self.ns = ns
        self.logs = logs
        self.agent: subprocess.Popen[bytes] | None = None
        self.agent_command: str | None = None
        self.agent_log: Path | None = None

    def run(self, command: str, *, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """One command in a fresh shell; stdout and stderr in one stream, in the order they were written
        (as on a terminal)."""
        return subprocess.run([*self.ns.exec_prefix, "bash", "-c", as_run(command)], cwd=ROOT, env=shell_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                              check=False)

    def use_agent(self, command: str) -> None:
        """Make `command` (a `nodedns serve`, as shown) the running agent."""
        if self.agent_command == command and self.agent is not None and self.agent.poll() is None:
            return
        self.stop_agent()
        shown = command.split("#", 1)[0].strip().removesuffix("&").strip()
        self.agent_log = self.logs / f"agent-{int(time.monotonic() * 1000)}.log"
        with self.agent_log.open("wb") as out:
            self.agent = subprocess.Popen([*self.ns.exec_prefix, "bash", "-c", "exec " + as_run(shown)], cwd=ROOT,
                                          env=shell_env(), stdout=out, stderr=subprocess.STDOUT)
        self.agent_command = command
        address = status_address(shown)
        deadline = time.monotonic() + 60
        while True:
            assert self.agent.poll() is None, f"{shown}: exited {self.agent.returncode}: {self.agent_log.read_text()}"
            if address is not None:
                probe = self.run(f"curl -sf http://{address}/readyz", timeout=10)
                if probe.returncode == 0:
                    return
            elif "ready:" in self.agent_log.read_text():
                return
            assert time.monotonic() < deadline, f"{shown}: not ready in 60s: {self.agent_log.read_text()}"
            time.sleep(0.2)

    def stop_agent(self) -> None:
        if self.agent is not None and self.agent.poll() is None:
            self.agent.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.agent.wait(0.3)
            if self.agent.poll() is None:
                self.agent.send_signal(signal.SIGTERM)  # the second signal cuts the lameduck short
            try:
                self.agent.wait(30)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait(5)
        self.agent = None
        self.agent_command = None

    def log(self) -> str:
        return self.agent_log.read_text() if self.agent_log is not None else ""

    def log_tail(self) -> str:
        return self.agent_log.read_text()[-1200:] if self.agent_log is not None else ""


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reader]:
    logs = tmp_path_factory.mktemp("doc-commands")
    with netns("docs", "nddc") as ns:
        etc = Path("/etc/netns") / ns.name
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "resolv.conf").write_text(f"nameserver {UPSTREAM}\n")
        with (logs / "upstream.log").open("wb") as out:
            upstream = subprocess.Popen(
                [*ns.exec_prefix, sys.executable, "-m", "tests.support.upstream_double", "--listen", f"{UPSTREAM}:53",
                 "--zone", json.dumps(UPSTREAM_ZONE)], cwd=ROOT, env=shell_env(), stdout=out,
                stderr=subprocess.STDOUT)
        r = Reader(ns, logs)
        try:
            deadline = time.monotonic() + 20
            while "serving on" not in (logs / "upstream.log").read_text():
                assert upstream.poll() is None and time.monotonic() < deadline, (logs / "upstream.log").read_text()
                time.sleep(0.1)
            yield r
        finally:
            r.stop_agent()
            upstream.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                upstream.wait(10)


def agent_for(cmd: DocCommand) -> str:
    """The agent a command runs against: the document's last `nodedns serve` before it (one that starts),
    else the README's quick-start agent."""
    agent = readme_serve()
    for c in COMMANDS:
        if c.path != cmd.path or c.line >= cmd.line:
            continue
        if is_serve(c.command) and c.exit == 0 and skip_reason(c) is None:
            agent = c.command
    return agent


def check_deploy(reader: Reader, cmd: DocCommand, directory: str) -> None:
    """What `kubectl apply -k DIR` would apply, rendered by kubectl alone: the agent's DaemonSet with a
    named image, its ConfigMap, its RBAC."""
    if shutil.which("kubectl") is None:
        assert not IN_CI, ".ci/run installs kubectl"
        pytest.skip(f"{cmd.where} `{cmd.command}`: kubectl is not installed (.ci/run installs it)")
    assert (ROOT / directory / "kustomization.yaml").is_file(), f"{cmd.where}: {directory} is no kustomization"
    r = reader.run(f"kubectl kustomize {shlex.quote(directory)}")
    assert r.returncode == 0, f"{cmd.where}: `kubectl kustomize {directory}` exited {r.returncode}:\n{r.stdout}"
    objects = [o for o in yaml.safe_load_all(r.stdout) if o]
    kinds = {o["kind"] for o in objects}
    assert {"DaemonSet", "ConfigMap", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} <= kinds, kinds
    ds = next(o for o in objects if o["kind"] == "DaemonSet")
    images = {c["image"] for c in ds["spec"]["template"]["spec"]["containers"]}
    # the `images:` block applied: a registry's name, not the bare `nodedns:0.1.0` of daemonset.yaml;
    # where the directory names the image itself, exactly that one
    assert images and all("/" in image for image in images), images
    block = (yaml.safe_load((ROOT / directory / "kustomization.yaml").read_text()) or {}).get("images") or []
    if block:
        assert images == {f"{i['newName']}:{i['newTag']}" for i in block}, (directory, images, block)


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.where for c in COMMANDS])
def test_the_command_runs_as_shown(reader: Reader, cmd: DocCommand) -> None:
    reason = skip_reason(cmd)
    if reason is not None:
        pytest.skip(f"{cmd.where} `{cmd.command}`: {reason}")
    if (directory := deploy_dir(cmd)) is not None:
        check_deploy(reader, cmd, directory)
        return
    if is_serve(cmd.command) and cmd.exit == 0:  # a `serve` shown to fail (a refused start) runs as any command
        reader.use_agent(cmd.command)  # asserts it becomes ready
        if cmd.output is not None:  # its log: the lines shown, in any order (its processes log side by side)
            deadline = time.monotonic() + 10
            while missing := [line for line in cmd.output if compare([line], reader.log())]:
                assert time.monotonic() < deadline, (f"{cmd.where}: `{cmd.command}`: shown but not in its log:\n  "
                                                     + "\n  ".join(missing) + f"\nlog:\n{reader.log()}")
                time.sleep(0.2)
        return
    reader.use_agent(agent_for(cmd))
    r = reader.run(cmd.command)
    got = r.stdout
    assert r.returncode == cmd.exit, (f"{cmd.where}: `{cmd.command}` exited {r.returncode}, the document says "
                                      f"{cmd.exit}:\n{got}\nagent log:\n{reader.log_tail()}")
    if cmd.output is not None:
        missing = compare(cmd.output, got)
        assert not missing, (f"{cmd.where}: `{cmd.command}`: shown but not in the output:\n  "
                             + "\n  ".join(missing) + f"\noutput:\n{got}")


def test_every_deploy_command_is_rendered_and_no_document_asks_for_kustomize_itself() -> None:
    deploys = [c for c in COMMANDS if deploy_dir(c) is not None]
    assert any(c.path == "README.md" for c in deploys) and any(c.path == "docs/node.md" for c in deploys)
    assert all(skip_reason(c) is None for c in deploys)
    # kubectl's built-in kustomize has no `edit`; the standalone kustomize is not what the docs install
    said = [f"{p.relative_to(ROOT)}" for p in DOCS if re.search(r"kustomize edit\b", p.read_text())]
    assert not said, said
