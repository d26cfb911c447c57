"""Test helpers: an agent running in a background uvloop thread, and a dnspython client for it.

    with running_agent({"manifests": "examples/cluster.yaml"}) as agent:
        r = agent.query("web.default.svc.cluster.local", "A")
        agent.call(lambda: agent.agent.index.apply("Service", "DELETED", svc))  # runs on the loop

Listeners bind 127.0.0.1 port 0 unless the config says otherwise, the HTTP listeners are off unless
the config names them ("status-listen" / "debug-listen": "127.0.0.1:0"); stopping skips the lameduck
unless the config sets one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rdatatype
import uvloop

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.app.parts import IndexOwner
from tests.support.ports import free_port as free_port  # each xdist worker from its own range

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cluster.yaml"
T = TypeVar("T")

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


class RunningAgent:
    """An Agent on its own uvloop event loop in a daemon thread."""

    def __init__(self, raw_config: Mapping[str, Any], agent_factory: Callable[[cfgmod.Config], Agent] = Agent):
        raw = dict(raw_config)
        raw.setdefault("listen", "127.0.0.1:0")
        raw.setdefault("status-listen", "none")
        raw.setdefault("debug-listen", "none")
        raw.setdefault("lameduck", "0s")  # stop at once unless a test is about the lameduck
        if not {"upstream", "upstream-resolv-conf", "upstream_resolv_conf"} & set(raw):
            raw["upstream"] = "none"  # not this machine's /etc/resolv.conf (the default): names outside are REFUSED
        self.config = cfgmod.build(raw, environ={})
        self.agent_factory = agent_factory
        self.agent: Agent
        self.loop: asyncio.AbstractEventLoop
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="agent", daemon=True)

    def _run(self) -> None:
        try:
            uvloop.run(self._main())
        except BaseException as exc:  # surfaced in start()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.agent = self.agent_factory(self.config)
        try:
            await self.agent.start()
        except BaseException:
            with contextlib.suppress(Exception):
                await self.agent.shutdown()
            raise
        self._ready.set()
        await self.agent.wait_stopped()
        await self.agent.shutdown()

    def start(self, timeout: float = 20.0) -> RunningAgent:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("agent did not start")
        if self._error is not None:
            raise self._error
        return self

    def stop(self, timeout: float = 20.0) -> None:
        if self._thread.is_alive() and self._error is None:
            self.loop.call_soon_threadsafe(self.agent.request_stop)
        self._thread.join(timeout)

    @property
    def host(self) -> str:
        return self.agent.server.bound[0][0]

    @property
    def port(self) -> int:
        return self.agent.server.bound[0][1]

    @property
    def status_url(self) -> str:
        """Base URL of the status endpoint (start the agent with "status-listen": "127.0.0.1:0")."""
        assert self.agent.status_server is not None, "started without status-listen"
        return self.agent.status_server.url

    @property
    def debug_url(self) -> str:
        """Base URL of the debug listener (start the agent with "debug-listen": "127.0.0.1:0")."""
        assert self.agent.status_server is not None, "started without status-listen or debug-listen"
        return self.agent.status_server.debug_url

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """Run fn() on the agent's loop thread and return its result."""

        async def wrapper() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(timeout)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def query(
        self,
        name: str,
        rdtype: str | int = "A",
        *,
        tcp: bool = False,
        edns: int | None = None,
        payload: int = 1232,
        dnssec: bool = False,
        rd: bool = True,
        timeout: float = 3.0,
    ) -> dns.message.Message:
        return query(self.host, self.port, name, rdtype, tcp=tcp, edns=edns, payload=payload, dnssec=dnssec,
                     rd=rd, timeout=timeout)

    def send_raw(self, data: bytes, *, timeout: float = 2.0) -> bytes | None:
        """Send raw bytes over UDP; the reply bytes, or None on timeout."""
        return send_raw_udp(self.host, self.port, data, timeout=timeout)


def query(
    host: str,
    port: int,
    name: str,
    rdtype: str | int = "A",
    *,
    tcp: bool = False,
    edns: int | None = None,
    payload: int = 1232,
    dnssec: bool = False,
    rd: bool = True,
    timeout: float = 3.0,
) -> dns.message.Message:
    msg = dns.message.make_query(name, rdtype, use_edns=edns, payload=payload, want_dnssec=dnssec)
    if not rd:
        msg.flags &= ~dns.flags.RD
    if tcp:
        return dns.query.tcp(msg, host, port=port, timeout=timeout)
    return dns.query.udp(msg, host, port=port, timeout=timeout, ignore_trailing=False)


def send_raw_udp(host: str, port: int, data: bytes, *, timeout: float = 2.0) -> bytes | None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(data, (host, port))
        try:
            return s.recv(65535)
        except TimeoutError:
            return None


