"""The agent dies or hangs under load: how long do the node's Pods go without DNS? (run by scripts/failover)

A fake node in network namespaces, set up as the DaemonSet sets up a real one:

    pod (ndfs-pod-*, 10.244.0.2)      node (ndfs-node-*)                          kube-dns (ndfs-dns-*)
    resolv.conf: nameserver           nodedns serve   --local-ip 169.254.20.10,    dnsmasq on 192.0.2.6:53,
      10.96.0.10 (the ClusterIP)        10.96.0.10 (the ConfigMap's), its config     the stand-in cluster DNS:
    dnsperf -s 10.96.0.10 (load)        and capabilities, --firewall FIREWALL        every cluster name is
    the meter: one query every 10 ms  nodedns guard   (the DaemonSet's args)         10.99.0.99 there
      from a fresh socket, 1 s        kube-proxy's stand-in: DNAT 10.96.0.10:53
      timeout, each answer noted        -> 192.0.2.6:53 (nat PREROUTING + OUTPUT)

The agent answers web.default.svc.cluster.local with 10.96.12.34 (examples/cluster.yaml), the
stand-in with 10.99.0.99: the meter's log says who answered each query. Per mode, under load:

    kill   SIGKILL every agent process (supervisor and workers); OUTAGE seconds later it is started
           again, as the kubelet restarts a container
    stop   SIGSTOP every agent process (a hung agent); OUTAGE seconds later SIGCONT
    stop-worker
           SIGSTOP one worker (its sockets stay in the SO_REUSEPORT group: its share of the queries is
           swallowed); OUTAGE seconds later SIGCONT. The supervisor kills it for its missing heartbeat
           and starts it again. The guard may fall back meanwhile (its probes reach the stopped worker
           only half the time), so 1.5 s after the stop (the soonest it can: three unanswered rounds of
           0.5 s) the rules and addresses are taken away as it does; the
           agent must not put them back while the stopped worker lives, though the other worker answers
           its probe: sampled every 50 ms ("put back while silent" must stay 0)

and it prints the window in which queries went unanswered (the longest run of unanswered queries
sent after the failure, gaps of up to three sends merged; every run is listed, and at most STRAY_LIMIT
queries may be lost outside the longest, as one datagram is now and then under load), when the
cluster DNS took over, and when the agent answered again.

    python3 scripts/lib/failover.py [--firewall iptables|nftables] [--modes kill,stop] [--rate 2000]
                                [--outage 5] [--workers N]

The last line is `RESULT {json}` for tests/e2e/test_failover.py. Needs root, iproute2, iptables or
nft, dnsperf, dnsmasq.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]  # scripts/lib/ -> the checkout
EXAMPLE = ROOT / "examples" / "cluster.yaml"
CLUSTER_IP = "10.96.0.10"
LINK_LOCAL = "169.254.20.10"
STANDIN_IP = "192.0.2.6"
NAME = "web.default.svc.cluster.local"
AGENT_ANSWER = "10.96.12.34"
STANDIN_ANSWER = "10.99.0.99"
INTERVAL = 0.01  # the meter sends a query every 10 ms
TIMEOUT = 1.0  # and counts one unanswered after a second
LIMIT = 3.0  # seconds: the longest acceptable window without answers
STRAY_LIMIT = 3  # unanswered queries outside that window (one lost datagram under load, not an outage)
GUARD_SOONEST = 1.5  # seconds after a failure: the guard's earliest fallback (3 unanswered rounds of 0.5 s)

METER = r"""
import selectors, signal, socket, struct, sys, time
path, target, interval, timeout, name = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
question = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0\0\1\0\1"
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
sel = selectors.DefaultSelector()
pending = {}
out = open(path, "w", buffering=1)
qid = 0
def done(s, result):
    t = pending.pop(s)[0]
    sel.unregister(s); s.close()
    out.write(f"{t:.4f} {result}\n")
