"""nodedns.observe.insight: queries attributed to the Pods of this node (from a manifest), search-list misses told from
what the clients send, advice in words, and memory that stays flat whatever a client sprays."""

from __future__ import annotations

import gc
import random
import tracemalloc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodedns.cluster.index import Index
from nodedns.cluster.objects import pod_owner
from nodedns.dns.queries import make_query
from nodedns.dns.wire import QT
from nodedns.metrics.slots import PLUGIN_CLUSTER, PLUGIN_FORWARD, SlotLabels, Slots
from nodedns.observe import insight as insight_module
from nodedns.observe import insightsketch as sketch_module
from nodedns.observe.insight import RETAIN, TOP_NAMES, TOP_OVERALL, Insight
from nodedns.observe.insightsketch import MAX_NAMES, MIN_NAMES, WINDOW, Budget, SpaceSaving, Walks, readings
from nodedns.podconf.resolvconf import KubeletDNS
from nodedns.podconf.searchpath import expansion, renderer_search_list
from nodedns.serve import tally as tally_module
from nodedns.serve.tally import HOST, UNKNOWN, Tally
from tests.support import manifests as m

NODE = "node-a"
ZONE = "cluster.local"
HOST_RESOLV_CONF = "nameserver 192.0.2.53\nsearch corp.example\n"
SETTINGS = KubeletDNS(cluster_dns=("169.254.20.10",), cluster_domain=ZONE)
SLOTS = Slots((ZONE,), authoritative=(ZONE,))
EXTERNAL = ("api.example.com", "cdn.example.net", "pay.example.org")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cluster() -> list[dict[str, Any]]:
    return [
        m.namespace("default"), m.namespace("orders"), m.namespace("other"),
        {**m.node(NODE), "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.1"}]}},
        m.pod("checkout-7d9f8-abcde", "orders", ip="10.244.0.5", node_name=NODE, uid="u1",
              owner=("ReplicaSet", "checkout-7d9f8")),
        m.pod("checkout-7d9f8-fghij", "orders", ip="10.244.0.6", node_name=NODE, uid="u2",
              owner=("ReplicaSet", "checkout-7d9f8")),
        m.pod("db-0", "orders", ip="10.244.0.7", node_name=NODE, uid="u3", owner=("StatefulSet", "db")),
        m.pod("batch", "default", ip="10.244.0.8", node_name=NODE, uid="u4",
              dns_config={"options": [{"name": "ndots", "value": "1"}]}),
        m.pod("agent-x1", "kube-system", ip="192.0.2.1", node_name=NODE, uid="u5", host_network=True,
              owner=("DaemonSet", "agent")),
        m.pod("elsewhere", "default", ip="10.244.9.9", node_name="node-b", uid="u6"),
    ]


def make(objects: Iterable[dict[str, Any]] | None = None, *, autopath: Any = None) -> tuple[Insight, Index, Clock]:
    index = Index()
    for obj in cluster() if objects is None else objects:
        assert index.apply(obj["kind"], "ADDED", obj)
    index.mark_synced()
    clock = Clock()
    insight = Insight(index=index, node_name=NODE, zone=ZONE, own_addresses=("169.254.20.10",), clock=clock,
                      autopath=autopath)
    insight.search_list = renderer_search_list(SETTINGS, HOST_RESOLV_CONF)
    insight.host_searches = ("corp.example",)
    insight.refresh()
    return insight, index, clock


def slot(rcode: str, plugin: str) -> int:
    zone = f"{ZONE}." if plugin == PLUGIN_CLUSTER else "."
    return SLOTS.slot(SlotLabels(zone, "A", rcode, plugin, False, rcode == "NXDOMAIN"))


