"""Which policies apply to which client of this node, and the gate the resolver asks (state, counters).

`PolicyBook.rebuild(index)` reads the index's DNS policies (`model.parse`, each problem logged once per
version of the policy) and this node's Pods (their labels, their namespace's labels) into `clients`:
client address -> `Applied` (the Pod, its policies in order). A Pod in the host network shares the
node's address: no policy applies to it by address. The book is rebuilt on every change of a Pod, a
Namespace or a policy (once per loop turn), so a policy change takes effect on the next query.

`clients` is what the hit paths need: the allow list never remembers an address in it
(`limits.AllowList.policed`), so both hit paths (C and Python) hand a datagram of such a client to the
resolver, which asks `check` before any stored answer, unless the memo below already holds its answer. A
client under no policy pays nothing here.

The memo (`memo`: one per group of clients under the same policies, `remember`): the keys of stored answers
the resolver decided a group's policies let through unchanged, read by both hit paths (through
`limits.AllowList.policed_hits`, the admitted clients' groups) and by the resolver's own first look, so a
repeat cached question of a Pod under a policy is answered there. A key enters only with an enforcing
"allow" that no audit policy would have denied (audit reporting stays exact: such keys are decided each
time). An entry is `(answer, cell)`: `answer` True when the decision does not read the answer (a name
outside the cluster zones, or no `clusterZone` among the group's policies), else the very stored answer
checked (`hides`): the hit paths serve only that object, so an answer rendered again (the index changed)
is decided again. `cell` counts the questions the memo answered under their (action, policy), folded
into `decisions` when they are read (`fold`), so the counts stay those of every question. Bounded: at
most MEMO_KEYS keys a group (then that group's are forgotten), MEMO_ENTRIES keys and MEMO_BYTES of
answers held in all, MEMO_GROUPS groups (then all are forgotten). `forget` drops it all: called on
every change of the book (the policies, the clients and theirs); whatever else a decision comes to read
must call it when that changes.

`check(client, qname)` decides (`model.decide`), counts the decision by (action, policy) (action
`allow`, `deny`, or `audit` for what an audit policy would have denied), by Pod and deciding rule for
denials, and logs a denial (sampled: the first of each (Pod, policy, rule), then one a minute per
policy). `outside(client, wire, qend)` says whether a cluster answer names a namespace the client may
not see (reverse names and CNAME chains: their targets; see `answer_names`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodedns.cluster import objects as k8s
from nodedns.cluster.index import Index
from nodedns.dns.wire import QT, iter_rrs
from nodedns.errors import FormatError
from nodedns.policy.model import (
    ALLOW,
    AUDIT,
    DENY,
    NO_POLICY,
    Decision,
    Policy,
    cluster_namespaces,
    decide,
    order,
    parse,
    zone_namespace,
)

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
        for key, record in index.policies.items():
            old = self.policies.get(key)
            p = old if old is not None and self._said.get(key) == record.spec else parse(record)
            if self._said.get(key) != record.spec:
                self._said[key] = record.spec
                for problem in p.problems:
                    log.warning("%s %s: %s", record.kind, p.ref, problem)
            parsed[key] = p
        for key in [k for k in self._said if k not in parsed]:
            del self._said[key]
        policies_changed = parsed != self.policies
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
        if d.action == DENY:
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
                          "problems": list(p.problems)} for p in order(self.policies.values())],
            "clients": len(self.clients),
            **counts,
        }


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
