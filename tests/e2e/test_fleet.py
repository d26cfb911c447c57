"""--workers: the index stream (journal, snapshot, replay), the counters summed over processes, and the
supervisor with real worker processes (one set of API watches, counters across workers, restarts,
start-up failures, orphans)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rcode
import pytest
import uvloop
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nodedns.config import build
from nodedns.metrics.aggregate import merge, merge_sections, slot_map
from nodedns.metrics.counters import Histogram, ListenerStats, Scrape
from nodedns.metrics.slots import SlotLabels, Slots
from nodedns.workers import modes
from nodedns.workers.channel import Channel
from nodedns.workers.launch import concrete_ports, workers_for
from tests.support import cluster_fixture as cf
from tests.support.apiserver import FakeApiServer, endpoint_slice, namespace, service
from tests.support.helpers import (
    EXAMPLE,
    RunningAgent,
    free_port,
    no_default_upstream,
    nodedns_cmd,
    running_agent,
    subprocess_env,
    wait_for,
)

# ----------------------------------------------------------------------------------------------
# Defaults


@pytest.mark.parametrize(("settings", "expected"), [({}, 1), ({"workers": 3}, 3),
                                                    ({"workers": 0}, len(os.sched_getaffinity(0)))],
                         ids=["default-one-process", "explicit", "zero-means-one-per-cpu"])
def test_the_worker_count_defaults_to_one_process(settings: dict[str, Any], expected: int) -> None:
    assert workers_for(build(settings, environ={})) == expected


# ----------------------------------------------------------------------------------------------
# Counters summed over processes


def labels(zone: str, rcode: str) -> SlotLabels:
    return SlotLabels(zone, "A", rcode, "kubernetes", False, rcode == "NXDOMAIN")


def worker_scrape(order: list[str], counts: dict[str, int], latency: float) -> Scrape:
    slots = Slots(("cluster.local",))
    for rcode in order:  # each process numbers its label combinations in the order it meets them
        slots.slot(labels("cluster.local.", rcode))
    ls = ListenerStats("dns://127.0.0.1:53", "1")
    for rcode, n in counts.items():
        ls.udp_hit[slots.slot(labels("cluster.local.", rcode))] += n
    ls.tcp_open, ls.tcp_accepted = 1, 2
    ls.observe("cluster.local.", latency)
    sections = {"cache": {"caches": [{"zones": ".", "entries": {"success": 5, "denial": 1}, "misses": 3}]},
                "upstream": {"upstreams": [{"to": "10.0.0.1:53", "zone": ".", "healthy": latency < 0.1, "fails": 1}],
                             "max_concurrent_rejects": 2}}
    return Scrape(version="x", slots=slots, listeners=[ls], alive=True, ready=True, index={}, cluster_cache=None,
                  panics=1, errors={"DNS listener error": 1}, sections=sections)


def test_counts_from_two_workers_are_summed_under_the_same_labels() -> None:
    into = Slots(("cluster.local",))
    a = worker_scrape(["NOERROR", "NXDOMAIN"], {"NOERROR": 10, "NXDOMAIN": 1}, 0.001)
    b = worker_scrape(["NXDOMAIN", "NOERROR"], {"NOERROR": 5, "NXDOMAIN": 2}, 0.2)  # other slot numbers
    t = merge(into, [a, b])
    (ls,) = t.listeners
    by_rcode = {into.labels[slot].rcode: n for slot, n in enumerate(ls.udp_hit) if n}
    assert by_rcode == {"NOERROR": 15, "NXDOMAIN": 3}
    assert (ls.tcp_open, ls.tcp_accepted) == (2, 4)
    assert ls.latency["cluster.local."].count == 2
    assert (t.panics, t.errors) == (2, {"DNS listener error": 2})
    cache = t.sections["cache"]["caches"]
    assert cache == [{"zones": ".", "entries": {"success": 10, "denial": 2}, "misses": 6}]
    (up,) = t.sections["upstream"]["upstreams"]
    assert (up["healthy"], up["fails"], t.sections["upstream"]["max_concurrent_rejects"]) == (False, 2, 4)


@pytest.mark.parametrize(("a", "b", "merged"), [
    ({"n": 1, "x": 1.5}, {"n": 2, "x": 0.5}, {"n": 3, "x": 2.0}),
    ({"ok": True}, {"ok": False}, {"ok": False}),
    ({"unready": ["a"]}, {"unready": ["a", "b"]}, {"unready": ["a", "b"]}),
    ({"list": [{"to": "x", "n": 1}]}, {"list": [{"to": "y", "n": 1}, {"to": "x", "n": 2}]},
     {"list": [{"to": "x", "n": 3}, {"to": "y", "n": 1}]}),
    ({"only": 1}, {"other": None}, {"only": 1, "other": None}),
], ids=["numbers-add", "booleans-must-all-hold", "texts-once", "records-matched-on-text-fields", "missing-keys"])
def test_provider_sections_merge_key_by_key(a: dict[str, Any], b: dict[str, Any], merged: dict[str, Any]) -> None:
    assert merge_sections(a, b) == merged


def test_histograms_in_sections_are_merged_not_replaced() -> None:
    h1, h2 = Histogram(), Histogram()
    h1.observe(0.001)
    h2.observe(0.002)
    out = merge_sections({"d": {"NOERROR": h1}}, {"d": {"NOERROR": h2}})
    assert out["d"]["NOERROR"].count == 2 and h1.count == 1


def test_slot_zero_stays_unclassified() -> None:
    into, source = Slots(), Slots()
    source.slot(labels(".", "NOERROR"))
    assert slot_map(into, source)[0] == 0 and into.labels[slot_map(into, source)[1]].rcode == "NOERROR"


# ----------------------------------------------------------------------------------------------
# The supervisor and its workers


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=3) as resp:
        return json.load(resp)


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=3) as resp:
        return str(resp.read().decode())


def from_many_ports(port: int, name: str, n: int, rdtype: str = "A") -> list[dns.message.Message]:
    """n queries, each from a fresh socket: SO_REUSEPORT spreads them over the workers."""
    return [dns.query.udp(dns.message.make_query(name, rdtype), "127.0.0.1", port=port, timeout=3) for _ in range(n)]


class Supervisor:
    def __init__(self, tmp_path: Path, *flags: str, workers: int = 2) -> None:
        self.port, self.status, self.debug = free_port(), free_port(), free_port()
        self.log = tmp_path / "serve.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                nodedns_cmd("serve", "--listen", f"127.0.0.1:{self.port}", "--status-listen",
                            f"127.0.0.1:{self.status}", "--debug-listen", f"127.0.0.1:{self.debug}", "--workers",
                            str(workers), "--lameduck", "0s", *no_default_upstream(flags), *flags),
                env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.status}"

    @property
    def debug_url(self) -> str:
        return f"http://127.0.0.1:{self.debug}"

    def ready(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()
        try:
            return urllib.request.urlopen(self.url + "/readyz", timeout=2).status == 200
        except OSError:
            return False

    def workers(self) -> list[dict[str, Any]]:
        doc: list[dict[str, Any]] = get_json(self.debug_url + "/status")["workers"]["workers"]
        return doc

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture
def supervisors() -> Iterator[list[Supervisor]]:
    started: list[Supervisor] = []
    yield started
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(10)
        for w in re.findall(r"worker \d+: pid (\d+)", s.log.read_text()):
            try:
                os.kill(int(w), signal.SIGKILL)  # never leave a worker behind, even when a test failed
            except ProcessLookupError:
                pass


def metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{")
               or line.startswith(name + " "))


def test_workers_share_one_api_watch_and_every_worker_sees_each_change(tmp_path: Path,
                                                                       supervisors: list[Supervisor]) -> None:
    with FakeApiServer() as api:
        api.put("Namespace", namespace("default"))
        api.put("Service", service("default", "web", ["10.96.0.50"]))
        api.put("EndpointSlice", endpoint_slice("default", "web-1", "web", ["10.1.0.1"]))
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        sup = Supervisor(tmp_path, "--kubeconfig", kubeconfig, "--node-name", "node-a", workers=3)
        supervisors.append(sup)
        wait_for(sup.ready, what="ready", timeout=30.0)
        assert [w["serving"] for w in sup.workers()] == [True, True, True]
        # every worker asks the owner once and stores the answer for its hit path (30 source ports over 3
        # workers: each gets some); the change must drop those stored answers in every worker
        assert all(r.answer[0][0].to_text() == "10.96.0.50"
                   for r in from_many_ports(sup.port, "web.default.svc.cluster.local", 30))
        api.put("Service", service("default", "web", ["10.96.0.51"]))

        def everyone_sees_it() -> bool:
            return all(r.answer and r.answer[0][0].to_text() == "10.96.0.51"
                       for r in from_many_ports(sup.port, "web.default.svc.cluster.local", 30))

        wait_for(everyone_sees_it, timeout=10, what="the change in every worker")
        explained = get_json(sup.debug_url + "/debug/lookup?name=web.default.svc.cluster.local&type=A")
        assert (explained["rcode"], explained["path"]) == ("NOERROR", "cluster")  # the supervisor's own index
        assert [r["data"] for r in explained["answer"]] == ["10.96.0.51"]
        lists = {r.resource for r in api.requests if r.verb == "list"}
        watches_per_resource = {res: len(api.requests_for(res, "watch")) for res in lists}
        assert lists == {"services", "endpointslices", "namespaces", "pods", "nodes", "dnspolicies",
                         "clusterdnspolicies"}
        assert all(n == 1 for n in watches_per_resource.values()), watches_per_resource  # not one per worker
        assert sup.stop() == 0


def test_metrics_sum_the_workers_and_keep_a_dead_workers_counts(tmp_path: Path,
                                                                supervisors: list[Supervisor]) -> None:
    sup = Supervisor(tmp_path, "--manifests", str(EXAMPLE))
    supervisors.append(sup)
    wait_for(sup.ready, what="ready", timeout=30.0)
    assert len(from_many_ports(sup.port, "web.default.svc.cluster.local", 40)) == 40
    wait_for(lambda: metric(get_text(sup.url + "/metrics"), "coredns_dns_requests_total") == 40, timeout=5,
             what="the workers' counters published")  # at most a second old
    text = get_text(sup.url + "/metrics")
    assert metric(text, "nodedns_workers") == 2 and metric(text, "nodedns_worker_up") == 2
    per_worker = [w for w in sup.workers()]
    # forked from the zygote, a worker has done little of its own yet: its CPU time may still be 0
    assert all(w["rss_bytes"] > 10 << 20 and isinstance(w["cpu_seconds"], float) for w in per_worker)
    os.kill(per_worker[0]["pid"], signal.SIGKILL)
    wait_for(lambda: sup.workers()[0]["restarts"] == 1 and sup.ready(), what="the worker restarted", timeout=30.0)
    text = get_text(sup.url + "/metrics")
    assert metric(text, "coredns_dns_requests_total") == 40  # the dead worker's share, as last gathered
    assert metric(text, "nodedns_worker_restarts_total") == 1
    assert "died (exit -9); restarting" in sup.log.read_text()
    assert sup.stop() == 0


def test_the_workers_refusals_and_rate_limits_show_in_the_supervisors_metrics(tmp_path: Path,
                                                                             supervisors: list[Supervisor]) -> None:
    sup = Supervisor(tmp_path, "--manifests", str(EXAMPLE), "--allow-from", "10.0.0.0/8,::1/128",
                     "--rate-limit", "50")
    supervisors.append(sup)
    wait_for(sup.ready, what="ready", timeout=30.0)
    answers = from_many_ports(sup.port, "web.default.svc.cluster.local", 20)  # 127.0.0.1 is not allowed
    assert {dns.rcode.to_text(r.rcode()) for r in answers} == {"REFUSED"}
    wait_for(lambda: metric(get_text(sup.url + "/metrics"), "nodedns_refused_by_acl_total") == 20, timeout=5,
             what="the workers' counters published")
    text = get_text(sup.url + "/metrics")
    assert metric(text, "nodedns_refused_by_acl_total") == 20  # counted by the workers, summed
    limits = get_json(sup.debug_url + "/status")["limits"]
    assert limits["allow_from"]["refused"] == 20
    assert limits["allow_from"]["networks"] == ["10.0.0.0/8", "::1/128"]  # settings: not summed, not doubled
    assert limits["rate_limit"]["qps"] == 50 and limits["pending"]["max"] == sup_max_pending()
    assert sup.stop() == 0


def sup_max_pending() -> int:
    return build({}).max_pending


def test_a_worker_that_cannot_bind_stops_the_supervisor_with_its_error(tmp_path: Path,
                                                                      supervisors: list[Supervisor]) -> None:
    # a TCP listener without SO_REUSEPORT: nobody may join. (A UDP socket there would be another server of
    # the address, which the supervisor refuses before it starts any worker: tests/e2e/test_duplicates.py.)
    blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    try:
        port = blocker.getsockname()[1]
        sup = Supervisor(tmp_path, "--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}")
        supervisors.append(sup)
        assert sup.proc.wait(30) == 1
    finally:
        blocker.close()
    out = sup.log.read_text()
    assert "cannot start" in out and "before it served: stopping" in out


def test_workers_exit_when_the_supervisor_is_killed(tmp_path: Path, supervisors: list[Supervisor]) -> None:
    sup = Supervisor(tmp_path, "--manifests", str(EXAMPLE))
    supervisors.append(sup)
    wait_for(sup.ready, what="ready", timeout=30.0)
    pids = [w["pid"] for w in sup.workers()]
    sup.proc.kill()
    sup.proc.wait(10)

    def gone() -> bool:
        for pid in pids:
            try:
                os.kill(pid, 0)
                return False
            except ProcessLookupError:
                continue
        return True

    wait_for(gone, timeout=15, what="orphaned workers gone")
    assert "the supervisor is gone; stopping" in sup.log.read_text()


def answered(port: int, name: str, *, timeout: float = 0.5) -> str:
    """One query from a fresh socket: its rcode, or "timeout" / "refused" (ICMP: nobody listens)."""
    try:
        r = dns.query.udp(dns.message.make_query(name, "A"), "127.0.0.1", port=port, timeout=timeout)
    except dns.exception.Timeout:
        return "timeout"
    except ConnectionRefusedError:
        return "refused"
    return str(dns.rcode.to_text(r.rcode()))


def test_sigterm_to_the_whole_group_keeps_every_worker_answering_through_the_lameduck(tmp_path: Path) -> None:
    """`timeout`, `kill -- -PGID`, systemd: the signal reaches the workers too; they follow the
    supervisor's lameduck (every query answered), and no worker is started again meanwhile."""
    port, status = free_port(), free_port()
    log = tmp_path / "serve.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(nodedns_cmd("serve", "--listen", f"127.0.0.1:{port}", "--status-listen",
                                            f"127.0.0.1:{status}", "--workers", "2", "--lameduck", "3s",
                                            "--manifests", str(EXAMPLE)),
                                env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: urllib.request.urlopen(f"http://127.0.0.1:{status}/readyz", timeout=2).status == 200,
                 what="ready", timeout=30.0)
        results: list[tuple[float, str]] = []
        stop = threading.Event()

        def load() -> None:  # queries from fresh sockets, so SO_REUSEPORT spreads them over both workers
            while not stop.is_set():
                results.append((time.monotonic(), answered(port, "web.default.svc.cluster.local")))

        threads = [threading.Thread(target=load) for _ in range(4)]
        for t in threads:
            t.start()
        wait_for(lambda: len(results) >= 50, what="the load answered", timeout=30.0)
        signalled = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(2.5)  # inside the 3 s lameduck
        stop.set()
        for t in threads:
            t.join()
        during = [r for when, r in results if when >= signalled]
        assert len(during) > 50, len(during)
        assert set(during) == {"NOERROR"}, {r: during.count(r) for r in set(during)}
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    text = log.read_text()
    assert "restarting" not in text and "died" not in text, text


