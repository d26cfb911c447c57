"""Insight on the hit path: the C hit path (nodedns/serve/_hitpath.c) and the Python one (NODEDNS_HIT_PATH=python)
count every answer by client the same way (nodedns.serve.tally), within the same bounds, and an agent's
/debug/top shows the same exact figures per Pod whichever path answered."""

from __future__ import annotations

import json
import socket
import struct
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import dns.rcode
import pytest

from nodedns.serve import tally as tallymod
from nodedns.serve.tally import Tally
from tests.support import manifests as m
from tests.support.helpers import c_extension, free_port, running_agent

_hitpath = c_extension("nodedns.serve._hitpath")

needs_c = pytest.mark.skipif(_hitpath is None, reason="nodedns.serve._hitpath is not built here (no C compiler)")
HIT_PATHS = [pytest.param("c", marks=needs_c, id="c-hit-path"), pytest.param("python", id="python-hit-path")]
NODE = "node-a"
PODS = {"127.0.0.2": ("orders", "checkout-7d9f8-abcde"), "127.0.0.3": ("orders", "checkout-7d9f8-fghij"),
        "127.0.0.4": ("default", "batch")}


def query(name: str, *, qid: int = 7, edns: bool = False) -> bytes:
    wire = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\x00"
    opt = b"\x00\x00\x29\x04\xd0" + b"\x00" * 6 if edns else b""
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 1 if edns else 0) + wire + b"\x00\x01\x00\x01" + opt


def stored(name: str, slot: int) -> bytes:
    q = query(name)
    return bytes([slot, 0]) + b"\x81\x80\x00\x01\x00\x00\x00\x00\x00\x00" + q[12:]


@needs_c
def test_the_c_hit_path_keeps_the_bounds_of_the_python_tally() -> None:
    assert (_hitpath.TALLY_CLIENTS, _hitpath.TALLY_ANSWERS) == (tallymod.MAX_CLIENTS, tallymod.MAX_ANSWERS)


@needs_c
@pytest.mark.parametrize(("clients", "names"), [(3, 5), (1, tallymod.MAX_ANSWERS + 20),
                                                (tallymod.MAX_CLIENTS + 10, 1)],
                         ids=["a-few-clients", "a-client-over-the-names-bound", "clients-over-the-bound"])
def test_the_c_hit_path_counts_each_hit_as_tally_hit_does(clients: int, names: int) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    srv.setblocking(False)
    table = {query(f"n{i}.example")[2:]: stored(f"n{i}.example", 3 + i % 5) for i in range(names)}
    sockets = []
    try:
        for c in range(clients):
            cli = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            cli.bind((f"127.0.{1 + c // 250}.{1 + c % 250}", 0))
            sockets.append(cli)
        expected = Tally()
        got = Tally()
        counts = [0] * 256
        allowed = {s.getsockname()[0] for s in sockets}
        handed_back = 0
        for cli in sockets:
            for i in range(names):
                for _ in range(2):
                    cli.sendto(query(f"n{i}.example"), srv.getsockname())
                    expected.hit(cli.getsockname()[0], table[query(f"n{i}.example")[2:]])
            deadline = time.monotonic() + 5
            sent = 2 * names
            while sent and time.monotonic() < deadline:
                received, misses, _ = _hitpath.serve(srv.fileno(), table, allowed, counts, 1232, got.hits)
                for data, addr in misses or ():  # a hit that does not fit its client's entry: as server.general
                    got.hit(addr[0], table[data[2:]])
                    counts[table[data[2:]][0]] += 1
                    handed_back += 1
                sent -= received
        assert got.hits == expected.hits and got.sealed == expected.sealed
        assert sum(counts) == 2 * names * clients  # each answer counted once, here or on the Python path
        # only what comes after a piece fills, until the Python path sets it aside: the rest of a batch at most
        assert (handed_back > 0) == (names > tallymod.MAX_ANSWERS) and handed_back <= _hitpath.BATCH
    finally:
        srv.close()
        for s in sockets:
            s.close()


