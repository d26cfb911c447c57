"""The agent's HTTP listeners: status (/healthz, /readyz, /metrics) and debug (/status, the explainer, the
page, /debug/*, /v1/resolv-conf).

Opened right after the DNS listeners (so the probes answer during the sync), closed last. A failure to
listen on the status port stops the start (an agent that manages the node waits HOLDER_WAIT seconds for
node-cache's terminating Pod to let the port go); one on the debug port is a warning. In a hand-over they
close when a newer agent serves (`yield_status`) and open again when it is gone (`take_back_status`).
With a debug listener the counters are sampled into the status page's history. aiohttp is imported where
used, so workers never load it.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from nodedns.app.poddns import PodDns
from nodedns.app.succession import HOLDER_POLL
from nodedns.config import Config, Endpoint, HostPort, endpoint_text
from nodedns.errors import ListenError, listen_reason
from nodedns.node import handover
from nodedns.observe.explain import Explainer
from nodedns.observe.history import History
from nodedns.observe.insightfeed import InsightFeed
from nodedns.observe.observer import Observer, Provider
from nodedns.podconf.resolvhttp import handle_http
from nodedns.runtime import logutil
from nodedns.runtime.tasks import Tasks

if TYPE_CHECKING:  # imported where used: --workers processes never load aiohttp
    from nodedns.observe.httpgate import HttpLimits
    from nodedns.observe.status import StatusServer

log = logging.getLogger("nodedns.app")  # the name every log line of the agent has had
_history_errors = logutil.Consolidated(log, "history sample error")

TAKE_BACK_TRIES = 10  # a superseded agent whose successor died: attempts to listen on the status port again


class Host(Protocol):
    """What the HTTP listeners read of the agent (a mode may replace `status_server_of`)."""

    config: Config
    handover: handover.Handover | None
    observer: Observer
    explainer: Explainer
    history: History
    http_limits: HttpLimits | None
    insight_feed: InsightFeed
    pod_dns: PodDns
    status_server_of: Callable[[], StatusServer]
    HOLDER_WAIT: float
    _tasks: Tasks

    def add_provider(self, section: str, provider: Provider) -> None: ...

    def stopping_now(self) -> bool: ...



class HttpListeners:
    """The status and debug listeners of one agent; `server` while they are open."""

    def __init__(self, agent: Host) -> None:
        self.agent = agent
        self.server: StatusServer | None = None
        self._sampling = False  # the history task runs

    def routes(self) -> StatusServer:
        """The HTTP routes this agent serves (its listeners are opened by `start`)."""
        from nodedns.observe.status import StatusServer

        agent = self.agent
        pod_dns = agent.pod_dns
        settings = pod_dns.kubelet or pod_dns.kubelet_dns()
        return StatusServer(
            agent.observer,
            explainer=agent.explainer,
            top=agent.insight_feed.document,
            debug=not agent.config.no_debug,
            # the host file's text as it is now (re-read as it changes)
            body_routes={"/v1/resolv-conf":
                         lambda body: handle_http(body, settings, pod_dns.host_text)},
            limits=agent.http_limits,
            history=agent.history,
        )

    async def start(self) -> None:
        """The status listener (probes, scrapes: a failure to listen stops the start) and the debug
        listener (operators: a failure is logged and the agent serves DNS without it)."""
        agent = self.agent
        cfg = agent.config
        if cfg.status_listen is None and cfg.debug_listen is None:
            return
        from nodedns.observe.status import DEBUG

        server = agent.status_server_of()
        reuse = agent.handover is not None  # shared with a successor
        try:
            if cfg.status_listen is not None:
                await self._listen_status(server, cfg.status_listen, reuse_port=reuse)
            if cfg.debug_listen is not None:
                try:
                    await server.listen(DEBUG, cfg.debug_listen, reuse_port=reuse)
                except OSError as exc:
                    server.failed(DEBUG, cfg.debug_listen, str(exc))
                    log.warning("%s", debug_listen_warning(cfg.debug_listen, exc))
        except BaseException:
            await server.stop()
            raise
        self.server = server
        agent.add_provider("http", server)
        if cfg.debug_listen is not None and not self._sampling:
            self._sampling = True  # once: a status server opened again (a hand-over taken back) needs no second
            agent._tasks.spawn(self._sample_history(), "history")

    async def _listen_status(self, server: StatusServer, where: HostPort, *, reuse_port: bool) -> None:
        """The status listener, or ListenError. An agent that manages the node's interface gives a port in use
        HOLDER_WAIT seconds to come free (node-cache's metrics on 9253, its Pod still terminating)."""
        from nodedns.observe.status import STATUS

        agent = self.agent
        loop = asyncio.get_running_loop()
        started = loop.time()
        said = False
        while True:
            try:
                await server.listen(STATUS, where, reuse_port=reuse_port)
                break
            except OSError as exc:
                waiting = loop.time() - started < agent.HOLDER_WAIT and not agent.stopping_now()
                if exc.errno != errno.EADDRINUSE or agent.config.setup_interface is None or not waiting:
                    raise ListenError("--status-listen", endpoint_text(where), exc) from None
                if not said:
                    log.warning("status listener: --status-listen %s is in use by another process (node-cache's "
                                "metrics, its Pod still terminating?): waiting up to %gs for it to come free",
                                endpoint_text(where), agent.HOLDER_WAIT)
                    said = True
                await asyncio.sleep(HOLDER_POLL)
        if said:
            log.info("status listener: %s came free after %.1fs", endpoint_text(where), loop.time() - started)

    async def _sample_history(self) -> None:
        """Every few seconds, the agent's counters into the history the status page draws (the
        --workers supervisor: its workers' counters, summed). Off the DNS path: it reads counters."""
        agent = self.agent
        history = agent.history
        while True:
            try:
                await agent.observer.refresh()
                history.add(agent.observer.reading())
            except Exception as exc:  # noqa: BLE001 - a broken sample costs its point, not the charts
                _history_errors.report(exc)
            await asyncio.sleep(history.interval)

    async def yield_status(self) -> None:
        """A newer agent serves beside us: let the shared status and debug ports reach it (probes, scrapes,
        operators)."""
        if self.server is not None:
            log.info("hand-over: the newer agent serves; closing our status and debug listeners so probes, "
                     "scrapes and operators reach it")
            server, self.server = self.server, None
            await server.stop()

    async def take_back_status(self) -> None:
        """The newer agent that took the shared status port over serves no more (killed, gone): listen on it
        again, so the kubelet's probes and the scrapes reach this agent, which serves. Tried for a while;
        without it the liveness probe fails and the kubelet restarts this Pod, which is the fallback."""
        if self.server is not None or self.agent.stopping_now():
            return
        for attempt in range(TAKE_BACK_TRIES):
            try:
                await self.start()
            except OSError as exc:
                log.error("hand-over: cannot listen on the status port again (%s); trying again (%d of %d)", exc,
                          attempt + 1, TAKE_BACK_TRIES)
                await asyncio.sleep(1.0)
                continue
            log.info("hand-over: status and debug listeners open again")
            return

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()


def debug_listen_warning(where: Endpoint, exc: OSError) -> str:
    """The warning for a debug listener that cannot listen: the flag, the URL, and what follows for
    `nodedns lookup`/`explain`/`top`, which look there by default."""
    text = endpoint_text(where)
    url = text if text.startswith("unix:") else f"http://{text}"
    return (f"debug listener: --debug-listen {url}: {listen_reason('--debug-listen', text, exc)}. This agent serves "
            f"DNS without it (no /, /status, /debug/*, /v1/resolv-conf); nodedns lookup, explain and top that "
            f"reach {url} talk to whatever listens there, not to this agent (each answer names the agent it "
            f"came from)")