def test_workers_import_only_the_installed_package_not_a_nodedns_folder_here(tmp_path: Path,
                                                                             supervisors: list[Supervisor]) -> None:
    bogus = tmp_path / "nodedns"
    bogus.mkdir()
    (bogus / "__init__.py").write_text("raise ImportError('the bogus nodedns folder of the current directory')\n")
    script = Path(sys.executable).parent / "nodedns"  # the console script: no current directory on sys.path
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        port, status = free_port(), free_port()
        log = tmp_path / "serve.log"
        with log.open("ab") as out:
            proc = subprocess.Popen([str(script), "serve", "--listen", f"127.0.0.1:{port}", "--status-listen",
                                     f"127.0.0.1:{status}", "--workers", "2", "--lameduck", "0s", "--manifests",
                                     str(EXAMPLE)], env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)
    finally:
        os.chdir(cwd)
    sup = Supervisor.__new__(Supervisor)
    sup.port, sup.status, sup.log, sup.proc = port, status, log, proc
    supervisors.append(sup)
    wait_for(sup.ready, what="ready", timeout=30.0)
    assert answered(port, "web.default.svc.cluster.local", timeout=3) == "NOERROR"
    assert "bogus" not in log.read_text()
    assert sup.stop() == 0


def test_answering_workers_never_load_the_kubernetes_client_urllib3_aiohttp_or_pyroute2(
        tmp_path: Path, supervisors: list[Supervisor]) -> None:
    with FakeApiServer() as api:
        api.put("Namespace", namespace("default"))
        api.put("Service", service("default", "web", ["10.96.0.50"]))
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        sup = Supervisor(tmp_path, "--kubeconfig", kubeconfig, "--node-name", "node-a")
        supervisors.append(sup)
        wait_for(sup.ready, what="ready", timeout=30.0)
        for name in ("web.default.svc.cluster.local", "nothing.default.svc.cluster.local"):
            from_many_ports(sup.port, name, 10)
        # the workers publish their state (what they loaded, what they asked) once it changes: poll for it
        wait_for(lambda: sum(w["cluster_asks"] for w in sup.workers()) >= 2, timeout=10,
                 what="the cluster misses published")
        workers = sup.workers()
        assert [w["heavy_imports"] for w in workers] == [[], []]
        assert sum(w["cluster_asks"] for w in workers) >= 2  # cluster misses went to the supervisor
        supervisor_modules = Path(f"/proc/{sup.proc.pid}/maps").read_text()
        assert "aiohttp" in supervisor_modules  # the check can see a loaded extension: the status server's
        for w in workers:
            assert "aiohttp" not in Path(f"/proc/{w['pid']}/maps").read_text()
        assert sup.stop() == 0


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def dead(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")  # a zombie has ended: only its parent's wait is missing


def smaps_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in smaps_rollup of {pid}")


def test_workers_are_forked_from_one_zygote_share_its_pages_and_start_again_when_it_dies(
        tmp_path: Path, supervisors: list[Supervisor]) -> None:
    sup = Supervisor(tmp_path, "--manifests", str(EXAMPLE))
    supervisors.append(sup)
    wait_for(sup.ready, what="ready", timeout=30.0)
    pids = [w["pid"] for w in sup.workers()]
    (zygote,) = {parent_of(pid) for pid in pids}  # one parent for every worker
    assert zygote != sup.proc.pid and parent_of(zygote) == sup.proc.pid
    assert "serve_forks" in Path(f"/proc/{zygote}/cmdline").read_text()
    for pid in pids:  # the imported code is shared with the zygote and the siblings: PSS well under RSS
        assert smaps_kb(pid, "Pss") < 0.75 * smaps_kb(pid, "Rss"), Path(f"/proc/{pid}/smaps_rollup").read_text()
    os.kill(zygote, signal.SIGKILL)
    # restarted and serving (a worker's restart is counted when it begins: the dead one is listed, not
    # up, until its successor is spawned)
    wait_for(lambda: [(w["restarts"], w["up"], w["serving"]) for w in sup.workers()] == [(1, True, True)] * 2
             and sup.ready(), timeout=30, what="both workers started again from a new zygote")
    new = [w["pid"] for w in sup.workers()]
    assert not set(new) & set(pids)
    # the old workers were killed, not left answering beside the new ones
    wait_for(lambda: all(dead(pid) for pid in pids), timeout=10, what="the old workers gone")
    (new_zygote,) = {parent_of(pid) for pid in new}
    assert new_zygote != zygote and parent_of(new_zygote) == sup.proc.pid
    assert {answered(sup.port, "web.default.svc.cluster.local") for _ in range(10)} == {"NOERROR"}
    assert "the process workers are forked from ended" in sup.log.read_text()
    assert sup.stop() == 0
    wait_for(lambda: dead(new_zygote), timeout=10, what="the zygote gone with the supervisor")


# ----------------------------------------------------------------------------------------------
# The channel: frames split across reads


FIRST, SECOND = ("inv", frozenset({"s:default/web"})), ("ans", b"x" * 100)
FIRST_FRAME = len(Channel.encode(FIRST))


@settings(max_examples=60, deadline=None)
@example(messages=[FIRST, SECOND], cuts=[2, FIRST_FRAME + 7])  # a whole frame and the start of the next in one read
@example(messages=[FIRST, SECOND], cuts=[FIRST_FRAME])  # a read that ends where a frame ends
@given(messages=st.lists(st.one_of(st.tuples(st.just("inv"), st.frozensets(st.text(max_size=12), max_size=5)),
                                   st.tuples(st.just("ans"), st.binary(max_size=3000))), min_size=1, max_size=8),
       cuts=st.lists(st.integers(1, 5000), max_size=12))
def test_the_channel_delivers_every_message_in_order_however_the_stream_is_split(messages: list[Any],
                                                                                 cuts: list[int]) -> None:
    """The supervisor's stream read the way the kernel may hand it over: a frame's header, its pickle
    and the next frame cut anywhere (a partly read frame waits for the rest; a whole one is not held
    back waiting for more), over a real socketpair, one piece per read."""
    frames = [Channel.encode(m) for m in messages]
    ends = [sum(len(f) for f in frames[: i + 1]) for i in range(len(frames))]
    stream = b"".join(frames)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(stream)}), len(stream)]

    async def scenario() -> list[Any]:
        got: list[Any] = []
        arrived = asyncio.Event()

        def deliver(message: Any) -> None:
            got.append(message)
            arrived.set()

        mine, theirs = socket.socketpair()
        theirs.setblocking(False)
        channel = await Channel.open(mine, deliver)
        try:
            for start, end in itertools.pairwise(bounds):
                await asyncio.get_running_loop().sock_sendall(theirs, stream[start:end])
                whole = sum(1 for e in ends if e <= end)  # the messages complete once this piece is read
                async with asyncio.timeout(2):
                    while len(got) < whole:
                        arrived.clear()
                        await arrived.wait()
            return got
        finally:
            channel.close()
            theirs.close()

    assert uvloop.run(scenario()) == messages


