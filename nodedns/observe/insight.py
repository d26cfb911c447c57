"""Per-Pod DNS insight: which Pod of this node asks what, what it costs, and what would make it cheaper (pure).

The answering processes count every answer by client address (`nodedns.serve.tally`); `Insight`, kept by
the owner of the index (the one agent, or the `--workers` supervisor), turns those rows into
figures per Pod:

    attribution   `refresh()` reads this node's Pods from the index (the own-node watch) and gives
                  each Pod a generation: a number that names it for as long as it lives (a Pod
                  recreated under the same name, or a new Pod on an address another one had, gets
                  a new one). `gens` maps every Pod address to its generation, host-network Pods'
                  addresses to HOST; the answering processes tag their counts with it (`Tally.gens`,
                  pushed to workers as the allow list's inputs are) and cut them whenever it changes,
                  so two Pods that use one address one after the other never share figures. Rows of
                  other addresses are the host-network group (loopback, this node's and the agent's
                  own addresses, host-network Pods) or the unknown group.
    per Pod       queries, answers by rcode, search-list misses, cluster / forwarded / the agent's
                  own answers, answers from stored answers (cache hits), upstream waits and their
                  time, its top names, the names its search list wasted, its NXDOMAIN names; the
                  queries per second over the last minute
    search-list   a name answered NXDOMAIN that the same client also asks with another suffix of
    misses        its search list (or as it is) within WINDOW seconds: the ndots:5 amplification,
                  told at any rate (`Walks`: one entry per name asked, the tally keeps every name).
                  The suffixes are those of the Pod's own resolv.conf, rendered with the kubelet's
                  rules (`searchpath.SearchList`); for the two groups, the cluster's (any
                  `<ns>.svc.<zone>`, `svc.<zone>`, `<zone>`) and the node's resolv.conf's. The order
                  of the two does not matter (busybox sends every search name at once; with
                  --workers the queries of one lookup reach several workers).
    advice        `advice()`: sentences per Pod and per owner (Deployment, StatefulSet, ...) from
                  what was seen and the Pod's resolv.conf: search-list misses for external names
                  (trailing dot, the ndots that would do, autopath), for cluster names written
                  short, names that do not exist, SERVFAILs; each names `nodedns explain` for its
                  worst name.
    namespaces    counters per namespace of this node's Pods (and the two groups, named
                  "(host-network)" and "(unknown)": never a namespace's name) for
                  `nodedns_namespace_queries_total{namespace,rcode}` and
                  `nodedns_namespace_search_misses_total{namespace}`; a namespace with no Pod here
                  for RETAIN seconds goes, so the label values stay those of this node's Pods.

Bounded memory, whatever the clients send: every name list is a space-saving sketch of fixed size
(`SpaceSaving`, Metwally et al. 2005: TOP_NAMES per Pod and per group, TOP_OVERALL for the node),
the search-list state of a client holds each name it asked (and each NXDOMAIN not followed yet)
for WINDOW seconds, at most MAX_NAMES of them, and the node's clients together NAMES_BUDGET (beyond
it each keeps MIN_NAMES), a group keeps that state for at most MAX_GROUP_CLIENTS addresses, at most
MAX_PODS Pods are tracked, and a Pod that went away is kept RETAIN seconds, then dropped (its
search-list state at once). A client spraying random names moves the
sketch's counters, not its size. Names are kept only in those sketches and never logged. The work
is bounded too: the names of at most NAMED_ROWS rows a second are looked at; rows beyond (only a
node full of Pods each spraying names sends so many) are counted without their names.
"""

from __future__ import annotations

import functools
import ipaddress
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nodedns.cluster.index import Index
from nodedns.cluster.objects import Pod
from nodedns.errors import NodednsError
from nodedns.observe.insightsketch import WINDOW, Budget, SpaceSaving, Walks, readings
from nodedns.podconf.searchpath import AUTOPATH_POLICIES, SearchList, SearchListFn
from nodedns.serve.tally import CLUSTER, FORWARDED, HOST, UNKNOWN, Row

