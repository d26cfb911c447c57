"""A DNS policy read from its spec, and the decision for one question (pure).

`parse(record)` turns a slim `objects.Policy` into a `Policy`: its selectors, its mode, its cluster-zone
namespaces, its rules and its default. What the API server accepted but the agent cannot use (a name
pattern it cannot parse, an RPZ feed, a value outside the schema's enums when the schema was bypassed)
is listed in `problems` and left out; the rest of the policy applies. Nothing unusable turns into "deny
everything" or "allow everything": a rule without a usable name is dropped (and said), an unknown
action drops its rule, an unknown rcode is NXDOMAIN, an unknown mode is enforce, an unknown default is
allow, an unreadable selector selects no Pod; each said in `problems`.

Names in rules: `a.example` exactly; `*.a.example` every name below a.example (not a.example itself);
`.a.example` the zone (a.example and every name below it); `.` every name.

`decide(policies, qname, zones)`: the policies that apply to a Pod, cluster ones first then namespace
ones (each group by name), the question's name (lowercase, no trailing dot):

1. the cluster zone: a name in a cluster zone (`zones`) that belongs to a namespace (`<..>.<ns>.svc.<zone>`,
   `<..>.<ns>.pod.<zone>`) outside a policy's `clusterZone.namespaces` is NXDOMAIN, as if absent (the
   first such policy decides; reverse names are checked on the answer: `outside_namespaces`);
2. the rules, in order, policy after policy: the first rule one of whose names matches decides;
3. no rule matched: deny (with the rcode NXDOMAIN) when a policy's default is deny (the first such
   decides), else allow.

Audit policies take part as if they enforced, but only the enforcing ones decide: the `Decision`'s
`audit` is what an audit policy would have denied that the enforcing ones let through.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodedns.cluster import objects as k8s
from nodedns.names import is_dns1123_label, is_subdomain, name_problem, relative_labels
from nodedns.policy import rpz as feeds

ENFORCE = "enforce"
AUDIT = "audit"
ALLOW = "allow"
DENY = "deny"
LOCAL = "local"  # an RPZ feed's local data: the answer is made from the feed
DROP = "DROP"  # the rcode of an RPZ `rpz-drop.` denial: no answer at all
RPZ = "rpz"  # the rule an RPZ feed's decisions are counted under
RCODES = ("NXDOMAIN", "NODATA", "REFUSED")
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class Selector:
    """A Kubernetes label selector: matchLabels and matchExpressions, ANDed; empty selects everything."""

    labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, frozenset[str]], ...] = ()
    nothing: bool = False  # unreadable: selects nothing (said in the policy's problems)

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, value in self.labels:
            if labels.get(key) != value:
                return False
        for key, op, values in self.expressions:
            have = key in labels
            if op == "In":
                if not have or labels[key] not in values:
                    return False
            elif op == "NotIn":
                if have and labels[key] in values:
                    return False
            elif op == "Exists":
                if not have:
                    return False
            elif have:  # DoesNotExist
                return False
        return True


EVERYTHING = Selector()


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: its names (exact, below a name, a zone), its action and, for deny, its rcode."""

    number: int  # its place in the policy's rules, from 1 (what explain and the metrics say)
    exact: frozenset[str]
    below: frozenset[str]  # `*.x`: names strictly below x
    zones: frozenset[str]  # `.x`: x and every name below ("" the root: every name)
    action: str
    rcode: str

    def matches(self, qname: str, parents: Sequence[str]) -> bool:
        """`parents`: the names above `qname`, nearest first, the root ("") last."""
        if qname in self.exact or qname in self.zones:
            return True
        below, zones = self.below, self.zones
        if not below and not zones:
            return False
        return any(p in below or p in zones for p in parents)