# ----------------------------------------------------------------------------------------------
# The supervisor in this process (its workers forked as in production), changes made on its loop


@pytest.fixture
def fleet() -> Iterator[RunningAgent]:
    with running_agent({"manifests": str(EXAMPLE), "workers": 2, "status-listen": "127.0.0.1:0",
                        "debug-listen": "127.0.0.1:0"},
                       agent_factory=lambda c: modes.supervisor(concrete_ports(c), count=2)) as agent:
        yield agent


def fleet_port(agent: RunningAgent) -> int:
    return int(agent.agent.config.listen_addresses[0][1])


def every_worker_answers(port: int, name: str, expected: str, n: int = 24) -> bool:
    """n queries from fresh source ports (spread over the workers): all answer `expected` (a query that gets no
    answer in time, as one to a worker still starting, is a no)."""
    try:
        answers = from_many_ports(port, name, n)
    except dns.exception.Timeout:
        return False
    for r in answers:
        if [rd.to_text() for rrset in r.answer for rd in rrset] != [expected]:
            return False
    return True


def test_several_changes_in_one_loop_turn_drop_the_answers_of_every_one_in_every_worker(
        fleet: RunningAgent) -> None:
    port = fleet_port(fleet)
    before = {"web.default": "10.96.12.34", "web.otherns": "10.96.40.7", "db.other": "10.96.0.20"}
    after = {"web.default": "10.96.12.35", "web.otherns": "10.96.40.8", "db.other": "10.96.0.21"}
    wait_for(lambda: every_worker_answers(port, "web.default.svc.cluster.local", before["web.default"]), 20,
             "the workers serving")
    for name, ip in before.items():  # each worker asks once and keeps the answer for its hit path
        assert every_worker_answers(port, f"{name}.svc.cluster.local", ip)

    def change_all() -> None:  # one event-loop turn: one flush of the invalidations of all three
        for name, ip in after.items():
            svc, ns = name.split(".")
            assert fleet.agent.index.apply("Service", "MODIFIED", cf.service(ns, svc, cluster_ips=[ip]))

    fleet.call(change_all)
    for name, ip in after.items():
        wait_for(lambda name=name, ip=ip: every_worker_answers(port, f"{name}.svc.cluster.local", ip), 5,
                 f"every worker answering the new address of {name}")