class Client:
    """Queries of one client address through a Tally, answered as the agent would (NXDOMAIN unless found)."""

    def __init__(self, tally: Tally, address: str, found: Iterable[str] = EXTERNAL) -> None:
        self.tally = tally
        self.address = address
        self.found = set(found) | {"web.default.svc.cluster.local", "db.other.svc.cluster.local"}

    def ask(self, name: str, qtype: int = QT.A) -> None:
        ok = name in self.found
        cluster_name = name.endswith("." + ZONE)
        plugin = PLUGIN_CLUSTER if cluster_name else PLUGIN_FORWARD
        self.tally.answered(self.address, make_query(name, qtype), slot("NOERROR" if ok else "NXDOMAIN", plugin),
                            None if cluster_name else 0.01)

    def getaddrinfo(self, name: str, searches: tuple[str, ...], ndots: int) -> None:
        """glibc: the expansion in order, A and AAAA per name, until a name is found."""
        for candidate in expansion(name, searches, ndots):
            self.ask(candidate, QT.A)
            self.ask(candidate, QT.AAAA)
            if candidate in self.found:
                return


def pods_by_name(insight: Insight) -> dict[str, dict[str, Any]]:
    return {p["pod"]: p for p in insight.document(limit=100)["pods"]}


def flush(insight: Insight, tally: Tally) -> None:
    insight.take(tally.flush(SLOTS.labels))


def tally_of(insight: Insight) -> Tally:
    """A Tally that counts by the Pod generations `insight` knows, as the agent's listeners do."""
    tally = Tally()
    tally.gens = insight.gens
    return tally


# ----------------------------------------------------------------------------------------------
# Attribution


def test_each_client_address_is_counted_for_its_pod_with_its_owner() -> None:
    insight, _, _ = make()
    tally = tally_of(insight)
    for address, n in (("10.244.0.5", 3), ("10.244.0.6", 1), ("10.244.0.7", 2), ("10.244.0.8", 5)):
        for _ in range(n):
            Client(tally, address).ask("web.default.svc.cluster.local")
    flush(insight, tally)
    pods = pods_by_name(insight)
    assert {ref: p["queries"] for ref, p in pods.items()} == {
        "orders/checkout-7d9f8-abcde": 3, "orders/checkout-7d9f8-fghij": 1, "orders/db-0": 2, "default/batch": 5,
        "kube-system/agent-x1": 0}
    assert pods["orders/checkout-7d9f8-abcde"]["owner"] == {"kind": "Deployment", "name": "checkout"}
    assert pods["orders/db-0"]["owner"] == {"kind": "StatefulSet", "name": "db"}
    assert pods["default/batch"]["owner"] is None
    assert "default/elsewhere" not in pods  # another node's Pod
    owners = {(o["kind"], o["name"]): o for o in insight.document()["owners"]}
    assert owners[("Deployment", "checkout")]["queries"] == 4 and owners[("Deployment", "checkout")]["pods"] == 2


@pytest.mark.parametrize(
    ("address", "group"),
    [
        ("192.0.2.1", "(host-network)"),  # the node's address, shared by its host-network Pods
        ("127.0.0.1", "(host-network)"),  # loopback: a process of the node
        ("169.254.20.10", "(host-network)"),  # the agent's own address: a host process asking the local IP
        ("10.244.0.99", "(unknown)"),  # no Pod of this node has it
        ("10.244.9.9", "(unknown)"),  # another node's Pod
    ],
    ids=["node-address", "loopback", "own-address", "no-pod", "another-nodes-pod"],
)
def test_host_network_and_unknown_clients_are_grouped(address: str, group: str) -> None:
    insight, _, _ = make()
    tally = tally_of(insight)
    Client(tally, address).ask("web.default.svc.cluster.local")
    flush(insight, tally)
    groups = {g["group"]: g for g in insight.document()["groups"]}
    assert groups[group]["queries"] == 1
    assert groups[group]["top_clients"] == [{"address": address, "queries": 1, "error": 0}]
    assert sum(p["queries"] for p in insight.document()["pods"]) == 0
    assert insight.namespaces()[group]["queries"] == {"NOERROR": 1}


def test_host_network_pods_map_to_the_host_group() -> None:
    insight, _, _ = make()
    assert insight.gens["192.0.2.1"] == HOST
    assert "10.244.9.9" not in insight.gens and insight.gens.get("10.244.0.99", UNKNOWN) == UNKNOWN