@needs_c
def test_a_client_cycling_more_names_than_the_tally_names_costs_no_call_per_hit() -> None:
    """One client asks 200 names over and over, 12,000 hits in one interval (a cache benchmark's client,
    or a busy proxy Pod): its pieces fill every 64 new names, so the MAX_SEALED pieces to set aside are
    used up early; the piece is then marked and the C path counts the rest by label slot itself.
    `on_full` (Tally.hit, Python) is called once per piece set aside and once to mark: not per hit (it
    was called for nine hits in ten, a tenth of a cached answer's cost), and the counts are Tally.hit's."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    srv.setblocking(False)
    cli = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    cli.bind(("127.0.0.1", 0))
    names = 200
    table = {query(f"n{i}.example")[2:]: stored(f"n{i}.example", 3 + i % 5) for i in range(names)}
    expected, got = Tally(), Tally()
    calls = 0

    def on_full(host: str, w: bytes) -> None:
        nonlocal calls
        calls += 1
        got.hit(host, w)

    counts = [0] * 256
    try:
        for _ in range(60):
            for i in range(names):
                cli.sendto(query(f"n{i}.example"), srv.getsockname())
                expected.hit(cli.getsockname()[0], table[query(f"n{i}.example")[2:]])
            left, deadline = names, time.monotonic() + 5
            while left and time.monotonic() < deadline:
                received, misses, _ = _hitpath.serve(srv.fileno(), table, {"127.0.0.1"}, counts, 1232, got.hits,
                                                     None, on_full)
                assert not misses
                left -= received
        assert sum(counts) == 60 * names
        assert len(expected.sealed) == tallymod.MAX_SEALED  # the pieces to set aside were used up
        assert got.hits == expected.hits and got.sealed == expected.sealed
        assert calls == tallymod.MAX_SEALED + 1, calls  # each piece set aside, and the mark: no call per hit
        by_slot = sum(n for w, n in got.hits["127.0.0.1"].items() if isinstance(w, int))
        assert by_slot > 0  # the hits after the mark, counted by slot
    finally:
        srv.close()
        cli.close()


def test_a_marked_piece_counts_new_answers_by_slot_without_tally_hit() -> None:
    """The Python side of the mark: once Tally.hit marks a full piece (no piece left to set aside),
    count_hit counts a new answer by its slot (True: the hit path calls no Tally.hit for it)."""
    t = Tally()
    host = "10.0.0.9"
    i = 0
    while (len(t.sealed) < tallymod.MAX_SEALED or tallymod.BY_SLOT not in t.hits[host]) and i < 100_000:
        w = stored(f"n{i}.example", 3 + i % 5)
        if not tallymod.count_hit(t.hits, host, w):
            t.hit(host, w)
        i += 1
    assert i == (tallymod.MAX_SEALED + 1) * tallymod.MAX_ANSWERS + 1  # marked at the first answer past the pieces
    piece = t.hits[host]
    assert len(piece) > tallymod.MAX_ANSWERS
    before = dict(piece)
    w = stored("brand-new.example", 4)
    assert tallymod.count_hit(t.hits, host, w)  # counted, no call
    assert piece[4] == before.get(4, 0) + 1 and w not in piece
    counted = sum(n for _, p in [*t.sealed, (host, piece)] for w, n in p.items() if w is not tallymod.BY_SLOT)
    assert counted == i + 1  # every answer counted once, the mark none


# ----------------------------------------------------------------------------------------------
# Through an agent, both hit paths


@pytest.fixture(params=HIT_PATHS)
def hit_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setenv("NODEDNS_HIT_PATH", "python")
    else:
        monkeypatch.delenv("NODEDNS_HIT_PATH", raising=False)
    return str(request.param)


@pytest.fixture
def agent(tmp_path: Path, hit_path: str) -> Iterator[Any]:
    objects = [m.namespace("default"), m.namespace("orders"), m.node(NODE),
               m.service("web", cluster_ips=["10.96.0.10"])]
    for ip, (ns, name) in PODS.items():
        owner = ("ReplicaSet", "checkout-7d9f8") if name.startswith("checkout") else None
        objects.append(m.pod(name, ns, ip=ip, node_name=NODE, uid=f"uid-{name}", owner=owner))
    path = m.write(tmp_path / "cluster.yaml", objects)
    with running_agent({"manifests": str(path), "node-name": NODE, "debug-listen": "127.0.0.1:0",
                        "host-resolv-conf": ""}) as running:
        assert (running.agent.server.batch_serve is not None) == (hit_path == "c")
        yield running


def ask(agent: Any, source: str, name: str, *, edns: bool = False) -> str:
    q = dns.message.make_query(name, "A", use_edns=0 if edns else None)
    r = dns.query.udp(q, agent.host, port=agent.port, source=source, timeout=3)
    return dns.rcode.to_text(r.rcode())


def top(agent: Any) -> dict[str, Any]:
    with urllib.request.urlopen(agent.debug_url + "/debug/top?limit=100", timeout=5) as resp:  # noqa: S310
        data: dict[str, Any] = json.loads(resp.read())
    return data


NAMES = ["web.default.svc.cluster.local", "WEB.default.svc.cluster.local", "nope.default.svc.cluster.local"]


def test_both_hit_paths_count_every_answer_for_its_pod(agent: Any) -> None:
    for name in NAMES:  # stored by a host process first: what the Pods ask next are hits
        ask(agent, "127.0.0.1", name)
        ask(agent, "127.0.0.1", name, edns=True)
    sent: dict[str, int] = {}
    for n, source in enumerate(PODS, start=1):
        for _ in range(n * 3):
            for name in NAMES:
                for edns in (False, True):
                    ask(agent, source, name, edns=edns)
        sent[source] = n * 3 * len(NAMES) * 2
    pods = {p["pod"]: p for p in top(agent)["pods"]}
    for source, (ns, name) in PODS.items():
        p = pods[f"{ns}/{name}"]
        # every answer from a stored one: on the hit path, but the client's first, which the allow list admits
        # on the slow path
        assert p["queries"] == sent[source] == p["cache_hits"] + 1, p
        assert p["rcodes"] == {"NOERROR": sent[source] * 2 // 3, "NXDOMAIN": sent[source] // 3}
        assert p["cluster"] == sent[source]
        assert {t["name"]: t["count"] for t in p["top_names"]} == {
            "web.default.svc.cluster.local": sent[source] * 2 // 3, "nope.default.svc.cluster.local": sent[source] // 3}
    groups = {g["group"]: g for g in top(agent)["groups"]}
    assert groups["(host-network)"]["queries"] >= len(NAMES) * 2  # the priming (and the agent's loop probes)


def test_a_client_asking_more_names_than_the_bound_is_counted_whole(agent: Any) -> None:
    names = [f"x{i}.orders.svc.cluster.local" for i in range(tallymod.MAX_ANSWERS + 30)]
    for name in names:
        ask(agent, "127.0.0.1", name)  # stored (NXDOMAIN, hot)
    for name in names:
        assert ask(agent, "127.0.0.4", name) == "NXDOMAIN"
    p = {p["pod"]: p for p in top(agent)["pods"]}["default/batch"]
    assert p["queries"] == p["cache_hits"] + 1 == p["nxdomain"] == len(names)
    assert len(p["top_names"]) <= 16


# ----------------------------------------------------------------------------------------------
# A fast search-list walk: every miss counted, whatever the rate, one process or two workers

FAST = [f"api{i}.example.com" for i in range(50)]


@pytest.mark.parametrize("workers", [1, 2], ids=["one-process", "workers-2"])
def test_a_fast_walk_of_50_external_names_counts_every_search_list_miss(tmp_path: Path, hit_path: str,
                                                                        workers: int) -> None:
    """An ndots:5 Pod asks 50 external names back to back (each: 3 NXDOMAINs, then the name): 150 misses of 200
    queries, 75%. That round goes mostly through the slow path; two more come mostly from stored answers (the
    hit path under test; each worker has its own): 450 misses of 600 queries, 75% still."""
    from nodedns.workers import modes
    from tests.support.upstream_double import UpstreamDouble

    objects = [m.namespace("default"), m.namespace("orders"), m.node(NODE),
               m.pod("checkout-7d9f8-abcde", "orders", ip="127.0.0.2", node_name=NODE, uid="u1",
                     owner=("ReplicaSet", "checkout-7d9f8"))]
    path = m.write(tmp_path / "cluster.yaml", objects)
    factory: Any = (lambda c: modes.supervisor(c, count=workers)) if workers > 1 else None
    searches = ("orders.svc.cluster.local", "svc.cluster.local", "cluster.local")
    port = free_port()
    with UpstreamDouble({name: {"A": ["192.0.2.80"]} for name in FAST}) as up, \
            running_agent({"manifests": str(path), "node-name": NODE, "debug-listen": "127.0.0.1:0",
                           "listen": f"127.0.0.1:{port}", "upstream": up.address, "host-resolv-conf": ""},
                          **({"agent_factory": factory} if factory else {})) as running:
        running.run(running.agent.wait_serving(), timeout=30)  # every worker bound and synced

        def walk() -> None:
            for name in FAST:
                for candidate in [f"{name}.{s}" for s in searches] + [name]:
                    r = dns.query.udp(dns.message.make_query(candidate + ".", "A"), "127.0.0.1", port=port,
                                      source="127.0.0.2", timeout=3)
                    assert dns.rcode.to_text(r.rcode()) == ("NOERROR" if candidate == name else "NXDOMAIN"), candidate

        def pod(queries: int) -> dict[str, Any]:
            deadline = time.monotonic() + 15
            while True:  # workers hand their counts on once a second
                got = {p["pod"]: p for p in top(running)["pods"]}.get("orders/checkout-7d9f8-abcde", {})
                if got.get("queries", 0) >= queries:
                    return got
                assert time.monotonic() < deadline, got
                time.sleep(0.1)

        walk()
        first = pod(200)
        assert (first["queries"], first["search_misses"], first["waste"]) == (200, 150, 0.75)
        walk()
        walk()
        got = pod(600)
    assert (got["queries"], got["nxdomain"], got["search_misses"], got["waste"]) == (600, 450, 450, 0.75)
    assert got["cache_hits"] >= (400 if workers == 1 else 150)  # later rounds: stored answers, many over a piece
    assert {w["name"] for w in got["wasted_names"]} <= set(FAST)
