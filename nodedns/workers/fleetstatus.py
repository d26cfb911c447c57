"""What /status and /metrics show of a --workers supervisor: its own parts plus its workers' counters.

`FleetObserver` sums the counters each worker published last (`aggregate.merge`; at most a second old:
a scrape costs the workers nothing) into the supervisor's sections; `worker_limits` keeps the "limits"
settings the supervisor's; `WorkersReport` is the "workers" section (each worker's pid, restarts, CPU and
memory).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from nodedns import __version__
from nodedns.app.agent import Agent
from nodedns.metrics import aggregate
from nodedns.metrics.counters import ListenerStats, Scrape
from nodedns.observe.observer import Observer
from nodedns.runtime import logutil
from nodedns.workers.supervisor import RESTART_REASONS, Fleet


class FleetObserver(Observer):
    """/metrics and /status of the supervisor: its own parts plus the sum of the counters its workers
    published last (at most a second old: a scrape costs the workers nothing)."""

    def __init__(self, agent: Agent, fleet: Fleet) -> None:
        super().__init__(agent)
        self.fleet = fleet

    def _totals(self) -> aggregate.Totals:
        fleet = self.fleet
        scrapes = [w.scrape for w in fleet.workers.values() if w.scrape is not None]
        if fleet.retired is not None:
            scrapes.append(fleet.retired)
        return aggregate.merge(fleet.agent.slots, scrapes)

    def _answers(self) -> tuple[list[ListenerStats], int, int]:
        t = self._totals()
        cc = t.cluster_cache
        if cc is None:
            return list(t.listeners), 0, 0
        return list(t.listeners), cc.hits_success + cc.hits_denial, cc.misses

    def _sections(self) -> dict[str, Mapping[str, Any]]:
        out = super()._sections()  # the supervisor's own: sync, node, handover, workers, limits (settings)
        for name, section in self._totals().sections.items():  # the workers': cache, upstream, autopath, ...
            if name == "limits" and name in out:
                out[name] = worker_limits(out[name], section)
            elif name == "filter_aaaa" and name in out:  # the supervisor decides; the workers answer (count)
                out[name] = {**out[name], "filtered": section.get("filtered", 0)}
            elif name == "hosts" and name in out:  # each process reads the files; the workers answer (count)
                out[name] = {**out[name], "answers": section.get("answers", 0)}
            elif name == "policy" and name in out:  # the supervisor's book; the workers decide (count)
                out[name] = {**out[name], "decisions": section.get("decisions", []),
                             "denied": section.get("denied", [])}
            elif name == "event_loop" and name in out:  # one row per process: the supervisor's, each worker's
                out[name] = {"processes": [*out[name].get("processes", ()), *section.get("processes", ())]}
            else:
                out.setdefault(name, section)
        return out

    def scrape(self, sections: Mapping[str, Mapping[str, Any]] | None = None) -> Scrape:
        sections = self._sections() if sections is None else sections
        t = self._totals()
        errors = dict(logutil.error_totals())
        for kind, n in t.errors.items():
            errors[kind] = errors.get(kind, 0) + n
        return Scrape(
            version=__version__,
            slots=self.fleet.agent.slots,
            listeners=t.listeners,
            alive=not self.liveness(),
            ready=not self.readiness(sections),
            index=self._index(),
            cluster_cache=t.cluster_cache if t.cluster_cache is not None else self._cluster_cache(),
            panics=t.panics,
            errors=errors,
            sections=sections,
        )


# In the "limits" section, what is a setting (the supervisor's, the same in every worker) rather
# than a count (the workers', summed): per subsection, the keys taken from the supervisor.
LIMIT_SETTINGS: Mapping[str, tuple[str, ...]] = {
    "allow_from": ("mode", "networks", "pod_cidrs"),
    "rate_limit": ("qps", "slip"),
    "miss_limit": ("qps", "namespace_qps", "max_clients"),
    "shed_capacity": ("tc_per_second",),
    "pending": ("max",),
    "upstream_share": ("max", "namespace_max"),
    "tcp": ("max_connections", "max_connections_per_client"),
}


def worker_limits(own: Mapping[str, Any], workers: Mapping[str, Any]) -> dict[str, Any]:
    """The "limits" section of a fleet: the workers' counts (they answer, so they refuse, limit and
    queue), summed, with the settings and the allow list's rules as the supervisor has them."""
    out = dict(workers)
    for sub, keys in LIMIT_SETTINGS.items():
        mine = own.get(sub)
        if mine is None:
            continue
        merged = dict(out.get(sub) or {})
        for key in keys:
            if key in mine:
                merged[key] = mine[key]
        out[sub] = merged
    return out


class WorkersReport:
    """The "workers" section of /status and /metrics (contract in nodedns.metrics.registry)."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.tick = os.sysconf("SC_CLK_TCK")
        self.page = os.sysconf("SC_PAGE_SIZE")

    def _usage(self, pid: int | None) -> tuple[float | None, int | None]:
        if pid is None:
            return None, None
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
                rss_pages = int(fh.read().split()[1])
        except (OSError, IndexError, ValueError):
            return None, None
        return (int(fields[11]) + int(fields[12])) / self.tick, rss_pages * self.page

    def status(self) -> dict[str, Any]:
        fleet = self.fleet
        out = []
        for number in range(fleet.count):
            worker = fleet.workers.get(number)
            up = worker is not None and worker.alive()
            cpu, rss = self._usage(worker.proc.pid if worker is not None and up else None)
            out.append({
                "worker": str(number),
                "pid": worker.proc.pid if worker is not None else None,
                "up": up,
                "serving": worker is not None and worker.serving,
                "restarts": fleet.restarts.get(number, 0),
                "restarts_by_reason": {r: fleet.restart_reasons.get(number, {}).get(r, 0) for r in RESTART_REASONS},
                "silent_seconds": round(fleet.clock() - worker.heard, 3) if worker is not None and up else None,
                "restarting": fleet.restarting.get(number),
                "cluster_asks": worker.asks if worker is not None else 0,
                "heavy_imports": list(worker.heavy_imports) if worker is not None else [],
                "cpu_seconds": cpu,
                "rss_bytes": rss,
            })
        return {"configured": fleet.count, "workers": out}
