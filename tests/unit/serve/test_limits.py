"""The miss budget per client and per namespace, the capacity for TC=1 replies over a budget, and the rate
limit's one-second windows and client table against a model (nodedns/serve/limits.py `MissBudget`,
`Capacity`, `RateLimiter`, `Namespaces`)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodedns.cluster import manifests
from nodedns.cluster.index import Index
from nodedns.serve.limits import Capacity, MissBudget, Namespaces, RateLimiter
from tests.support import cluster_fixture as cf

P, D, S = MissBudget.PASS, MissBudget.DROP, MissBudget.SLIP


class Clock:
    def __init__(self) -> None:
        self.now = 1000.25

    def __call__(self) -> float:
        return self.now


def budget(rate: int, namespace_rate: int = 0, *, capacity: int = 1000, pods: dict[str, str] | None = None,
           clock: Clock | None = None) -> MissBudget:
    clock = clock or Clock()
    table = pods or {}
    return MissBudget(rate, namespace_rate, capacity=Capacity(capacity, clock=clock), namespace_of=table.get,
                      clock=clock)


def test_a_client_gets_exactly_its_budget_of_misses_then_tc() -> None:
    b = budget(5)
    assert [b.take("10.0.0.1") for _ in range(7)] == [P] * 5 + [S, S]
    assert b.shed == {"client": 2, "namespace": 0} and b.slipped == 2 and b.dropped == 0
    assert [b.take("10.0.0.2") for _ in range(5)] == [P] * 5  # another client: a budget of its own


def test_a_new_second_gives_a_new_budget_and_no_more() -> None:
    clock = Clock()
    b = budget(3, clock=clock)
    assert [b.take("c") for _ in range(2)] == [P, P]
    clock.now += 1.0
    assert [b.take("c") for _ in range(4)] == [P, P, P, S]


def test_the_pods_of_a_namespace_share_its_budget_exactly() -> None:
    pods = {f"10.0.0.{i}": "tenant" for i in range(1, 21)} | {"10.0.1.1": "victim"}
    b = budget(100, 10, pods=pods)
    verdicts = [b.take(f"10.0.0.{i % 20 + 1}") for i in range(12)]  # 20 Pods, one budget of 10
    assert verdicts == [P] * 10 + [S, S]
    assert b.shed == {"client": 0, "namespace": 2}
    assert b.take("10.0.1.1") == P  # another namespace: its own
    assert b.take("192.0.2.1") == P  # no Pod of this node: its client budget alone


def test_a_namespace_gets_a_new_budget_each_second() -> None:
    """--miss-limit-namespace is misses a second: a namespace that spent its budget in one second has it
    whole again in the next, for the Pod that spent it and for another of its Pods."""
    clock = Clock()
    pods = {"10.0.0.1": "ns", "10.0.0.2": "ns", "10.0.0.3": "ns"}
    b = budget(0, 2, pods=pods, clock=clock)
    assert [b.take("10.0.0.1"), b.take("10.0.0.2"), b.take("10.0.0.1")] == [P, P, S]
    clock.now += 1.0
    assert [b.take("10.0.0.3"), b.take("10.0.0.1"), b.take("10.0.0.2")] == [P, P, S]


def test_a_client_over_its_own_budget_spends_none_of_its_namespaces() -> None:
    pods = {"10.0.0.1": "ns", "10.0.0.2": "ns"}
    b = budget(2, 4, pods=pods)
    assert [b.take("10.0.0.1") for _ in range(10)] == [P, P] + [S] * 8
    assert [b.take("10.0.0.2") for _ in range(3)] == [P, P, S]  # 2 of the namespace's 4 left, its own 2


def test_only_the_namespace_budget_when_the_client_one_is_off() -> None:
    b = budget(0, 3, pods={"10.0.0.1": "ns"})
    assert [b.take("10.0.0.1") for _ in range(4)] == [P, P, P, S]
    assert [b.take("192.0.2.1") for _ in range(50)] == [P] * 50  # not a Pod of a namespace: no budget applies


def test_over_a_budget_tc_while_the_capacity_lasts_then_dropped() -> None:
    clock = Clock()
    capacity = Capacity(3, clock=clock)
    b = MissBudget(1, 0, capacity=capacity, clock=clock)
    assert [b.take("c") for _ in range(6)] == [P, S, S, S, D, D]
    assert capacity.exhausted == 2 and b.dropped == 2
    clock.now += 1.0
    assert [b.take("c") for _ in range(2)] == [P, S]  # a new second: capacity again


def test_tcp_misses_meet_the_same_budgets_counted_apart_from_udp_s_and_refused_without_capacity() -> None:
    """A client's TCP misses have its budget and its namespace's, at the same rates, counted apart from its
    UDP misses (a TC=1 retry over TCP is not refused for what was sent over UDP in its name); over them
    refused (False), counted as shed, no TC=1 capacity spent; a new second renews both."""
    clock = Clock()
    pods = {"10.0.0.1": "ns", "10.0.0.2": "ns"}
    capacity = Capacity(1, clock=clock)
    b = MissBudget(3, 5, capacity=capacity, namespace_of=pods.get, clock=clock)
    assert [b.take("10.0.0.1") for _ in range(4)] == [P, P, P, S]  # UDP: its budget spent, the capacity too
    assert [b.take_tcp("10.0.0.1") for _ in range(4)] == [True, True, True, False]  # TCP: a budget of its own
    assert [b.take_tcp("10.0.0.2") for _ in range(3)] == [True, True, False]  # the namespace's 5 over TCP
    assert b.shed == {"client": 2, "namespace": 1} and b.refused == 2 and b.slipped == 1 and b.dropped == 0
    assert capacity.used == 1  # no capacity spent on refusals
    clock.now += 1.0
    assert [b.take_tcp("10.0.0.1") for _ in range(4)] == [True, True, True, False]
    assert b.take("10.0.0.2") == P
    # the `miss_limit` entry of /status's "limits" (docs/status.md), the nodedns_misses_shed* metrics' source
    assert b.status() == {"qps": 3, "namespace_qps": 5, "shed": {"client": 3, "namespace": 1}, "slipped": 1,
                          "dropped": 0, "refused": 3, "clients": 2, "namespaces": 1, "max_clients": 100_000}


def test_the_rate_limit_with_a_capacity_truncates_every_reply_over_the_budget_until_it_is_spent() -> None:
    """A spoofer sending in a victim's name exhausts the victim's budget: every reply over it is TC=1 (the
    victim asks again over TCP and gets its answer) while the process can afford them."""
    clock = Clock()
    capacity = Capacity(4, clock=clock)
    rl = RateLimiter(2, capacity=capacity, clock=clock)
    other = RateLimiter(1, capacity=capacity, clock=clock)  # the capacity is the process's: every limit shares it
    assert [rl.take("victim") for _ in range(5)] == [P, P, S, S, S]
    assert [other.take("x") for _ in range(3)] == [P, S, D]
    assert (rl.slipped, rl.dropped, other.slipped, other.dropped) == (3, 0, 1, 1)


@pytest.mark.parametrize("rates", [(0, 0), (-1, 5), (5, -1)])
def test_a_budget_of_nothing_is_refused(rates: tuple[int, int]) -> None:
    with pytest.raises(ValueError, match="miss budget"):
        MissBudget(*rates, capacity=Capacity())


def add_pod(index: Index, ns: str, ip: str, node: str, *, host_network: bool = False) -> None:
    obj: dict[str, Any] = cf.pod(ns, f"p-{ip.replace('.', '-')}", ip)
    obj["spec"]["nodeName"] = node
    if host_network:
        obj["spec"]["hostNetwork"] = True
    for kind, o in manifests.objects([obj]):
        assert index.apply(kind, "ADDED", o)


def test_the_namespace_of_a_client_is_its_pod_s_on_this_node() -> None:
    index = Index()
    add_pod(index, "a", "10.244.1.5", "n1")
    add_pod(index, "b", "10.244.2.5", "n2")
    add_pod(index, "kube-system", "192.168.0.1", "n1", host_network=True)
    names = Namespaces(index, "n1")
    assert names("10.244.1.5") == "a"
    assert names("10.244.2.5") is None  # another node's Pod
    assert names("192.168.0.1") is None  # hostNetwork: the node's address, no tenant's
    names.apply({"10.244.9.9": "pushed"})  # a worker: what the supervisor pushed, no index
    assert names("10.244.9.9") == "pushed" and names("10.244.1.5") is None


# -- the one-second windows against a model, every boundary reached exactly ------------------------------


STEPS = st.lists(st.tuples(st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]),
                           st.sampled_from(["same", "0.3", "to-the-second", "a-microsecond-before"])),
                 max_size=60)


def _advance(clock: Clock, how: str) -> None:
    if how == "0.3":
        clock.now += 0.3
    elif how == "to-the-second":
        clock.now = math.floor(clock.now) + 1.0
    elif how == "a-microsecond-before":
        clock.now = math.floor(clock.now) + 1.0 - 1e-6


@settings(max_examples=300, deadline=None)
@given(steps=STEPS, rate=st.integers(1, 3), slip=st.integers(0, 3), max_clients=st.integers(1, 3))
def test_the_rate_limit_follows_its_model_at_every_second_and_table_edge(
        steps: list[tuple[str, str]], rate: int, slip: int, max_clients: int) -> None:
    """docs/hardening.md: each client `rate` replies a one-second window of the clock (a new window from
    the second on, exactly); over it every `slip`th reply TC=1 (the first over included), the rest
    dropped, none with slip 0; the table holds `max_clients` clients of the window, the others share one
    budget and each such reply counts as the table being full."""
    clock = Clock()
    rl = RateLimiter(rate, slip=slip, max_clients=max_clients, clock=clock)
    second: int | None = None
    counts: dict[str, int] = {}
    dropped = slipped = full = 0
    for client, how in steps:
        _advance(clock, how)
        if math.floor(clock.now) != second:
            second, counts = math.floor(clock.now), {}
        key = client
        if client not in counts and len(counts) >= max_clients:
            key, full = "", full + 1
        counts[key] = n = counts.get(key, 0) + 1
        want = P if n <= rate else S if slip and (n - rate - 1) % slip == 0 else D
        dropped += want == D
        slipped += want == S
        assert rl.take(client) == want, (client, clock.now, counts)
        status = rl.status()
        assert (status["dropped"], status["slipped"], status["table_full"], status["clients"]) == \
            (dropped, slipped, full, len(counts))


@settings(max_examples=200, deadline=None)
@given(steps=STEPS, rate=st.integers(1, 3), max_clients=st.integers(1, 5))
def test_the_miss_budget_of_a_client_renews_exactly_at_each_second(steps: list[tuple[str, str]], rate: int,
                                                                   max_clients: int) -> None:
    """Each client `rate` misses a window (over it TC=1, not counted); past the table's bound the clients
    new to the window share one budget."""
    clock = Clock()
    b = MissBudget(rate, 0, capacity=Capacity(1000, clock=clock), max_clients=max_clients, clock=clock)
    second: int | None = None
    counts: dict[str, int] = {}
    for client, how in steps:
        _advance(clock, how)
        if math.floor(clock.now) != second:
            second, counts = math.floor(clock.now), {}
        key = client if client in counts or len(counts) < max_clients else ""
        n = counts.get(key, 0)
        if n < rate:
            counts[key] = n + 1
        assert b.take(client) == (P if n < rate else S), (client, clock.now, counts)


def test_the_second_turns_for_both_transports_whichever_misses_first_in_it() -> None:
    """UDP and TCP misses are counted apart but in one one-second window: a TCP miss that opens the new
    second clears the UDP counts too, so the client's first UDP miss of that second passes."""
    clock = Clock()
    b = budget(2, clock=clock)
    assert [b.take("10.0.0.1") for _ in range(3)] == [P, P, S]
    assert [b.take_tcp("10.0.0.1") for _ in range(3)] == [True, True, False]
    clock.now += 1.0
    assert b.take_tcp("10.0.0.1") is True  # the new second, opened by TCP
    assert b.take("10.0.0.1") == P
    clock.now += 1.0
    assert b.take("10.0.0.1") == P  # ... and opened by UDP
    assert b.take_tcp("10.0.0.1") is True
