"""The interface over netlink and the node reconcile loop: ensure, adopt or refuse, re-add, clean up, count."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from nodedns.errors import NetifError
from nodedns.node.firewall import SKIP_COMMENT, IptablesFirewall, command_runner
from nodedns.node.netif import Link, NodeNetwork
from tests.support.netns import Netns, netns, requires_netns
from tests.support.node_fakes import FakeFirewall, FakeLink, Recorder

IPS = ("169.254.20.10", "fd00:10:96::a")


@pytest.fixture
def node() -> Iterator[Netns]:
    with netns("if") as ns:
        yield ns


def addresses(ns: Netns, dev: str) -> list[str]:
    out = ns.run("ip", "-o", "addr", "show", "dev", dev, "scope", "global").stdout
    return sorted(line.split()[3] for line in out.splitlines())


@requires_netns
def test_ensure_creates_the_link_up_with_host_addresses_of_both_families(
    node: Netns, caplog: pytest.LogCaptureFixture
) -> None:
    link = Link("nodelocaldns", IPS, netns=node.name)
    with caplog.at_level(logging.WARNING, "nodedns.netif"):
        actions, errors = link.ensure()
    assert errors == []
    assert actions[0].startswith("added interface nodelocaldns (kind ")
    assert addresses(node, "nodelocaldns") == ["169.254.20.10/32", "fd00:10:96::a/128"]
    state = link.describe()
    assert state["up"] is True and state["kind"] == link.kind
    if link.kind == "bridge":  # the kernel has no dummy driver: the fallback is said out loud
        assert "link kind dummy is not available" in caplog.text
    else:
        assert link.kind == "dummy"
    # the IPv6 address is usable at once (no duplicate address detection): bind to it
    node.run("python3", "-c", "import socket; s=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); "
                              "s.bind(('fd00:10:96::a', 5353))")


@requires_netns
def test_ensure_is_idempotent_and_repairs_what_was_changed(node: Netns) -> None:
    link = Link("nodelocaldns", IPS, netns=node.name)
    link.ensure()
    assert link.ensure() == ([], [])
    node.run("ip", "addr", "del", "169.254.20.10/32", "dev", "nodelocaldns")
    node.run("ip", "addr", "add", "10.1.2.3/32", "dev", "nodelocaldns")  # a predecessor's other local IP
    node.run("ip", "link", "set", "nodelocaldns", "down")
    actions, errors = link.ensure()
    assert errors == []
    assert sorted(actions) == ["added address 169.254.20.10/32 to nodelocaldns",
                               "added address fd00:10:96::a/128 to nodelocaldns",  # link down drops IPv6 addresses
                               "removed stale address 10.1.2.3/32 from nodelocaldns",
                               "set nodelocaldns up"]
    assert addresses(node, "nodelocaldns") == ["169.254.20.10/32", "fd00:10:96::a/128"]


@pytest.mark.parametrize(
    ("setup", "what"),
    [
        (["ip", "link", "add", "nodelocaldns", "type", "veth", "peer", "name", "nd6peer"], "a veth link"),
        (["ip", "link", "add", "nodelocaldns", "type", "bridge"], "a bridge we did not create (no alias"),
    ],
    ids=["veth", "bridge-without-our-alias"],
)
@requires_netns
def test_a_foreign_link_with_that_name_is_refused_and_left_alone(node: Netns, setup: list[str], what: str) -> None:
    node.run(*setup)
    link = Link("nodelocaldns", IPS, netns=node.name)
    actions, errors = link.ensure()
    assert actions == []
    assert [e.cause for e in errors] == ["interface_check"] and what in errors[0].reason
    assert addresses(node, "nodelocaldns") == []
    node.run("ip", "addr", "add", "169.254.20.10/32", "dev", "nodelocaldns")  # its owner's address, say
    _, errors = link.remove_addresses()  # what `nodedns guard` does on a fallback
    assert [e.cause for e in errors] == ["interface_check"]
    assert addresses(node, "nodelocaldns") == ["169.254.20.10/32"]
    _, errors = link.remove()
    assert [e.cause for e in errors] == ["interface_check"]
    assert "nodelocaldns" in node.links()


@requires_netns
def test_our_bridge_is_refused_once_it_has_a_port(node: Netns) -> None:
    """The fallback link (a bridge with no ports and our alias, as `Link` makes it where the kernel has
    no dummy driver) is made by hand here, so this runs on a kernel with dummy links too."""
    node.run("ip", "link", "add", "nodelocaldns", "type", "bridge")
    node.run("ip", "link", "set", "nodelocaldns", "alias", "nodedns")
    link = Link("nodelocaldns", IPS, netns=node.name)
    _, errors = link.ensure()
    assert errors == [] and link.kind == "bridge"  # ours: managed
    assert addresses(node, "nodelocaldns") == ["169.254.20.10/32", "fd00:10:96::a/128"]
    node.run("ip", "link", "add", "nd6port", "type", "veth", "peer", "name", "nd6peer")
    node.run("ip", "link", "set", "nd6port", "master", "nodelocaldns")
    _, errors = link.ensure()
    assert "1 ports" in errors[0].reason


@requires_netns
def test_remove_deletes_our_link_and_is_a_no_op_when_it_is_gone(node: Netns) -> None:
    link = Link("nodelocaldns", IPS, netns=node.name)
    link.ensure()
    assert link.remove() == (["deleted interface nodelocaldns"], [])
    assert "nodelocaldns" not in node.links()
    assert link.remove() == ([], [])


# ----------------------------------------------------------------------------------------------
# NodeNetwork with the real link and the real iptables in a namespace


def node_network(ns: Netns, *, ips: tuple[str, ...] = IPS, skip_teardown: bool = False) -> NodeNetwork:
    return NodeNetwork(
        link=Link("nodelocaldns", ips, netns=ns.name),
        firewall=IptablesFirewall(ips, health_port=9253, runner=command_runner(prefix=ns.exec_prefix)),
        skip_teardown=skip_teardown,
    )


def our_rules(ns: Netns) -> list[str]:
    return [r for r in ns.rules("iptables") + ns.rules("ip6tables") if SKIP_COMMENT in r or "nodedns:" in r]


@requires_netns
def test_prepare_removes_a_crashed_predecessors_rules_and_keeps_its_link(node: Netns) -> None:
    crashed = node_network(node, ips=("169.254.20.10", "10.96.0.10"))
    crashed.prepare_sync()
    crashed.reconcile_sync(True)
    assert len(our_rules(node)) == 24  # then SIGKILL: nothing cleaned up
    fresh = node_network(node)
    fresh.prepare_sync()
    assert our_rules(node) == []  # no capture until we serve again
    assert addresses(node, "nodelocaldns") == ["169.254.20.10/32", "fd00:10:96::a/128"]
    fresh.reconcile_sync(True)
    assert len(our_rules(node)) == 24 and fresh.rules_installed


@requires_netns
def test_reconcile_installs_rules_only_when_we_can_answer_and_adds_back_what_vanished(
    node: Netns, caplog: pytest.LogCaptureFixture
) -> None:
    net = node_network(node)
    net.prepare_sync()
    net.reconcile_sync(False)
    assert our_rules(node) == [] and not net.rules_installed
    net.reconcile_sync(True)
    assert len(our_rules(node)) == 24
    node.run("iptables", "-t", "raw", "-F", "PREROUTING")
    node.run("ip", "link", "del", "nodelocaldns")
    with caplog.at_level(logging.INFO, "nodedns.netif"):
        net.reconcile_sync(True)
    assert len(our_rules(node)) == 24
    assert "nodelocaldns" in node.links()
    assert net.added_back == 2 + 1 + 1 + 2  # two rules; link, up, two addresses
    assert "added back nodedns rule: iptables -t raw PREROUTING" in caplog.text
    net.reconcile_sync(False)  # the listeners died: stop capturing
    assert our_rules(node) == [] and not net.rules_installed


@requires_netns
def test_teardown_removes_rules_then_link_unless_skip_teardown(node: Netns) -> None:
    net = node_network(node)
    net.prepare_sync()
    net.reconcile_sync(True)
    net.teardown_sync()
    assert our_rules(node) == [] and "nodelocaldns" not in node.links()
    net.reconcile_sync(True)  # a round that was already queued does nothing after teardown
    assert our_rules(node) == [] and "nodelocaldns" not in node.links()

    kept = node_network(node, skip_teardown=True)
    kept.prepare_sync()
    kept.reconcile_sync(True)
    kept.teardown_sync()
    assert len(our_rules(node)) == 24 and "nodelocaldns" in node.links()


@requires_netns
def test_failures_are_counted_by_cause_and_block_capture(node: Netns) -> None:
    node.run("ip", "link", "add", "nodelocaldns", "type", "veth", "peer", "name", "nd6peer")
    net = node_network(node)
    net.prepare_sync()
    net.reconcile_sync(True)
    assert net.errors["interface_check"] == 2
    assert our_rules(node) == []  # never steer traffic to an address we do not hold
    assert net.problems() == ["interface nodelocaldns is not set up: nodelocaldns is a veth link; "
                              "refusing to manage it"]
    assert net.state()["setup_errors"] == {"interface_check": 2}


# ----------------------------------------------------------------------------------------------
# The async loop, with recording stand-ins (no root needed)


def test_the_loop_waits_for_capture_runs_off_the_event_loop_and_tears_down_in_order() -> None:
    rec = Recorder()
    net = NodeNetwork(link=FakeLink(rec), firewall=FakeFirewall(rec), sync_interval=0.05)  # type: ignore[arg-type]
    allowed = False

    async def main() -> int:
        nonlocal allowed
        loop_thread = threading.get_ident()
        await net.prepare()
        net.start(can_capture=lambda: allowed)
        await asyncio.sleep(0.1)
        assert "firewall.ensure" not in [c for c, _ in rec.calls]  # index not synced: no rules
        allowed = True
        net.poke()
        for _ in range(100):
            if [c for c, _ in rec.calls].count("firewall.ensure") >= 2:
                break
            await asyncio.sleep(0.02)
        await net.teardown(retry=False)
        return loop_thread

    loop_thread = asyncio.run(asyncio.wait_for(main(), 10))
    names = [c for c, _ in rec.calls]
    assert names[:2] == ["firewall.remove retry=True", "link.ensure"]
    assert names.count("firewall.ensure") >= 2  # installed, then re-asserted on the timer
    assert names[-2:] == ["firewall.remove retry=False", "link.remove"]
    assert all(thread != loop_thread for _, thread in rec.calls)
    assert net.rules_installed is False and net.reconciles >= 2


class FailingFirewall(FakeFirewall):
    def ensure(self) -> tuple[list[str], list[NetifError]]:
        self.rec.note("firewall.ensure")
        return [], [NetifError("iptables", f"adding rule {i}: exit status 127: iptables: not found") for i in range(10)]


class RefusedFirewall(FakeFirewall):
    """iptables without NET_ADMIN: every call refused (exit status 4, "Permission denied (you must be root)")."""

    def remove(self, *, retry: bool = True) -> tuple[list[str], list[NetifError]]:
        self.rec.note(f"firewall.remove retry={retry}")
        return [], [NetifError("permission", "listing raw PREROUTING: exit status 4: iptables v1.8.9 (nf_tables): "
                                             "Permission denied (you must be root) (" + NetifError.NO_NET_ADMIN + ")")]


class RefusedLink(FakeLink):
    def ensure(self) -> tuple[list[str], list[NetifError]]:
        self.rec.note("link.ensure")
        return [], [NetifError("interface_add", "adding nodelocaldns: Operation not permitted (errno 1)")]


@pytest.mark.parametrize(("link", "firewall", "first"), [
    (FakeLink, RefusedFirewall, "listing raw PREROUTING: exit status 4: iptables v1.8.9 (nf_tables): Permission denied "
                                "(you must be root): the agent lacks the NET_ADMIN capability"),
    (RefusedLink, FakeFirewall,
     "adding nodelocaldns: Operation not permitted (errno 1): the agent lacks the NET_ADMIN"),
], ids=["iptables-refused", "netlink-refused"])
def test_a_node_setup_refused_for_lack_of_net_admin_stops_the_start(link: type, firewall: type, first: str) -> None:
    """A missing privilege never passes by itself: prepare raises (the agent exits 1 naming NET_ADMIN)."""
    rec = Recorder()
    net = NodeNetwork(link=link(rec), firewall=firewall(rec))
    with pytest.raises(NetifError) as refused:
        net.prepare_sync()
    assert refused.value.cause == "permission" and refused.value.reason.startswith(first), refused.value.reason


class LockedFirewall(FakeFirewall):
    def remove(self, *, retry: bool = True) -> tuple[list[str], list[NetifError]]:
        return [], [NetifError("iptables_lock", "listing raw PREROUTING: exit status 4: Another app is currently "
                                                "holding the xtables lock. Stopped waiting after 5s.")]


def test_a_node_setup_that_fails_for_another_reason_is_retried_not_fatal() -> None:
    rec = Recorder()
    net = NodeNetwork(link=FakeLink(rec), firewall=LockedFirewall(rec))  # type: ignore[arg-type]
    net.prepare_sync()  # no raise: the reconcile loop tries again
    assert net.interface_ok is True and net.errors["iptables_lock"] == 1


class BrokenLink(FakeLink):
    def remove(self) -> tuple[list[str], list[NetifError]]:
        raise RuntimeError("netlink socket closed under us")


def test_a_round_logs_one_line_per_failure_cause_and_counts_every_failure(caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder()
    net = NodeNetwork(link=FakeLink(rec), firewall=FailingFirewall(rec))  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, "nodedns.netif"):
        net.reconcile_sync(True)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["node setup failed (iptables): adding rule 0: exit status 127: iptables: not found "
                     "(and 9 more like it)"]
    assert net.errors["iptables"] == 10 and not net.rules_installed


def test_a_failing_teardown_is_logged_and_does_not_stop_the_shutdown(caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder()
    net = NodeNetwork(link=BrokenLink(rec), firewall=FakeFirewall(rec))  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, "nodedns.netif"):
        asyncio.run(asyncio.wait_for(net.teardown(), 10))
    assert "node teardown failed" in caplog.text
    assert [c for c, _ in rec.calls] == ["firewall.remove retry=True"]  # rules first, even so


# ----------------------------------------------------------------------------------------------
# Capture only what answers; put back at once what was taken away (nodedns guard)


class Responder:
    """A UDP socket on 127.0.0.1 answering every query NOERROR (echoing it back as a response), or not at all."""

    def __init__(self) -> None:
        import socket

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.answering = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(512)
            except OSError:
                continue
            if self.answering and len(data) >= 12:
                self.sock.sendto(data[:2] + bytes([data[2] | 0x80, 0x00]) + data[4:], addr)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


class VanishingLink(FakeLink):
    """Its addresses are gone (the guard took them) until the next ensure() puts them back."""

    gone = False

    def missing(self) -> list[str]:
        return list(self.ips) if self.gone else []

    def ensure(self) -> tuple[list[str], list[NetifError]]:
        super().ensure()
        self.gone = False
        return [], []


def test_the_rules_go_in_only_once_a_query_to_the_local_ips_is_answered(caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder()
    responder = Responder()
    net = NodeNetwork(link=FakeLink(rec), firewall=FakeFirewall(rec), sync_interval=0.05,  # type: ignore[arg-type]
                      probe_targets=[("127.0.0.1", responder.port)], watch_period=0.05)

    async def main() -> None:
        net.start(can_capture=lambda: True)
        for _ in range(100):
            if net.unanswered:
                break
            await asyncio.sleep(0.05)
        assert "firewall.ensure" not in [c for c, _ in rec.calls] and not net.rules_installed
        assert net.problems() == [f"no answer on the local IPs, so no conntrack-bypass rules: 127.0.0.1:"
                                  f"{responder.port}: no answer in 1s"]
        responder.answering = True
        for _ in range(200):
            if net.rules_installed:
                break
            await asyncio.sleep(0.05)
        await net.teardown(retry=False)

    try:
        with caplog.at_level(logging.INFO, "nodedns.netif"):
            asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        responder.close()
    assert net.rules_installed is False and [c for c, _ in rec.calls].count("firewall.ensure") >= 1
    assert "not installing the conntrack-bypass rules: 127.0.0.1:" in caplog.text
    assert "the local IPs answer again: installing the conntrack-bypass rules" in caplog.text


def test_local_ips_taken_away_are_put_back_within_the_watch_period_not_the_sync_interval() -> None:
    rec = Recorder()
    responder = Responder()
    responder.answering = True
    link = VanishingLink(rec)
    net = NodeNetwork(link=link, firewall=FakeFirewall(rec), sync_interval=3600,  # type: ignore[arg-type]
                      probe_targets=[("127.0.0.1", responder.port)], watch_period=0.05)

    async def main() -> float:
        net.interface_ok = True
        net.start(can_capture=lambda: True)
        while not net.rules_installed:  # noqa: ASYNC110 - polling the state the loop sets
            await asyncio.sleep(0.01)
        ensures = [c for c, _ in rec.calls].count("firewall.ensure")
        link.gone = True  # the guard fell back
        taken = time.monotonic()
        while [c for c, _ in rec.calls].count("firewall.ensure") == ensures:  # noqa: ASYNC110 - polling
            await asyncio.sleep(0.01)
        took = time.monotonic() - taken
        await net.teardown(retry=False)
        return took

    try:
        took = asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        responder.close()
    assert took < 10 and net.taken_away == 1  # an hour's sync interval, yet put back at once (load cannot break this)


@requires_netns
def test_a_local_ip_on_kube_ipvs0_is_reported_as_kube_proxys_ipvs_mode(node: Netns,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    node.run("ip", "link", "add", "kube-ipvs0", "type", "bridge")  # a dummy where the kernel has the driver
    node.run("ip", "addr", "add", "10.96.0.10/32", "dev", "kube-ipvs0")  # what kube-proxy's IPVS mode does
    net = NodeNetwork(link=Link("nodelocaldns", ("169.254.20.10", "10.96.0.10"), netns=node.name), firewall=None)
    with caplog.at_level(logging.WARNING, "nodedns.netif"):
        net.prepare_sync()
    assert net.state()["local_ips_elsewhere"] == [{"ip": "10.96.0.10", "interface": "kube-ipvs0"}]
    assert "local IP 10.96.0.10 is also on kube-ipvs0: kube-proxy runs in IPVS mode" in caplog.text


def test_rules_taken_away_with_the_local_ips_go_back_only_after_a_probe_is_answered() -> None:
    """The guard fell back (the local IPs and the rules gone) while the agent does not answer: the addresses
    go back on the interface (the probe goes to them), the rules do not, until a probe is answered."""
    rec = Recorder()
    responder = Responder()
    responder.answering = True
    link = VanishingLink(rec)
    net = NodeNetwork(link=link, firewall=FakeFirewall(rec), sync_interval=3600,  # type: ignore[arg-type]
                      probe_targets=[("127.0.0.1", responder.port)], watch_period=0.05)

    def ensures() -> int:
        return [c for c, _ in rec.calls].count("firewall.ensure")

    async def main() -> tuple[int, int, bool, bool]:
        net.interface_ok = True
        net.start(can_capture=lambda: True)
        while not net.rules_installed:  # noqa: ASYNC110 - polling the state the loop sets
            await asyncio.sleep(0.01)
        first = ensures()
        responder.answering = False  # the agent hangs ...
        link.gone = True  # ... and the guard takes its addresses (and rules) away
        while not net.unanswered and ensures() == first:  # noqa: ASYNC110 - the probe failed, or rules went in
            await asyncio.sleep(0.01)
        put_back, while_silent, installed = not link.gone, ensures(), net.rules_installed
        responder.answering = True
        while while_silent == first and ensures() == while_silent:  # noqa: ASYNC110 - answered again: back in
            await asyncio.sleep(0.01)
        await net.teardown(retry=False)
        return first, while_silent, put_back, installed

    try:
        first, while_silent, put_back, installed = asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        responder.close()
    assert put_back and net.taken_away == 1  # the addresses are back on the interface ...
    assert while_silent == first and not installed  # ... the rules not, while nothing answers there


def test_local_ips_taken_away_are_not_put_back_while_a_worker_is_silent(caplog: pytest.LogCaptureFixture) -> None:
    """The guard fell back while one worker's event loop was stopped: another worker answers the probe (the
    kernel hashes it to one socket of the group), but the addresses and rules stay off until nothing holds
    them (fleet: every worker heard from again), then go back once the probe is answered."""
    rec = Recorder()
    responder = Responder()
    responder.answering = True  # the other worker answers
    link = VanishingLink(rec)
    held: list[str] = []
    net = NodeNetwork(link=link, firewall=FakeFirewall(rec), sync_interval=3600,  # type: ignore[arg-type]
                      probe_targets=[("127.0.0.1", responder.port)], watch_period=0.05)

    async def main() -> None:
        net.interface_ok = True
        net.start(can_capture=lambda: True, hold=lambda: held[0] if held else None)
        while not net.rules_installed:  # noqa: ASYNC110 - polling the state the loop sets
            await asyncio.sleep(0.01)
        ensures = [c for c, _ in rec.calls].count("link.ensure")
        held.append("worker 1 silent for 1.2s (no heartbeat)")
        link.gone = True  # the guard fell back
        while not net.held:  # noqa: ASYNC110 - polling
            await asyncio.sleep(0.01)
        for _ in range(20):  # a second of watch periods: nothing is put back
            await asyncio.sleep(0.05)
            assert link.gone and [c for c, _ in rec.calls].count("link.ensure") == ensures
        assert net.problems() == ["the local IPs and rules are not put back while worker 1 silent for 1.2s "
                                  "(no heartbeat)"]
        assert net.state()["held"] == "worker 1 silent for 1.2s (no heartbeat)"
        held.clear()  # the worker was restarted and serves
        while link.gone:  # noqa: ASYNC110 - polling
            await asyncio.sleep(0.01)
        while not net.rules_installed:  # noqa: ASYNC110 - polling
            await asyncio.sleep(0.01)
        assert net.problems() == [] and net.state()["held"] is None
        await net.teardown(retry=False)

    try:
        with caplog.at_level(logging.INFO, "nodedns.netif"):
            asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        responder.close()
    assert "not putting the local IPs and rules back: worker 1 silent for 1.2s (no heartbeat)" in caplog.text
    assert "every worker is heard from again" in caplog.text
