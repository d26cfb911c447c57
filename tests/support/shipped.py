"""The agent as the DaemonSet runs it: daemonset/configmap.yaml's config, the node-specific keys adapted.

    with FakeApiServer() as api, UpstreamDouble() as up:
        cluster(api)                                  # node-a with its pod CIDR, Pods, Services
        with ShippedAgent(tmp_path, api, up) as agent:   # `nodedns serve --config FILE`, NODE_NAME=node-a
            agent.wait_ready(); agent.get("/debug/lookup?name=..."); agent.metric("nodedns_refused_by_acl_total")

Kept from the ConfigMap as it is: the allow list (the default: this node's pod CIDRs from its Node
record), its workers, autopath and logging, the cluster domain, the API watch as the source (here a
FakeApiServer through a kubeconfig instead of the in-cluster service account). Adapted, because they
name the node: the listeners (127.0.0.1, free ports, instead of the local IP's port 53, 0.0.0.0:9253
and 127.0.0.1:9254), no interface and no firewall rules (netns tests cover those), the upstream (the
node's resolv.conf names port 53; here an UpstreamDouble) and the host resolv.conf. Each adapted key
must be in the ConfigMap, so a change of its shape shows here.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from tests.support import manifests as m
from tests.support.agentproc import metric_value
from tests.support.apiserver import FakeApiServer
from tests.support.helpers import ROOT, free_port, nodedns_cmd, subprocess_env
from tests.support.upstream_double import UpstreamDouble

NODE = "node-a"
POD_CIDR = "10.244.0.0/24"
CLIENT_IP = "10.244.0.5"  # a Pod of this node, inside its pod CIDR
HOST_POD_IP = "192.0.2.10"  # a host-network Pod of this node on an address its Node record does not list
HOST_RESOLV_CONF = "nameserver 192.0.2.53\nsearch corp.example\n"
# what the test changes, and what the ConfigMap must say for it to be the node-specific key we think
# (the local IPs are not among them: the ConfigMap holds them in its own `local-ip` key, which the
# DaemonSet passes to both containers as --local-ip; this agent has no interface, so it needs none)
NODE_SPECIFIC = ("setup-interface", "firewall", "status-listen", "debug-listen", "upstream-resolv-conf",
                 "kube-dns-config-dir")


def configmap_config() -> dict[str, Any]:
    """The agent's config as daemonset/configmap.yaml holds it."""
    docs = [d for d in yaml.safe_load_all((ROOT / "daemonset" / "configmap.yaml").read_text()) if d]
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    cfg: dict[str, Any] = yaml.safe_load(cm["data"]["config.yaml"])
    return cfg


def cluster(api: FakeApiServer) -> None:
    """node-a with its pod CIDR; Pods of node-a (one the explainer explains); Services."""
    for ns in ("default", "prod", "kube-system"):
        api.put("Namespace", m.namespace(ns))
    api.put("Node", m.node(NODE, pod_cidrs=[POD_CIDR]))
    api.put("Pod", m.pod("client", ip=CLIENT_IP, node_name=NODE))
    api.put("Pod", m.pod("batch", "prod", ip="10.244.0.6", node_name=NODE,
                         dns_config={"options": [{"name": "ndots", "value": "2"}]}))
    api.put("Pod", m.pod("hostnet", "kube-system", ip=HOST_POD_IP, node_name=NODE, host_network=True))
    api.put("Service", m.service("web", cluster_ips=["10.96.0.10"]))
    api.put("Service", m.service("db", "prod", cluster_ips=["10.96.0.20"]))


class ShippedAgent:
    """`nodedns serve --config FILE` with the ConfigMap's config adapted to this test (module docstring)."""

    def __init__(self, tmp_path: Path, api: FakeApiServer, upstream: UpstreamDouble, **override: Any) -> None:
        raw = configmap_config()
        missing = [k for k in NODE_SPECIFIC if k not in raw]
        assert not missing, f"daemonset/configmap.yaml no longer sets {missing}: adapt tests/support/shipped.py"
        self.port, self.status_port, self.debug_port = free_port(), free_port(), free_port()
        for key in ("setup-interface", "upstream-resolv-conf", "kube-dns-config-dir"):  # the node's files
            del raw[key]
        host = tmp_path / "host-resolv.conf"
        host.write_text(HOST_RESOLV_CONF)
        raw.update({
            "firewall": "none",
            "listen": [f"127.0.0.1:{self.port}"],
            "status-listen": f"127.0.0.1:{self.status_port}",
            "debug-listen": f"127.0.0.1:{self.debug_port}",
            "upstream": [upstream.address],
            "host-resolv-conf": str(host),
            "kubeconfig": api.write_kubeconfig(tmp_path / "kubeconfig"),
            "lameduck": "0s",
            **override,
        })
        self.config = raw
        self.file = tmp_path / "config.yaml"
        self.file.write_text(yaml.safe_dump(raw))
        self.log = tmp_path / "agent.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ShippedAgent:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(nodedns_cmd("serve", "--config", str(self.file)),
                                         env=subprocess_env(NODE_NAME=NODE), stdout=out, stderr=subprocess.STDOUT)
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    @property
    def status_url(self) -> str:
        return f"http://127.0.0.1:{self.status_port}"

    @property
    def debug_url(self) -> str:
        return f"http://127.0.0.1:{self.debug_port}"

    def get(self, path: str, *, body: bytes | None = None, timeout: float = 15.0) -> tuple[int, str]:
        """(status, body) of a route: the probes and /metrics on the status listener, the rest on the
        debug listener."""
        base = self.status_url if path.split("?")[0] in ("/healthz", "/readyz", "/metrics") else self.debug_url
        req = urllib.request.Request(base + path, data=body, method="POST" if body is not None else "GET",
                                     headers={"Content-Type": "application/json"} if body is not None else {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - our own loopback URL
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            with err:
                return err.code, err.read().decode()

    def metric(self, name: str, **labels: str) -> float | None:
        return metric_value(self.get("/metrics")[1], name, **labels)

    def wait_ready(self, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None and self.proc.poll() is None, self.log.read_text()[-3000:]
            with contextlib.suppress(OSError):
                if self.get("/readyz", timeout=1.0)[0] == 200:
                    return
            assert time.monotonic() < deadline, f"not ready in {timeout}s: {self.log.read_text()[-3000:]}"
            time.sleep(0.1)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode
