"""End to end on a fake node: glibc in a "pod" namespace resolves through the agent in a "node" namespace.

    pod netns (nd6-pod-*)                        node netns (nd6-node-*)
    /etc/netns/<pod>/resolv.conf                 nodedns serve --setup-interface nodelocaldns
      (by `nodedns resolv-conf`):                  --local-ip 169.254.20.10 --local-ip fd00:10:96::a
      nameserver 169.254.20.10                     --firewall iptables|nftables
    getent ahosts web  --veth 192.0.2.0/30-->    (with the DaemonSet's capabilities only, via setpriv)

The agent is started, checked (names, rules, interface), SIGKILLed (leftovers stay), restarted on
the leftovers (clean: no duplicate rules), checked again, and SIGTERMed: nothing may remain.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from nodedns.node.firewall import ALLOW_COMMENT, SKIP_COMMENT
from tests.support.helpers import EXAMPLE, ROOT, nodedns_cmd, subprocess_env
from tests.support.netns import Netns, netns, requires_netns, veth_pair

pytestmark = requires_netns

LOCAL_V4 = "169.254.20.10"
LOCAL_V6 = "fd00:10:96::a"
START_TIMEOUT = 30.0
RULES_PER_IP = 12  # node-cache's 10 for port 53 + 2 for the status port


POD = """\
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default}
spec:
  containers: [{name: client, image: busybox}]
"""


def render_pod_resolv_conf(pod_netns: str, tmp_path: Path) -> Path:
    """`nodedns resolv-conf` writes the ClusterFirst Pod's file where `ip netns exec` mounts it."""
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    target = Path("/etc/netns") / pod_netns / "resolv.conf"
    target.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(nodedns_cmd("resolv-conf", "--pod", str(pod), "--resolv-conf", "", "--cluster-dns", LOCAL_V4,
                                   "--cluster-domain", "cluster.local", "-o", str(target)),
                       env=subprocess_env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return target


def daemonset_caps() -> list[str]:
    """The capabilities the DaemonSet adds (it drops all others)."""
    ds = next(d for d in yaml.safe_load_all((ROOT / "daemonset" / "daemonset.yaml").read_text()) if d)
    caps = ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]
    assert caps["drop"] == ["ALL"]
    return [str(c).lower() for c in caps["add"]]


def as_in_the_daemonset() -> list[str]:
    """Run with only the DaemonSet's capabilities and no privilege escalation, like the container."""
    if shutil.which("setpriv") is None:
        return []
    bounding = ",".join(["-all", *(f"+{c}" for c in daemonset_caps())])
    return ["setpriv", f"--bounding-set={bounding}", "--inh-caps=-all", "--no-new-privs", "--"]


@pytest.fixture
def node_and_pod(tmp_path: Path) -> Iterator[tuple[Netns, Netns]]:
    with netns("node") as node, netns("pod") as pod:
        veth_pair(node, pod, node_ip="192.0.2.1", pod_ip="192.0.2.2", routes=[f"{LOCAL_V4}/32"])
        resolv = render_pod_resolv_conf(pod.name, tmp_path)
        assert resolv.read_text() == ("nameserver 169.254.20.10\n"
                                      "search default.svc.cluster.local svc.cluster.local cluster.local\n"
                                      "options ndots:5\n")
        yield node, pod


class NodeAgent:
    """`nodedns serve` in the node namespace, its log in a file."""

    def __init__(self, node: Netns, firewall: str, log: Path) -> None:
        self.node = node
        self.firewall = firewall
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [*self.node.exec_prefix, *as_in_the_daemonset(), *nodedns_cmd(
            "serve", "--manifests", str(EXAMPLE), "--setup-interface", "nodelocaldns",
            "--local-ip", LOCAL_V4, "--local-ip", LOCAL_V6, "--firewall", self.firewall,
            "--lameduck", "1s", "--sync-interval", "2s", "--upstream", "none")]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def our_rules(node: Netns, firewall: str) -> list[str]:
    if firewall == "nftables":
        rules, chain = [], ""
        for line in node.nft_ruleset().splitlines():
            if line.strip().startswith("chain "):
                chain = line.split()[1]
            elif 'comment "nodedns:' in line:
                rules.append(f"{chain}: {line.strip()}")
        return rules
    return [r for b in ("iptables", "ip6tables") for r in node.rules(b) if SKIP_COMMENT in r or ALLOW_COMMENT in r]


