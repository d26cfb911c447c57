"""How a Pod's stub resolver searches, and the part of it node-local autopath does server-side (pure).

- `SearchList`, `renderer_search_list(settings, host_text)`: a Pod's nameservers, search domains,
  options and ndots as the kubelet writes its resolv.conf (`resolvconf.pod_dns_for`).
- `expansion(name, searches, ndots)`: the names glibc's `res_nsearch` tries for a name, in order.
- `Autopath`: which clients get the server-side walk (`--autopath`: a Pod alone on its IP, on this node,
  not on the host network, with cluster DNS) and which names it tries for a query
  `<base>.<first search domain>`; `covers(qname)`: the NXDOMAINs a walk may replace, which the resolver
  keeps out of the hot dict. The resolver does the walk and every rcode decision.

Who gets it, the walk and where it stops, and why the hit path stays client-independent:
docs/beyond.md "Node-local autopath (`--autopath`)".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodedns.cluster.index import Index
from nodedns.cluster.objects import Pod
from nodedns.errors import NodednsError
from nodedns.names import normalize_name
from nodedns.podconf.resolvconf import CLUSTER_FIRST, CLUSTER_FIRST_WITH_HOST_NET, KubeletDNS, PodDNSSpec, pod_dns_for

GLIBC_DEFAULT_NDOTS = 1
AUTOPATH_POLICIES = (CLUSTER_FIRST, CLUSTER_FIRST_WITH_HOST_NET)
MAX_CLIENTS = 8192  # cached client plans; past it the cache starts over (a flood of source IPs)
MAX_NAME = 253  # characters of a name in presentation form without the trailing dot


@dataclass(frozen=True, slots=True)
class SearchList:
    """A Pod's search domains and ndots (and nameservers, options, the file), and how they were derived."""

    searches: tuple[str, ...]
    ndots: int
    source: str
    notes: tuple[str, ...] = field(default=())
    nameservers: tuple[str, ...] = field(default=())
    options: tuple[str, ...] = field(default=())
    resolv_conf: str = ""  # the rendered /etc/resolv.conf


SearchListFn = Callable[[Pod], SearchList]


def ndots_of(options: Sequence[str]) -> int:
    """glibc's ndots from resolv.conf options: the last `ndots:N` wins, capped at 15; default 1."""
    ndots = GLIBC_DEFAULT_NDOTS
    for opt in options:
        name, _, value = opt.partition(":")
        if name == "ndots" and value.isdigit():
            ndots = min(int(value), 15)
    return ndots


def pod_spec(pod: Pod) -> PodDNSSpec:
    """The renderer's view of a slim Pod record (its DNS fields)."""
    return PodDNSSpec.from_pod({
        "metadata": {"namespace": pod.namespace},
        "spec": {"dnsPolicy": pod.dns_policy, "hostNetwork": pod.host_network, "dnsConfig": pod.dns_config},
    })


def search_list_of(spec: PodDNSSpec, settings: KubeletDNS, host_resolv_conf: str | None) -> SearchList:
    """The search list of a Pod's DNS fields. Raises the renderer's errors (PodSpecError, HostResolvConfError)."""
    result = pod_dns_for(spec, settings, host_resolv_conf)
    return SearchList(
        searches=tuple(normalize_name(s) for s in result.searches),
        ndots=ndots_of(result.options),
        source="resolvconf.pod_dns_for (the kubelet's rules)",
        notes=tuple(w.line() for w in result.warnings),
        nameservers=result.nameservers,
        options=result.options,
        resolv_conf=result.render(),
    )


def renderer_search_list(settings: KubeletDNS, host_resolv_conf: str | None) -> SearchListFn:
    """A Pod's search list as the kubelet forms it: `resolvconf.pod_dns_for` on the Pod's DNS fields.

    Raises the renderer's errors (PodSpecError, HostResolvConfError); callers report them.
    """

    def search_list(pod: Pod) -> SearchList:
        return search_list_of(pod_spec(pod), settings, host_resolv_conf)

    return search_list


def expansion(name: str, searches: Sequence[str], ndots: int) -> list[str]:
    """The names a glibc stub resolver tries for `name`, in order (res_nsearch)."""
    text = name.strip()
    if text.endswith("."):
        return [normalize_name(text)]
    base = normalize_name(text)
    dots = text.count(".")
    as_is_first = dots >= ndots
    out: list[str] = [base] if as_is_first else []
    out.extend(f"{base}.{s}" if s else base for s in searches)
    if not as_is_first:
        out.append(base)
    return list(dict.fromkeys(out))


# ----------------------------------------------------------------------------------------------
# Node-local autopath


@dataclass(frozen=True, slots=True)
class Plan:
    """What autopath does for one client: its search domains (the first one is what queries must end
    with) and whether the bare name closes the walk. Equal plans give equal answers."""

    searches: tuple[str, ...]
    ndots: int
    tld_query: bool  # glibc tries a dotless bare name last (no `no-tld-query` option)

    @property
    def first(self) -> str:
        return self.searches[0]

    def names(self, qname: str) -> tuple[str, ...] | None:
        """The names to try for `qname`, the query itself first; None when it is not `<base>.<first>`."""
        first = self.first
        if not qname.endswith(first) or len(qname) <= len(first) + 1 or qname[-len(first) - 1] != ".":
            return None
        base = qname[: -len(first) - 1]
        out = [f"{base}.{s}" if s else base for s in self.searches]
        dots = base.count(".")
        if dots < self.ndots and (dots or self.tld_query):
            out.append(base)
        if any(len(n) > MAX_NAME for n in out):
            return None  # glibc stops at a name too long to send: let the client walk
        return tuple(dict.fromkeys(out))


