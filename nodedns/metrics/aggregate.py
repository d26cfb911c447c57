"""Sum the counters of several worker processes into one scrape (pure): what /metrics and /status show.

Each worker counts on its own (`metrics.counters.Scrape`: per-listener slot counters, latency histograms,
the stored-answer cache, its provider sections). Slot numbers are per process, so counts are moved
to the supervisor's `Slots` by their labels. Listener counters are matched by listener (`server`
label), numbers summed, histograms merged; provider sections (`cache`, `upstream`, `autopath`, ...)
are merged key by key (`merge_sections`: numbers add up, booleans hold only if they hold everywhere, lists of records
are matched on their text fields). Fields added to `ListenerStats` later are summed the same way,
without a change here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nodedns.metrics.counters import ClusterCacheStats, Histogram, ListenerStats, Scrape
from nodedns.metrics.slots import Slots


def slot_map(into: Slots, source: Slots) -> list[int]:
    """For each slot of `source`, the slot with the same labels in `into` (0 stays 0: unclassified)."""
    return [0] + [into.slot(labels) for labels in source.labels[1:]]


def _merge_value(a: Any, b: Any) -> Any:
    if isinstance(a, Histogram) and isinstance(b, Histogram):
        out = Histogram()
        out.merge(a)
        out.merge(b)
        return out
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) and bool(b) if a is not None and b is not None else (a if b is None else b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a + b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return merge_sections(a, b)
    if isinstance(a, list) and isinstance(b, list):
        return _merge_lists(a, b)
    return a if a is not None else b


def _identity(record: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in record.items() if isinstance(v, str)))


def _merge_lists(a: list[Any], b: list[Any]) -> list[Any]:
    if all(isinstance(x, Mapping) for x in (*a, *b)):
        out: dict[tuple[tuple[str, str], ...], Any] = {}
        for record in (*a, *b):
            key = _identity(record)
            out[key] = merge_sections(out[key], record) if key in out else dict(record)
        return list(out.values())
    return list(dict.fromkeys((*a, *b)))  # reasons and other texts: each once, in order


def merge_sections(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two provider sections (`status()` mappings) of the same part in two processes, as one."""
    out = dict(a)
    for key, value in b.items():
        out[key] = _merge_value(out[key], value) if key in out else value
    return out


def _add_listener(into: ListenerStats, ls: ListenerStats, remap: Sequence[int]) -> None:
    for f in dataclasses.fields(ls):
        mine, theirs = getattr(into, f.name), getattr(ls, f.name)
        if isinstance(theirs, list):  # per-slot counters
            for slot, n in enumerate(theirs):
                if n:
                    mine[remap[slot] if slot < len(remap) else 0] += n
        elif isinstance(theirs, dict):  # zone -> Histogram
            for zone, h in theirs.items():
                mine.setdefault(zone, Histogram()).merge(h)
        elif isinstance(theirs, int | float) and not isinstance(theirs, bool):
            setattr(into, f.name, mine + theirs)


def _add_cluster_cache(into: ClusterCacheStats | None, c: ClusterCacheStats) -> ClusterCacheStats:
    if into is None:
        return dataclasses.replace(c)
    for f in dataclasses.fields(c):
        value = getattr(c, f.name)
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(into, f.name, getattr(into, f.name) + value)
    return into


@dataclasses.dataclass(slots=True)
class Totals:
    """Worker scrapes summed: listeners (in the supervisor's slots), the cluster-answer cache,
    panics, consolidated errors, and the merged provider sections."""

    listeners: list[ListenerStats]
    cluster_cache: ClusterCacheStats | None
    panics: int
    errors: dict[str, int]
    sections: dict[str, dict[str, Any]]


def merge(into: Slots, scrapes: Iterable[Scrape], *, sections: Iterable[str] | None = None) -> Totals:
    """Sum scrapes from several processes; listeners keep the order in which they first appear.

    `sections`: the provider sections to merge (None: every one the scrapes carry)."""
    listeners: dict[str, ListenerStats] = {}
    cluster_cache: ClusterCacheStats | None = None
    panics = 0
    errors: dict[str, int] = {}
    merged: dict[str, dict[str, Any]] = {}
    for s in scrapes:
        remap = slot_map(into, s.slots)
        for ls in s.listeners:
            target = listeners.get(ls.server)
            if target is None:
                target = listeners[ls.server] = ListenerStats(ls.server, ls.family)
            _add_listener(target, ls, remap)
        if s.cluster_cache is not None:
            cluster_cache = _add_cluster_cache(cluster_cache, s.cluster_cache)
        panics += s.panics
        for kind, n in s.errors.items():
            errors[kind] = errors.get(kind, 0) + n
        for name in (s.sections if sections is None else sections):
            section = s.sections.get(name)
            if section is not None:
                merged[name] = merge_sections(merged[name], section) if name in merged else dict(section)
    return Totals(list(listeners.values()), cluster_cache, panics, errors, merged)


def counters_only(s: Scrape) -> Scrape:
    """What a finished worker leaves behind: its counters (gauges such as open connections zeroed)."""
    listeners = []
    for ls in s.listeners:
        kept = dataclasses.replace(ls)
        kept.tcp_open = 0
        listeners.append(kept)
    return dataclasses.replace(s, listeners=listeners, cluster_cache=None, sections={})