@contextlib.contextmanager
def running_agent(raw_config: Mapping[str, Any], **kw: Any) -> Iterator[RunningAgent]:
    agent = RunningAgent(raw_config, **kw).start()
    try:
        yield agent
    finally:
        agent.stop()


def rrset_values(msg: dns.message.Message, section: str = "answer", rdtype: str | None = None) -> list[str]:
    """Sorted rdata texts in a section, optionally of one type."""
    out = []
    for rrset in getattr(msg, section):
        if rdtype is None or rrset.rdtype == dns.rdatatype.from_text(rdtype):
            out.extend(rd.to_text() for rd in rrset)
    return sorted(out)


def c_extension(module: str) -> Any:
    """The built C extension `module` (nodedns.serve._hitpath, nodedns.cluster._slim), or None where it is not
    built (no C compiler at install time). In CI (CI=true), which installs gcc, ImportError stands: the
    extension must be built and tested there."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        if IN_CI:
            raise
        return None


def require_c_extension(module: str) -> Any:
    """`c_extension(module)`, else the calling test module skipped (outside CI) with the reason."""
    import pytest

    found = c_extension(module)
    if found is None:
        pytest.skip(f"{module} is not built here (no C compiler at install time)", allow_module_level=True)
    return found


PROPAGATION_BOUND = 2.0  # seconds from an API change to the agent's answer (typically a few milliseconds)


def answer_of(agent: RunningAgent, name: str, rdtype: str = "A") -> tuple[str, list[str]]:
    """(rcode text, sorted answer rdata of `rdtype`) of the agent's answer to `name`."""
    r = agent.query(name, rdtype)
    return dns.rcode.to_text(r.rcode()), rrset_values(r, rdtype=rdtype)


def until_answer(agent: RunningAgent, name: str, expected: tuple[str, list[str]], rdtype: str = "A",
                 within: float = PROPAGATION_BOUND) -> float:
    """Poll until the answer is `expected`; the seconds it took (fails past `within`)."""
    started = time.monotonic()
    while True:
        got = answer_of(agent, name, rdtype)
        took = time.monotonic() - started
        if got == expected:
            return took
        if took > within:
            raise AssertionError(f"{name} {rdtype}: still {got}, expected {expected}")
        time.sleep(0.005)


def nodedns_cmd(*args: str) -> list[str]:
    """argv to run this checkout's nodedns in a subprocess (use with env=subprocess_env())."""
    import sys

    return [sys.executable, "-m", "nodedns", *args]


UPSTREAM_FLAGS = ("--upstream", "--upstream-resolv-conf", "--config")


def no_default_upstream(args: Sequence[str]) -> tuple[str, ...]:
    """`--upstream none` unless `args` name upstreams (or a config file that may): an agent a test starts
    then refuses names outside the cluster instead of forwarding them to this machine's /etc/resolv.conf
    (the default), whose servers a test cannot count on."""
    if any(a.split("=", 1)[0] in UPSTREAM_FLAGS for a in args):
        return ()
    return ("--upstream", "none")


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for nodedns subprocesses: this checkout first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def wait_for(predicate: Callable[[], object], timeout: float = 10.0, what: str = "the condition",
             interval: float = 0.02) -> float:
    """Poll `predicate` until it returns something true; the seconds that took. Fails (AssertionError,
    naming `what`) after `timeout`. An OSError raised by the predicate counts as "not yet" (a listener
    that is not open yet), and so does a DNS query that timed out (a worker still starting); any other
    exception propagates. Tests wait for a state this way, never with
    a fixed sleep."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        try:
            if predicate():
                return time.monotonic() - started
        except (OSError, dns.exception.Timeout):
            pass
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not reached within {timeout:g}s")
        time.sleep(interval)


def agent_with_timing(timing: Any) -> Callable[[cfgmod.Config], Agent]:
    """An agent factory for running_agent(agent_factory=...): an Agent whose API sync runs on `timing` (a
    kube.Timing with the back-offs tests shorten)."""
    def make(config: cfgmod.Config) -> Agent:
        # the agent takes the relist window from its config (--kube-relist-spread): the timing's, for the test
        agent = Agent(dataclasses.replace(config, kube_relist_spread=timing.relist_spread))
        assert isinstance(agent.source, IndexOwner)
        agent.source.kube_timing = timing
        return agent
    return make


def load_script(name: str) -> ModuleType:
    """A command of scripts/ (no .py suffix: scripts/remeasure, scripts/bench-http-flood, ...) imported as a module,
    named with underscores for dashes and found under that name in sys.modules (dataclasses look it up there)."""
    module_name = name.replace("-", "_")
    loader = SourceFileLoader(module_name, str(ROOT / "scripts" / name))
    spec = importlib.util.spec_from_loader(module_name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    loader.exec_module(module)
    return module
