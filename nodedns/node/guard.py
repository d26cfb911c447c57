"""`nodedns guard`: the fallback that survives the agent: when nothing answers on the local IPs, give them back.

`Guard` asks every local IP for `--probe-name` each `--probe-interval`. Waiting (at its start and after a
fallback) it never acts; armed once the agent answered on every local IP `--failures` rounds in a row, it
falls back after `--failures` rounds in a row in which some local IP did not answer: the conntrack-bypass
rules removed, then the local IPs taken off the interface (the link stays), so kube-proxy's DNAT sends the
Pods to the cluster DNS again. Putting them back is the agent's reconcile loop's job. A failing round is
logged and the next one runs; SIGTERM ends it once there is nothing to guard, a second signal at once.
It imports neither the index nor the Kubernetes client. Why it never fights a live agent: docs/node.md
"When the agent dies: `nodedns guard`".
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from nodedns.errors import NetifError
from nodedns.node.netif import HostPort, probe_all, where
from nodedns.runtime.logutil import Consolidated

log = logging.getLogger("nodedns.guard")
errors = Consolidated(log, "guard error")

DNS_PORT = 53

Prober = Callable[[Sequence[HostPort], str], Awaitable[list[tuple[HostPort, str]]]]
Report = tuple[list[str], list[NetifError]]


class Addresses(Protocol):
    """The interface side (nodedns.node.netif.Link): take the local IPs off it."""

    name: str

    def remove_addresses(self) -> Report: ...


class Rules(Protocol):
    """The conntrack-bypass rules (nodedns.node.firewall.*Firewall): remove ours."""

    kind: str

    def remove(self, *, retry: bool = True) -> Report: ...


class Guard:
    """The probe rounds and the decision (see the module docstring); `run()` until told to stop."""

    def __init__(
        self,
        *,
        link: Addresses,
        rules: Rules | None,
        local_ips: Sequence[str],
        probe_name: str,
        interval: float = 0.5,
        failures: int = 3,
        port: int = DNS_PORT,
        prober: Prober | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.link = link
        self.rules = rules
        self.targets: tuple[HostPort, ...] = tuple((ip, port) for ip in local_ips)
        self.probe_name = probe_name
        self.interval = interval
        self.failures = failures
        self.wait = max(interval, 0.1)  # a probe's answer is due before the next round
        self.prober = prober or self._probe
        self.clock = clock
        self.armed = False
        self.answered = 0  # rounds in a row in which every local IP answered
        self.unanswered = 0  # rounds in a row in which some local IP did not
        self.fallbacks = 0
        self.retried = False  # the last fallback was incomplete and has been tried once more
        self.forced = False
        self._stop = asyncio.Event()

    async def _probe(self, targets: Sequence[HostPort], qname: str) -> list[tuple[HostPort, str]]:
        return await probe_all(targets, qname, wait=self.wait)

    # -- one round -------------------------------------------------------------------------

    async def round(self) -> None:
        failed = await self.prober(self.targets, self.probe_name)
        if not failed:
            self.unanswered = 0
            self.answered += 1
            if not self.armed and self.answered >= self.failures:
                self.armed = True
                log.info("the agent answers on %s: guarding (falling back after %d unanswered rounds in a row)",
                         ", ".join(where(t) for t in self.targets), self.failures)
            return
        self.answered = 0
        self.unanswered += 1
        why = "; ".join(f"{where(t)}: {reason}" for t, reason in failed)
        if not self.armed:
            log.debug("not armed (the agent has not answered yet): %s", why)
            return
        if self.unanswered < self.failures:
            log.warning("no answer (%d of %d before falling back): %s", self.unanswered, self.failures, why)
            return
        await self.fall_back(why)

    async def fall_back(self, why: str) -> None:
        """Remove the rules (capture ends: kube-proxy's DNAT applies again), then the addresses."""
        self.armed = False
        self.unanswered = 0
        self.fallbacks += 1
        started = self.clock()
        removed: list[str] = []
        failed: list[NetifError] = []
        steps: list[Callable[[], Report]] = [self.link.remove_addresses]
        if self.rules is not None:
            steps.insert(0, self.rules.remove)
        for step in steps:
            done, errs = await asyncio.to_thread(step)
            removed += done
            failed += errs
        log.error("the agent did not answer %d rounds in a row (%s): fell back to the cluster DNS in %.0f ms: "
                  "removed %s. The agent puts them back once it answers again", self.failures, why,
                  1000 * (self.clock() - started), _summary(removed))
        if failed:
            again = not self.retried  # what is left may still capture: once more on the next failures
            log.error("the fallback is incomplete%s: %s", f", trying again after the next {self.failures} "
                      "unanswered rounds" if again else "", "; ".join(f"{e.cause}: {e.reason}" for e in failed))
            self.armed = self.retried = again
        else:
            self.retried = False

    # -- the loop --------------------------------------------------------------------------

    def stop(self) -> None:
        """SIGTERM: leave once there is nothing to guard (not armed, or the last round answered); a second
        signal: at once. So a Pod being deleted while its agent hangs still falls back first."""
        if self._stop.is_set():
            self.forced = True
        self._stop.set()

    def done(self) -> bool:
        if not self._stop.is_set():
            return False
        return self.forced or not self.armed or self.unanswered == 0

    async def run(self) -> None:
        log.info("probing %s for %s every %gs; waiting for the agent to answer", ", ".join(
            where(t) for t in self.targets), self.probe_name, self.interval)
        while True:
            started = self.clock()
            try:
                await self.round()
            except Exception as exc:  # noqa: BLE001 - the guard outlives its own bugs: next round
                errors.report(f"{exc.__class__.__name__}: {exc}")
            if self.done():
                return
            left = self.interval - (self.clock() - started)
            if left > 0 and not self._stop.is_set():
                try:
                    await asyncio.wait_for(self._stop.wait(), left)
                except TimeoutError:
                    pass
            elif left > 0:
                await asyncio.sleep(left)


def _summary(items: list[str]) -> str:
    if not items:
        return "nothing (already gone)"
    rules = [i for i in items if not i.startswith("removed address")]
    addresses = [i.removeprefix("removed address ").split(" from ")[0] for i in items
                 if i.startswith("removed address")]
    parts = []
    if rules:
        parts.append(rules[0] if len(rules) == 1 else f"{len(rules)} rules")
    if addresses:
        parts.append("addresses " + ", ".join(addresses))
    return " and ".join(parts)


def hangup() -> None:
    """SIGHUP: nothing is re-read (the guard reads its flags and --config once): said in one line, and it guards
    on."""
    log.info("SIGHUP: ignored (the guard reads its flags and --config file once; a change takes a restart)")


async def main(guard: Guard) -> int:
    """Run until SIGTERM/SIGINT; the exit code."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, guard.stop)
    loop.add_signal_handler(signal.SIGHUP, hangup)
    await guard.run()
    log.info("stopped (fell back %d times)", guard.fallbacks)
    return 0