@dataclass(frozen=True, slots=True)
class Policy:
    """A DNS policy as the agent uses it (module docstring)."""

    kind: str  # objects.DNS_POLICY | objects.CLUSTER_DNS_POLICY
    namespace: str  # "" for a ClusterDNSPolicy
    name: str
    mode: str
    pods: Selector
    namespaces: Selector | None  # a ClusterDNSPolicy's namespaceSelector; None: its own namespace only
    cluster_namespaces: frozenset[str] | None  # clusterZone.namespaces; None: every namespace
    rules: tuple[Rule, ...]
    default: str
    problems: tuple[str, ...] = ()
    rpz_ref: tuple[str, str, str] | None = None  # spec.rpz.configMapRef: (namespace, name, key)
    rpz: feeds.Feed | None = None  # the feed read from it (None: not read, or unusable: `PolicyBook.feeds` says)

    @property
    def ref(self) -> str:
        """`ns/name` of a DNSPolicy, `name` of a ClusterDNSPolicy (the `policy` label of the metrics)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def cluster(self) -> bool:
        return self.kind == k8s.CLUSTER_DNS_POLICY

    def applies(self, pod_namespace: str, pod_labels: Mapping[str, str], ns_labels: Mapping[str, str]) -> bool:
        """Whether this policy applies to a Pod with these labels, in a namespace with these."""
        if self.namespaces is None:
            if pod_namespace != self.namespace:
                return False
        elif not self.namespaces.matches(ns_labels):
            return False
        return self.pods.matches(pod_labels)


def _selector(raw: Any, what: str, problems: list[str]) -> Selector:
    if raw is None:
        return EVERYTHING
    if not isinstance(raw, Mapping):
        problems.append(f"{what} is not an object: it selects nothing")
        return Selector(nothing=True)
    labels = raw.get("matchLabels") or {}
    exprs = raw.get("matchExpressions") or []
    if not isinstance(labels, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        problems.append(f"{what}.matchLabels is not a map of strings: it selects nothing")
        return Selector(nothing=True)
    out: list[tuple[str, str, frozenset[str]]] = []
    if not isinstance(exprs, list):
        problems.append(f"{what}.matchExpressions is not a list: it selects nothing")
        return Selector(nothing=True)
    for i, e in enumerate(exprs):
        ok = isinstance(e, Mapping) and isinstance(e.get("key"), str) and e.get("operator") in OPERATORS
        values = e.get("values") or [] if isinstance(e, Mapping) else []
        if ok and isinstance(values, list) and all(isinstance(v, str) for v in values):
            op = e["operator"]
            if op in ("In", "NotIn") and not values or op in ("Exists", "DoesNotExist") and values:
                ok = False
        else:
            ok = False
        if not ok:
            problems.append(f"{what}.matchExpressions[{i}] is not a usable expression (key, an operator of "
                            f"{', '.join(OPERATORS)}, values for In/NotIn only): it selects nothing")
            return Selector(nothing=True)
        out.append((e["key"], e["operator"], frozenset(values)))
    return Selector(tuple(sorted(labels.items())), tuple(out))


def pattern(text: Any) -> tuple[str, str] | str:
    """("exact" | "below" | "zone", name) for a rule's name, or why it cannot be used."""
    if not isinstance(text, str) or not text:
        return f"{text!r} is not a name"
    raw = text.strip().lower()
    if raw == ".":
        return "zone", ""
    if raw.endswith(".") and len(raw) > 1:
        raw = raw[:-1]
    how = "exact"
    if raw.startswith("*."):
        how, raw = "below", raw[2:]
    elif raw.startswith("."):
        how, raw = "zone", raw[1:]
    problem = name_problem(raw)
    if problem is None and "*" in raw:
        problem = "a '*' only as the whole first label"
    if problem is not None:
        return f"{text!r} cannot be used: {problem}"
    return how, raw


