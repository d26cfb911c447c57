"""The answers that take more than one question: an ExternalName chased out of the cluster, an autopath walk.

`Chaser.chase` answers an ExternalName that leaves the cluster: the CNAME chain from the index, then
the target's records via the forward cache or the upstreams (`ForwardPath.shared`); the rcode is the
one at the end of the chain. The whole answer is kept in the hot dict for the rest of the second unless
the chain's tags changed while the target was asked (`ClusterAnswers.expect`/`settled`), or a walk may
replace its NXDOMAIN.

`Chaser.walk` is node-local autopath (--autopath, a Pod of this node asking `<base>.<its first search
domain>`): each name of the search list answered as a query of its own (stored answers, index, cache,
in-flight sharing, serve-stale); the first that is not NXDOMAIN gives a CNAME from the query to it
plus its records (none when it is the query itself; NODATA: NODATA, no CNAME, as CoreDNS); all
NXDOMAIN: the query's own NXDOMAIN; any other rcode on the way, or no answer: the query's own plain
answer (the client walks itself). The hot dict is read by question alone, so walk answers never go
in: they are kept aside by (question, names walked) for the rest of the second, dropped on every
index change (`forget_walks`). Each name is answered by what the walk is given (`AsAsked`: the
resolver's own answer to a question as asked).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

from nodedns.cluster.records import ClusterRecords
from nodedns.dns.keys import KEY_HEAD, patch
from nodedns.dns.pack import RR, build_chased, encode_name
from nodedns.dns.wire import QT, RCODE, Query
from nodedns.forward.store import Entry
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.forwarding import ForwardPath, Outcome

# An autopath walk's end: (template to send or None, result, position in the names walked); result is
# as_asked | searched | not_found | gave_up
WalkStep = tuple[bytes | None, str, int]
# the answer to one question as asked, no walk (the resolver's `_as_asked`, given to each walk)
AsAsked = Callable[[Query, bytes, str | None], Outcome]


class Autopathing(Protocol):
    """What the resolver needs from node-local autopath (nodedns.podconf.searchpath.Autopath)."""

    def names(self, qname: str, client: str) -> Sequence[str] | None:
        """The names to walk for this query from this client (the query first), or None: plain answer."""
        ...

    def covers(self, qname: str) -> bool:
        """A walk may replace an NXDOMAIN for this name: keep it out of the hot dict."""
        ...

    def count(self, result: str, position: int) -> None:
        """A walk ended: as_asked | searched | not_found | gave_up, at this position of its names."""
        ...


class Chaser:
    """ExternalName chases and autopath walks, and the walk answers kept for this second."""

    def __init__(
        self,
        *,
        records: ClusterRecords,
        cluster_answers: ClusterAnswers,
        forwarding: ForwardPath,
        autopath: Autopathing | None,
        max_udp_size: int,
    ) -> None:
        self.records = records
        self.cluster_answers = cluster_answers
        self.forwarding = forwarding
        self.forward_cache = forwarding.forward_cache
        self.recursion_available = forwarding.recursion_available
        self.autopath = autopath
        self.stats = forwarding.stats  # the resolver's counters (one dict, the forward path's)
        self.max_udp_size = max_udp_size
        self._svc_suffix = f".svc.{records.zone}"
        # --autopath: walk answers by (key, names) for the rest of the second, dropped on an index change
        self._walked: dict[tuple[bytes, tuple[str, ...]], WalkStep] = {}
        self._walked_second = -1
        self._walk_epoch = 0  # moves on every index change: a walk that spanned one is not kept

    def walk_namespace(self, qname: str) -> str | None:
        """The namespace whose Pods decide whether a walk may replace this name's NXDOMAIN."""
        if not qname.endswith(self._svc_suffix):
            return None
        return qname[: -len(self._svc_suffix)].rpartition(".")[2]

    def forget_walks(self) -> None:
        """Walk answers kept for this second are void (the index or the autopath plans changed)."""
        self._walked.clear()
        self._walk_epoch += 1

    def chase(self, q: Query, data: bytes, chain: list[RR], target: str, plain: bytes,
               tags: frozenset[str], client: str | None) -> Outcome:
        """`plain` is the CNAME-only template (when the target cannot be asked); `tags` the chain's."""
        cache = self.forward_cache
        assert cache is not None
        try:
            name = encode_name(target)
            tq = q._replace(qname=target, key=q.key[:KEY_HEAD] + name + q.key[-4:],
                            question=name + q.question[-4:])
        except ValueError:
            self.cluster_answers.settled(q.key)
            self.cluster_answers.put(q.key, plain, tags)
            return patch(plain, data, 12 + len(q.question))
        self.stats["chased"] += 1
        qend = 12 + len(q.question)
        now = cache.now()
        entry = cache.get(tq.key)
        if entry is not None and cache.fresh(entry, now):
            return patch(self._chained(q, chain, tags, cache.serve(tq.key, entry, now)), data, qend)
        return self._chase_miss(q, tq, data, qend, chain, tags, entry, client)

    async def _chase_miss(self, q: Query, tq: Query, data: bytes, qend: int, chain: list[RR],
                          tags: frozenset[str], stale: Entry | None, client: str | None) -> bytes:
        target = await self.forwarding.shared(tq, stale, client=client)
        return patch(self._chained(q, chain, tags, target), data, qend)

    def _chained(self, q: Query, chain: list[RR], tags: frozenset[str], target: bytes) -> bytes:
        """The chain + target answer, kept in the hot dict for the rest of this second unless the
        chain's tags changed while the target was asked (or a walk may replace its NXDOMAIN)."""
        assert self.forward_cache is not None
        wire = build_chased(q, chain=chain, target=target, ra=self.recursion_available,
                            max_udp_size=self.max_udp_size)
        settled = self.cluster_answers.settled(q.key)
        if self.autopath is not None:
            ns = self.walk_namespace(q.qname)
            if ns is not None:
                tags = tags | {f"a:{ns}"}
        if settled and not (wire[3] & 0xF == RCODE.NXDOMAIN and self.autopath is not None
                            and self.autopath.covers(q.qname)):
            self.forward_cache.hold(q.key, wire)
            self.cluster_answers.watch(q.key, tags)
        return wire

    # -- node-local autopath ----------------------------------------------------------------

    def walk(self, q: Query, data: bytes, names: Sequence[str], client: str | None, as_asked: AsAsked) -> Outcome:
        """Answer `q` by walking `names` (`q`'s own name first) as the client's resolver would
        (`walk_step`), counted in the autopath metrics."""
        qend = 12 + len(q.question)
        step = self.walk_step(q, names, client, as_asked)
        if isinstance(step, tuple):
            return self._walked_answer(step, data, qend)
        return self._walk_finish(step, data, qend)

    async def _walk_finish(self, pending: Coroutine[Any, Any, WalkStep], data: bytes, qend: int) -> bytes | None:
        return self._walked_answer(await pending, data, qend)

    def _walked_answer(self, step: WalkStep, data: bytes, qend: int) -> bytes | None:
        wire, result, position = step
        if self.autopath is not None:
            self.autopath.count(result, position)
        return patch(wire, data, qend) if wire is not None else None

    def walk_step(self, q: Query, names: Sequence[str], client: str | None,
                  as_asked: AsAsked) -> WalkStep | Coroutine[Any, Any, WalkStep]:
        """The walk's (template, result, position): each name is answered like a query of its own
        (`_candidate`: stored answers, else `as_asked`, the resolver's answer to the name as asked: index,
        cache, in-flight sharing, serve-stale), going on only
        past NXDOMAIN. Nothing built for `q` goes into the hot dict; the step is kept by (question,
        names) for the rest of the second (the same walk gives the same answer until the index or
        a TTL moves). Not counted: the explainer asks here too."""
        key = (q.key, tuple(names))
        second = int(self.forward_cache.now()) if self.forward_cache is not None else 0
        if second != self._walked_second:
            self._walked.clear()
            self._walked_second = second
        done = self._walked.get(key)
        if done is not None:
            return done
        epoch = self._walk_epoch
        first: bytes | None = None
        for i in range(len(names)):
            out = self._candidate(q, names, i, client, as_asked)
            if out is not None and not isinstance(out, bytes):
                return self._walk_on(q, names, key, i, out, first, epoch, client, as_asked)
            if i == 0:
                first = out
            step = self._walk_step(q, names, i, out, first)
            if step is not None:
                return self._keep(key, step, epoch)
        return None, "gave_up", 0  # not reached: the last name always ends the walk

    async def _walk_on(self, q: Query, names: Sequence[str], key: tuple[bytes, tuple[str, ...]], i: int,
                       pending: Coroutine[Any, Any, bytes | None], first: bytes | None, epoch: int,
                       client: str | None, as_asked: AsAsked) -> WalkStep:
        out = await pending
        while True:
            if i == 0:
                first = out
            step = self._walk_step(q, names, i, out, first)
            if step is not None:
                return self._keep(key, step, epoch)
            i += 1
            nxt = self._candidate(q, names, i, client, as_asked)
            out = nxt if nxt is None or isinstance(nxt, bytes) else await nxt

    def _keep(self, key: tuple[bytes, tuple[str, ...]], step: WalkStep, epoch: int) -> WalkStep:
        if epoch != self._walk_epoch:
            return step  # the index changed during the walk: this answer is for this query only
        if len(self._walked) >= self.cluster_answers.max_entries:
            self._walked.clear()
        self._walked[key] = step
        return step

    def _candidate(self, q: Query, names: Sequence[str], i: int, client: str | None, as_asked: AsAsked) -> Outcome:
        """The plain answer (a template: ID 0, lowercase question) to `q` asked for `names[i]`."""
        if i == 0:
            tq = q
        else:
            try:
                name = encode_name(names[i])
            except ValueError:
                return None  # not a name we can send: the walk gives up
            tq = q._replace(qname=names[i], key=q.key[:KEY_HEAD] + name + q.key[-4:], question=name + q.key[-4:])
        stored = self.cluster_answers.hot.get(tq.key) or self.cluster_answers.aside.get(tq.key)
        if stored:
            return stored
        return as_asked(tq, b"\x00\x00" + tq.key, client)

    def _walk_step(self, q: Query, names: Sequence[str], i: int, out: bytes | None,
                   first: bytes | None) -> WalkStep | None:
        """(template to send, result, position) once names[i] answered `out` (None: no answer) ends the
        walk; None to go on to the next name."""
        rcode = out[3] & 0xF if out is not None else -1
        if rcode == RCODE.NXDOMAIN and i + 1 < len(names):
            return None
        if rcode == RCODE.NOERROR and out is not None:
            if i == 0:
                return out, "as_asked", 0
            # records: a CNAME to the name found, then its records. NODATA: no CNAME, like CoreDNS's
            # autopath (an answer section with only a CNAME would end glibc's search even when both
            # A and AAAA are empty; an empty one lets it go on, as it would without us)
            chain = [RR(q.qname, QT.CNAME, self.records.ttl, names[i])] if out[6:8] != b"\x00\x00" else []
            return build_chased(q, chain=chain, target=out, ra=self.recursion_available,
                                max_udp_size=self.max_udp_size), "searched", i
        return first, ("not_found" if rcode == RCODE.NXDOMAIN else "gave_up"), i

    # -- server identity (class CH) --------------------------------------------------------
