"""What the supervisor pushes to its workers (the allow list's inputs, autopath plans, the Pods' namespaces) and the
parts that take it.

Both are read for many queries and depend on a few hundred objects at most (this node's Node and Pods):
the supervisor forms them (`allow_rules`, `autopath_plans`) and pushes them when they change
(messages.Allow, messages.Plans); a worker decides from them locally (`PushedAllowList`,
`PushedAutopath`).
"""

from __future__ import annotations

import ipaddress

from nodedns.cluster.index import Index
from nodedns.names import IPNetwork
from nodedns.podconf.searchpath import Autopath, Plan
from nodedns.serve.limits import LOOPBACK, AllowList
from nodedns.workers.messages import Allow, Plans, Tenants


def allow_rules(allow: AllowList, index: Index, node_name: str) -> Allow | None:
    """The default allow list's inputs as the supervisor has them: networks, open, pod CIDRs, IPs of
    this node's Pods; None with an explicit --allow-from (a worker builds that one itself)."""
    if allow.explicit is not None:
        return None
    pod_ips = frozenset(ip for p in index.pods_on_node(node_name) if not p.host_network for ip in p.ips) \
        if node_name else frozenset()
    return Allow(tuple(str(n) for n in allow.networks), allow.open, allow.pod_cidrs, pod_ips)


def autopath_plans(autopath: Autopath, index: Index, node_name: str) -> Plans:
    """Autopath as the supervisor decides it: the plan of each client IP of this node's Pods that has
    one, and the namespaces where a walk may replace an NXDOMAIN."""
    plans: dict[str, Plan] = {}
    if node_name:
        for pod in index.pods_on_node(node_name):
            for ip in pod.ips:
                plan = autopath.plan_for(ip)
                if plan is not None:
                    plans[ip] = plan
    return Plans(plans, autopath.namespaces())


def pod_namespaces(index: Index, node_name: str) -> Tenants:
    """The address -> namespace of each (non-hostNetwork) Pod of this node: the miss budget per namespace
    (a worker's `limits.Namespaces`)."""
    if not node_name:
        return Tenants({})
    return Tenants({ip: p.namespace for p in index.pods_on_node(node_name) if not p.host_network for ip in p.ips})


class PushedAllowList(AllowList):
    """A worker's allow list: the default rules come from the supervisor (`apply`); an explicit
    --allow-from is the worker's own."""

    def __init__(self, *, explicit: tuple[IPNetwork, ...] | None, own_addresses: tuple[str, ...]) -> None:
        self.pod_ips: frozenset[str] = frozenset()
        super().__init__(explicit=explicit, own_addresses=own_addresses)

    def refresh(self, *, force: bool = False) -> None:
        if self.explicit is not None:
            super().refresh(force=force)
        elif force:  # until the supervisor's rules arrive: as the supervisor starts, every client
            self._set([*LOOPBACK, *(ipaddress.ip_network(a) for a in self.own)], open_=True)

    def apply(self, rules: Allow) -> None:
        self.pod_cidrs, self.pod_ips = tuple(rules.pod_cidrs), rules.pod_ips
        self._set([ipaddress.ip_network(n) for n in rules.networks], open_=rules.open)

    def _pod_of_this_node(self, ip: str) -> bool:
        return ip in self.pod_ips


class PushedAutopath(Autopath):
    """A worker's autopath: the plans and namespaces the supervisor decided (`apply`); the walk and
    its counters are the worker's."""

    def __init__(self, *, index: Index, zone: str) -> None:
        super().__init__(index=index, zone=zone, node_name="")
        self.plans: dict[str, Plan] = {}
        self.walkable: frozenset[str] = frozenset()

    def apply(self, plans: Plans) -> None:
        self.plans, self.walkable = plans.plans, plans.namespaces

    def plan_for(self, client: str) -> Plan | None:
        return self.plans.get(client)

    def namespaces(self) -> frozenset[str]:
        return self.walkable