TOP_NAMES = 16  # names kept per Pod and group (space-saving counters)
TOP_WASTED = 8  # names whose search list was wasted, per Pod
TOP_NXDOMAIN = 8  # names answered NXDOMAIN (not as a search-list miss), per Pod
TOP_OVERALL = 64  # names kept for the whole node
TOP_CLIENTS = 16  # addresses kept per group
MAX_PODS = 2048  # Pods tracked (live and gone); beyond, the longest gone go first
MAX_GROUP_CLIENTS = 64  # addresses of a group whose search-list state is kept
RETAIN = 600.0  # seconds a Pod that went away (and its namespace's counters) is kept
RATE_BUCKET = 10.0  # seconds per bucket of the queries-per-second figure
RATE_BUCKETS = 6  # buckets: the rate is over the last minute
NAMED_ROWS = 5000  # rows a second whose names are looked at (sketches, search-list misses); beyond, counted only
MIN_QUERIES = 20  # queries a Pod must have sent before advice is given
WASTE_SHARE = 0.2  # share of search-list misses worth a word
NXDOMAIN_SHARE = 0.2  # share of names that do not exist worth a word
SERVFAIL_SHARE = 0.05  # share of SERVFAIL worth a word

HOST_GROUP = "(host-network)"  # the namespace label of the host-network group (no namespace can be so named)
UNKNOWN_GROUP = "(unknown)"
SORTS = ("queries", "nxdomain", "waste")
OFF = {"insight": "off", "note": "this agent runs with --insight off: nothing is counted per client"}


# ----------------------------------------------------------------------------------------------
# Figures