def test_a_pod_that_goes_away_is_kept_for_a_while_then_dropped() -> None:
    insight, index, clock = make()
    tally = tally_of(insight)
    Client(tally, "10.244.0.7").ask("web.default.svc.cluster.local")
    flush(insight, tally)
    index.apply("Pod", "DELETED", m.pod("db-0", "orders", ip="10.244.0.7", node_name=NODE, uid="u3"))
    assert insight.refresh()  # the map changed: the address is nobody's now
    assert "10.244.0.7" not in insight.gens
    gone = pods_by_name(insight)["orders/db-0"]
    assert (gone["state"], gone["queries"]) == ("gone", 1)
    clock.now += RETAIN + 1
    insight.refresh()
    assert "orders/db-0" not in pods_by_name(insight)
    assert insight.pod("orders", "db-0") is None


def test_a_namespace_without_pods_leaves_the_metrics_after_a_while() -> None:
    insight, index, clock = make()
    tally = tally_of(insight)
    Client(tally, "10.244.0.8").ask("web.default.svc.cluster.local")
    flush(insight, tally)
    assert "default" in insight.namespaces()
    index.apply("Pod", "DELETED", m.pod("batch", "default", ip="10.244.0.8", node_name=NODE))
    insight.refresh()
    clock.now += RETAIN / 2
    insight.refresh()
    assert "default" in insight.namespaces()  # its Pod is still remembered
    clock.now += RETAIN
    insight.refresh()
    assert "default" not in insight.namespaces()
    assert set(insight.namespaces()) <= {"orders", "kube-system", "(host-network)", "(unknown)"}


@pytest.mark.parametrize(
    "new_pod",
    [
        m.pod("web-1", "default", ip="10.244.0.7", node_name=NODE, uid="u9"),
        m.pod("db-0", "orders", ip="10.244.0.7", node_name=NODE, uid="u3-again", owner=("StatefulSet", "db")),
    ],
    ids=["another-pod-takes-the-address", "the-statefulset-pod-is-recreated-under-its-name"],
)
def test_a_new_pod_on_an_old_address_has_figures_of_its_own(new_pod: dict[str, Any]) -> None:
    insight, index, _ = make()
    tally = tally_of(insight)
    old_gen = insight.gens["10.244.0.7"]
    for _ in range(3):
        Client(tally, "10.244.0.7").ask("web.default.svc.cluster.local")
    index.apply("Pod", "DELETED", m.pod("db-0", "orders", ip="10.244.0.7", node_name=NODE, uid="u3"))
    index.apply("Pod", "ADDED", new_pod)
    assert insight.refresh()
    new_gen = insight.gens["10.244.0.7"]
    assert new_gen != old_gen
    insight.take(tally.retag(insight.gens, SLOTS.labels))  # what was counted before the change: the old Pod's
    Client(tally, "10.244.0.7").ask("web.default.svc.cluster.local")
    flush(insight, tally)
    by_gen = {p["generation"]: p for p in insight.document(limit=100)["pods"]}
    assert (by_gen[old_gen]["queries"], by_gen[old_gen]["state"]) == (3, "gone")
    assert (by_gen[new_gen]["queries"], by_gen[new_gen]["state"]) == (1, "running")
    assert by_gen[new_gen]["name"] == new_pod["metadata"]["name"]


def test_a_finished_pod_gives_up_its_address() -> None:
    """A Job's Pod that completed no longer holds its address: the next Pod there is the one asking."""
    insight, index, _ = make([m.namespace("default"), m.node(NODE),
                              m.pod("job-1-x", ip="10.244.0.20", node_name=NODE, uid="j1", owner=("Job", "job-1"),
                                    phase="Succeeded"),
                              m.pod("web-2", ip="10.244.0.20", node_name=NODE, uid="w2")])
    assert insight.gens["10.244.0.20"] == insight.live[("default", "web-2")].gen
    assert ("default", "job-1-x") not in insight.live


# ----------------------------------------------------------------------------------------------
# Search-list misses

CLUSTER_FIRST = ("orders.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example")


