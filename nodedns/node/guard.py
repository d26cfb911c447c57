"""`nodedns guard`: the fallback that survives the agent: when nothing answers on the local IPs, give them back.

With the node-cache arrangement (`--local-ip 169.254.20.10,<kube-dns ClusterIP>`, both on the agent's
interface, both NOTRACK'd) the agent's addresses and rules are what steer the Pods' DNS to it. An
agent that is killed (SIGKILL, the OOM killer) or hangs leaves them in place, and nothing answers:
a black hole. The guard is a small separate process (its own container in the DaemonSet Pod, its
own memory limit; it loads neither the index nor the Kubernetes client) that asks every local IP
for `--probe-name` (TXT, `dns-version.<zone>` by default) every `--probe-interval`, and

    armed      (it has seen the agent answer on every local IP `--failures` rounds in a row)
               a round in which some local IP does not answer (no reply within the interval,
               refused, SERVFAIL/REFUSED) counts; one that answers everywhere resets the count;
               `--failures` failed rounds in a row: the conntrack-bypass rules are removed
               (every rule with our comment, or `table inet nodedns`), then the local IPs are
               taken off the interface (the link stays). kube-proxy's DNAT of the kube-dns
               ClusterIP applies again: Pods resolve through the cluster DNS Service. -> waiting
    waiting    (at its own start, and after a fallback) it never acts: it waits until the agent
               answers on every local IP `--failures` rounds in a row -> armed

Why it never fights a live agent: it acts only on failed probes, only after that many in a row,
and only once it has seen the agent answer (so an agent that is starting, absent, or has not put
the addresses back yet is left alone). Hysteresis: as many good rounds as failures are needed to
arm again. Putting the addresses and rules back is not the guard's job: the agent's reconcile loop
notices within a second that its local IPs are gone and restores them once a query to them is
answered (a hung agent that wakes up, a restarted one at its start), and the guard arms again.

How it probes once the IPs are gone: it does not need to: after a fallback it only waits for the
agent's answers on the restored addresses. While they are gone, the ClusterIP is answered by the
cluster DNS through kube-proxy (a probe counts as an answer, which is the truth: DNS works there)
and the link-local address by nobody; neither arms the guard alone, since every local IP must
answer. An agent that puts its addresses back but does not answer (its listeners dead, its
workers hung) never gets its rules back from its own loop (it asks first), so there is nothing
to take away again.

It survives its own errors: a failing round (netlink, a missing iptables) is logged and the next
one runs. SIGTERM/SIGINT end it (exit 0) once there is nothing to guard: at once when it is not
armed or the last round was answered (the agent in its lameduck, or a successor, answers), else
after the rounds that decide (a Pod deleted while its agent hangs still falls back first); a
second signal ends it at once.
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