class Figures:
    """What one Pod (or group) was answered."""

    __slots__ = ("queries", "rcodes", "search_misses", "cluster", "forwarded", "server", "cached", "upstream",
                 "upstream_seconds", "names", "wasted", "nxnames", "first_seen", "last_seen", "rate", "rate_at")

    def __init__(self, now: float) -> None:
        self.queries = 0
        self.rcodes: dict[str, int] = {}
        self.search_misses = 0
        self.cluster = 0
        self.forwarded = 0
        self.server = 0
        self.cached = 0
        self.upstream = 0
        self.upstream_seconds = 0.0
        self.names = SpaceSaving(TOP_NAMES)
        self.wasted = SpaceSaving(TOP_WASTED)
        self.nxnames = SpaceSaving(TOP_NXDOMAIN)
        self.first_seen: float | None = None
        self.last_seen: float | None = None
        self.rate = [0] * RATE_BUCKETS
        self.rate_at = int(now // RATE_BUCKET)

    def count(self, row: Row, now: float) -> None:
        n = row.answers
        self.queries += n
        self.rcodes[row.rcode] = self.rcodes.get(row.rcode, 0) + n
        if row.source == CLUSTER:
            self.cluster += n
        elif row.source == FORWARDED:
            self.forwarded += n
        else:
            self.server += n
        self.cached += row.cached
        self.upstream += row.upstream
        self.upstream_seconds += row.upstream_seconds
        if row.name:
            self.names.add(row.name, n)
        if self.first_seen is None:
            self.first_seen = now
        self.last_seen = now
        self._roll(now)
        self.rate[self.rate_at % RATE_BUCKETS] += n

    def missed(self, base: str, n: int) -> None:
        self.search_misses += n
        self.wasted.add(base, n)

    def _roll(self, now: float) -> None:
        at = int(now // RATE_BUCKET)
        if at - self.rate_at >= RATE_BUCKETS:
            self.rate = [0] * RATE_BUCKETS
        else:
            for b in range(self.rate_at + 1, at + 1):
                self.rate[b % RATE_BUCKETS] = 0
        self.rate_at = max(at, self.rate_at)

    def qps(self, now: float) -> float:
        self._roll(now)
        return sum(self.rate) / (RATE_BUCKET * RATE_BUCKETS)

    @property
    def nxdomain(self) -> int:
        return self.rcodes.get("NXDOMAIN", 0)

    def waste(self) -> float:
        return self.search_misses / self.queries if self.queries else 0.0

    def add(self, other: Figures) -> None:
        """Sum another Pod's figures into these (an owner's), sketches included."""
        self.queries += other.queries
        for rcode, n in other.rcodes.items():
            self.rcodes[rcode] = self.rcodes.get(rcode, 0) + n
        for attr in ("search_misses", "cluster", "forwarded", "server", "cached", "upstream"):
            setattr(self, attr, getattr(self, attr) + getattr(other, attr))
        self.upstream_seconds += other.upstream_seconds
        for mine, theirs in ((self.names, other.names), (self.wasted, other.wasted), (self.nxnames, other.nxnames)):
            for item, count, _ in theirs.top():
                mine.add(item, count)

    def document(self, now: float) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "qps": round(self.qps(now), 2),
            "rcodes": dict(sorted(self.rcodes.items())),
            "nxdomain": self.nxdomain,
            "search_misses": self.search_misses,
            "waste": round(self.waste(), 4),
            "cluster": self.cluster,
            "forwarded": self.forwarded,
            "server": self.server,
            "cache_hits": self.cached,
            "upstream": {"queries": self.upstream, "seconds": round(self.upstream_seconds, 6),
                         "mean_ms": round(self.upstream_seconds / self.upstream * 1000, 3) if self.upstream else None},
            "top_names": _top(self.names),
            "wasted_names": _top(self.wasted),
            "nxdomain_names": _top(self.nxnames),
            "seconds_since_seen": round(now - self.last_seen, 1) if self.last_seen is not None else None,
        }


def _top(sketch: SpaceSaving, n: int | None = None) -> list[dict[str, Any]]:
    return [{"name": item, "count": count, "error": error} for item, count, error in sketch.top(n)]


@dataclass(slots=True)
class PodInfo:
    """One generation: a Pod of this node as long as it lives, and what it was answered."""

    gen: int
    pod: Pod
    figures: Figures
    walks: Walks = field(default_factory=Walks)
    search: SearchList | None = None
    search_error: str = ""
    search_of: Pod | None = None  # the record `search` was rendered from
    gone_at: float | None = None

    @property
    def ref(self) -> str:
        return f"{self.pod.namespace}/{self.pod.name}"

    def state(self) -> str:
        if self.gone_at is not None:
            return "gone"
        return "terminating" if self.pod.terminating else "running"


class Group:
    """The host-network or the unknown clients: their figures, and per address what tells misses."""

    __slots__ = ("name", "figures", "walks", "clients", "budget")

    def __init__(self, name: str, now: float, budget: Budget) -> None:
        self.name = name
        self.figures = Figures(now)
        self.walks: dict[str, Walks] = {}
        self.clients = SpaceSaving(TOP_CLIENTS)
        self.budget = budget

    def walks_of(self, client: str) -> Walks:
        w = self.walks.get(client)
        if w is None:
            if len(self.walks) >= MAX_GROUP_CLIENTS:
                self.walks.pop(next(iter(self.walks))).clear()  # the longest known goes
            w = self.walks[client] = Walks(self.budget)
        return w


# ----------------------------------------------------------------------------------------------
# Insight


class Insight:
    """Figures per Pod of this node, per group and per namespace, and advice (module docstring).

    `search_list` (the renderer with the agent's kubelet settings) and `host_searches` (the search
    domains the node's resolv.conf gives host-network processes) are set by the wiring once known;
    `autopath` is the agent's Autopath (None without --autopath), for the advice.
    """

    def __init__(self, *, index: Index, node_name: str, zone: str, own_addresses: Iterable[str] = (),
                 autopath: Any = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.index = index
        self.node_name = node_name
        self.zone = zone
        self.own = frozenset(own_addresses)
        self.autopath = autopath
        self.clock = clock
        self.search_list: SearchListFn | None = None
        self.host_searches: tuple[str, ...] = ()
        self.pods: dict[int, PodInfo] = {}  # generation -> Pod (live, and gone within RETAIN)
        self.live: dict[tuple[str, str], PodInfo] = {}  # (namespace, name) -> its current generation
        self.gens: dict[str, int] = {}  # address -> generation (HOST for host-network Pods)
        self.next_gen = 1
        now = clock()
        self.started = now
        self.budget = Budget()  # the search-list state of every client together
        self.groups = {HOST: Group(HOST_GROUP, now, self.budget), UNKNOWN: Group(UNKNOWN_GROUP, now, self.budget)}
        self.overall = SpaceSaving(TOP_OVERALL)
        self.ns_queries: dict[str, dict[str, int]] = {}  # namespace -> rcode -> answers
        self.ns_misses: dict[str, int] = {}
        self.ns_seen: dict[str, float] = {}  # namespace -> when a Pod of it was last here
        self.rows = 0  # rows taken
        self.unnamed_rows = 0  # rows counted without looking at their names (over NAMED_ROWS a second)
        self.dropped_pods = 0  # gone Pods dropped early (MAX_PODS)
        self._budget = (int(now), NAMED_ROWS)  # (second, named rows left in it)

    # -- attribution ---------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Read this node's Pods from the index: new generations, gone ones, the address map. True when
        `gens` changed (the answering processes must be given the new map)."""
        now = self.clock()
        current = {(p.namespace, p.name): p for p in self.index.pods_on_node(self.node_name)
                   if not p.done} if self.node_name else {}
        for key, held in list(self.live.items()):
            pod = current.get(key)
            if pod is None or (pod.uid and held.pod.uid and pod.uid != held.pod.uid):
                held.gone_at = now
                held.walks.clear()  # it asks no more: its search-list state goes back to the budget
                del self.live[key]
        for key, pod in current.items():
            info = self.live.get(key)
            if info is None:
                info = PodInfo(self.next_gen, pod, Figures(now), Walks(self.budget))
                self.next_gen += 1
                self.pods[info.gen] = info
                self.live[key] = info
            else:
                info.pod = pod
            self.ns_seen[pod.namespace] = now
        gens: dict[str, int] = {}
        holders: dict[str, PodInfo] = {}
        for info in self.live.values():
            for ip in info.pod.ips:
                if info.pod.host_network:
                    gens[ip] = HOST
                    continue
                other = holders.get(ip)
                # a running Pod wins over a terminating one; between equals, the newer
                if other is None or (not info.pod.terminating, info.gen) > (not other.pod.terminating, other.gen):
                    holders[ip] = info
        for ip, info in holders.items():
            gens.setdefault(ip, info.gen)
        self._expire(now)
        if gens != self.gens:
            self.gens = gens
            return True
        return False

    def _expire(self, now: float) -> None:
        gone = sorted((i for i in self.pods.values() if i.gone_at is not None), key=lambda i: i.gone_at or 0.0)
        for info in gone:
            if now - (info.gone_at or now) > RETAIN or len(self.pods) > MAX_PODS:
                if now - (info.gone_at or now) <= RETAIN:
                    self.dropped_pods += 1
                del self.pods[info.gen]
        for ns, seen in list(self.ns_seen.items()):
            if now - seen > RETAIN and not any(i.pod.namespace == ns for i in self.pods.values()):
                del self.ns_seen[ns]
                self.ns_queries.pop(ns, None)
                self.ns_misses.pop(ns, None)

    def is_host(self, address: str) -> bool:
        """Loopback, the agent's own addresses and this node's (its Node record)."""
        if address in self.own:
            return True
        node = self.index.nodes.get(self.node_name) if self.node_name else None
        if node is not None and address in node.addresses:
            return True
        return _loopback(address)

    # -- taking rows ---------------------------------------------------------------------------

    def take(self, rows: Iterable[Row]) -> None:
        """Count the rows of one interval of one answering process."""
        now = self.clock()
        second, budget = self._budget
        if int(now) != second:
            second, budget = int(now), NAMED_ROWS
        for row in rows:
            self.rows += 1
            if row.name:
                if budget > 0:
                    budget -= 1
                else:
                    row = row._replace(name="")
                    self.unnamed_rows += 1
            info = self.pods.get(row.gen) if row.gen > 0 else None
            if info is not None:
                fig, walks, ns = info.figures, info.walks, info.pod.namespace
                searches, any_ns = self._searches(info), False
            else:
                group = self.groups[HOST if row.gen == HOST or (row.client and self.is_host(row.client)) else UNKNOWN]
                fig, ns = group.figures, group.name
                walks = group.walks_of(row.client)
                searches, any_ns = self._group_searches(), True
                if row.client:
                    group.clients.add(row.client, row.answers)
            fig.count(row, now)
            by_rcode = self.ns_queries.setdefault(ns, {})
            by_rcode[row.rcode] = by_rcode.get(row.rcode, 0) + row.answers
            self.ns_misses.setdefault(ns, 0)
            if row.name:
                self.overall.add(row.name, row.answers)
                nx = row.rcode == "NXDOMAIN"
                parts = readings(row.name, searches, self.zone, any_namespace=any_ns)
                if any_ns and len(parts) > 1:  # a namespace's domain read from the name itself
                    searches = (*searches, *(suffix for _, suffix in parts if suffix and suffix not in searches))
                for base, n in walks.observe(row.name, nx, row.answers, now, parts, searches):
                    fig.missed(base, n)
                    self.ns_misses[ns] += n
                if nx and len(parts) == 1:
                    fig.nxnames.add(row.name, row.answers)  # not formed by the search list: a name that is not there
        self._budget = (second, budget)

    def _searches(self, info: PodInfo) -> tuple[str, ...]:
        """The Pod's search domains from its rendered resolv.conf (re-rendered when its record changed)."""
        if info.search_of is not info.pod and self.search_list is not None:
            info.search_of = info.pod
            try:
                info.search, info.search_error = self.search_list(info.pod), ""
            except NodednsError as exc:
                info.search, info.search_error = None, str(exc)
        if info.search is not None:
            return info.search.searches
        return self._group_searches()

    def _group_searches(self) -> tuple[str, ...]:
        zone = self.zone
        return (f"svc.{zone}", zone, *self.host_searches)

    # -- reading -------------------------------------------------------------------------------

    def pod_entry(self, info: PodInfo, now: float, *, with_advice: bool = True) -> dict[str, Any]:
        pod = info.pod
        out: dict[str, Any] = {
            "pod": info.ref,
            "namespace": pod.namespace,
            "name": pod.name,
            "generation": info.gen,
            "uid": pod.uid or None,
            "owner": {"kind": pod.owner[0], "name": pod.owner[1]} if pod.owner else None,
            "ips": list(pod.ips),
            "host_network": pod.host_network,
            "state": info.state(),
            "seconds_since_gone": round(now - info.gone_at, 1) if info.gone_at is not None else None,
            "resolv_conf": ({"search": list(info.search.searches), "ndots": info.search.ndots,
                             "options": list(info.search.options)} if info.search is not None
                            else {"error": info.search_error} if info.search_error else None),
            **info.figures.document(now),
        }
        if with_advice:
            out["advice"] = self.advice(info.figures, info.ref, info.search, pod)
        return out

    def _group_entry(self, group: Group, now: float) -> dict[str, Any]:
        return {"group": group.name, **group.figures.document(now),
                "top_clients": [{"address": a, "queries": c, "error": e} for a, c, e in group.clients.top()],
                "advice": self.advice(group.figures, group.name, None, None)}

    def owners(self, now: float, namespace: str | None = None) -> list[dict[str, Any]]:
        """Figures summed per owner (Deployment, StatefulSet, ...) of the Pods tracked, with advice."""
        by_owner: dict[tuple[str, str, str], list[PodInfo]] = {}
        for info in self.pods.values():
            pod = info.pod
            if pod.owner is not None and (namespace is None or pod.namespace == namespace):
                by_owner.setdefault((pod.namespace, *pod.owner), []).append(info)
        out = []
        for (ns, kind, name), infos in sorted(by_owner.items()):
            fig = Figures(now)
            for info in infos:
                fig.add(info.figures)
            live = [i for i in infos if i.gone_at is None]
            ref = f"{kind} {ns}/{name}"
            sample = (live or infos)[-1]
            out.append({"kind": kind, "namespace": ns, "name": name, "pods": len(live), "pods_tracked": len(infos),
                        **fig.document(now),
                        "advice": self.advice(fig, ref, sample.search, sample.pod, owner=len(infos))})
        return out

    def document(self, *, sort: str = "queries", namespace: str | None = None, limit: int = 50) -> dict[str, Any]:
        """GET /debug/top: the Pods by `sort` (queries, nxdomain, waste), the groups, the owners, the
        namespaces, the node's top names and every advice."""
        if sort not in SORTS:
            raise ValueError(f"sort must be one of {', '.join(SORTS)} (got {sort!r})")
        now = self.clock()
        infos = [i for i in self.pods.values() if namespace is None or i.pod.namespace == namespace]
        key: Callable[[PodInfo], tuple[float, ...]] = {
            "queries": lambda i: (i.figures.queries, i.figures.qps(now)),
            "nxdomain": lambda i: (i.figures.nxdomain, i.figures.queries),
            "waste": lambda i: (i.figures.search_misses, i.figures.waste()),
        }[sort]
        infos.sort(key=lambda i: (*key(i), -i.gen), reverse=True)
        pods = [self.pod_entry(i, now) for i in infos[:limit]]
        groups = [self._group_entry(g, now) for g in self.groups.values()] if namespace is None else []
        owners = self.owners(now, namespace)
        advice = [a for p in pods for a in p["advice"]] + [a for g in groups for a in g["advice"]] \
            + [a for o in owners if o["pods_tracked"] > 1 for a in o["advice"]]
        return {
            "insight": "on",
            "node": self.node_name or None,
            "sort": sort,
            "namespace": namespace,
            "seconds_counted": round(now - self.started, 1),
            "pods_tracked": len(self.pods),
            "pods_live": len(self.live),
            "pods_shown": len(pods),
            "pods": pods,
            "groups": groups,
            "owners": owners,
            "namespaces": self.namespaces(),
            "top_names": _top(self.overall, 20),
            "advice": advice,
            "bounds": {"top_names_per_pod": TOP_NAMES, "top_names_overall": TOP_OVERALL, "max_pods": MAX_PODS,
                       "retain_seconds": RETAIN, "window_seconds": WINDOW},
        }

    def namespaces(self) -> dict[str, dict[str, Any]]:
        return {ns: {"queries": dict(sorted(self.ns_queries.get(ns, {}).items())),
                     "search_misses": self.ns_misses.get(ns, 0)}
                for ns in sorted(set(self.ns_queries) | set(self.ns_misses))}

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The entry of a Pod of this node (the live one, else the latest gone), for `nodedns explain`."""
        info = self.live.get((namespace, name))
        if info is None:
            gone = [i for i in self.pods.values() if i.pod.namespace == namespace and i.pod.name == name]
            info = max(gone, key=lambda i: i.gen) if gone else None
        return self.pod_entry(info, self.clock()) if info is not None else None

    def status(self) -> dict[str, Any]:
        """The "insight" section of /status and /metrics (contract in nodedns.metrics.registry)."""
        now = self.clock()
        top = sorted(self.pods.values(), key=lambda i: (i.figures.queries, i.gen), reverse=True)[:10]
        return {
            "enabled": True,
            "pods_live": len(self.live),
            "pods_tracked": len(self.pods),
            "rows": self.rows,
            "unnamed_rows": self.unnamed_rows,
            "dropped_pods": self.dropped_pods,
            "namespaces": self.namespaces(),
            "top": [{"pod": i.ref, "state": i.state(), "queries": i.figures.queries,
                     "qps": round(i.figures.qps(now), 2), "nxdomain": i.figures.nxdomain,
                     "search_misses": i.figures.search_misses, "waste": round(i.figures.waste(), 4),
                     "top_name": i.figures.names.first()} for i in top],
            "groups": {g.name: {"queries": g.figures.queries, "qps": round(g.figures.qps(now), 2),
                                "nxdomain": g.figures.nxdomain, "search_misses": g.figures.search_misses,
                                "waste": round(g.figures.waste(), 4), "top_name": g.figures.names.first()}
                       for g in self.groups.values()},
            "advice": [a for i in top for a in self.advice(i.figures, i.ref, i.search, i.pod)][:10],
        }

    # -- advice --------------------------------------------------------------------------------

    def advice(self, fig: Figures, ref: str, search: SearchList | None, pod: Pod | None, *,
               owner: int = 0) -> list[str]:
        """Sentences on what makes this client's DNS expensive, and the fix (module docstring)."""
        out: list[str] = []
        q = fig.queries
        if q < MIN_QUERIES:
            return out
        where = "the Pod template's dnsConfig" if owner else "dnsConfig"
        who = f"{ref} ({owner} Pods seen)" if owner > 1 else ref
        explain = (f" (`nodedns explain {{name}} --pod-ref {pod.namespace}/{pod.name}` shows each query)"
                   if pod is not None and not owner else "")
        if fig.waste() >= WASTE_SHARE:
            wasted = fig.wasted.top()
            external = [(b, n) for b, n, _ in wasted if self._external(b)]
            short = [(b, n) for b, n, _ in wasted if not self._external(b)]
            ext_n = sum(n for _, n in external)
            if ext_n >= sum(n for _, n in short) and external:
                name = external[0][0]
                fixes = [f"use FQDNs with a trailing dot ({name}.)"]
                ndots = max(1, min(b.count(".") for b, _ in external[:4]))
                if search is None or ndots < search.ndots:
                    fixes.append(f"set ndots:{ndots} in {where}")
                fixes.append(self._autopath_fix(pod))
                out.append(f"{who}: {_pct(fig.waste())} of its queries are search-list misses for external names "
                           f"(most: {', '.join(b for b, _ in external[:3])}); {', '.join(f for f in fixes if f)}"
                           + explain.format(name=name))
            elif short:
                name = short[0][0]
                full = self._found_as(name, search)
                fix = self._autopath_fix(pod)
                out.append(f"{who}: {_pct(fig.waste())} of its queries are search-list misses for cluster names "
                           f"written short (most: {', '.join(b for b, _ in short[:3])}); write the full name with a "
                           f"trailing dot ({full}.)" + (f", {fix}" if fix else "") + explain.format(name=name))
        nx_plain = fig.nxdomain - fig.search_misses
        if nx_plain / q >= NXDOMAIN_SHARE and fig.nxnames.top(1):
            names = [n for n, _, _ in fig.nxnames.top(3)]
            out.append(f"{who}: {_pct(nx_plain / q)} of its queries ask for names that do not exist (most: "
                       f"{', '.join(names)}); check the names it is configured with" + explain.format(name=names[0]))
        servfail = fig.rcodes.get("SERVFAIL", 0)
        if servfail / q >= SERVFAIL_SHARE:
            out.append(f"{who}: {_pct(servfail / q)} of its answers are SERVFAIL: an upstream fails or times out for "
                       "its names (see the upstream health on the status page)")
        return out

    def _autopath_fix(self, pod: Pod | None) -> str:
        if self.autopath is None:
            return "or turn on autopath (--autopath) so the agent walks the search list for it"
        if pod is None or pod.host_network or pod.dns_policy not in AUTOPATH_POLICIES:
            return ""
        return ""  # autopath is on and serves it: the misses seen came from another resolver's path

    def _external(self, base: str) -> bool:
        """A name outside the cluster: not a short `<svc>.<ns>`, `<svc>.<ns>.svc`, nor under the zone."""
        zone = self.zone
        if base == zone or base.endswith("." + zone):
            return False
        labels = base.split(".")
        if len(labels) == 1:
            return False  # a bare name: a Service of its own namespace, written short
        last = labels[-1]
        return last != "svc" and last not in self.index.namespaces

    def _found_as(self, base: str, search: SearchList | None) -> str:
        zone = self.zone
        labels = base.split(".")
        if base.endswith("." + zone) or base == zone:
            return base
        if labels[-1] == "svc":
            return f"{base}.{zone}"
        if len(labels) >= 2:
            return f"{base}.svc.{zone}"
        ns = search.searches[0].split(".")[0] if search is not None and search.searches else "NAMESPACE"
        return f"{base}.{ns}.svc.{zone}"


@functools.lru_cache(maxsize=1024)
def _loopback(address: str) -> bool:
    """A loopback address (the text a listener reports; a zone index ignored). Remembered: every row
    of a host or unknown client asks, and parsing an address costs more than the rest of a row."""
    try:
        return ipaddress.ip_address(address.partition("%")[0]).is_loopback
    except ValueError:
        return False


def _pct(share: float) -> str:
    return f"{round(share * 100)}%"