@pytest.mark.parametrize(
    ("address", "name", "misses", "nxdomain"),
    [
        # ndots:5, 4 search domains: the external name after 8 NXDOMAINs (A and AAAA each)
        ("10.244.0.5", "api.example.com", 8, 8),
        # ndots:1: the name as it is first, found
        ("10.244.0.8", "api.example.com", 0, 0),
        # another namespace's Service, found under the second search domain
        ("10.244.0.5", "db.other", 2, 2),
        # a name that is nowhere: 8 misses, and the last two NXDOMAINs (the name as is) are no misses
        ("10.244.0.5", "nope", 8, 10),
        # an FQDN with a trailing dot: no search list
        ("10.244.0.5", "api.example.com.", 0, 0),
    ],
    ids=["ndots5-external", "ndots1-external", "ndots5-other-namespace", "ndots5-nowhere", "fqdn"],
)
def test_search_list_misses_are_the_nxdomains_followed_by_another_suffix(address: str, name: str, misses: int,
                                                                        nxdomain: int) -> None:
    insight, _, _ = make()
    tally = tally_of(insight)
    info = insight.pods[insight.gens[address]]
    sl = insight.search_list(info.pod)  # type: ignore[misc]
    Client(tally, address).getaddrinfo(name, sl.searches, sl.ndots)
    flush(insight, tally)
    pod = pods_by_name(insight)[info.ref]
    assert (pod["search_misses"], pod["nxdomain"]) == (misses, nxdomain)
    assert insight.namespaces()[info.pod.namespace]["search_misses"] == misses


def test_the_order_of_the_queries_does_not_matter() -> None:
    """busybox sends every search name at once; with --workers the queries of one lookup reach the
    supervisor from several workers in any order."""
    insight, _, _ = make()
    for order in (1, -1):
        tally = tally_of(insight)
        client = Client(tally, "10.244.0.5")
        for name in expansion("api.example.com", CLUSTER_FIRST, 5)[::order]:
            client.ask(name)
        flush(insight, tally)
    assert pods_by_name(insight)["orders/checkout-7d9f8-abcde"]["search_misses"] == 8


def misses_after(gap: float) -> int:
    """A search-list NXDOMAIN, then `gap` seconds later (the next interval) its follow-up: the misses counted."""
    insight, _, clock = make()
    tally = tally_of(insight)
    client = Client(tally, "10.244.0.5")
    client.ask("api.example.com.orders.svc.cluster.local")
    flush(insight, tally)
    clock.now += gap
    client.ask("api.example.com")
    flush(insight, tally)
    return int(pods_by_name(insight)["orders/checkout-7d9f8-abcde"]["search_misses"])


def test_a_miss_and_its_follow_up_in_two_intervals_count_once() -> None:
    assert misses_after(1) == 1


def test_an_nxdomain_not_followed_within_the_window_is_no_miss() -> None:
    assert misses_after(WINDOW + 1) == 0


def test_readings_of_a_name() -> None:
    assert readings("api.example.com.orders.svc.cluster.local", CLUSTER_FIRST) == [
        ("api.example.com", "orders.svc.cluster.local"), ("api.example.com.orders", "svc.cluster.local"),
        ("api.example.com.orders.svc", "cluster.local"), ("api.example.com.orders.svc.cluster.local", "")]
    assert readings("x.team-a.svc.cluster.local", (), ZONE, any_namespace=True)[0] == ("x", "team-a.svc.cluster.local")


# ----------------------------------------------------------------------------------------------
# Advice


def busy(insight: Insight, address: str, lookups: int = 5) -> None:
    tally = tally_of(insight)
    info = insight.pods[insight.gens[address]]
    sl = insight.search_list(info.pod)  # type: ignore[misc]
    client = Client(tally, address)
    for _ in range(lookups):
        for name in EXTERNAL:
            client.getaddrinfo(name, sl.searches, sl.ndots)
    flush(insight, tally)


def test_advice_names_the_pod_wasting_its_search_list_on_external_names_and_the_fix() -> None:
    insight, _, _ = make()
    busy(insight, "10.244.0.5")
    busy(insight, "10.244.0.8")
    pods = pods_by_name(insight)
    (advice,) = pods["orders/checkout-7d9f8-abcde"]["advice"]
    assert advice.startswith("orders/checkout-7d9f8-abcde: 80% of its queries are search-list misses for external "
                             "names (most: ")
    for fix in ("use FQDNs with a trailing dot (", "set ndots:2 in dnsConfig", "turn on autopath",
                "nodedns explain"):
        assert fix in advice
    assert pods["default/batch"]["advice"] == []  # ndots:1: nothing wasted
    assert pods["default/batch"]["waste"] == 0.0
    assert advice in insight.document()["advice"]


