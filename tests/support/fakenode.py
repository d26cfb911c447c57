"""A fake node in network namespaces: the agent as the DaemonSet runs it, its upstream, Pods' resolv.conf.

    config, local_ip = shipped_config(tmp)                 # the ConfigMap's config.yaml and local-ip
    render_resolv_conf(pod_ns, POD_SPEC, tmp)              # `nodedns resolv-conf` where glibc reads it
    with agent_on_node(node_ns, tmp, zone=ZONE, argv=["--config", str(config), ...], node_name="node-a") as agent:
        node_http(node_ns, "http://127.0.0.1:9254/status")

Used by the real-client matrix, the insight end-to-end test and the shadow end-to-end test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.helpers import ROOT, nodedns_cmd, subprocess_env
from tests.support.netns import Netns

LOCAL_IP = "169.254.20.10"
SHIPPED_CONFIG = ROOT / "daemonset" / "configmap.yaml"
START_TIMEOUT = 60.0  # the agent syncs, binds and installs its rules (slow under a loaded CI)
SERVING = "conntrack-bypass rules installed"  # logged once the listeners are bound and the index synced


def shipped_config(tmp: Path) -> tuple[Path, str]:
    """The DaemonSet's config.yaml, byte for byte as the ConfigMap ships it, and its `local-ip` key (the
    DaemonSet passes it as --local-ip)."""
    docs = [d for d in yaml.safe_load_all(SHIPPED_CONFIG.read_text()) if d]
    (cm,) = [d for d in docs if d.get("kind") == "ConfigMap"]
    path = tmp / "config.yaml"
    path.write_text(cm["data"]["config.yaml"], encoding="utf-8")
    local_ip = str(cm["data"]["local-ip"])
    assert LOCAL_IP in local_ip.split(","), local_ip
    return path, local_ip


def render_resolv_conf(ns: Netns, pod: Mapping[str, Any], tmp: Path) -> str:
    """The Pod's resolv.conf from `nodedns resolv-conf`, where `ip netns exec` mounts it; returns its text."""
    spec = tmp / f"{ns.name}-{pod['metadata']['name']}.yaml"
    spec.write_text(yaml.safe_dump(dict(pod)))
    target = Path("/etc/netns") / ns.name / "resolv.conf"
    target.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(nodedns_cmd("resolv-conf", "--pod", str(spec), "--resolv-conf", "", "--cluster-dns", LOCAL_IP,
                                   "--cluster-domain", "cluster.local", "-o", str(target)),
                       env=subprocess_env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return target.read_text()


def node_http(ns: Netns, url: str) -> str:
    """GET url from inside the node's namespace (the debug and metrics listeners are the node's, not Pods')."""
    r = ns.run(sys.executable, "-c", "import urllib.request, sys; sys.stdout.write(urllib.request."
               f"urlopen({url!r}, timeout=5).read().decode())", timeout=30, env=subprocess_env())
    return r.stdout


@dataclass
class NodeAgent:
    """The agent process on the fake node and its stand-in upstream."""

    agent: subprocess.Popen[bytes]
    upstream: subprocess.Popen[bytes]
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def agent_on_node(node: Netns, tmp: Path, *, zone: Mapping[str, Any], argv: Sequence[str],
                  node_name: str) -> Iterator[NodeAgent]:
    """`nodedns serve ARGV` in the node's namespace, with NODE_NAME set, its upstream the node's resolv.conf
    naming an UpstreamDouble on 127.0.0.1:53 that serves `zone`; yields once its rules are installed, and
    stops both (SIGTERM, then SIGKILL after 30 s) on the way out."""
    node_etc = Path("/etc/netns") / node.name
    node_etc.mkdir(parents=True, exist_ok=True)
    (node_etc / "resolv.conf").write_text("nameserver 127.0.0.1\n")  # the node's: the stand-in upstream
    upstream = subprocess.Popen([*node.exec_prefix, sys.executable, "-m", "tests.support.upstream_double",
                                 "--listen", "127.0.0.1:53", "--zone", json.dumps(dict(zone))], env=subprocess_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    log = tmp / "agent.log"
    with log.open("wb") as out:
        agent = subprocess.Popen([*node.exec_prefix, *nodedns_cmd("serve", *argv)],
                                 env=subprocess_env(NODE_NAME=node_name), stdout=out, stderr=subprocess.STDOUT)
    running = NodeAgent(agent, upstream, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while SERVING not in running.log_text():
            assert agent.poll() is None, running.log_text()
            if time.monotonic() > deadline:
                raise AssertionError(f"agent not serving after {START_TIMEOUT}s:\n{running.log_text()}")
            time.sleep(0.1)
        yield running
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(30)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait(10)
        upstream.terminate()
        upstream.wait(10)
        if os.environ.get("NODEDNS_SHOW_AGENT_LOG"):
            print(running.log_text())