next_send = time.monotonic()
while not stop or pending:
    now = time.monotonic()
    if not stop and now >= next_send:
        qid = (qid + 1) & 0xFFFF
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        s.connect((target, 53))
        pending[s] = (now, qid)
        sel.register(s, selectors.EVENT_READ)
        try:
            s.send(struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + question)
        except OSError:
            done(s, "unsent")
        next_send += interval
        if next_send < now:
            next_send = now + interval
    for key, _ in sel.select(timeout=0.002):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except ConnectionRefusedError:
            done(s, "refused"); continue
        except OSError:
            done(s, "error"); continue
        if len(data) < 12 or struct.unpack("!H", data[:2])[0] != pending[s][1]:
            continue
        rcode = data[3] & 15
        ancount = struct.unpack("!H", data[6:8])[0]
        if rcode == 0 and ancount and len(data) >= 4:
            done(s, socket.inet_ntoa(data[-4:]))
        else:
            done(s, f"rcode-{rcode}")
    now = time.monotonic()
    for s, (t, _) in list(pending.items()):
        if now - t > timeout:
            done(s, "timeout")
"""


def run(*argv: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(argv, capture_output=True, text=True, input=stdin, timeout=60, check=False)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


class Ns:
    def __init__(self, role: str) -> None:
        self.name = f"ndfs-{role}-{secrets.token_hex(3)}"

    def __call__(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run("ip", "netns", "exec", self.name, *argv, check=check)

    @property
    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]


def daemonset() -> tuple[dict[str, Any], dict[str, Any]]:
    docs = list(yaml.safe_load_all((ROOT / "daemonset" / "daemonset.yaml").read_text()))
    cm = next(d for d in yaml.safe_load_all((ROOT / "daemonset" / "configmap.yaml").read_text()) if d)
    return next(d for d in docs if d), cm


def container(ds: dict[str, Any], name: str) -> dict[str, Any]:
    c: dict[str, Any] = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == name)
    return c


def expand(args: list[str], cm: dict[str, Any]) -> list[str]:
    """$(NODEDNS_LOCAL_IP) as the kubelet expands it from the ConfigMap."""
    return [a.replace("$(NODEDNS_LOCAL_IP)", cm["data"]["local-ip"]) for a in args]


def capabilities(c: dict[str, Any]) -> list[str]:
    """Run with exactly the container's capabilities, as in the DaemonSet (setpriv, when there)."""
    if shutil.which("setpriv") is None:
        return []
    caps = c["securityContext"]["capabilities"]["add"]
    bounding = ",".join(["-all", *(f"+{str(cap).lower()}" for cap in caps)])
    return ["setpriv", f"--bounding-set={bounding}", "--inh-caps=-all", "--no-new-privs", "--"]