def getent(pod: Netns, name: str) -> subprocess.CompletedProcess[str]:
    return pod.run("getent", "ahosts", name, check=False, timeout=15)


def wait_serving(agent: NodeAgent, run: int) -> None:
    """Until this run's agent has installed its rules (they follow the bound listeners and the sync).

    Waiting on the log, not on glibc: a query sent while nothing listens waits out glibc's 5 s timeout.
    """
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        assert agent.proc is not None and agent.proc.poll() is None, agent.output()
        if agent.output().count("conntrack-bypass rules installed") >= run:
            return
        time.sleep(0.05)
    raise AssertionError(f"agent not serving after {START_TIMEOUT}s:\n{agent.output()}")


def check_serving(agent: NodeAgent, node: Netns, pod: Netns) -> None:
    web = getent(pod, "web")
    assert web.returncode == 0 and "10.96.12.34" in web.stdout.split(), web.stdout + agent.output()
    other = getent(pod, "web.otherns")
    assert other.returncode == 0 and "10.96.40.7" in other.stdout.split(), other.stdout
    assert getent(pod, "no-such-service").returncode != 0
    rules = our_rules(node, agent.firewall)
    assert len(rules) == 2 * RULES_PER_IP and len(set(rules)) == len(rules), rules  # both IPs, no duplicates
    if agent.firewall == "iptables":
        raw = node.run("iptables", "-t", "raw", "-S").stdout
        assert f"-A PREROUTING -d {LOCAL_V4}/32 -p udp -m udp --dport 53 -m comment --comment " \
               f'"{SKIP_COMMENT}" -j NOTRACK' in raw
    else:
        assert f'ip daddr {LOCAL_V4} udp dport 53 notrack comment "{SKIP_COMMENT}"' in node.nft_ruleset()
    addrs = node.run("ip", "-o", "addr", "show", "dev", "nodelocaldns", "scope", "global").stdout
    assert f"{LOCAL_V4}/32" in addrs and f"{LOCAL_V6}/128" in addrs
    # the IPv6 local IP answers too (dual-stack in one process)
    v6 = node.run(sys.executable, "-c", "import dns.message, dns.query; print(dns.query.udp(dns.message.make_query("
                  f"'web.default.svc.cluster.local', 'A'), '{LOCAL_V6}', timeout=3).answer[0][0])",
                  env=subprocess_env())
    assert v6.stdout.strip() == "10.96.12.34"


def check_clean(node: Netns, firewall: str) -> None:
    assert "nodelocaldns" not in node.links()
    assert our_rules(node, firewall) == []
    if firewall == "nftables":
        assert "table inet nodedns" not in node.nft_ruleset()
    inode = node.run("stat", "-L", "-c", "%i", "/proc/self/ns/net").stdout.strip()
    assert not Path(f"/run/nodedns/nodelocaldns.netns-{inode}").exists()  # the roster went with the last agent


@pytest.mark.parametrize("firewall", ["iptables", "nftables"])
def test_pods_resolve_through_the_agent_which_restarts_clean_after_sigkill_and_leaves_nothing_on_sigterm(
    node_and_pod: tuple[Netns, Netns], firewall: str, tmp_path: Path
) -> None:
    node, pod = node_and_pod
    agent = NodeAgent(node, firewall, tmp_path / "agent.log")
    try:
        agent.start()
        wait_serving(agent, run=1)
        check_serving(agent, node, pod)

        agent.signal(signal.SIGKILL)
        agent.wait(10)
        assert "nodelocaldns" in node.links() and len(our_rules(node, firewall)) == 2 * RULES_PER_IP  # leftovers

        agent.start()
        wait_serving(agent, run=2)
        check_serving(agent, node, pod)
        assert "left by a previous run" in agent.output()

        agent.signal(signal.SIGTERM)
        time.sleep(0.2)
        assert getent(pod, "web").returncode == 0  # lameduck: still answering
        assert agent.wait(15) == 0, agent.output()
        check_clean(node, firewall)
    finally:
        agent.stop()
    out = agent.output()
    assert "Traceback" not in out, out
    if os.environ.get("NODEDNS_SHOW_AGENT_LOG"):
        print(out)
