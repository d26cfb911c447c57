"""Which policies apply to which client of this node, and the gate the resolver asks (state, counters).

- `PolicyBook.rebuild(index)`: the index's DNS policies (`model.parse`, each problem logged once per version)
  and this node's Pods into `clients`: client address -> `Applied` (the Pod, its policies in order); none for
  a host-network Pod. Rebuilt once per loop turn on a change of a Pod, Namespace or policy.
- `check(client, qname)`: the decision (`model.decide`), counted by (action, policy), denials by Pod and rule
  and logged (sampled). `outside(client, wire, qend)`: a cluster answer that names a hidden namespace.
- The memo (`remember`, one per group of clients under the same policies): the keys of stored answers an
  enforcing allow let through unchanged (no audit policy denying; under `clusterZone`, that very answer),
  read by both hit paths (`limits.AllowList.policed_hits`) and the resolver's first look; its questions
  counted into `decisions` (`fold`). Bounded by MEMO_KEYS, MEMO_ENTRIES, MEMO_BYTES, MEMO_GROUPS; `forget`
  on every change of the book, and by whatever else a decision comes to read when that changes.

The allow list never remembers an address in `clients`, so a policed client's datagrams reach the resolver
unless the memo holds the answer; a client under no policy pays nothing. Why the memo is exact:
docs/policy.md "Its cost".
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodedns.cluster import objects as k8s
from nodedns.cluster.index import Index
from nodedns.dns.keys import KEY_HEAD, patch
from nodedns.dns.pack import RR, build_chased, build_response, encode_name
from nodedns.dns.wire import QT, RCODE, Query, iter_rrs
from nodedns.errors import EncodeError, FormatError
from nodedns.policy.model import (
    ALLOW,
    AUDIT,
    DENY,
    LOCAL,
    NO_POLICY,
    Decision,
    Policy,
    cluster_namespaces,
    decide,
    order,
    parse,
    zone_namespace,
)
from nodedns.policy.rpz import Feed, local_answer

log = logging.getLogger("nodedns.policy")

LOG_INTERVAL = 60.0  # seconds between two denial lines of one policy (the first of each Pod and rule: at once)
MAX_DENIED_ROWS = 4096  # (Pod, policy, rule) rows of denied counts kept at most
MEMO_KEYS = 4096  # keys the memo holds for one group of clients at most (then the group's are forgotten)
MEMO_ENTRIES = 16384  # keys it holds over all groups at most (then every group's are forgotten)
MEMO_BYTES = 1 << 20  # bytes of stored answers its entries hold by identity at most (likewise)
MEMO_GROUPS = 64  # groups at most (likewise)

# a memo entry: (True, or the stored answer checked; the cell counting the questions it answered)
MemoEntry = tuple[object, list[int]]
Memo = dict[bytes, MemoEntry]


FeedRef = tuple[str, str, str]  # a ClusterDNSPolicy's spec.rpz.configMapRef: (namespace, name, key)


@dataclass(frozen=True, slots=True)
class FeedState:
    """What became of one RPZ feed: `feed` when its ConfigMap's key was read (`feed.problem` may still say
    nothing of it applies), else `problem` (the ConfigMap or its key is missing, it cannot be read);
    neither: not read yet."""

    feed: Feed | None = None
    problem: str = ""
    reason: str = ""  # the FeedLoaded condition's reason when it is not loaded (ConfigMapNotFound, ...)


@dataclass(frozen=True, slots=True)
class Applied:
    """The policies that apply to one Pod (ordered: `model.order`), and the namespaces its cluster zone
    shows (None: all) under the enforcing ones and under all of them (audit)."""

    pod: str  # namespace/name
    policies: tuple[Policy, ...]
    namespaces: frozenset[str] | None
    audit_namespaces: frozenset[str] | None


class PolicyBook:
    """The parsed policies, the clients they apply to, the decisions counted (module docstring)."""

    def __init__(self, *, node_name: str = "", zones: Sequence[str] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.node_name = node_name
        self.zones = tuple(z for z in zones if z)
        self.clock = clock
        self.policies: dict[tuple[str, str, str], Policy] = {}
        self._parsed: dict[tuple[str, str, str], Policy] = {}  # as read from the spec, before its feed is attached
        self.feeds: dict[FeedRef, FeedState] = {}  # RPZ feeds as read (nodedns.policy.feeds sets them)
        self._feeds_said: dict[FeedRef, Feed | str] = {}  # what was last logged of each feed
        self.no_feeds = ""  # why no feed can be read here (--manifests: no API to watch ConfigMaps on)
        self._ordered: tuple[Policy, ...] = ()  # `policies` in the order they decide (model.order)
        self.clients: dict[str, Applied] = {}
        self.decisions: dict[tuple[str, str], int] = {}  # (action, policy) -> count
        self.denied: dict[tuple[str, str, str], int] = {}  # (pod, policy, rule) -> denials (audit ones too)
        self._said: dict[tuple[str, str, str], str] = {}  # a policy's key -> the spec its problems were logged for
        self._logged: dict[str, float] = {}  # policy -> when its last denial line was written
        self.on_clients: list[Callable[[frozenset[str]], None]] = []  # told the new client set on each change
        self.owner = True  # built from an index (False: a --workers worker, `take`n what the owner pushed)
        # the memo (module docstring): group (the policies) -> key -> entry; read by the hit paths
        self.memo: dict[tuple[Policy, ...], Memo] = {}
        self._memo_of: dict[str, Memo] = {}  # client -> its group's memo
        self._cells: dict[tuple[str, str], list[int]] = {}  # (action, policy) -> questions answered by the memo
        self._memo_entries = 0
        self._memo_bytes = 0
        self.memo_clears = 0  # times every group's keys were forgotten (a change of the book, a bound)

    # -- the book --------------------------------------------------------------------------

    def rebuild(self, index: Index) -> bool:
        """Read the policies and this node's Pods again; whether the clients' policies changed."""
        parsed: dict[tuple[str, str, str], Policy] = {}
        raw: dict[tuple[str, str, str], Policy] = {}
        for key, record in index.policies.items():
            old = self._parsed.get(key)
            p = old if old is not None and self._said.get(key) == record.spec else parse(record)
            if self._said.get(key) != record.spec:
                self._said[key] = record.spec
                for problem in p.problems:
                    log.warning("%s %s: %s", record.kind, p.ref, problem)
            raw[key] = p
            parsed[key] = self._with_feed(p)
        for key in [k for k in self._said if k not in parsed]:
            del self._said[key]
        policies_changed = parsed != self.policies  # a feed read anew is a change too (`_with_feed`)
        self._parsed = raw
        self.policies = parsed
        ordered = order(parsed.values())
        clients: dict[str, Applied] = {}
        self._ordered = ordered
        if ordered:
            pods = index.pods_on_node(self.node_name) if self.node_name else index.pods.values()
            for pod in pods:  # this node's only (--pods verified indexes every Pod of the cluster)
                if pod.host_network or pod.done or not pod.ips:
                    continue
                if self.node_name and pod.node_name != self.node_name:
                    continue
                applied = self.for_pod(index, pod)
                if applied is None:
                    continue
                for ip in pod.ips:
                    clients[ip] = applied
        return self._set(clients, forget=policies_changed)

    def _with_feed(self, p: Policy) -> Policy:
        """`p` with its RPZ feed attached when it was read and applies (the rest of the policy applies either
        way; what became of the feed is in `feeds`, the log and the policy's status)."""
        if p.rpz_ref is None:
            return p
        state = self.feed_state(p.rpz_ref)
        feed = state.feed if state is not None else None
        said = self._feeds_said.get(p.rpz_ref)
        if state is not None and (feed if feed is not None else state.problem) != said:
            self._feeds_said[p.rpz_ref] = feed if feed is not None else state.problem
            where = "{}/{} key {}".format(*p.rpz_ref)
            if feed is None:
                log.warning("ClusterDNSPolicy %s: RPZ feed %s not applied: %s", p.ref, where, state.problem)
            elif feed.problem:
                log.warning("ClusterDNSPolicy %s: RPZ feed %s not applied: %s", p.ref, where, feed.problem)
            else:
                (log.warning if feed.left_out else log.info)("ClusterDNSPolicy %s: RPZ feed %s (origin %s): %s%s",
                                                             p.ref, where, feed.origin, feed.summary(),
                                                             _examples(feed))
        if feed is None or feed.problem:
            return p
        return dataclasses.replace(p, rpz=feed)

    def feed_state(self, ref: FeedRef) -> FeedState | None:
        """What became of a feed (None: not read yet)."""
        state = self.feeds.get(ref)
        if state is None and self.no_feeds:
            return FeedState(problem=self.no_feeds, reason="NotWatched")
        return state

    def wanted_feeds(self) -> frozenset[FeedRef]:
        """The ConfigMap keys the policies name as RPZ feeds."""
        return frozenset(p.rpz_ref for p in self._parsed.values() if p.rpz_ref is not None)

    def set_feed(self, ref: FeedRef, state: FeedState | None) -> None:
        """What became of a feed (None: no policy names it any more); the book is rebuilt by the caller."""
        if state is None:
            self.feeds.pop(ref, None)
            self._feeds_said.pop(ref, None)
        else:
            self.feeds[ref] = state

    def take(self, clients: dict[str, Applied]) -> bool:
        """A --workers worker: the clients and their policies as the index owner pushed them."""
        self.owner = False
        return self._set(clients)

    def _set(self, clients: dict[str, Applied], *, forget: bool = False) -> bool:
        changed = clients != self.clients
        self.clients = clients
        if changed or forget:
            self.forget()  # before the listeners: the hit paths' map of clients is cleared by them
        if changed:
            keys = frozenset(clients)
            for listener in self.on_clients:
                listener(keys)
        return changed

    def for_pod(self, index: Index, pod: k8s.Pod) -> Applied | None:
        """The policies that apply to `pod` (its labels, its namespace's in the index), None when none does
        (the explainer asks for a Pod given by its manifest)."""
        labels = k8s.namespace_labels(pod.namespace, index.namespace_labels.get(pod.namespace, ()))
        plabels = dict(pod.labels)
        mine = tuple(p for p in self._ordered if p.applies(pod.namespace, plabels, labels))
        if not mine:
            return None
        return Applied(f"{pod.namespace}/{pod.name}", mine, cluster_namespaces(mine),
                       cluster_namespaces(mine, audit=True))

    def applied(self, pod: str) -> Applied | None:
        """The policies of a Pod (namespace/name), None when none applies."""
        for a in self.clients.values():
            if a.pod == pod:
                return a
        return None

    # -- the decision ----------------------------------------------------------------------

    def decide(self, applied: Applied | None, qname: str) -> Decision:
        """The decision for `qname` under `applied` (uncounted: the explainer asks here)."""
        if applied is None:
            return NO_POLICY
        return decide(applied.policies, qname, self.zones)

    def check(self, client: str, qname: str) -> Decision | None:
        """The counted decision for a client's question; None when no policy applies to the client."""
        applied = self.clients.get(client)
        if applied is None:
            return None
        d = decide(applied.policies, qname, self.zones)
        self.count(applied, d, qname)
        return d

    def count(self, applied: Applied, d: Decision, qname: str) -> None:
        """Count a decision (and log a denial, sampled): by (action, policy), denials by Pod and rule."""
        key = (d.action, d.policy)
        self.decisions[key] = self.decisions.get(key, 0) + 1
        if d.action == DENY:  # an RPZ feed's local data is counted (action "local"), not listed as a denial
            self._denied(applied, d, qname, enforced=True)
        if d.audit is not None:
            akey = (AUDIT, d.audit.policy)
            self.decisions[akey] = self.decisions.get(akey, 0) + 1
            self._denied(applied, d.audit, qname, enforced=False)

    def _denied(self, applied: Applied, d: Decision, qname: str, *, enforced: bool) -> None:
        row = (applied.pod, d.policy, d.rule if enforced else f"{d.rule} (audit)")
        seen = self.denied.get(row)
        if seen is None and len(self.denied) >= MAX_DENIED_ROWS:
            return
        self.denied[row] = (seen or 0) + 1
        now = self.clock()
        last = self._logged.get(d.policy)
        if seen is None or last is None or now - last >= LOG_INTERVAL:
            self._logged[d.policy] = now
            log.info("policy %s %s %s for Pod %s: %s (%s) [%d such so far]", d.policy, d.rule,
                     "denied" if enforced else "would deny (audit)", applied.pod, qname, d.rcode, self.denied[row])

    def local(self, q: Query, data: bytes, client: str, d: Decision, *, ask: Callable[[Query, bytes], Any],
              ra: bool, max_udp_size: int, applied: Applied | None = None) -> bytes | Coroutine[Any, Any, bytes] | None:
        """The answer an RPZ feed's local data makes (`d.action` LOCAL): its A/AAAA/TXT records of the type
        asked (none: NODATA), or its CNAME followed by the target's answer (`ask`: the resolver's answer to a
        question, bytes or a coroutine), the target decided under the client's policies as a question of its
        own (denied: the denial; local data of its own: the CNAME alone, no second hop). `applied`: decided
        under these policies, uncounted (the explainer), instead of the client's."""
        qend = 12 + len(q.question)
        records, target = local_answer(d.local, q.qtype)
        rrs = [RR(q.qname, rtype, ttl, data_) for rtype, ttl, data_ in records]
        try:
            wire = build_response(q, rcode=RCODE.NOERROR, aa=False, ra=ra, answer=rrs, max_udp_size=max_udp_size)
        except EncodeError:
            wire = build_response(q, rcode=RCODE.SERVFAIL, aa=False, ra=ra, max_udp_size=max_udp_size)
        if target is None or q.qtype == QT.CNAME:
            return patch(wire, data, qend)
        td = self.decide(applied, target) if applied is not None else self.check(client, target)
        if td is not None and td.action == DENY:
            if td.rcode == "DROP":
                return None
            rcode = {"NXDOMAIN": RCODE.NXDOMAIN, "REFUSED": RCODE.REFUSED}.get(td.rcode, RCODE.NOERROR)
            return patch(build_response(q, rcode=rcode, aa=False, ra=ra, answer=rrs, max_udp_size=max_udp_size),
                         data, qend)
        if td is not None and td.action == LOCAL:
            return patch(wire, data, qend)
        try:
            name = encode_name(target)
        except ValueError:
            return patch(wire, data, qend)
        tq = q._replace(qname=target, key=q.key[:KEY_HEAD] + name + q.key[-4:], question=name + q.question[-4:])
        tdata = data[:12] + tq.question + data[qend:]
        out = ask(tq, tdata)
        if out is None:
            return patch(wire, data, qend)
        if isinstance(out, bytes):
            return self._chained(q, data, rrs, out, ra, max_udp_size, wire)
        return self._chained_later(q, data, rrs, out, ra, max_udp_size, wire)

    async def _chained_later(self, q: Query, data: bytes, rrs: list[RR], out: Any, ra: bool, max_udp_size: int,
                             plain: bytes) -> bytes:
        return self._chained(q, data, rrs, await out, ra, max_udp_size, plain)

    @staticmethod
    def _chained(q: Query, data: bytes, rrs: list[RR], target: bytes | None, ra: bool, max_udp_size: int,
                 plain: bytes) -> bytes:
        qend = 12 + len(q.question)
        if target is None:
            return patch(plain, data, qend)
        try:
            wire = build_chased(q, chain=rrs, target=target, ra=ra, max_udp_size=max_udp_size)
        except Exception:  # noqa: BLE001 - a target answer dnslib cannot read: the CNAME alone
            return patch(plain, data, qend)
        return patch(wire, data, qend)

    def outside(self, client: str, wire: bytes, qend: int) -> Decision | None:
        """The denial of a cluster answer for `client` that names a namespace its enforcing policies hide
        (None: the answer may go as it is)."""
        return self.hides(self.clients.get(client), wire, qend)

    def hides(self, applied: Applied | None, wire: bytes, qend: int) -> Decision | None:
        """`outside` for the policies `applied`."""
        if applied is None or applied.namespaces is None:
            return None
        allowed = applied.namespaces
        for name in answer_names(wire, qend):
            ns = zone_namespace(name, self.zones)
            if ns is not None and ns not in allowed:
                for p in applied.policies:
                    if p.mode != AUDIT and p.cluster_namespaces is not None and ns not in p.cluster_namespaces:
                        return Decision(DENY, "NXDOMAIN", p.ref, "clusterZone")
        return None

    def recount(self, client: str, was: Decision | None, now: Decision, qname: str) -> None:
        """A decision counted as `was` turned out `now` (an answer that names a hidden namespace)."""
        applied = self.clients.get(client)
        if applied is None:
            return
        if was is not None:
            key = (was.action, was.policy)
            if self.decisions.get(key, 0) > 0:
                self.decisions[key] -= 1
        self.count(applied, now, qname)

    # -- the memo --------------------------------------------------------------------------

    def remember(self, client: str, key: bytes, answer: object, d: Decision) -> Memo | None:
        """Remember that `client`'s policies let the stored answer for `key` through unchanged (`answer`:
        True when the decision does not read the answer, else the stored answer checked); the group's memo
        it went into, or None when it may not go in (not an enforcing allow, an audit policy would deny,
        the client under no policy)."""
        applied = self.clients.get(client)
        if applied is None or d.action != ALLOW or d.audit is not None:
            return None
        size = len(answer) if isinstance(answer, bytes) else 0
        if (self._memo_entries >= MEMO_ENTRIES or self._memo_bytes + size > MEMO_BYTES
                or (client not in self._memo_of and applied.policies not in self.memo
                    and len(self.memo) >= MEMO_GROUPS)):
            self.forget()
        group = self._memo_of.get(client)
        if group is None:
            group = self.memo.get(applied.policies)
            if group is None:
                group = self.memo[applied.policies] = {}
            self._memo_of[client] = group
        if len(group) >= MEMO_KEYS and key not in group:
            self._memo_entries -= len(group)
            self._memo_bytes -= sum(len(e[0]) for e in group.values() if isinstance(e[0], bytes))
            group.clear()
        old = group.get(key)
        if old is None:
            self._memo_entries += 1
        elif isinstance(old[0], bytes):
            self._memo_bytes -= len(old[0])
        self._memo_bytes += size
        dkey = (d.action, d.policy)
        cell = self._cells.get(dkey)
        if cell is None:
            cell = self._cells[dkey] = [0]
        group[key] = (answer, cell)
        return group

    def fold(self) -> None:
        """The questions the memo answered, into `decisions`."""
        for dkey, cell in self._cells.items():
            if cell[0]:
                self.decisions[dkey] = self.decisions.get(dkey, 0) + cell[0]
                cell[0] = 0

    def forget(self) -> None:
        """Every group's keys forgotten (in place: a map that still points at a group finds it empty)."""
        self.fold()
        if not self.memo and not self._memo_of:
            return
        for group in self.memo.values():
            group.clear()
        for group in self._memo_of.values():
            group.clear()
        self.memo.clear()
        self._memo_of.clear()
        self._cells.clear()
        self._memo_entries = self._memo_bytes = 0
        self.memo_clears += 1

    def memo_status(self) -> dict[str, int]:
        """What the memo holds: groups, keys, bytes of answers held, times forgotten."""
        return {"groups": len(self.memo), "keys": self._memo_entries, "bytes": self._memo_bytes,
                "clears": self.memo_clears}

    # -- what it shows ---------------------------------------------------------------------

    def status(self) -> Mapping[str, Any]:
        """The "policy" section of /status and /metrics (a worker's: its counts only, summed by the
        supervisor's)."""
        self.fold()
        counts = {
            "decisions": [{"action": a, "policy": p, "count": n} for (a, p), n in sorted(self.decisions.items())],
            "denied": [{"pod": pod, "policy": p, "rule": r, "count": n}
                       for (pod, p, r), n in sorted(self.denied.items())],
        }
        if not self.owner:
            return counts
        return {
            "policies": [{"policy": p.ref, "kind": p.kind, "mode": p.mode, "rules": len(p.rules),
                          "pods": sum(1 for a in {a.pod: a for a in self.clients.values()}.values()
                                      if p in a.policies),
                          "problems": list(p.problems) + self.feed_problems(p),
                          **({"rpz": self.feed_status(p.rpz_ref)} if p.rpz_ref is not None else {})}
                         for p in order(self.policies.values())],
            "clients": len(self.clients),
            **counts,
        }


    def feed_status(self, ref: FeedRef) -> dict[str, Any]:
        """The /status view of one feed: where it is read from, its state and counts."""
        state = self.feed_state(ref)
        out: dict[str, Any] = {"configMap": f"{ref[0]}/{ref[1]}", "key": ref[2]}
        feed = state.feed if state is not None else None
        if state is None:
            out["state"] = "not read yet"
        elif feed is None or feed.problem:
            out["state"] = "not applied"
            out["problem"] = feed.problem if feed is not None else state.problem
        else:
            out.update(state="applied", origin=feed.origin, triggers=feed.entries, left_out=dict(feed.left_out))
        return out

    def feed_problems(self, p: Policy) -> list[str]:
        """What of a policy's RPZ feed is left out, as its problems (none while it is not read yet)."""
        if p.rpz_ref is None:
            return []
        state = self.feed_state(p.rpz_ref)
        if state is None:
            return []
        where = "rpz {}/{} key {}".format(*p.rpz_ref)
        feed = state.feed
        if feed is None or feed.problem:
            return [f"{where}: {feed.problem if feed is not None else state.problem}: the feed is not applied "
                    "(the rules are)"]
        return [f"{where}: {n} {why} left out{_said_examples(feed, why)} (the rest of the feed applies)"
                for why, n in sorted(feed.left_out.items())]


def _said_examples(feed: Feed, why: str) -> str:
    shown = feed.examples.get(why) or ()
    return f" (such as {shown[0]!r})" if shown else ""


def _examples(feed: Feed) -> str:
    return "".join(f"; {why}: e.g. {feed.examples[why][0]!r}" for why in sorted(feed.examples) if feed.examples[why])


_TARGETS = (QT.CNAME, QT.PTR, QT.SRV)


def answer_names(wire: bytes, qend: int) -> list[str]:
    """The names an answer section shows: each record's owner, and the targets of CNAME, PTR and SRV
    records (lowercase, no trailing dot); [] when the message cannot be walked."""
    try:
        rrs = iter_rrs(wire, qend)
    except FormatError:
        return []
    out = []
    for section, start, rtype, ttl_off, _end in rrs:
        if section != 0:
            break
        out.append(read_name(wire, start))
        if rtype in _TARGETS:
            rdata = ttl_off + 6
            out.append(read_name(wire, rdata + 6 if rtype == QT.SRV else rdata))
    return out


def read_name(wire: bytes, pos: int) -> str:
    """The name at `pos`, compression pointers followed (at most 64 hops), lowercase, no trailing dot."""
    labels: list[str] = []
    hops = 0
    while pos < len(wire):
        n = wire[pos]
        if n >= 0xC0:
            hops += 1
            if hops > 64 or pos + 1 >= len(wire):
                break
            pos = ((n & 0x3F) << 8) | wire[pos + 1]
            continue
        if n == 0:
            break
        labels.append(wire[pos + 1: pos + 1 + n].decode("ascii", "replace").lower())
        pos += n + 1
    return ".".join(labels)
