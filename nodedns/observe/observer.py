"""The agent's view of itself: liveness, readiness, the /status document and the metrics scrape.

`Observer` reads the running parts (listeners, index, stored answers) and the registered providers
(see metrics.py for the provider contract) on the event loop, when asked: nothing here runs per
query. The status HTTP server (status.py) and the metrics Collector call it.

Readiness (/readyz 200) is the Agent's `ready()` (listeners serving, index synced, the interface
holding the local IPs, no shutdown under way: SIGTERM starts it, the lameduck keeps answering while
unready) plus any provider's `unready` reasons; a provider's `warnings` (wrong but not a reason to stop
answering) leave it ready and are said beside it. Liveness (/healthz) is the Agent's `live()`: the
listeners have not died while they should be serving.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from nodedns import __version__
from nodedns.cluster.index import Index
from nodedns.config import Config
from nodedns.metrics.counters import ClusterCacheStats, Histogram, ListenerStats, Scrape, answer_totals, totals
from nodedns.metrics.registry import registry, render
from nodedns.metrics.slots import Slots
from nodedns.observe.history import Reading
from nodedns.runtime import logutil
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.server import DNSServer

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

# the entries of the hot dict by kind (a gauge) are counted by walking it: at every scrape while it is
# small, at most every ENTRIES_PERIOD seconds once it is large (a worker publishes every second)
ENTRIES_EXACT = 4096
ENTRIES_PERIOD = 10.0
UNUSABLE_SHOWN = 20  # Services with an unusable externalName listed by name in /status (all are counted)

# What /status says for a section no provider fills, in words a newcomer understands (the status
# page shows them as they are).
ABSENT: dict[str, str] = {
    "sync": "not used: the cluster objects come from a manifest file (--manifests), not from the Kubernetes API",
    "cache": "no upstream configured: names outside the cluster are refused, so nothing is cached",
    "upstream": "no upstream configured: names outside the cluster are refused",
    "node": "not managed: this agent adds no network interface and no firewall rules (--setup-interface, "
            "--firewall)",
}


class Provider(Protocol):
    """A part that reports its state: a JSON-able mapping, cheap, no I/O (see metrics.py)."""

    def status(self) -> Mapping[str, Any]: ...


class Parts(Protocol):
    """What the Observer reads from the Agent."""

    config: Config
    index: Index
    server: DNSServer
    cluster_answers: ClusterAnswers
    slots: Slots
    state: str

    @property
    def source_info(self) -> dict[str, Any]: ...

    def live(self) -> tuple[bool, list[str]]: ...

    def ready(self) -> tuple[bool, list[str]]: ...

    def node_state(self) -> Mapping[str, Any] | None: ...


class Observer:
    """Liveness, readiness, status and metrics of one agent."""

    def __init__(self, parts: Parts, *, clock: Callable[[], float] = time.time) -> None:
        self.parts = parts
        self.providers: dict[str, Provider] = {}
        self.clock = clock
        self.started = clock()
        self.stopping = False
        self._registry: CollectorRegistry | None = None  # at the first /metrics: workers never load prometheus_client
        self._entries: tuple[float, list[int]] = (-1e9, [0, 0])  # (when, [success, denial]) of a large hot dict

    @property
    def registry(self) -> CollectorRegistry:
        if self._registry is None:
            self._registry = registry(self.scrape)
        return self._registry

    def add_provider(self, section: str, provider: Provider) -> None:
        self.providers[section] = provider

    async def refresh(self) -> None:
        """Before a scrape or /status: bring in counters kept elsewhere (the --workers supervisor asks its
        workers); nothing to do for a single agent."""

    # -- health ----------------------------------------------------------------------------

    def liveness(self) -> list[str]:
        """Why the agent is not alive (empty: alive)."""
        return self.parts.live()[1]

    def section(self, name: str) -> Mapping[str, Any] | None:
        """One section of /status as it is now (a --workers supervisor's: the workers' counts in it)."""
        return self._sections().get(name)

    def _sections(self) -> dict[str, Mapping[str, Any]]:
        out: dict[str, Mapping[str, Any]] = {}
        node = self.parts.node_state()  # interface and firewall, when the agent manages them
        if node is not None:
            out["node"] = node
        for section, provider in self.providers.items():
            try:
                out[section] = provider.status()
            except Exception as exc:  # noqa: BLE001 - one broken part must not take /status down
                _provider_errors.report(f"{section}: {exc.__class__.__name__}: {exc}")
                out[section] = {"error": f"{exc.__class__.__name__}: {exc}",
                                "unready": [f"{section}: status unavailable"]}
        return out

    def readiness(self, sections: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
        """Why the agent is not ready (empty: ready)."""
        reasons = list(self.parts.ready()[1])
        if self.stopping and "shutting down" not in reasons:
            reasons.insert(0, "shutting down")  # SIGTERM received, shutdown() not begun yet
        for section, st in (self._sections() if sections is None else sections).items():
            unready = st.get("unready")
            if isinstance(unready, list | tuple):
                reasons.extend(f"{section}: {r}" for r in unready)
        return reasons

    def warnings(self, sections: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
        """What is wrong but does not make the agent unready (a part's `warnings`): /readyz still says
        200, with them; /status and the status page show them."""
        out: list[str] = []
        for section, st in (self._sections() if sections is None else sections).items():
            said = st.get("warnings")
            if isinstance(said, list | tuple):
                out.extend(f"{section}: {w}" for w in said)
        return out

    # -- the scrape ------------------------------------------------------------------------

    def _cluster_cache(self) -> ClusterCacheStats:
        p = self.parts
        labels = p.slots.labels
        table = p.cluster_answers.hot.view
        when, entries = self._entries
        now = self.clock()
        if len(table) < ENTRIES_EXACT or now - when >= ENTRIES_PERIOD:  # a walk over the table: not every second
            entries = [0, 0]
            for w in table.values():
                slot = w[0]
                entries[1 if slot < len(labels) and labels[slot].denial else 0] += 1
            self._entries = (now, entries)
        hits = [0, 0]
        sources = [ls.udp_hit for ls in p.server.stats] + [p.cluster_answers.hits]
        for counts in sources:
            for slot, n in enumerate(counts):
                if n:
                    hits[1 if slot < len(labels) and labels[slot].denial else 0] += n
        zones = ",".join(z for z in (f"{p.config.cluster_domain}.", "in-addr.arpa.", "ip6.arpa."))
        return ClusterCacheStats(
            zones=zones,
            entries_success=entries[0],
            entries_denial=entries[1],
            hits_success=hits[0],
            hits_denial=hits[1],
            misses=p.cluster_answers.misses,
            evictions=p.cluster_answers.evictions,
            clears=p.cluster_answers.clears,
            bytes=p.cluster_answers.bytes,
            max_bytes=p.cluster_answers.max_bytes,
            too_large=p.cluster_answers.too_large,
        )

    def _index(self) -> dict[str, Any]:
        ix = self.parts.index
        return {
            "synced": ix.synced,
            "generation": ix.generation,
            "counts": ix.counts(),
            "skipped": ix.skipped,
            "seconds_since_change": round(max(0.0, self.clock() - ix.last_change), 3),
            # names from the API the wire cannot carry: the objects are kept, answering without them
            "unusable_names": {"spec.externalName": len(ix.unusable)},
            "unusable": [{"service": f"{ns}/{name}", "reason": reason}
                         for (ns, name), reason in itertools.islice(ix.unusable.items(), UNUSABLE_SHOWN)],
        }

    def scrape(self, sections: Mapping[str, Mapping[str, Any]] | None = None) -> Scrape:
        sections = self._sections() if sections is None else sections
        p = self.parts
        return Scrape(
            version=__version__,
            slots=p.slots,
            listeners=list(p.server.stats),
            alive=not self.liveness(),
            ready=not self.readiness(sections),
            index=self._index(),
            cluster_cache=self._cluster_cache(),
            panics=p.server.panics,
            errors=logutil.error_totals(),
            sections=sections,
        )

    def metrics(self) -> bytes:
        return render(self.registry)

    # -- the history (nodedns.observe.history) -----------------------------------------------------

    def _answers(self) -> tuple[list[ListenerStats], int, int]:
        """(listener counters, answers sent from a stored answer, stored answers built): this process's."""
        p = self.parts
        listeners = list(p.server.stats)
        hit_path = sum(sum(ls.udp_hit) for ls in listeners)
        return listeners, hit_path + sum(p.cluster_answers.hits), p.cluster_answers.misses

    def reading(self) -> Reading:
        """The cumulative counters the history samples every few seconds: the answer counters the
        listeners keep, the stored answers' and the forward cache's counts, the upstreams' health.
        Cheap (no walk over the stored answers), on the event loop, never per query."""
        listeners, from_memory, built = self._answers()
        sections = self._sections()
        t = answer_totals(self.parts.slots, listeners)
        timed = Histogram()
        for ls in listeners:
            for h in ls.latency.values():
                timed.merge(h)
        forwarded = 0
        cache = sections.get("cache", {})
        for c in cache.get("caches", ()) if isinstance(cache, Mapping) else ():
            if isinstance(c, Mapping) and isinstance(c.get("misses"), int):
                forwarded += c["misses"]  # asked of an upstream (the forward cache's hits are in from_memory)
        upstreams: list[tuple[str, bool]] = []
        up = sections.get("upstream", {})
        for u in up.get("upstreams", ()) if isinstance(up, Mapping) else ():
            if isinstance(u, Mapping):
                zone = u.get("zone", ".")
                name = str(u.get("to", "?")) + ("" if zone in (".", "", None) else f" ({zone})")
                upstreams.append((name, bool(u.get("healthy"))))
        return Reading(
            queries=t.total,
            rcodes=t.by_rcode,
            from_memory=from_memory,
            worked_out=built + forwarded,
            timed=tuple(timed.counts),
            hit_path=sum(sum(ls.udp_hit) for ls in listeners),
            upstreams=tuple(upstreams),
            paths=t.by_path,
        )

    # -- /status ---------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        sections = self._sections()
        s = self.scrape(sections)
        p = self.parts
        t = totals(s)
        hit_path = sum(sum(ls.udp_hit) for ls in s.listeners)
        cc = s.cluster_cache
        assert cc is not None
        cc_hits = cc.hits_success + cc.hits_denial
        latency: dict[str, Histogram] = {}
        for ls in s.listeners:
            for zone, h in ls.latency.items():
                latency.setdefault(zone, Histogram()).merge(h)
        unready = self.readiness(sections)
        out: dict[str, Any] = {
            "version": __version__,
            "state": "stopping" if self.stopping and p.state == "running" else p.state,
            "ready": not unready,
            "unready": unready,
            "warnings": self.warnings(sections),
            "alive": s.alive,
            "uptime_seconds": round(self.clock() - self.started, 3),
            "config": p.config.public_dict(),
            "listeners": [
                {"server": ls.server, "family": "ipv6" if ls.family == "2" else "ipv4", "tcp_open": ls.tcp_open,
                 "tcp_accepted": ls.tcp_accepted, "tcp_refused": ls.tcp_refused,
                 "tcp_refused_per_client": ls.tcp_refused_client, "tcp_aborted_not_reading": ls.tcp_aborted_unread,
                 "tcp_aborted_owed": ls.tcp_aborted_owed, "tcp_aborted_evicted": ls.tcp_aborted_evicted}
                for ls in s.listeners
            ],
            "queries": {
                "total": t.total,
                "hit_path": hit_path,
                "by_proto": t.by_proto,
                "by_rcode": dict(sorted(t.by_rcode.items())),
                "by_type": dict(sorted(t.by_type.items())),
                "by_path": dict(sorted(t.by_path.items())),
                "panics": s.panics,
            },
            "latency": {zone: h.summary() for zone, h in sorted(latency.items())},
            "index": s.index,
            "source": p.source_info,
            "cluster_answers": {
                "entries": cc.entries_success + cc.entries_denial,
                "entries_success": cc.entries_success,
                "entries_denial": cc.entries_denial,
                "hits": cc_hits,
                "misses": cc.misses,
                "hit_ratio": round(cc_hits / (cc_hits + cc.misses), 4) if cc_hits + cc.misses else None,
                "evictions": cc.evictions,
                "clears": cc.clears,
                # the byte budget (the cluster share of --cache-max-bytes): stored answers, hot and aside
                "bytes": cc.bytes,
                "max_bytes": cc.max_bytes,
                "too_large": cc.too_large,
            },
            "errors": s.errors,
        }
        for section, note in ABSENT.items():
            out[section] = dict(sections[section]) if section in sections else {"present": False, "note": note}
        for section, st in sections.items():
            if section not in out:
                out[section] = dict(st)
        return out


_provider_errors = logutil.Consolidated(logging.getLogger("nodedns.observe"), "status provider error")