@dataclass(slots=True)
class _Client:
    generation: int
    pod: Pod | None
    plan: Plan | None
    reason: str


class Autopath:
    """Which clients get a server-side search-list walk, and the names it tries (see the module doc).

    `search_list` is set by the wiring once the kubelet settings are known (the agent's own
    listen addresses and the host resolv.conf); until then nobody gets autopath. A client's plan is
    cached by IP and re-derived when the index generation moves (the renderer asked again only when
    the Pod record itself changed); so is the namespace set `covers` reads.
    """

    def __init__(self, *, index: Index, zone: str, node_name: str, search_list: SearchListFn | None = None) -> None:
        self.index = index
        self.zone = zone
        self.node_name = node_name
        self.search_list = search_list
        self._suffix = f".svc.{zone}"
        self._clients: dict[str, _Client] = {}
        self._namespaces: tuple[int, frozenset[str]] = (-1, frozenset())  # (generation, namespaces)
        self.walks = {"as_asked": 0, "searched": 0, "not_found": 0, "gave_up": 0}
        self.saved = 0  # queries the clients did not have to send
        self.plain_client_queries = 0  # queries below .svc.<zone> from clients without a plan (plain answers)

    # -- the hot questions (slow path only) ------------------------------------------------------

    def names(self, qname: str, client: str) -> tuple[str, ...] | None:
        """The names to walk for this query from this client, the query itself first; None: plain answer."""
        if not qname.endswith(self._suffix) or not self.index.synced or "\\" in qname:
            return None
        plan = self.plan_for(client)
        if plan is None:
            self.plain_client_queries += 1
            return None
        return plan.names(qname)

    def covers(self, qname: str) -> bool:
        """An NXDOMAIN for this name may be replaced by a walk: at least one label below `<ns>.svc.<zone>`
        of a namespace with a walk-eligible Pod on this node."""
        if not qname.endswith(self._suffix):
            return False
        base, dot, ns = qname[: -len(self._suffix)].rpartition(".")
        return bool(dot and base) and ns in self.namespaces()

    def namespaces(self) -> frozenset[str]:
        """Namespaces with a Pod of this node that could get the walk (see covers), for this generation."""
        generation = self.index.generation
        if self._namespaces[0] != generation:
            found = frozenset(
                p.namespace for p in self.index.pods_on_node(self.node_name)
                if not p.host_network and not p.terminating and p.dns_policy in AUTOPATH_POLICIES
            ) if self.node_name else frozenset()
            self._namespaces = (generation, found)
        return self._namespaces[1]

    def count(self, result: str, position: int) -> None:
        """One walk ended: `result` (a key of `walks`) at `position` in the list of names."""
        self.walks[result] += 1
        if result == "searched":
            self.saved += position

    # -- clients -------------------------------------------------------------------------------

    def plan_for(self, client: str) -> Plan | None:
        return self.client(client)[0]

    def client(self, ip: str) -> tuple[Plan | None, Pod | None, str]:
        """(plan or None, the Pod, the reason when there is no plan) for a source address."""
        generation = self.index.generation
        entry = self._clients.get(ip)
        if entry is not None and entry.generation == generation:
            return entry.plan, entry.pod, entry.reason
        pods = [p for p in self.index.pods_with_ip(ip) if not p.terminating]
        pod = pods[0] if len(pods) == 1 else None
        if entry is not None and pod is not None and pod is entry.pod:
            plan, reason = entry.plan, entry.reason  # same Pod record: same plan
        elif pod is None:
            plan, reason = None, ("no running Pod with this IP in the index" if not pods
                                  else f"{len(pods)} running Pods share this IP")
        else:
            plan, reason = self.plan_of(pod)
        if len(self._clients) >= MAX_CLIENTS and ip not in self._clients:
            self._clients.clear()
        self._clients[ip] = _Client(generation, pod, plan, reason)
        return plan, pod, reason

    def plan_of(self, pod: Pod, *, on_this_node: bool | None = None) -> tuple[Plan | None, str]:
        """The plan for a Pod, or None and why it gets plain answers. `on_this_node` overrides the
        node check (the explainer asks about a Pod from a file "as if it ran here")."""
        if pod.host_network:
            return None, "a host-network Pod: its source address is the node's, shared by every host process"
        if pod.dns_policy not in AUTOPATH_POLICIES:
            return None, f"dnsPolicy {pod.dns_policy}: custom DNS gets plain answers"
        here = (bool(self.node_name) and pod.node_name == self.node_name) if on_this_node is None else on_this_node
        if not here:
            return None, (f"runs on node {pod.node_name or '(none)'}, not on this node {self.node_name}"
                          if self.node_name else "this agent does not know its node name (--node-name)")
        if pod.terminating:
            return None, "the Pod is terminating"
        if self.search_list is None:
            return None, "the kubelet settings are not known yet"
        try:
            sl = self.search_list(pod)
        except NodednsError as exc:
            return None, f"its resolv.conf cannot be formed: {exc}"
        if not sl.searches or sl.searches[0] != f"{pod.namespace}{self._suffix}":
            return None, "its first search domain is not its namespace's"
        return Plan(sl.searches, sl.ndots, "no-tld-query" not in sl.options), ""

    # -- status ----------------------------------------------------------------------------------

    def status(self) -> Mapping[str, Any]:
        """The "autopath" section of /status and /metrics (contract in nodedns.metrics.registry)."""
        return {
            "enabled": True,
            "node": self.node_name,
            "success": self.walks["as_asked"] + self.walks["searched"],
            "walks": dict(self.walks),
            "queries_saved": self.saved,
            "plain_client_queries": self.plain_client_queries,
            "clients_cached": len(self._clients),
            "namespaces": sorted(self.namespaces()),
        }