def test_advice_for_an_owner_speaks_of_the_pod_template() -> None:
    insight, _, _ = make()
    busy(insight, "10.244.0.5")
    busy(insight, "10.244.0.6")
    owners = {o["name"]: o for o in insight.document()["owners"]}
    (advice,) = owners["checkout"]["advice"]
    assert advice.startswith("Deployment orders/checkout (2 Pods seen): 80% of its queries are search-list misses")
    assert "set ndots:2 in the Pod template's dnsConfig" in advice


def test_with_autopath_on_the_advice_does_not_ask_for_it() -> None:
    insight, _, _ = make(autopath=object())
    busy(insight, "10.244.0.5")
    (advice,) = pods_by_name(insight)["orders/checkout-7d9f8-abcde"]["advice"]
    assert "autopath" not in advice


def test_advice_on_cluster_names_written_short_and_on_names_that_do_not_exist() -> None:
    insight, _, _ = make()
    tally = tally_of(insight)
    client = Client(tally, "10.244.0.7")
    for _ in range(10):
        client.getaddrinfo("db.other", CLUSTER_FIRST, 5)
    flush(insight, tally)
    (short,) = pods_by_name(insight)["orders/db-0"]["advice"]
    assert "search-list misses for cluster names written short (most: db.other)" in short
    assert "(db.other.svc.cluster.local.)" in short
    tally = tally_of(insight)
    client = Client(tally, "10.244.0.8")  # ndots:1
    for i in range(30):
        client.getaddrinfo(f"typo{i % 3}.example.com", ("default.svc.cluster.local",), 1)
    flush(insight, tally)
    advice = pods_by_name(insight)["default/batch"]["advice"]
    assert any("ask for names that do not exist (most: typo" in a for a in advice), advice


# ----------------------------------------------------------------------------------------------
# Bounded memory


def test_space_saving_keeps_the_heavy_names_among_a_flood() -> None:
    """A name with more than total/k of the queries is always kept, its count within its error."""
    sketch = SpaceSaving(8)
    rng = random.Random(7)
    for i in range(20_000):
        sketch.add(f"r{rng.getrandbits(64):x}.example")
        if i % 4 == 0:
            sketch.add("hot.example.com")  # 5,000 of 25,000: above 25,000 / 8
    assert len(sketch.counters) == 8 and sketch.total == 25_000
    name, count, error = sketch.top(1)[0]
    assert name == "hot.example.com" and count - error <= 5_000 <= count


def test_space_saving_evicts_what_a_scan_in_arrival_order_evicts() -> None:
    """The sketch finds its victim through a heap of possibly stale counts: the same victim as a scan of
    the counters in arrival order for the smallest count (the first among equals), over random streams
    of skewed names and weights."""

    def scan(k: int, stream: list[tuple[str, int]]) -> dict[str, list[int]]:
        counters: dict[str, list[int]] = {}
        for item, n in stream:
            if item in counters:
                counters[item][0] += n
            elif len(counters) < k:
                counters[item] = [n, 0]
            else:
                victim = min(counters, key=lambda i: counters[i][0])
                floor = counters.pop(victim)[0]
                counters[item] = [floor + n, floor]
        return counters

    for trial in range(200):
        rng = random.Random(trial)
        k = rng.randint(1, 20)
        stream = [(f"n{int(rng.paretovariate(1.2)) % 200}", rng.choice((1, 1, 1, 2, 5, 100)))
                  for _ in range(rng.randint(0, 2000))]
        sketch = SpaceSaving(k)
        for item, n in stream:
            sketch.add(item, n)
        expected = scan(k, stream)
        assert list(sketch.counters.items()) == list(expected.items()), trial