class Node:
    """The namespaces, the stand-ins, the agent and its guard; everything removed on exit."""

    def __init__(self, firewall: str, workers: int | None, work: Path) -> None:
        self.firewall = firewall
        self.workers = workers
        self.work = work
        self.node, self.pod, self.dns = Ns("node"), Ns("pod"), Ns("dns")
        self.procs: list[subprocess.Popen[bytes]] = []
        self.agent: subprocess.Popen[bytes] | None = None
        self.guard: subprocess.Popen[bytes] | None = None
        self.generation = 0
        self.ds, self.cm = daemonset()

    # -- set-up ----------------------------------------------------------------------------

    def setup(self) -> None:
        for ns in (self.node, self.pod, self.dns):
            run("ip", "netns", "add", ns.name)
            ns("ip", "link", "set", "lo", "up")
        self._veth(self.pod, "10.244.0.1", "10.244.0.2")  # node-a's pod CIDR: the agent's allow list admits it
        self._veth(self.dns, "192.0.2.5", STANDIN_IP)
        self.node("sysctl", "-qw", "net.ipv4.ip_forward=1")
        for dest in (f"{CLUSTER_IP}/32", f"{LINK_LOCAL}/32"):
            self.pod("ip", "route", "add", dest, "via", "10.244.0.1")
        self.dns("ip", "route", "add", "10.244.0.0/30", "via", "192.0.2.5")
        self._kube_proxy()
        etc = Path("/etc/netns") / self.pod.name
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "resolv.conf").write_text(f"nameserver {CLUSTER_IP}\nsearch default.svc.cluster.local "
                                         "svc.cluster.local cluster.local\noptions ndots:5\n")
        self.procs.append(subprocess.Popen(
            [*self.dns.prefix, "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
             "--no-hosts", "--bind-interfaces", f"--listen-address={STANDIN_IP}", "--user=root", "--pid-file",
             f"--address=/cluster.local/{STANDIN_ANSWER}"],
            stdout=subprocess.DEVNULL, stderr=(self.work / "dnsmasq.log").open("wb")))

    def _veth(self, other: Ns, node_ip: str, other_ip: str) -> None:
        tag = secrets.token_hex(3)
        a, b = f"ndfsn{tag}", f"ndfsp{tag}"
        run("ip", "link", "add", a, "netns", self.node.name, "type", "veth", "peer", "name", b, "netns", other.name)
        self.node("ip", "addr", "add", f"{node_ip}/30", "dev", a)
        self.node("ip", "link", "set", a, "up")
        other("ip", "addr", "add", f"{other_ip}/30", "dev", b)
        other("ip", "link", "set", b, "up")

    def _kube_proxy(self) -> None:
        """What kube-proxy does for the kube-dns Service: DNAT its ClusterIP to an endpoint (pods' packets in
        PREROUTING, the node's own in OUTPUT), in the mode that matches the firewall."""
        if self.firewall == "nftables":
            dnat = (f"    ip daddr {CLUSTER_IP} udp dport 53 dnat to {STANDIN_IP}:53\n"
                    f"    ip daddr {CLUSTER_IP} tcp dport 53 dnat to {STANDIN_IP}:53\n")
            script = ("table ip kube-proxy {\n"
                      "  chain dnat_pre {\n    type nat hook prerouting priority dstnat; policy accept;\n"
                      f"{dnat}  }}\n"
                      "  chain dnat_out {\n    type nat hook output priority -100; policy accept;\n"
                      f"{dnat}  }}\n"
                      "  chain masq {\n    type nat hook postrouting priority srcnat; policy accept;\n"
                      f"    ip saddr != 10.244.0.0/24 ip daddr {STANDIN_IP} masquerade\n  }}\n"
                      "}\n")
            run(*self.node.prefix, "nft", "-f", "-", stdin=script)
            return
        for chain in ("PREROUTING", "OUTPUT"):
            for proto in ("udp", "tcp"):
                self.node("iptables", "-t", "nat", "-A", chain, "-d", f"{CLUSTER_IP}/32", "-p", proto, "--dport", "53",
                          "-m", "comment", "--comment", "kube-system/kube-dns:dns cluster IP", "-j", "DNAT",
                          "--to-destination", f"{STANDIN_IP}:53")
        # the node's own queries (source: a local address the endpoint cannot route back to) are masqueraded,
        # as kube-proxy marks traffic to a ClusterIP from outside the pod network
        self.node("iptables", "-t", "nat", "-A", "POSTROUTING", "!", "-s", "10.244.0.0/24", "-d", STANDIN_IP,
                  "-j", "MASQUERADE")

    # -- the agent and the guard -------------------------------------------------------------

    def start_agent(self) -> None:
        self.generation += 1
        cfg = self.work / "config.yaml"
        cfg.write_text(self.cm["data"]["config.yaml"])
        resolv = self.work / "upstream-resolv.conf"
        resolv.write_text(f"nameserver {STANDIN_IP}\n")
        c = container(self.ds, "nodedns")
        args = [a.replace("/etc/nodedns/config.yaml", str(cfg)).replace("/run/nodedns-pod/", f"{self.work}/")
                for a in expand(c["args"], self.cm)]
        args += ["--manifests", str(EXAMPLE), "--firewall", self.firewall, "--upstream-resolv-conf", str(resolv),
                 "--lock-dir", str(self.work / "locks"), "--lameduck", "1s", "--node-name", "node-a"]
        if self.workers is not None:
            args += ["--workers", str(self.workers)]
        log = (self.work / f"agent-{self.generation}.log").open("wb")
        self.agent = subprocess.Popen([*self.node.prefix, *capabilities(c), sys.executable, "-m", "nodedns", *args],
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start_guard(self) -> None:
        c = container(self.ds, "guard")
        cfg = self.work / "config.yaml"  # the agent's file, which the guard reads its interface and firewall from
        cfg.write_text(self.cm["data"]["config.yaml"])
        args = [a.replace("/etc/nodedns/config.yaml", str(cfg)) for a in expand(c["args"], self.cm)]
        args += ["--firewall", self.firewall]  # as the agent runs here (a flag wins over the file)
        self.guard = subprocess.Popen([*self.node.prefix, *capabilities(c), sys.executable, "-m", "nodedns", *args],
                                      stdout=(self.work / "guard.log").open("wb"), stderr=subprocess.STDOUT,
                                      start_new_session=True)

    def agent_log(self) -> str:
        return (self.work / f"agent-{self.generation}.log").read_text(errors="replace")

    def guard_log(self) -> str:
        return (self.work / "guard.log").read_text(errors="replace")

    def wait(self, what: str, check: Any, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            for name, p in (("agent", self.agent), ("guard", self.guard)):
                if p is not None and p.poll() is not None and name in what:
                    raise RuntimeError(f"the {name} exited ({p.returncode}):\n{self.agent_log()}\n{self.guard_log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: not within {timeout:g}s\n--- agent\n{self.agent_log()}\n--- guard\n"
                                   f"{self.guard_log()}")
            time.sleep(0.05)

    def signal_agent(self, sig: signal.Signals) -> None:
        assert self.agent is not None
        os.killpg(self.agent.pid, sig)  # every agent process: the supervisor and its workers

    def fall_back(self) -> subprocess.Popen[bytes]:
        """What `nodedns guard` does when it falls back (nodedns.node.guard.Guard.fall_back): the conntrack-bypass
        rules removed (kube-proxy's DNAT applies to the ClusterIP again), then the local IPs. In the
        background (the xtables lock may be busy): the process, to wait for."""
        code = ("import sys; from nodedns.node import firewall; from nodedns.node.netif import Link; "
                "ips = sys.argv[2].split(','); fw = firewall.make(sys.argv[1], ips, health_port=None); "
                "fw.remove() if fw is not None else None; Link('nodelocaldns', ips).remove_addresses()")
        return subprocess.Popen([*self.node.prefix, sys.executable, "-c", code, self.firewall,
                                 self.cm["data"]["local-ip"]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def rules(self) -> int:
        if self.firewall == "nftables":
            out = self.node("nft", "list", "table", "inet", "nodedns", check=False).stdout
            return out.count('comment "nodedns:')
        return self.node("iptables-save").stdout.count("nodedns:")

    def addresses(self) -> list[str]:
        out = self.node("ip", "-o", "addr", "show", "dev", "nodelocaldns", check=False).stdout
        return sorted(line.split()[3] for line in out.splitlines() if " inet " in line)

    def getent(self) -> str:
        r = self.pod("getent", "ahostsv4", "web", check=False)
        return r.stdout.split()[0] if r.returncode == 0 and r.stdout else f"exit {r.returncode}"

    # -- teardown --------------------------------------------------------------------------

    def close(self) -> None:
        for p in (self.guard, self.agent, *self.procs):
            if p is None or p.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if p in (self.guard, self.agent):
                    os.killpg(p.pid, signal.SIGCONT)
                    os.killpg(p.pid, signal.SIGKILL)
                else:
                    p.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(10)
        for ns in (self.node, self.pod, self.dns):
            run("ip", "netns", "delete", ns.name, check=False)
        shutil.rmtree(Path("/etc/netns") / self.pod.name, ignore_errors=True)


@contextlib.contextmanager
def fake_node(firewall: str, workers: int | None) -> Iterator[Node]:
    with tempfile.TemporaryDirectory(prefix="nodedns-failover.") as tmp:
        node = Node(firewall, workers, Path(tmp))
        try:
            node.setup()
            yield node
        finally:
            node.close()
            if os.environ.get("KEEP_LOGS"):
                for log in sorted(Path(tmp).glob("*.log")):
                    print(f"--- {log.name}\n{log.read_text(errors='replace')}", file=sys.stderr)


# ----------------------------------------------------------------------------------------------
# One scenario under load


def read_meter(path: Path) -> list[tuple[float, str]]:
    out = []
    for line in path.read_text().splitlines():
        t, _, result = line.partition(" ")
        with contextlib.suppress(ValueError):
            out.append((float(t), result))
    return out


def dnsperf_counts(text: str) -> tuple[int, int]:
    sent = re.search(r"Queries sent:\s+(\d+)", text)
    lost = re.search(r"Queries lost:\s+(\d+)", text)
    return (int(sent.group(1)) if sent else 0, int(lost.group(1)) if lost else 0)


def scenario(node: Node, mode: str, *, rate: int, outage: float) -> dict[str, Any]:
    """Load, fail the agent, bring it back; the meter's verdict."""
    work = node.work
    meter_log = work / f"meter-{mode}.txt"
    (work / "queries.txt").write_text(f"{NAME} A\nweb.otherns.svc.cluster.local A\nnope.default.svc.cluster.local A\n")
    meter = subprocess.Popen([*node.pod.prefix, sys.executable, "-c", METER, str(meter_log), CLUSTER_IP, str(INTERVAL),
                              str(TIMEOUT), NAME])
    perf = subprocess.Popen([*node.pod.prefix, "dnsperf", "-s", CLUSTER_IP, "-d", str(work / "queries.txt"), "-Q",
                             str(rate), "-l", "600", "-c", "16", "-q", "500", "-t", "1"],
                            stdout=(work / f"dnsperf-{mode}.txt").open("w"), stderr=subprocess.STDOUT)
    fallbacks = node.guard_log().count("fell back to the cluster DNS")
    try:
        time.sleep(2.0)
        before = read_meter(meter_log)
        failed_at = time.monotonic()
        node.signal_agent(signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
        if mode == "kill":
            assert node.agent is not None
            node.agent.wait(10)
        node.wait("the guard to fall back", lambda: node.guard_log().count("fell back to the cluster DNS") > fallbacks,
                  timeout=30)
        fell_back = time.monotonic()
        during_rules, during_addresses = node.rules(), node.addresses()
        during_getent = node.getent()
        time.sleep(max(0.0, outage - (time.monotonic() - failed_at)))
        back_at = time.monotonic()
        if mode == "kill":
            node.start_agent()  # as the kubelet restarts the container
        else:
            node.signal_agent(signal.SIGCONT)
        node.wait("the agent", lambda: any(r == AGENT_ANSWER and t > back_at for t, r in read_meter(meter_log)),
                  timeout=60)
        time.sleep(2.0)
    finally:
        stop_load(meter, perf)
    results = sorted(read_meter(meter_log))  # in the order sent (the log is in the order answered)
    after_failure = [(t, r) for t, r in results if t >= failed_at]
    spans = unanswered_spans(after_failure, failed_at)
    unanswered = [t for t, r in after_failure if r not in (AGENT_ANSWER, STANDIN_ANSWER)]
    # the window: the longest run of unanswered queries (gaps of up to 3 sends merged), i.e. the time
    # Pods had no DNS; a lone query lost outside it while a server answered the others is counted apart
    longest = max(spans, key=lambda s: s[1] - s[0], default=None)
    window = (longest[1] - longest[0]) if longest else 0.0
    stray = sum(1 for t in unanswered if longest is None or not longest[0] <= round(t - failed_at, 3) <= longest[1])
    standin = [t for t, r in after_failure if r == STANDIN_ANSWER]
    agent_again = [t for t, r in after_failure if r == AGENT_ANSWER and t >= back_at]
    tail = [r for t, r in results if t >= results[-1][0] - 1.0]
    sent, lost = dnsperf_counts((work / f"dnsperf-{mode}.txt").read_text(errors="replace"))
    return {
        "mode": mode,
        "window": round(window, 3),
        "within_limit": window <= LIMIT and stray <= STRAY_LIMIT,
        "unanswered": len(unanswered),
        "stray": stray,
        "first_unanswered": round(min(unanswered) - failed_at, 3) if unanswered else None,
        "unanswered_spans": spans,
        "came_back_at": round(back_at - failed_at, 3),
        "kinds": sorted({r for _, r in after_failure if r not in (AGENT_ANSWER, STANDIN_ANSWER)}),
        "cluster_dns_from": round(min(standin) - failed_at, 3) if standin else None,
        "guard_fell_back_after": round(fell_back - failed_at, 3),
        "agent_again_after": round(min(agent_again) - back_at, 3) if agent_again else None,
        "before_failure": sorted({r for _, r in before}),
        "last_second": sorted(set(tail)),
        "answers": {"agent": sum(r == AGENT_ANSWER for _, r in results),
                    "cluster_dns": sum(r == STANDIN_ANSWER for _, r in results), "unanswered": len(unanswered)},
        "sent": len(results),
        "during": {"rules": during_rules, "addresses": during_addresses, "getent": during_getent},
        "after": {"rules": node.rules(), "addresses": node.addresses(), "getent": node.getent()},
        "dnsperf": {"sent": sent, "lost": lost},
    }


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def agent_tree(pid: int) -> list[int]:
    out = [pid]
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            for child in fh.read().split():
                out.extend(agent_tree(int(child)))
    return out


def scenario_stop_worker(node: Node, *, rate: int, outage: float) -> dict[str, Any]:
    """SIGSTOP one worker under load (module docstring: stop-worker); the meter's verdict and whether the
    addresses came back while it was stopped."""
    assert node.agent is not None
    work = node.work
    meter_log = work / "meter-stop-worker.txt"
    (work / "queries.txt").write_text(f"{NAME} A\nweb.otherns.svc.cluster.local A\nnope.default.svc.cluster.local A\n")
    meter = subprocess.Popen([*node.pod.prefix, sys.executable, "-c", METER, str(meter_log), CLUSTER_IP, str(INTERVAL),
                              str(TIMEOUT), NAME])
    perf = subprocess.Popen([*node.pod.prefix, "dnsperf", "-s", CLUSTER_IP, "-d", str(work / "queries.txt"), "-Q",
                             str(rate), "-l", "600", "-c", "16", "-q", "500", "-t", "1"],
                            stdout=(work / "dnsperf-stop-worker.txt").open("w"), stderr=subprocess.STDOUT)
    fallbacks = node.guard_log().count("fell back to the cluster DNS")
    tree = agent_tree(node.agent.pid)  # the supervisor, its zygote, the workers
    victim = tree[-1]
    put_back_while_silent = 0
    fell_back = restarted = taken_at = put_back = None
    try:
        time.sleep(2.0)
        failed_at = time.monotonic()
        os.kill(victim, signal.SIGSTOP)
        taker: subprocess.Popen[bytes] | None = None
        while time.monotonic() - failed_at < outage:
            if taker is None and time.monotonic() - failed_at >= GUARD_SOONEST:
                taker = node.fall_back()  # the guard's fallback, for certain
            now = time.monotonic() - failed_at
            addresses = node.addresses()
            if fell_back is None and node.guard_log().count("fell back to the cluster DNS") > fallbacks:
                fell_back = now
            if taker is not None and taker.poll() is not None and addresses and pid_alive(victim):
                put_back_while_silent += 1
            if taken_at is None and taker is not None and taker.poll() is not None and not addresses:
                taken_at = now
            if taken_at is not None and put_back is None and addresses:
                put_back = now
            if restarted is None and len(agent_tree(node.agent.pid)) == len(tree) and victim not in \
                    agent_tree(node.agent.pid):
                restarted = now
            time.sleep(0.05)
        if pid_alive(victim):
            os.kill(victim, signal.SIGCONT)
        if taker is not None:
            taker.wait(60)
        back_at = time.monotonic()
        node.wait("the agent", lambda: any(r == AGENT_ANSWER and t > back_at for t, r in read_meter(meter_log)),
                  timeout=60)
        node.wait("the addresses", lambda: node.addresses() == ["10.96.0.10/32", "169.254.20.10/32"], timeout=30)
        time.sleep(2.0)
    finally:
        stop_load(meter, perf)
    results = sorted(read_meter(meter_log))
    after_failure = [(t, r) for t, r in results if t >= failed_at]
    unanswered = [t for t, r in after_failure if r not in (AGENT_ANSWER, STANDIN_ANSWER)]
    window = (max(unanswered) - min(unanswered) + INTERVAL) if unanswered else 0.0
    tail = [r for t, r in results if t >= results[-1][0] - 1.0]
    sent, lost = dnsperf_counts((work / "dnsperf-stop-worker.txt").read_text(errors="replace"))
    return {
        "mode": "stop-worker",
        "window": round(window, 3),
        "within_limit": window <= LIMIT and put_back_while_silent == 0 and restarted is not None,
        "unanswered": len(unanswered),
        "last_unanswered": round(max(unanswered) - failed_at, 3) if unanswered else None,
        "unanswered_spans": unanswered_spans(after_failure, failed_at),
        "restarted_after": None if restarted is None else round(restarted, 3),
        "addresses_gone_after": None if taken_at is None else round(taken_at, 3),
        "put_back_after": None if put_back is None else round(put_back, 3),
        "guard_fell_back_after": None if fell_back is None else round(fell_back, 3),
        "put_back_while_silent": put_back_while_silent,
        "victim_alive": pid_alive(victim),
        "answers": {"agent": sum(r == AGENT_ANSWER for _, r in results),
                    "cluster_dns": sum(r == STANDIN_ANSWER for _, r in results), "unanswered": len(unanswered)},
        "sent": len(results),
        "last_second": sorted(set(tail)),
        "after": {"rules": node.rules(), "addresses": node.addresses(), "getent": node.getent()},
        "dnsperf": {"sent": sent, "lost": lost},
    }


def unanswered_spans(after_failure: list[tuple[float, str]], failed_at: float) -> list[list[float]]:
    """Runs of unanswered queries, seconds after the failure (gaps of up to three sends merged)."""
    spans: list[list[float]] = []
    for t, r in after_failure:
        if r in (AGENT_ANSWER, STANDIN_ANSWER):
            continue
        at = round(t - failed_at, 3)
        if spans and at - spans[-1][1] <= 3 * INTERVAL:
            spans[-1][1] = at
        else:
            spans.append([at, at])
    return [[a, round(b + INTERVAL, 3)] for a, b in spans]


def stop_load(meter: subprocess.Popen[bytes], perf: subprocess.Popen[bytes]) -> None:
    """The meter stopped (it writes its last lines) and dnsperf interrupted (it prints its summary)."""
    meter.send_signal(signal.SIGTERM)
    perf.send_signal(signal.SIGINT)
    meter.wait(10)
    try:
        perf.wait(10)
    except subprocess.TimeoutExpired:
        perf.kill()
        perf.wait(5)


def spans_text(spans: list[list[float]]) -> str:
    """Runs of unanswered queries as `a-b s` (the first eight and the count of the rest)."""
    text = ", ".join(f"{a:g}-{b:g}s" for a, b in spans[:8]) or "none"
    return text + (f" and {len(spans) - 8} more" if len(spans) > 8 else "")


def describe_stop_worker(r: dict[str, Any]) -> str:
    fell = f"fell back {r['guard_fell_back_after']:.2f}s after the stop" if r["guard_fell_back_after"] is not None \
        else "did not fall back itself"
    return (f"stop-worker (SIGSTOP one worker, SIGCONT {OUTAGE_TEXT}): unanswered for {r['window']:.2f}s (limit "
            f"{LIMIT:g}s: {'ok' if r['window'] <= LIMIT else 'OVER'}), the last {r['last_unanswered']}s after the "
            f"stop; the worker started again after {r['restarted_after']}s; rules and addresses taken away at "
            f"+{GUARD_SOONEST:g}s (gone at {r['addresses_gone_after']}s, back at {r['put_back_after']}s), the guard "
            f"{fell}; addresses put back while the stopped worker lived: "
            f"{r['put_back_while_silent']} samples | unanswered runs {spans_text(r['unanswered_spans'])} | meter: "
            f"{r['sent']} queries, agent {r['answers']['agent']}, "
            f"cluster DNS {r['answers']['cluster_dns']}, unanswered "
            f"{r['answers']['unanswered']} | after: {r['after']['rules']} rules, getent web -> {r['after']['getent']} "
            f"| dnsperf: sent {r['dnsperf']['sent']} lost {r['dnsperf']['lost']}")


def describe(r: dict[str, Any]) -> str:
    what = {"kill": "SIGKILL every agent process, restarted", "stop": "SIGSTOP every agent process, SIGCONT"}[r["mode"]]
    return (f"{r['mode']} ({what} {OUTAGE_TEXT}): unanswered for {r['window']:.2f}s (limit {LIMIT:g}s: "
            f"{'ok' if r['within_limit'] else 'OVER'}; unanswered runs {r['unanswered_spans']}, {r['stray']} lost "
            f"outside the longest (limit {STRAY_LIMIT})); guard fell back {r['guard_fell_back_after']:.2f}s after the "
            f"failure, cluster DNS answering from +{r['cluster_dns_from']}s; the agent answered again "
            f"{r['agent_again_after']}s after it came back | meter: {r['sent']} queries, agent "
            f"{r['answers']['agent']}, cluster DNS {r['answers']['cluster_dns']}, unanswered "
            f"{r['answers']['unanswered']} | during the outage: "
            f"{r['during']['rules']} rules, addresses {r['during']['addresses'] or 'none'}, getent web -> "
            f"{r['during']['getent']} | after: {r['after']['rules']} rules, getent web -> {r['after']['getent']} | "
            f"dnsperf: sent {r['dnsperf']['sent']} lost {r['dnsperf']['lost']}")


OUTAGE_TEXT = ""


def main() -> int:
    global OUTAGE_TEXT
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--firewall", choices=("iptables", "nftables"), default="iptables")
    p.add_argument("--modes", default="kill,stop")
    p.add_argument("--rate", type=int, default=2000)
    p.add_argument("--outage", type=float, default=5.0, help="seconds before the agent comes back")
    p.add_argument("--workers", type=int, default=None, help="default: the ConfigMap's")
    a = p.parse_args()
    OUTAGE_TEXT = f"{a.outage:g}s later"
    results = []
    with fake_node(a.firewall, a.workers) as node:
        node.start_guard()  # first: the guard tolerates an agent that is not there yet
        node.start_agent()
        node.wait("agent serving", lambda: "conntrack-bypass rules installed" in node.agent_log())
        node.wait("guard armed", lambda: "guarding" in node.guard_log())
        print(f"node: agent pid {node.agent.pid if node.agent else '?'} serving {CLUSTER_IP} and {LINK_LOCAL} "
              f"({node.rules()} {a.firewall} rules), guard armed; pods resolve web -> {node.getent()} "
              f"(the cluster DNS stand-in answers {STANDIN_ANSWER}); load: dnsperf at {a.rate} qps + the meter",
              flush=True)
        for mode in a.modes.split(","):
            node.wait("agent serving", lambda: node.getent() == AGENT_ANSWER)
            if mode == "stop-worker":
                r = scenario_stop_worker(node, rate=a.rate, outage=a.outage)
                print(describe_stop_worker(r), flush=True)
            else:
                r = scenario(node, mode, rate=a.rate, outage=a.outage)
                print(describe(r), flush=True)
            results.append(r)
        print("RESULT " + json.dumps({"firewall": a.firewall, "limit": LIMIT, "scenarios": results}), flush=True)
    return 0 if all(r["within_limit"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
