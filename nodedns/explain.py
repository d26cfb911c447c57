"""The lookup explainer behind /debug/lookup: how this agent answers a question right now.

`Explainer.explain(name, qtype, client=None)` sends the question through the real resolver (the
same decisions, the same stored answers; only the transport and its counters are left out) and
reports which path answered it (cluster index, cache, stub domain, upstream, or a refusal), the
rcode, the records and the TTL left. With a client IP it finds the Pod with that IP in the index,
derives the search list and ndots its resolver gets, and walks the list the way glibc does
(`res_nsearch`): the name as is first when it has at least ndots dots, else after the search
domains; the walk goes on after NXDOMAIN, NODATA and SERVFAIL and stops at an answer or any other
rcode. Every query it would send is listed with its answer.

Hooks, set by the wiring:
- `search_list(pod) -> SearchList`: how a Pod's resolv.conf search list and ndots are formed. The
  default, `renderer_search_list`, asks the resolv.conf renderer (`resolvconf.pod_dns_for`, the
  kubelet's rules) with the agent's kubelet settings and the host resolv.conf text.
- `forward`: an object with `explain(qname, qtype) -> Mapping | None` (issue 4's forwarder) that
  says whether a name outside our zones is served from the cache (with TTL left), a stub domain or
  the upstreams, and which servers. Without it, such names are refused and the explainer says so.

Forwarded questions really go upstream (bounded by `timeout`): the explainer shows what the agent
answers now, not a simulation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nodedns.errors import NodednsError
from nodedns.index import Index
from nodedns.metrics import Slots
from nodedns.names import canonical_ip, normalize_name
from nodedns.objects import Pod
from nodedns.resolvconf import KubeletDNS, PodDNSSpec, pod_dns_for
from nodedns.resolver import Resolver
from nodedns.wire import QT, RCODE, describe, fast_key, make_query

GLIBC_DEFAULT_NDOTS = 1


@dataclass(frozen=True, slots=True)
class SearchList:
    """A Pod's search domains and ndots (and nameservers), and how they were derived."""

    searches: tuple[str, ...]
    ndots: int
    source: str
    notes: tuple[str, ...] = field(default=())
    nameservers: tuple[str, ...] = field(default=())


SearchListFn = Callable[[Pod], SearchList]


class ForwardExplainer(Protocol):
    def explain(self, qname: str, qtype: int) -> Mapping[str, Any] | None: ...


def _ndots(options: Sequence[str]) -> int:
    """glibc's ndots from resolv.conf options: the last `ndots:N` wins, capped at 15; default 1."""
    ndots = GLIBC_DEFAULT_NDOTS
    for opt in options:
        name, _, value = opt.partition(":")
        if name == "ndots" and value.isdigit():
            ndots = min(int(value), 15)
    return ndots


def renderer_search_list(settings: KubeletDNS, host_resolv_conf: str | None) -> SearchListFn:
    """A Pod's search list as the kubelet forms it: `resolvconf.pod_dns_for` on the Pod's DNS fields.

    Raises the renderer's errors (PodSpecError, HostResolvConfError); the explainer reports them.
    """

    def search_list(pod: Pod) -> SearchList:
        spec = PodDNSSpec.from_pod({
            "metadata": {"namespace": pod.namespace},
            "spec": {"dnsPolicy": pod.dns_policy, "hostNetwork": pod.host_network, "dnsConfig": pod.dns_config},
        })
        result = pod_dns_for(spec, settings, host_resolv_conf)
        return SearchList(
            searches=tuple(normalize_name(s) for s in result.searches),
            ndots=_ndots(result.options),
            source="resolvconf.pod_dns_for (the kubelet's rules)",
            notes=tuple(w.line() for w in result.warnings),
            nameservers=result.nameservers,
        )

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


def _continues(rcode: str, answers: int) -> bool:
    """glibc goes on to the next search domain after NXDOMAIN, NODATA and SERVFAIL."""
    return rcode in ("NXDOMAIN", "SERVFAIL") or (rcode == "NOERROR" and answers == 0)