def test_a_client_spraying_100000_random_names_costs_a_fixed_amount() -> None:
    """What the tally and the insight hold does not grow with the names a Pod sprays: measured with
    tracemalloc on their own modules' allocations only (nothing else in the process counts)."""
    insight, _, clock = make()
    tally = tally_of(insight)
    rng = random.Random(18)
    client = Client(tally, "10.244.0.5")
    modules = [tracemalloc.Filter(True, insight_module.__file__), tracemalloc.Filter(True, sketch_module.__file__),
               tracemalloc.Filter(True, tally_module.__file__)]

    def spray(n: int) -> None:
        for i in range(n):
            client.ask(f"{rng.getrandbits(48):012x}.example.com.orders.svc.cluster.local")
            if i % 1000 == 999:  # one interval
                flush(insight, tally)
                clock.now += 1

    tracemalloc.start()
    try:
        spray(10_000)
        gc.collect()
        warm = sum(s.size for s in tracemalloc.take_snapshot().filter_traces(modules).statistics("filename"))
        spray(90_000)
        gc.collect()
        after = sum(s.size for s in tracemalloc.take_snapshot().filter_traces(modules).statistics("filename"))
    finally:
        tracemalloc.stop()
    pod = pods_by_name(insight)["orders/checkout-7d9f8-abcde"]
    assert pod["queries"] == 100_000
    assert len(pod["top_names"]) == TOP_NAMES and len(insight.overall.counters) == TOP_OVERALL
    info = insight.pods[insight.gens["10.244.0.5"]]
    assert len(info.walks.asked) + len(info.walks.pending) <= MAX_NAMES
    assert warm > 64 * 1024, warm  # the filters see the two modules' allocations (the sketches, the walks)
    assert after - warm < 32 * 1024, (warm, after)  # flat: 90,000 more names, no more memory


def test_walks_stay_bounded() -> None:
    walks = Walks()
    for i in range(10_000):
        walks.observe(f"n{i}.orders.svc.cluster.local", True, 1, 0.0,
                      readings(f"n{i}.orders.svc.cluster.local", CLUSTER_FIRST), CLUSTER_FIRST)
    assert len(walks.asked) + len(walks.pending) == MAX_NAMES == walks.budget.used


def test_the_clients_of_a_node_share_one_budget_of_walk_state_each_keeping_its_share() -> None:
    budget = Budget(limit=1000)
    busy, quiet = Walks(budget), Walks(budget)
    for i in range(5000):
        busy.observe(f"n{i}.orders.svc.cluster.local", True, 1, 0.0,
                     readings(f"n{i}.orders.svc.cluster.local", CLUSTER_FIRST), CLUSTER_FIRST)
    assert len(busy.asked) + len(busy.pending) == budget.used == 1000
    for i in range(MIN_NAMES):
        quiet.observe(f"q{i}.example.com", False, 1, 0.0, readings(f"q{i}.example.com", CLUSTER_FIRST), CLUSTER_FIRST)
    assert len(quiet.asked) == MIN_NAMES  # its share, though the budget was spent
    busy.clear()
    assert budget.used == MIN_NAMES
    quiet.expire(WINDOW + 1)
    assert budget.used == 0 and not quiet.asked


WALK_BASES = ("db", "api", "www.example.com")
WALK_STEPS = st.lists(st.tuples(
    st.integers(0, 2),  # the client
    st.sampled_from(["walk", "ask", "expire", "gone"]),
    st.sampled_from(WALK_BASES),
    st.integers(0, 4),  # how far into its walk the client gets before an answer (4: to the name as it is)
    st.floats(0.0, WINDOW / 2),  # seconds passing first
), max_size=40)


@settings(max_examples=150, deadline=None)
@given(steps=WALK_STEPS)
def test_the_budget_counts_exactly_what_the_clients_remember(steps: list[tuple[int, str, str, int, float]]) -> None:
    """The node's budget of walk state is the names its clients remember, to the unit, whatever they ask:
    walks confirmed by a later name, walks abandoned, names forgotten with age, clients gone. A unit kept
    for a name no client holds would shrink every client to its minimum share over the hours."""
    budget = Budget(limit=4 * MIN_NAMES)
    clients = [Walks(budget) for _ in range(3)]
    now = 0.0
    for who, what, base, depth, wait in steps:
        now += wait
        walks = clients[who]
        if what == "expire":
            walks.expire(now)
        elif what == "gone":
            walks.clear()
        else:
            names = expansion(base, CLUSTER_FIRST, 5)
            names = names[:depth + 1] if what == "walk" else names[-1:]
            for i, name in enumerate(names):
                nx = i < len(names) - 1 or (what == "walk" and depth < 3)
                walks.observe(name, nx, 1, now, readings(name, CLUSTER_FIRST), CLUSTER_FIRST)
        held = sum(len(w.asked) + len(w.pending) for w in clients)
        assert budget.used == held, (who, what, base, depth, budget.used, held)


