"""What a --workers supervisor pushes: a worker's allow list and autopath decide as the supervisor's would,
from the pushed data alone (an empty index of its own)."""

from __future__ import annotations

import ipaddress

import pytest

from nodedns.cluster.index import Index
from nodedns.serve.limits import AllowList, Namespaces
from nodedns.workers.pushed import PushedAllowList, allow_rules, pod_namespaces
from tests.support import manifests as mf

NODE = "node-a"
OWN = ("169.254.20.10",)
CLIENTS = ["127.0.0.1", "::1", "169.254.20.10", "10.244.0.7", "fd00:10:244::5", "10.9.0.7", "10.9.0.8",
           "192.168.99.9", "8.8.8.8", "2001:db8::1", "not-an-ip"]


def node_index(*, pod_cidrs: list[str] | None) -> Index:
    index = Index()
    index.apply("Node", "ADDED", mf.node(NODE, pod_cidrs=pod_cidrs))
    index.apply("Pod", "ADDED", mf.pod("calico", ip="10.9.0.7", node_name=NODE))  # outside the pod CIDR
    index.apply("Pod", "ADDED", mf.pod("elsewhere", ip="10.9.0.8", node_name="node-b"))
    index.apply("Pod", "ADDED", mf.pod("host", ip="192.168.99.9", node_name=NODE, host_network=True))
    index.mark_synced()
    return index


@pytest.mark.parametrize("pod_cidrs", [["10.244.0.0/24", "fd00:10:244::/64"], None], ids=["known-cidrs", "open"])
def test_a_worker_admits_exactly_the_clients_the_supervisor_admits(pod_cidrs: list[str] | None) -> None:
    index = node_index(pod_cidrs=pod_cidrs)
    owner = AllowList(explicit=None, own_addresses=OWN, index=index, node_name=NODE)
    rules = allow_rules(owner, index, NODE)
    assert rules is not None
    worker = PushedAllowList(explicit=None, own_addresses=OWN)
    worker.apply(rules)
    decided = {c: worker.admit(c) for c in CLIENTS}
    assert decided == {c: owner.admit(c) for c in CLIENTS}
    assert worker.status()["mode"] == owner.status()["mode"] == ("default" if pod_cidrs else "open")
    if pod_cidrs:  # the decision is not "everyone": this node's Pods in, others out
        assert decided["10.9.0.7"] and not decided["10.9.0.8"] and not decided["192.168.99.9"]
        assert not decided["8.8.8.8"]


def test_until_the_rules_arrive_a_worker_answers_every_client_and_an_explicit_list_is_its_own() -> None:
    worker = PushedAllowList(explicit=None, own_addresses=OWN)
    assert worker.open and worker.admit("8.8.8.8")
    explicit = PushedAllowList(explicit=(ipaddress.ip_network("10.0.0.0/8"),), own_addresses=OWN)
    assert explicit.admit("10.9.0.8") and not explicit.admit("8.8.8.8")
    owner = AllowList(explicit=explicit.explicit, own_addresses=OWN)
    assert allow_rules(owner, node_index(pod_cidrs=None), NODE) is None  # nothing to push


def test_a_worker_knows_each_client_s_namespace_as_the_supervisor_does() -> None:
    """The shares per namespace (upstream queries, --miss-limit-namespace) in a worker, from what the
    supervisor pushed (`pod_namespaces`, messages.Tenants), decide as the index owner's would."""
    index = node_index(pod_cidrs=["10.244.0.0/24"])
    index.apply("Pod", "ADDED", mf.pod("web", "shop", ip="10.244.0.7", node_name=NODE))
    owner = Namespaces(index, NODE)
    worker = Namespaces(None)
    assert all(worker(c) is None for c in CLIENTS)  # before the first push: no namespace, each client its own
    worker.apply(pod_namespaces(index, NODE).namespaces)
    decided = {c: worker(c) for c in CLIENTS}
    assert decided == {c: owner(c) for c in CLIENTS}
    assert decided["10.244.0.7"] == "shop" and decided["10.9.0.7"] == "default"
    assert decided["10.9.0.8"] is None and decided["192.168.99.9"] is None  # another node's; hostNetwork
