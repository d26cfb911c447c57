"""The lookup explainer behind /debug/lookup and /debug/explain: how this agent answers a question now.

`Explainer.explain(name, qtype, client=None)` asks the real resolver (`Resolver.answer(..., client=None)`, or
`Resolver.walk_step` for a Pod with an autopath plan: the same decisions and stored answers, never the allow
list, never counted) and reports the path, rcode, records and TTL left; forwarded questions really go upstream.
With a client it asks as that Pod: its address checked with `AllowList.admit` (a refused Pod is reported, not
asked for), its search list walked as glibc does. `explain_pod` does the same for a Pod of the index or a
manifest, for several types, with what insight saw of it and, with a clusterset zone, where the name exists there.

Bounds: each request's `Budget` (`MAX_QUESTIONS`, of them `MAX_UPSTREAM` waiting on the network, within
`MAX_SECONDS`; `MAX_TYPES` types), all requests' `QUESTION_RATE` beyond `QUESTION_BURST`; a question beyond them
is not asked and the reply says why; the walk yields to the event loop after every question.
The behaviour as a user meets it: docs/status.md "The lookup explainer", docs/beyond.md "`nodedns explain`".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from nodedns.cluster.index import Index
from nodedns.cluster.objects import POD, Pod, slim
from nodedns.dns.describe import describe
from nodedns.dns.keys import fast_key, patch
from nodedns.dns.message import parse_query
from nodedns.dns.queries import make_query
from nodedns.dns.wire import QT, Query, question_end
from nodedns.errors import ManifestError, NodednsError, PodNotFound
from nodedns.metrics.slots import Slots
from nodedns.names import canonical_ip, normalize_name, relative_labels
from nodedns.podconf.resolvconf import KubeletDNS, PodDNSSpec
from nodedns.podconf.searchpath import Autopath, Plan, SearchList, SearchListFn, expansion, renderer_search_list
from nodedns.policy.book import Applied
from nodedns.policy.model import DENY, LOCAL, Decision
from nodedns.serve.chase import WalkStep
from nodedns.serve.limits import Pace
from nodedns.serve.resolver import Resolver

EXPLAIN_TYPES = (QT.A, QT.AAAA)  # getaddrinfo with AF_UNSPEC asks both for every name
MAX_TYPES = 8  # record types per explain request
MAX_QUESTIONS = 128  # questions one request asks the resolver
MAX_UPSTREAM = 32  # of them, questions that may wait on the network
MAX_SECONDS = 10.0  # one request's questions, all told
QUESTION_RATE = 20.0  # questions a second, every request together, beyond a burst of
QUESTION_BURST = 50  # (an explanation of the usual size is not slowed; a flood of them costs ~1% of a core)

__all__ = ["Budget", "Explainer", "ForwardExplainer", "expansion", "renderer_search_list"]


class ForwardExplainer(Protocol):
    def explain(self, qname: str, qtype: int) -> Mapping[str, Any] | None: ...


@dataclass(slots=True)
class Budget:
    """What one request may still ask (see the module docstring)."""

    questions: int
    upstream: int
    deadline: float
    clock: Callable[[], float]
    asked: int = 0
    network: int = 0
    cut: str = ""  # why questions were left unasked ("" while none was)

    def left(self) -> float:
        return self.deadline - self.clock()

    def take(self, network: int) -> str:
        """Take one question that may wait on the network for `network` upstream questions; "" when it
        may be asked, else why not (kept in `cut`)."""
        if self.asked >= self.questions:
            self.cut = f"this request's budget of {self.questions} questions is spent"
        elif self.left() <= 0:
            self.cut = "this request's time is up"
        elif self.network + network > self.upstream:
            self.cut = f"this request's budget of {self.upstream} upstream questions is spent"
        else:
            self.asked += 1
            return ""
        return self.cut

    def summary(self) -> dict[str, Any]:
        return {"questions": self.asked, "max_questions": self.questions, "upstream": self.network,
                "max_upstream": self.upstream, **({"cut": self.cut} if self.cut else {})}


def _continues(rcode: str, answers: int) -> bool:
    """glibc goes on to the next search domain after NXDOMAIN, NODATA and SERVFAIL."""
    return rcode in ("NXDOMAIN", "SERVFAIL") or (rcode == "NOERROR" and answers == 0)


def _unanswered(result: dict[str, Any], how: str, **extra: Any) -> dict[str, Any]:
    result.update(path="none", rcode="", how=how, stored=False, flags=[], answer=[], authority=[], additional=[],
                  ttl_left=None, **extra)
    return result


class Explainer:
    """Answers 'how would you answer this?' from the live resolver and index.

    Hooks: `search_list(pod)` forms a Pod's search list and ndots (default: `renderer_search_list`, the kubelet's
    rules); `forward.explain(qname, qtype)` says whether a name outside our zones comes from the cache, a stub
    domain or the upstreams (without it, from the answer's metric labels); `insight(namespace, name)` is what
    insight saw of a Pod of this node (the wiring sets it)."""

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
        autopath: Autopath | None = None,
        node_name: str = "",
        multicluster_zone: str = "",
        max_questions: int = MAX_QUESTIONS,
        max_upstream: int = MAX_UPSTREAM,
        max_seconds: float = MAX_SECONDS,
        question_rate: float = QUESTION_RATE,
        question_burst: int = QUESTION_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.autopath = autopath
        self.multicluster_zone = multicluster_zone
        self.node_name = node_name
        self.resolver = resolver
        self.index = index
        self.slots = slots
        self.zone = zone
        self.search_list = search_list or renderer_search_list(KubeletDNS(cluster_domain=zone), None)
        self.forward = forward
        self.timeout = timeout
        self.max_questions = max_questions
        self.max_upstream = max_upstream
        self.max_seconds = max_seconds
        self.clock = clock
        self.pace = Pace(question_rate, question_burst, clock=clock)
        self.insight: Callable[[str, str], Mapping[str, Any] | None] | None = None
        self.about: Callable[[], Mapping[str, Any]] | None = None  # which agent answers (set by the wiring)

    def budget(self) -> Budget:
        """A fresh per-request budget."""
        return Budget(self.max_questions, self.max_upstream, self.clock() + self.max_seconds, self.clock)

    def refusal(self, client: str) -> str:
        """Why the agent refuses this client ("" when it answers it). Asks the allow list without
        counting a refusal."""
        allow = self.resolver.allow
        if client in allow.allowed or allow.admit(client):
            return ""
        return f"the client {client} is not in the allow list ({allow.describe()})"

    async def explain(self, name: str, qtype: int, client: str | None = None) -> dict[str, Any]:
        """The explanation as a JSON-able dict. ValueError for a bad name or client address."""
        budget = self.budget()
        out = await self.answer(name, qtype, budget=budget)  # the name as an absolute name, as loopback
        if client is not None:
            out["client"] = await self._client(name, qtype, client, budget)
        out["budget"] = budget.summary()
        if self.about is not None:
            out["agent"] = dict(self.about())
        return out

    async def answer(self, name: str, qtype: int, client: str | None = None,
                     walk: Sequence[str] | None = None, budget: Budget | None = None,
                     applied: Applied | None = None) -> dict[str, Any]:
        """One question through the resolver: path, rcode, records, TTL left. With `client`, as that
        client (refused without asking when the allow list refuses it). With `walk`, the names an
        autopath walk tries for it (the resolver's `walk_step`, not counted in the metrics). With `applied`,
        under those DNS policies: `policy` says which rule decides (path "policy" for a denial)."""
        budget = budget if budget is not None else self.budget()
        query = make_query(name, qtype)
        qname = normalize_name(name)
        result: dict[str, Any] = {"question": {"name": qname + ".", "type": QT.name(qtype)}}
        if client is not None:
            refused = self.refusal(client)
            if refused:
                result.update(path="refused", how=refused, stored=False, rcode="REFUSED", flags=[], answer=[],
                              authority=[], additional=[], ttl_left=None)
                return result
        cut = budget.take(len(walk) if walk is not None else 1)
        turn = self.pace.reserve(budget.left()) if not cut else None
        if turn is None and not cut:
            budget.asked -= 1
            cut = budget.cut = (f"this request's time is up (the explainer asks {1 / self.pace.interval:g} "
                                "questions a second, all requests together)")
        if cut:
            return _unanswered(result, f"not asked: {cut}", not_asked=True)
        if turn:
            await asyncio.sleep(turn)
        fk = fast_key(query)
        stored = fk is not None and fk[0] in self.resolver.cluster_answers.hot
        qend = question_end(query)
        q = parse_query(query)
        book = self.resolver.policy
        decision = book.decide(applied, qname) if book is not None and applied is not None else None
        if decision is not None:
            result["policy"] = {"action": decision.action, "rcode": decision.rcode or None,
                                "policy": decision.policy, "rule": decision.rule, "how": decision.describe(),
                                **({"trigger": decision.trigger} if decision.trigger else {})}
            if decision.action == DENY:
                return self._policy_denied(result, q, query, decision)
            walk = None  # a Pod under a policy walks its search list itself
        if decision is not None and decision.action == LOCAL and book is not None:  # an RPZ feed's local data
            resolver = self.resolver
            pending: Any = book.local(q, query, "", decision, ask=lambda tq, tdata: resolver.answer(tq, tdata, None),
                                      ra=resolver.recursion_available, max_udp_size=resolver.max_udp_size,
                                      applied=applied)
        else:
            pending = self.resolver.walk_step(q, walk) if walk is not None else self.resolver.answer(q, query, None)
        timed_out = False
        wait = 0.0
        if pending is not None and not isinstance(pending, bytes | tuple):
            budget.network += len(walk) if walk is not None else 1
            wait = min(self.timeout, budget.left())
            try:
                pending = await asyncio.wait_for(pending, max(wait, 0.001))
            except TimeoutError:
                pending = None
                timed_out = True
        else:
            await asyncio.sleep(0)  # answered at once: let the DNS listeners have the loop in between
        step: WalkStep | None = pending if isinstance(pending, tuple) else None
        outcome: bytes | None = pending if isinstance(pending, bytes) else None
        if step is not None and walk is not None:
            wire, how_walked, position = step
            outcome = patch(wire, query, qend) if wire is not None else None
            result["autopath"] = {"result": how_walked, "name": walk[position] + ".",
                                  "names": [n + "." for n in walk]}
        if outcome is None:
            return _unanswered(result, f"no answer within {wait:g}s" if timed_out
                               else "the resolver dropped the query")
        hidden = book.hides(applied, outcome, qend) if book is not None and applied is not None and \
            self.resolver.records.claims(qname) else None
        if hidden is not None:
            how = hidden.describe() + " (the answer names a hidden namespace)"
            result["policy"] = {"action": hidden.action, "rcode": hidden.rcode, "policy": hidden.policy,
                                "rule": hidden.rule, "how": how}
            return self._policy_denied(result, q, query, hidden)
        labels = self.slots.labels[self.slots.classify(outcome)]
        desc = describe(outcome)
        path = labels.path
        how = self._how(qname, qtype, path, stored, labels.rcode)
        left = self.resolver.forwarding.last_known_good(fk[0]) \
            if fk is not None and path in ("cache", "upstream", "stub") else None
        if left is not None:
            path, how = "last-known-good", (f"an upstream answered NXDOMAIN or NODATA for this cached answer: served "
                                            f"for {max(left, 0):.0f}s more (--stale-nxdomain) while asked again")
        local = self.resolver.forwarding.hosts_answer(q) if path not in ("cluster", "refused") and walk is None \
            and self.resolver.records.lookup(qname, qtype) is None else None  # the index wins a PTR it has
        if local is not None:  # the --hosts files answered (before any forwarding): which lines
            path, how = "hosts", "answered from " + ", ".join(str(s) for s in local.sources) + " (--hosts)"
            result["hosts"] = [str(s) for s in local.sources]
        forward = self.forward.explain(qname, qtype) if self.forward is not None and path not in ("cluster", "hosts") \
            else None
        if forward:
            path = str(forward.get("path", path))
            result["forward"] = dict(forward)
        if "autopath" in result:
            path, how = "autopath", AUTOPATH_HOW[result["autopath"]["result"]].format(name=result["autopath"]["name"])
        if decision is not None and decision.action == LOCAL:  # made from an RPZ feed's local data
            path, how = "policy", decision.describe()
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

    def _policy_denied(self, result: dict[str, Any], q: Query, query: bytes, d: Decision) -> dict[str, Any]:
        """The answer a DNS policy's denial gives (as the resolver makes it)."""
        out = self.resolver.denied(q, query, d.rcode)
        desc = describe(out) if out is not None else {"rcode": "no answer (dropped)"}
        result.update(path="policy", how=d.describe(), stored=False, rcode=desc.get("rcode", d.rcode),
                      flags=desc.get("flags", []), answer=[], authority=desc.get("authority", []),
                      additional=desc.get("additional", []), ttl_left=None)
        return result

    def _how(self, qname: str, qtype: int, path: str, stored: bool, rcode: str) -> str:
        """The reason behind the path, in a few words."""
        ix = self.index
        if path == "cluster":
            where = "the stored answer the UDP hit path serves" if stored else "built from the index now"
            if self.resolver.records.in_clusterset(qname):
                where = f"the clusterset zone of Multi-Cluster Services, {where}"
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
        if path == "filtered" and self.resolver.aaaa is not None:
            return f"not asked upstream: --filter-aaaa {self.resolver.aaaa.mode} ({self.resolver.aaaa.reason})"
        return rcode

    # -- a client's search-list walk -------------------------------------------------------------

    async def _client(self, name: str, qtype: int, client: str, budget: Budget) -> dict[str, Any]:
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
        refused = self.refusal(ip)
        if refused:
            info.update(allowed=False, queries=[], result=f"every query is answered REFUSED: {refused}")
            return info
        applied = self.resolver.policy.clients.get(ip) if self.resolver.policy is not None else None
        plan = self.autopath.plan_for(ip) if self.autopath is not None and applied is None else None
        walked = await self.glibc_walk(name, sl, (qtype,), plan, budget, applied)
        info.update(allowed=True, queries=walked["queries"], result=walked["result"])
        if applied is not None:
            info["policies"] = [p.ref for p in applied.policies]
        return info

    async def glibc_walk(self, name: str, sl: SearchList, qtypes: Sequence[int], plan: Plan | None,
                         budget: Budget | None = None, applied: Applied | None = None) -> dict[str, Any]:
        """Every query a glibc resolver with this search list sends for `name`, with this agent's answer.

        The names of `expansion` in order; per name one query per type (getaddrinfo with AF_UNSPEC
        sends A and AAAA together). A name answers when any of its queries has records in its answer
        section; the walk goes on after NXDOMAIN, NODATA and SERVFAIL (all of the name's queries)
        and stops at any other rcode. With an autopath `plan`, a query the agent would walk for this
        client is answered by the walk (marked `autopath`). The walk stops where `budget` runs out.
        """
        budget = budget if budget is not None else self.budget()
        queries: list[dict[str, Any]] = []
        answered: str | None = None
        stopped: str | None = None
        cut = ""
        for candidate in expansion(name, sl.searches, sl.ndots):
            names = plan.names(candidate) if plan is not None else None
            group = [await self.answer(candidate, qtype, walk=names, budget=budget, applied=applied)
                     for qtype in qtypes]
            if any(a.get("not_asked") for a in group):
                queries.extend(a for a in group if not a.get("not_asked"))
                cut = budget.cut
                break
            queries.extend(group)
            if any(a["rcode"] == "NOERROR" and a["answer"] for a in group):
                answered = group[0]["question"]["name"]
                break
            halt = next((a for a in group if not _continues(a["rcode"], len(a["answer"]))), None)
            if halt is not None:
                stopped = halt["rcode"] or "no answer"
                break
        n, per = len(queries), len(qtypes)
        numbers = f"query {n}" if per == 1 else f"queries {n - per + 1}-{n}"
        if cut:
            result = f"cut short after {n} quer{'y' if n == 1 else 'ies'}: {cut}"
        elif answered is not None:
            result = f"answered by {numbers} ({answered})"
        elif stopped is not None:
            result = f"stopped at {numbers}: {stopped}"
        else:
            result = f"no answer after {n} queries: the client gets " + (
                "NODATA" if any(q["rcode"] == "NOERROR" for q in queries) else queries[-1]["rcode"] if queries else "")
        return {"queries": queries, "total": n, "answered": answered, "result": result,
                "autopath": any("autopath" in q for q in queries), "cut": bool(cut)}

    # -- nodedns explain: a Pod's resolver, simulated ---------------------------------------------

    async def explain_pod(self, name: str, *, pod_ref: str | None = None, manifest: object = None,
                          qtypes: Sequence[int] = EXPLAIN_TYPES) -> dict[str, Any]:
        """`nodedns explain NAME --pod-ref ns/name | --pod FILE` (POST /debug/explain).

        The Pod comes from the index (`pod_ref`) or from a manifest (a Pod as parsed JSON; treated
        as if it ran on this node). Its resolv.conf is rendered with the kubelet's rules, every
        query its glibc resolver sends for `name` is listed with this agent's answer (and whether
        autopath answers it), with the total and advice when the search list makes it expensive.
        Raises ValueError (bad name, reference or types), PodNotFound, ManifestError/ObjectError
        (not a Pod), PodSpecError (the API server would reject it), HostResolvConfError.
        """
        make_query(name, QT.A)  # ValueError for a name that cannot be asked
        if not qtypes:
            raise ValueError("no record types to ask for")
        if len(qtypes) > MAX_TYPES:
            raise ValueError(f"at most {MAX_TYPES} record types per request (got {len(qtypes)})")
        pod, source = self._explained_pod(pod_ref, manifest)
        sl = self.search_list(pod)
        book = self.resolver.policy
        applied = book.for_pod(self.index, pod) if book is not None else None
        plan, reason = self._plan(pod, source)
        if applied is not None and plan is not None:
            plan, reason = None, "a Pod under a DNS policy walks its search list itself, each name decided"
        budget = self.budget()
        # as the Pod: its own address (a manifest's is checked only against an explicit --allow-from:
        # by default a Pod of this node is admitted whatever its address)
        check = pod.ip if pod.ip and (source == "index" or self.resolver.allow.explicit is not None) else ""
        refused = self.refusal(pod.ip) if check else ""
        empty: dict[str, Any] = {"queries": [], "total": 0, "answered": None, "autopath": False, "cut": False,
                                 "result": f"every query is answered REFUSED: {refused}"}
        walked = await self.glibc_walk(name, sl, qtypes, plan, budget, applied) if not refused else empty
        out: dict[str, Any] = {
            "name": name,
            "types": [QT.name(t) for t in qtypes],
            "pod": {"ref": f"{pod.namespace}/{pod.name}", "source": source, "ip": pod.ip or None,
                    "node": pod.node_name or None, "dns_policy": pod.dns_policy, "host_network": pod.host_network},
            "allowed": not refused,
            "resolv_conf": sl.resolv_conf,
            "nameservers": list(sl.nameservers),
            "search": list(sl.searches),
            "ndots": sl.ndots,
            "options": list(sl.options),
            "warnings": list(sl.notes),
            "autopath": {"enabled": self.autopath is not None, "applies": plan is not None, "reason": reason,
                         "used": walked["autopath"]},
            "policies": [{"policy": p.ref, "kind": p.kind, "mode": p.mode} for p in applied.policies]
            if applied is not None else [],
            **{k: walked[k] for k in ("queries", "total", "answered", "result")},
        }
        plain = walked
        if walked["autopath"]:
            plain = await self.glibc_walk(name, sl, qtypes, None, budget, applied)
            out["without_autopath"] = {k: plain[k] for k in ("total", "answered", "result")}
        zone = self.zone
        cut = bool(walked["cut"] or plain["cut"] or refused)
        out["advice"] = [] if cut else advice(
            name, sl, qtypes, walked, plain,
            (f"{pod.namespace}.svc.{zone}", f"svc.{zone}", zone, *self._clusterset_searches(pod)))
        if not cut:
            out["advice"].extend(self._clusterset_advice(name, pod, sl, plain))
        out["budget"] = budget.summary()
        if source == "index" and self.insight is not None:
            out["seen"] = self.insight(pod.namespace, pod.name)
        if self.about is not None:
            out["agent"] = dict(self.about())
        return out

    def _clusterset_searches(self, pod: Pod) -> tuple[str, ...]:
        """The search domains a Pod opts in with to reach the clusterset zone by short names."""
        mc = self.multicluster_zone
        return (f"{pod.namespace}.svc.{mc}", f"svc.{mc}") if mc else ()

    def _clusterset_advice(self, name: str, pod: Pod, sl: SearchList, plain: Mapping[str, Any]) -> list[str]:
        """How this lookup meets the clusterset zone: answered there through dnsConfig.searches; answered
        by a cluster-local Service although a ServiceImport has the name too; or not found although
        the name exists there."""
        mc = self.multicluster_zone
        text = name.strip()
        if not mc or not text or text.endswith("."):
            return []
        answered = plain.get("answered")
        if answered is not None and answered.rstrip(".").endswith("." + mc):
            return [f"answered from the clusterset zone ({answered}) through the Pod's dnsConfig.searches: the "
                    f"cluster's search domains come first, so a Service of the same name in this cluster would "
                    f"answer instead; write {answered} where the application must reach the clusterset service"]
        imported = self._imported_name(normalize_name(text), pod)
        if imported is None:
            return []
        if answered is not None:
            return [f"answered by the cluster-local {answered}; {imported}. is the clusterset service (a "
                    f"ServiceImport) of that name: write it in full to reach every cluster's backends"]
        return [f"{name!r} exists in the clusterset zone as {imported}. (a ServiceImport), which the kubelet never "
                f"puts in a search list: write {imported}. or opt this Pod in with dnsConfig: "
                f"{{searches: [{', '.join(self._clusterset_searches(pod))}]}} (searched after the cluster's own "
                "domains)"]

    def _imported_name(self, base: str, pod: Pod) -> str | None:
        """`<base>.<the Pod's namespace>.svc.<zone>` or `<base>.svc.<zone>` when it is a clusterset
        service with records (`<service>.<namespace>.svc.<zone>` shapes only)."""
        mc = self.multicluster_zone
        for candidate in (f"{base}.{pod.namespace}.svc.{mc}", f"{base}.svc.{mc}"):
            if len(relative_labels(candidate, mc)) != 3:
                continue
            for qtype in (QT.A, QT.AAAA):
                found = self.resolver.records.lookup(candidate, qtype)
                if found is not None and found.answer:
                    return candidate
        return None

    def _explained_pod(self, pod_ref: str | None, manifest: object) -> tuple[Pod, str]:
        if (pod_ref is None) == (manifest is None):
            raise ValueError("give exactly one of a pod reference (namespace/name) or a Pod manifest")
        if pod_ref is not None:
            ns, sep, pname = pod_ref.strip().partition("/")
            if not sep or not ns or not pname:
                raise ValueError(f"pod reference {pod_ref!r} is not namespace/name")
            found = self.index.pods.get((ns, pname))
            if found is None:
                where = "the Pods of its own node" + (f" ({self.node_name})" if self.node_name else "")
                raise PodNotFound(f"pod {ns}/{pname} is not in this agent's index (it watches {where}); "
                                  "give the manifest with --pod FILE instead")
            return found, "index"
        PodDNSSpec.from_pod(manifest)  # the renderer's type checks first: ManifestError, PodSpecError
        record = slim(POD, manifest) if isinstance(manifest, Mapping) else None
        if not isinstance(record, Pod):
            raise ManifestError("the manifest is not a Pod")
        return record, "request"

    def _plan(self, pod: Pod, source: str) -> tuple[Plan | None, str]:
        if self.autopath is None:
            return None, "this agent runs without --autopath"
        if source == "index" and pod.ip:
            plan, _, reason = self.autopath.client(pod.ip)
            return plan, reason
        plan, reason = self.autopath.plan_of(pod, on_this_node=True)
        return plan, reason or "as if it ran on this node: it was given as a manifest"


AUTOPATH_HOW = {
    "as_asked": "autopath: the name as asked exists; its own answer",
    "searched": "autopath: the agent walked the search list and answers for {name}; the client sends no "
                "further names",
    "not_found": "autopath: no name of the search list exists; the client goes on by itself",
    "gave_up": "autopath: a name on the way failed (not NXDOMAIN); the plain answer, the client goes on by itself",
}


def _queries(n: int) -> str:
    return f"{n} quer{'y' if n == 1 else 'ies'}"


def advice(name: str, sl: SearchList, qtypes: Sequence[int], walked: Mapping[str, Any],
           plain: Mapping[str, Any], cluster_domains: Sequence[str] = ()) -> list[str]:
    """What makes this lookup expensive, and the dnsConfig (or spelling) that would fix it.

    `walked` is the walk as this client gets it (autopath included), `plain` the same without
    autopath; `cluster_domains` the search domains the kubelet puts first for cluster DNS."""
    out: list[str] = []
    per = len(qtypes)
    text = name.strip()
    if text.endswith("."):
        return out
    dots = text.count(".")
    total, plain_total = int(walked["total"]), int(plain["total"])
    answered = plain.get("answered")
    base = normalize_name(text)
    if walked.get("autopath") and total < plain_total:
        out.append(f"autopath answers this lookup with {_queries(total)} on the wire instead of {plain_total}; "
                   "clients without it (other nodes, the host network, custom DNS) still send "
                   f"{plain_total}")
    if plain_total <= per:
        return out
    if answered == base + ".":
        fix_ndots = max(dots, 1)
        if dots:
            out.append(f"{name!r} has {dots} dot{'s' if dots != 1 else ''}, fewer than ndots {sl.ndots}: every "
                       f"search domain is tried first ({_queries(plain_total - per)} wasted). Write it as an "
                       f"absolute name ({base}.) where the application takes it, or lower ndots for this Pod: "
                       f'dnsConfig: {{options: [{{name: ndots, value: "{fix_ndots}"}}]}} ({_queries(per)} then; '
                       f"shorter in-cluster names like web.otherns still search first)")
        else:
            out.append(f"{name!r} is answered as an absolute name after {_queries(plain_total - per)} wasted: "
                       f"write it with a trailing dot ({base}.)")
    elif answered is not None:
        out.append(f"{name!r} is found as {answered} after {_queries(plain_total - per)} wasted: "
                   f"use that name with a trailing dot ({answered}) to send {per}")
    else:
        out.append(f"{name!r} does not resolve: each lookup costs {_queries(plain_total)} (every search domain, "
                   f"{'A and AAAA' if per == 2 else 'each type'})")
    extra = [d for d in sl.searches if d not in cluster_domains]
    reached = [d for d in extra if any(q["question"]["name"].endswith(f".{d}.") for q in plain["queries"])]
    if reached:
        out.append(f"{len(reached)} search domain{'s' if len(reached) != 1 else ''} beyond the cluster's "
                   f"({' '.join(reached)}) cost {len(reached) * per} of these queries; they come from the node's "
                   "resolv.conf search line (kubelet --resolv-conf) or dnsConfig.searches")
    return out
