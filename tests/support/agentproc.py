"""`nodedns serve` as a subprocess, for tests that measure it from outside: its memory, its log, its /metrics.

    with AgentProcess(["--manifests", EXAMPLE], log=tmp_path / "agent.log") as agent:
        agent.wait_ready()
        agent.rss_kib(); agent.metric("coredns_panics_total"); agent.log_text()

DNS on 127.0.0.1:`agent.port` (UDP and TCP), status on 127.0.0.1:`agent.status_port`, debug on
127.0.0.1:`agent.debug_port`. Every wait is
bounded; stopping sends SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from tests.support.helpers import free_port, no_default_upstream, nodedns_cmd, subprocess_env


def proc_kib(pid: int, field: str) -> int:
    """A `/proc/PID/status` memory field (VmRSS, VmHWM) in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    m = re.search(rf"^{field}:\s+(\d+) kB", status, re.M)
    assert m is not None, f"no {field} in /proc/{pid}/status"
    return int(m.group(1))


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in Prometheus text (labels must match exactly those given; None: absent)."""
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        base, _, rest = head.partition("{")
        if base != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', rest))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(value)
    return None


class AgentProcess:
    """One `nodedns serve` subprocess on 127.0.0.1 (DNS and status on free ports)."""

    def __init__(self, args: list[str], *, log: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.status_port = free_port()
        self.debug_port = free_port()
        self.log = log
        self.args = ["serve", "--listen", f"127.0.0.1:{self.port}", "--status-listen",
                     f"127.0.0.1:{self.status_port}", "--debug-listen", f"127.0.0.1:{self.debug_port}",
                     "--lameduck", "0s", *no_default_upstream(args), *args]
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> AgentProcess:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(nodedns_cmd(*self.args), env=subprocess_env(), stdout=out,
                                         stderr=subprocess.STDOUT)
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """(HTTP status, body) of a route: /healthz, /readyz, /metrics on the status listener, the rest
        on the debug listener."""
        port = self.status_port if path.split("?")[0] in ("/healthz", "/readyz", "/metrics") else self.debug_port
        url = f"http://127.0.0.1:{port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - our own loopback URL
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.alive(), f"the agent exited: {self.log_text()[-2000:]}"
            with contextlib.suppress(OSError):
                if self.get("/readyz", timeout=1.0)[0] == 200:
                    return
            assert time.monotonic() < deadline, f"not ready in {timeout}s: {self.log_text()[-2000:]}"
            time.sleep(0.05)

    def metrics(self) -> str:
        return self.get("/metrics")[1]

    def metric(self, name: str, **labels: str) -> float | None:
        return metric_value(self.metrics(), name, **labels)

    def rss_kib(self) -> int:
        return proc_kib(self.pid, "VmRSS")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, grace: float = 10.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode
