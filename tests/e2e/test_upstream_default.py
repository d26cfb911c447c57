"""The default upstream is CoreDNS's default Corefile's: the nameservers of /etc/resolv.conf, with the
loop check; `--upstream none` turns it off (names outside the cluster are REFUSED).

The end-to-end cases run the agent in a network namespace whose /etc/resolv.conf is
/etc/netns/<ns>/resolv.conf (`ip netns exec` bind-mounts it), with a small DNS server on
127.0.0.1:53 in the namespace as the upstream it names.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodedns import config as cfgmod
from nodedns.errors import ConfigError
from nodedns.observe.status import render_page
from tests.support.helpers import EXAMPLE, nodedns_cmd, running_agent, subprocess_env, wait_for
from tests.support.netns import Netns, netns, requires_netns

PREFIX = "ndup"
AGENT_PORT = 5353
OUTSIDE = "www.example.org"
OUTSIDE_ANSWER = "192.0.2.53"


@pytest.mark.parametrize(
    ("raw", "upstream", "resolv_conf"),
    [
        ({}, (), "/etc/resolv.conf"),
        ({"upstream": "none"}, (), None),
        ({"upstream": ["None"]}, (), None),
        ({"upstream": "10.0.0.53"}, (("10.0.0.53", 53),), None),
        ({"upstream-resolv-conf": "/run/resolv.conf"}, (), "/run/resolv.conf"),
        ({"upstream": "10.0.0.53", "upstream-resolv-conf": "/run/resolv.conf"}, (("10.0.0.53", 53),),
         "/run/resolv.conf"),
        ({"kube-dns-config-dir": "/etc/kube-dns"}, (), "/etc/resolv.conf"),
        ({"kube-dns-config-dir": "/etc/kube-dns", "upstream": "none"}, (), None),
    ],
    ids=["nothing-given-means-etc-resolv-conf", "none-means-no-upstream", "none-is-case-insensitive",
         "an-address-replaces-the-default", "another-resolv-conf", "address-and-resolv-conf-kept-as-given",
         "kube-dns-configmap-falls-back-to-resolv-conf-as-kube-dns-does", "kube-dns-configmap-without-default"],
)
def test_the_upstream_default_is_the_nodes_resolv_conf_unless_turned_off(
        raw: dict[str, Any], upstream: tuple[tuple[str, int], ...], resolv_conf: str | None) -> None:
    cfg = cfgmod.build(raw, environ={})
    assert (cfg.upstream, cfg.upstream_resolv_conf) == (upstream, resolv_conf)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"upstream": "none,10.0.0.53"}, "upstream: 'none' cannot be combined with upstream addresses"),
        ({"upstream": "none", "upstream-resolv-conf": "/run/resolv.conf"}, "upstream: 'none' turns off"),
    ],
    ids=["none-with-an-address", "none-with-a-resolv-conf"],
)
def test_none_mixed_with_upstreams_is_a_config_error(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cfgmod.build(raw, environ={})


# ----------------------------------------------------------------------------------------------
# End to end, in a network namespace

UPSTREAM = r'''
import socket, sys
import dns.message, dns.rrset
mode = sys.argv[1]
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind((sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1", 53))
print("ready", flush=True)
while True:
    data, peer = sock.recvfrom(65535)
    q = dns.message.from_wire(data)
    if mode == "relay":  # a resolver that forwards back to the agent: a loop
        fwd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        fwd.settimeout(3)
        fwd.sendto(data, ("127.0.0.1", int(sys.argv[2])))
        try:
            sock.sendto(fwd.recv(65535), peer)
        except OSError:
            pass
        fwd.close()
        continue
    r = dns.message.make_response(q)
    if q.question[0].rdtype == 1:
        r.answer.append(dns.rrset.from_text(q.question[0].name, 60, "IN", "A", sys.argv[3]))
    sock.sendto(r.to_wire(), peer)
'''

ASK = r'''
import sys
import dns.message, dns.query, dns.rcode
try:
    r = dns.query.udp(dns.message.make_query(sys.argv[1], "A"), "127.0.0.1", port=int(sys.argv[2]), timeout=1)
except Exception as exc:
    print("error", type(exc).__name__)
else:
    print(dns.rcode.to_text(r.rcode()), *sorted(rr.to_text() for rrset in r.answer for rr in rrset))
'''


def ask(ns: Netns, name: str, port: int = AGENT_PORT) -> str:
    return ns.run(sys.executable, "-c", ASK, name, str(port), env=subprocess_env(), timeout=10).stdout.strip()


@contextlib.contextmanager
def upstream_in(ns: Netns, mode: str = "answer", answer: str = OUTSIDE_ANSWER,
                address: str = "127.0.0.1") -> Iterator[None]:
    proc = subprocess.Popen([*ns.exec_prefix, sys.executable, "-c", UPSTREAM, mode, str(AGENT_PORT), answer, address],
                            env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.stdout
        yield
    finally:
        proc.kill()
        proc.communicate()


@contextlib.contextmanager
def agent_in(ns: Netns, log: Path, *flags: str) -> Iterator[subprocess.Popen[bytes]]:
    argv = [*ns.exec_prefix, *nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen",
                                          f"127.0.0.1:{AGENT_PORT}", "--status-listen", "none", "--lameduck", "0s",
                                          "--workers", "1", *flags)]
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not ask(ns, "web.default.svc.cluster.local").startswith("NOERROR"):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def node_ns() -> Iterator[Netns]:
    with netns("node", PREFIX) as ns:
        etc = Path("/etc/netns") / ns.name
        etc.mkdir(parents=True)
        (etc / "resolv.conf").write_text("# the node's file, as the agent sees it\nnameserver 127.0.0.1\n")
        yield ns


@requires_netns
def test_without_upstream_flags_names_outside_the_cluster_go_to_the_resolv_conf_nameservers(
        node_ns: Netns, tmp_path: Path) -> None:
    with upstream_in(node_ns), agent_in(node_ns, tmp_path / "agent.log"):
        assert ask(node_ns, OUTSIDE) == f"NOERROR {OUTSIDE_ANSWER}"
        assert ask(node_ns, "web.default.svc.cluster.local").startswith("NOERROR")
    assert "upstreams: . -> 127.0.0.1:53" in (tmp_path / "agent.log").read_text()


@requires_netns
def test_when_the_nodes_resolv_conf_changes_the_agent_forwards_to_its_new_nameservers(
        node_ns: Netns, tmp_path: Path) -> None:
    """As the DaemonSet runs it (`upstream-resolv-conf: /etc/resolv.conf`, the node's file): a new nameserver in
    the file takes the names outside the cluster within a reload period, without a restart."""
    conf = Path("/etc/netns") / node_ns.name / "resolv.conf"
    with upstream_in(node_ns), upstream_in(node_ns, answer="192.0.2.54", address="127.0.0.2"), \
            agent_in(node_ns, tmp_path / "agent.log", "--upstream-resolv-conf", "/etc/resolv.conf",
                     "--kube-dns-config-period", "200ms", "--cache-success", "0"):
        assert ask(node_ns, OUTSIDE) == f"NOERROR {OUTSIDE_ANSWER}"
        with conf.open("r+") as fh:  # in place: `ip netns exec` bind-mounts this very file
            fh.truncate(0)
            fh.write("nameserver 127.0.0.2\n")
        wait_for(lambda: ask(node_ns, OUTSIDE) == "NOERROR 192.0.2.54", timeout=10,
                 what="the answer from the new nameserver")
    assert "upstream config reloaded: . -> 127.0.0.2:53" in (tmp_path / "agent.log").read_text()


@requires_netns
def test_upstream_none_refuses_names_outside_the_cluster(node_ns: Netns, tmp_path: Path) -> None:
    with upstream_in(node_ns), agent_in(node_ns, tmp_path / "agent.log", "--upstream", "none"):
        assert ask(node_ns, OUTSIDE) == "REFUSED"
        assert ask(node_ns, "web.default.svc.cluster.local").startswith("NOERROR")


@requires_netns
def test_a_resolv_conf_that_forwards_back_to_the_agent_is_a_detected_loop(node_ns: Netns, tmp_path: Path) -> None:
    """The loop is found (each worker probes), the names routed there get SERVFAIL, the cluster zone goes on."""
    log = tmp_path / "agent.log"
    argv = [*node_ns.exec_prefix, *nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen",
                                               f"127.0.0.1:{AGENT_PORT}", "--status-listen", "none", "--workers", "2",
                                               "--upstream-timeout", "500ms", "--lameduck", "0s")]
    with upstream_in(node_ns, "relay"), log.open("ab") as out:
        proc = subprocess.Popen(argv, env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while log.read_text().count('forwarding loop detected for zone "."') < 2:  # both workers
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            assert ask(node_ns, OUTSIDE) == "SERVFAIL"
            assert ask(node_ns, "web.default.svc.cluster.local").startswith("NOERROR")
        finally:
            proc.terminate()
            code = proc.wait(30)
    assert code == 0, log.read_text()


@requires_netns
def test_a_resolv_conf_naming_the_agents_own_address_is_refused_at_start(node_ns: Netns, tmp_path: Path) -> None:
    argv = [*node_ns.exec_prefix, *nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen", "127.0.0.1:53",
                                               "--status-listen", "none", "--workers", "2")]
    r = subprocess.run(argv, env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("nodedns: config error:")]
    assert lines == ["nodedns: config error: upstream: 127.0.0.1:53 is this agent's own listen address"], r.stderr


@requires_netns
def test_a_resolv_conf_without_nameservers_says_how_to_turn_the_default_off(node_ns: Netns) -> None:
    (Path("/etc/netns") / node_ns.name / "resolv.conf").write_text("search example.org\n")
    argv = [*node_ns.exec_prefix, *nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen",
                                               f"127.0.0.1:{AGENT_PORT}", "--status-listen", "none")]
    r = subprocess.run(argv, env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "nodedns: config error: upstream: the default upstreams are the nameservers of /etc/resolv.conf, which "
        "cannot be used (upstream-resolv-conf: /etc/resolv.conf names no nameserver); give --upstream ADDR, or "
        "--upstream none to refuse names outside the cluster"], r.stderr


@pytest.mark.parametrize(
    ("raw", "shown", "not_shown"),
    [
        ({"upstream": "none"}, "no upstream configured: names outside the cluster are refused", "not wired"),
        ({"upstream": "192.0.2.1"}, "192.0.2.1:53", "no upstream configured"),
    ],
    ids=["upstream-none", "an-upstream"],
)
def test_the_status_page_says_in_words_whether_outside_names_are_forwarded(
        raw: dict[str, Any], shown: str, not_shown: str) -> None:
    with running_agent({"manifests": str(EXAMPLE), "health-check": "0s", **raw}) as agent:
        page = render_page(agent.call(agent.agent.observer.status))
    tables = re.sub(r"<script>.*?</script>", "", page, flags=re.S)  # the words the page shows, not its script's
    assert shown in tables
    assert not_shown not in tables