class Explainer:
    """Answers 'how would you answer this?' from the live resolver and index."""

    def __init__(
        self,
        *,
        resolver: Resolver,
        index: Index,
        slots: Slots,
        zone: str,
        search_list: SearchListFn | None = None,
        forward: ForwardExplainer | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.resolver = resolver
        self.index = index
        self.slots = slots
        self.zone = zone
        self.search_list = search_list or renderer_search_list(KubeletDNS(cluster_domain=zone), None)
        self.forward = forward
        self.timeout = timeout

    async def explain(self, name: str, qtype: int, client: str | None = None) -> dict[str, Any]:
        """The explanation as a JSON-able dict. ValueError for a bad name or client address."""
        out = await self.answer(name, qtype, client or "127.0.0.1")
        if client is not None:
            out["client"] = await self._client(name, qtype, client)
        return out

    async def answer(self, name: str, qtype: int, client: str = "127.0.0.1") -> dict[str, Any]:
        """One question through the resolver: path, rcode, records, TTL left."""
        query = make_query(name, qtype)
        fk = fast_key(query)
        stored = fk is not None and fk[0] in self.resolver.cluster_answers.table
        qname = normalize_name(name)
        outcome = self.resolver.handle(query, client)
        if outcome is not None and not isinstance(outcome, bytes):
            try:
                outcome = await asyncio.wait_for(outcome, self.timeout)
            except TimeoutError:
                outcome = None
                timed_out = True
            else:
                timed_out = False
        else:
            timed_out = False
        result: dict[str, Any] = {"question": {"name": qname + ".", "type": QT.name(qtype)}}
        if outcome is None:
            result.update(path="none", rcode="", how=f"no answer within {self.timeout:g}s" if timed_out
                          else "the resolver dropped the query", answer=[], authority=[], additional=[],
                          ttl_left=None)
            return result
        labels = self.slots.labels[self.slots.classify(outcome)]
        desc = describe(outcome)
        path = labels.path
        how = self._how(qname, qtype, path, stored, labels.rcode)
        if path == "refused" and not self.resolver.allow.admit(client):
            how = f"the client {client} is not in the allow list ({self.resolver.allow.describe()})"
        forward = self.forward.explain(qname, qtype) if self.forward is not None and path != "cluster" else None
        if forward:
            path = str(forward.get("path", path))
            result["forward"] = dict(forward)
        records = desc.get("answer", [])
        negative = desc.get("authority", []) if not records else []
        ttls = [int(r["ttl"]) for r in (records or negative)]
        result.update(
            path=path,
            how=how,
            stored=stored,
            rcode=desc.get("rcode", labels.rcode),
            flags=desc.get("flags", []),
            answer=records,
            authority=desc.get("authority", []),
            additional=desc.get("additional", []),
            ttl_left=min(ttls) if ttls else None,
        )
        return result

    def _how(self, qname: str, qtype: int, path: str, stored: bool, rcode: str) -> str:
        """The reason behind the path, in a few words."""
        ix = self.index
        if path == "cluster":
            where = "the stored answer the UDP hit path serves" if stored else "built from the index now"
            sync = "synced" if ix.synced else "NOT synced yet: would-be NXDOMAINs are SERVFAIL"
            return f"{where}; index generation {ix.generation}, {sync}"
        if path == "refused":
            if qtype in (QT.AXFR, QT.IXFR):
                return "zone transfers are not served"
            if self.forward is None and not self.resolver.records.in_zone(qname):
                return "the name is outside the cluster zone and no upstream is configured"
            return "the resolver refuses this question"
        if path in ("upstream", "stub", "cache"):
            return "forwarded"
        return rcode

    async def _client(self, name: str, qtype: int, client: str) -> dict[str, Any]:
        ip = canonical_ip(client)
        if ip is None:
            raise ValueError(f"client {client!r} is not an IP address")
        info: dict[str, Any] = {"ip": ip}
        pods = [p for p in self.index.pods_with_ip(ip) if not p.terminating]
        if not pods:
            info.update(pod=None, note="no running Pod with this IP in the index (with --pods verified, or "
                                       "the agent's own node's pods, only those are indexed)")
            return info
        pods.sort(key=lambda p: (p.host_network, p.namespace, p.name))
        pod = pods[0]
        info.update(pod=f"{pod.namespace}/{pod.name}", dns_policy=pod.dns_policy, host_network=pod.host_network)
        try:
            sl = self.search_list(pod)
        except NodednsError as exc:
            info.update(error=f"the Pod's resolv.conf cannot be formed: {exc}", queries=[])
            return info
        info.update(
            nameservers=list(sl.nameservers),
            search=list(sl.searches),
            ndots=sl.ndots,
            search_source=sl.source,
            notes=list(sl.notes),
        )
        if len(pods) > 1:
            info["notes"].append(f"{len(pods)} pods share this IP (host network); showing {info['pod']}")
        queries: list[dict[str, Any]] = []
        final = None
        for candidate in expansion(name, sl.searches, sl.ndots):
            a = await self.answer(candidate, qtype, ip)
            queries.append(a)
            if not _continues(a["rcode"], len(a["answer"])):
                final = len(queries)
                break
        info["queries"] = queries
        if final is not None and queries[final - 1]["rcode"] == RCODE.name(RCODE.NOERROR):
            info["result"] = f"answered by query {final} ({queries[final - 1]['question']['name']})"
        elif final is not None:
            info["result"] = f"stopped at query {final}: {queries[final - 1]['rcode']}"
        else:
            info["result"] = f"no answer after {len(queries)} queries: the client gets " + (
                "NODATA" if any(q["rcode"] == "NOERROR" for q in queries) else queries[-1]["rcode"] if queries else "")
        return info