def _rules(raw: Any, problems: list[str]) -> tuple[Rule, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append("rules is not a list: no rule applies")
        return ()
    out = []
    for number, r in enumerate(raw, 1):
        if not isinstance(r, Mapping):
            problems.append(f"rules[{number - 1}] is not an object: dropped")
            continue
        action = r.get("action")
        if action not in (ALLOW, DENY):
            problems.append(f"rules[{number - 1}]: action {action!r} is neither allow nor deny: the rule is dropped")
            continue
        rcode = r.get("rcode", "NXDOMAIN")
        if rcode not in RCODES:
            problems.append(f"rules[{number - 1}]: rcode {rcode!r} is not one of {', '.join(RCODES)}: NXDOMAIN")
            rcode = "NXDOMAIN"
        found: dict[str, set[str]] = {"exact": set(), "below": set(), "zone": set()}
        names = r.get("names")
        for text in names if isinstance(names, list) else []:
            p = pattern(text)
            if isinstance(p, str):
                problems.append(f"rules[{number - 1}]: the name {p}; the rule's other names apply")
                continue
            found[p[0]].add(p[1])
        if not any(found.values()):
            problems.append(f"rules[{number - 1}]: no usable name: the rule is dropped")
            continue
        out.append(Rule(number, frozenset(found["exact"]), frozenset(found["below"]), frozenset(found["zone"]),
                        action, rcode))
    return tuple(out)


def parse(record: k8s.Policy) -> Policy:
    """The policy a slim record holds (module docstring: what is left out is in `problems`)."""
    problems: list[str] = []
    try:
        spec = json.loads(record.spec)
    except ValueError:
        spec = None
    if not isinstance(spec, Mapping):
        problems.append("spec is not an object: the policy applies to no Pod")
        spec = {}
        pods = Selector(nothing=True)
    else:
        pods = _selector(spec.get("podSelector"), "podSelector", problems)
    cluster = record.kind == k8s.CLUSTER_DNS_POLICY
    namespaces = _selector(spec.get("namespaceSelector"), "namespaceSelector", problems) if cluster else None
    if not cluster and "namespaceSelector" in spec:
        problems.append("namespaceSelector is for a ClusterDNSPolicy: ignored (a DNSPolicy applies in its namespace)")
    mode = spec.get("mode", ENFORCE)
    if mode not in (ENFORCE, AUDIT):
        problems.append(f"mode {mode!r} is neither enforce nor audit: enforce")
        mode = ENFORCE
    default = spec.get("default", ALLOW)
    if default not in (ALLOW, DENY):
        problems.append(f"default {default!r} is neither allow nor deny: allow")
        default = ALLOW
    cz = spec.get("clusterZone")
    cluster_namespaces: frozenset[str] | None = None
    if isinstance(cz, Mapping) and cz.get("namespaces") is not None:
        listed = cz["namespaces"] if isinstance(cz["namespaces"], list) else []
        good = {n for n in listed if isinstance(n, str) and is_dns1123_label(n)}
        bad = [n for n in listed if n not in good]
        if bad or not isinstance(cz["namespaces"], list):
            problems.append(f"clusterZone.namespaces: {bad or cz['namespaces']!r} not namespace names: left out "
                            "(the cluster zone is narrowed to the others)")
        cluster_namespaces = frozenset(good)
    elif cz is not None and not isinstance(cz, Mapping):
        problems.append("clusterZone is not an object: ignored")
    rpz_ref = _rpz_ref(spec.get("rpz"), cluster, problems)
    return Policy(record.kind, record.namespace, record.name, mode, pods, namespaces, cluster_namespaces,
                  _rules(spec.get("rules"), problems), default, tuple(problems), rpz_ref)


def _rpz_ref(raw: Any, cluster: bool, problems: list[str]) -> tuple[str, str, str] | None:
    """spec.rpz.configMapRef as (namespace, name, key), or None (said in `problems` when it was given)."""
    if raw is None:
        return None
    if not cluster:
        problems.append("rpz is for a ClusterDNSPolicy: ignored")
        return None
    ref = raw.get("configMapRef") if isinstance(raw, Mapping) else None
    parts = [ref.get(k) if isinstance(ref, Mapping) else None for k in ("namespace", "name", "key")]
    if not all(isinstance(v, str) and v for v in parts) or not is_dns1123_label(str(parts[0])):
        problems.append("rpz.configMapRef needs a namespace, a name and a key: the feed is not applied (the "
                        "rules are)")
        return None
    return str(parts[0]), str(parts[1]), str(parts[2])


def order(policies: Iterable[Policy]) -> tuple[Policy, ...]:
    """Cluster policies first, then namespace ones, each group by namespace and name."""
    return tuple(sorted(policies, key=lambda p: (not p.cluster, p.namespace, p.name)))


# ----------------------------------------------------------------------------------------------
# The decision


@dataclass(frozen=True, slots=True)
class Decision:
    """What the enforcing policies decide (`action`, `rcode`, by `policy`'s `rule`), and what an audit
    policy would have denied besides (`audit`: its decision, or None)."""

    action: str  # allow | deny
    rcode: str  # for deny
    policy: str  # the deciding policy's ref ("" when no policy decides: nothing applies)
    rule: str  # "rules[N]" | "clusterZone" | "default" | "rpz"
    audit: Decision | None = None
    trigger: str = ""  # rule "rpz": the feed's trigger that matched (relative to its origin)
    local: tuple[feeds.LocalRecord, ...] = ()  # action "local": the feed's records for the trigger

    def describe(self) -> str:
        what = f"{self.action}" + (f" ({self.rcode})" if self.action == DENY else "")
        rule = f"{self.rule} ({self.trigger})" if self.trigger else self.rule
        head = f"{what} by {self.policy} {rule}" if self.policy else what + " (no policy applies)"
        if self.audit is not None:
            head += f"; audit: {self.audit.policy} {self.audit.rule} would deny ({self.audit.rcode})"
        return head


NO_POLICY = Decision(ALLOW, "", "", "")


def parents(qname: str) -> list[str]:
    """The names above `qname`, nearest first, the root ("") last."""
    out = []
    rest = qname
    while rest:
        dot = rest.find(".")
        rest = rest[dot + 1:] if dot >= 0 else ""
        out.append(rest)
    return out


def zone_namespace(qname: str, zones: Sequence[str]) -> str | None:
    """The namespace a cluster-zone name belongs to (`..<ns>.svc.<zone>`, `..<ns>.pod.<zone>`), else None."""
    for zone in zones:
        if zone and is_subdomain(qname, zone):
            rel = relative_labels(qname, zone)
            if len(rel) >= 2 and rel[-1] in ("svc", "pod"):
                return rel[-2]
            return None
    return None


def _decide(policies: Sequence[Policy], qname: str, ups: Sequence[str], ns: str | None) -> Decision | None:
    if not policies:
        return None
    if ns is not None:
        for p in policies:
            if p.cluster_namespaces is not None and ns not in p.cluster_namespaces:
                return Decision(DENY, "NXDOMAIN", p.ref, "clusterZone")
    for p in policies:
        for r in p.rules:
            if r.matches(qname, ups):
                return Decision(r.action, r.rcode if r.action == DENY else "", p.ref, f"rules[{r.number - 1}]")
        feed = p.rpz
        if feed is not None:  # after the policy's own rules: an explicit allow of the policy wins over its feed
            hit = feed.match(qname, ups)
            if hit is not None:
                return _rpz_decision(p.ref, feed, *hit)
    for p in policies:
        if p.default == DENY:
            return Decision(DENY, "NXDOMAIN", p.ref, "default")
    return Decision(ALLOW, "", policies[0].ref, "default")


_RPZ_DENIALS = {feeds.NXDOMAIN: "NXDOMAIN", feeds.NODATA: "NODATA", feeds.DROP: DROP}


def _rpz_decision(ref: str, feed: feeds.Feed, code: int, trigger: str) -> Decision:
    rcode = _RPZ_DENIALS.get(code)
    if rcode is not None:
        return Decision(DENY, rcode, ref, RPZ, trigger=trigger)
    if code == feeds.LOCAL:
        return Decision(LOCAL, "", ref, RPZ, trigger=trigger, local=feed.records(trigger))
    return Decision(ALLOW, "", ref, RPZ, trigger=trigger)  # passthru


def decide(policies: Sequence[Policy], qname: str, zones: Sequence[str] = ()) -> Decision:
    """The decision for `qname` under `policies` (ordered: `order`), module docstring."""
    if not policies:
        return NO_POLICY
    ups = parents(qname)
    ns = zone_namespace(qname, zones)
    enforcing = [p for p in policies if p.mode == ENFORCE]
    enforced = _decide(enforcing, qname, ups, ns) or Decision(ALLOW, "", policies[0].ref, "default")
    if len(enforcing) == len(policies):
        return enforced
    everything = _decide(policies, qname, ups, ns)
    if not enforcing and everything is not None and everything.action == ALLOW:
        return everything
    if everything is not None and everything.action != ALLOW and enforced.action == ALLOW:
        return Decision(enforced.action, enforced.rcode, enforced.policy, enforced.rule, everything, enforced.trigger)
    return enforced


def cluster_namespaces(policies: Sequence[Policy], *, audit: bool = False) -> frozenset[str] | None:
    """The namespaces whose cluster-zone names the enforcing policies (`audit`: all) let a Pod see (None:
    every one)."""
    out: frozenset[str] | None = None
    for p in policies:
        if p.cluster_namespaces is None or (p.mode != ENFORCE and not audit):
            continue
        out = p.cluster_namespaces if out is None else out & p.cluster_namespaces
    return out