# ----------------------------------------------------------------------------------------------
# Owners


@pytest.mark.parametrize(
    ("meta", "owner"),
    [
        ({"ownerReferences": [{"kind": "ReplicaSet", "name": "checkout-7d9f8", "controller": True}],
          "labels": {"pod-template-hash": "7d9f8"}}, ("Deployment", "checkout")),
        ({"ownerReferences": [{"kind": "ReplicaSet", "name": "plain-rs", "controller": True}]},
         ("ReplicaSet", "plain-rs")),
        ({"ownerReferences": [{"kind": "StatefulSet", "name": "db", "controller": True}]}, ("StatefulSet", "db")),
        ({"ownerReferences": [{"kind": "Job", "name": "backup-28934", "controller": True}]}, ("Job", "backup-28934")),
        ({"ownerReferences": [{"kind": "DaemonSet", "name": "agent", "controller": True}]}, ("DaemonSet", "agent")),
        ({"ownerReferences": [{"kind": "Thing", "name": "a"}, {"kind": "Rollout", "name": "b", "controller": True}]},
         ("Rollout", "b")),
        ({}, None),
        ({"ownerReferences": "garbage"}, None),
    ],
    ids=["deployment-through-its-replicaset", "replicaset-without-template-hash", "statefulset", "job", "daemonset",
         "the-controller-of-several", "bare-pod", "malformed"],
)
def test_the_owner_of_a_pod(meta: dict[str, Any], owner: tuple[str, str] | None) -> None:
    assert pod_owner(meta) == owner


def test_the_manifest_helper_writes_what_kubectl_shows(tmp_path: Path) -> None:
    path = m.write(tmp_path / "c.yaml", cluster())
    assert "pod-template-hash: 7d9f8" in path.read_text()


def test_names_beyond_the_budget_of_a_second_are_counted_without_them() -> None:
    from nodedns.observe.insight import NAMED_ROWS
    from nodedns.serve.tally import Row

    insight, _, clock = make()
    gen = insight.gens["10.244.0.5"]
    rows = [Row(gen, "", f"n{i}.example.com", QT.A, "NOERROR", "forwarded", 1, 0, 0, 0.0)
            for i in range(NAMED_ROWS + 100)]
    insight.take(rows)
    assert insight.unnamed_rows == 100
    assert pods_by_name(insight)["orders/checkout-7d9f8-abcde"]["queries"] == NAMED_ROWS + 100
    clock.now += 1
    insight.take(rows[:10])
    assert insight.unnamed_rows == 100  # a new second, a new budget


def test_a_fast_walk_split_between_two_workers_counts_every_miss() -> None:
    """50 external names walked back to back by an ndots:5 Pod, the queries spread over two workers' tallies
    (one lookup's queries reach different workers), handed on one after the other: every NXDOMAIN of the
    walks is a miss, however many names the two batches hold."""
    insight, _, _ = make()
    insight.search_list = renderer_search_list(SETTINGS, "nameserver 192.0.2.53\n")
    insight.host_searches = ()
    names = [f"api{i}.example.com" for i in range(50)]
    tallies = [Tally(), Tally()]
    for t in tallies:
        t.gens = insight.gens
    clients = [Client(t, "10.244.0.5", found=names) for t in tallies]
    rng = random.Random(7)
    for name in names:
        for candidate in expansion(name, ("orders.svc.cluster.local", "svc.cluster.local", "cluster.local"), 5):
            rng.choice(clients).ask(candidate)
    for t in tallies:
        flush(insight, t)
    pod = pods_by_name(insight)["orders/checkout-7d9f8-abcde"]
    assert (pod["queries"], pod["search_misses"], pod["waste"]) == (200, 150, 0.75)
