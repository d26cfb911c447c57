"""A local IP that is not link-local must be the kube-dns Service's ClusterIP in the API: else the agent warns
at start and /readyz says why under `warnings:` (still 200: the agent answers what it is asked), and so does
/status. Against the API server double, with the addresses as the DaemonSet's ConfigMap gives them."""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from nodedns.app.sections import KubeDnsReport, cluster_dns_ips
from nodedns.cluster.index import Index
from tests.support import kube_agent
from tests.support.apiserver import FakeApiServer, namespace, service
from tests.support.helpers import RunningAgent, running_agent
from tests.support.kube_agent import fast_agent, wait_synced

LINK_LOCAL = "169.254.20.10"
api = kube_agent.api


def readyz(agent: RunningAgent) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(agent.status_url + "/readyz", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def status(agent: RunningAgent) -> dict[str, Any]:
    with urllib.request.urlopen(agent.debug_url + "/status", timeout=10) as resp:
        doc: dict[str, Any] = json.loads(resp.read())
        return doc


def serving(api: FakeApiServer, kubeconfig: str, local_ips: str) -> Any:
    api.put("Namespace", namespace("kube-system"))
    return running_agent({"kubeconfig": kubeconfig, "node-name": "node-a", "local-ip": local_ips,
                          "status-listen": "127.0.0.1:0", "debug-listen": "127.0.0.1:0"}, agent_factory=fast_agent)


def test_a_local_ip_that_is_not_the_kube_dns_cluster_ip_is_warned_at_start_and_on_readyz(
        api: FakeApiServer, kubeconfig: str, caplog: pytest.LogCaptureFixture) -> None:
    api.put("Service", service("kube-system", "kube-dns", ["10.100.0.10"], [("dns", 53)]))
    caplog.set_level(logging.WARNING)
    with serving(api, kubeconfig, f"{LINK_LOCAL},10.96.0.10") as agent:
        wait_synced(agent)
        code, body = readyz(agent)
        assert code == 200 and body.startswith("ready\nwarnings:\n- kube_dns: local IP 10.96.0.10 is not the "
                                               "ClusterIP of the Service kube-system/kube-dns (10.100.0.10 in the "
                                               "API)"), body
        assert f"set local-ip to {LINK_LOCAL},10.100.0.10" in body
        doc = status(agent)
        assert doc["ready"] is True and doc["warnings"] == [body.split("\n- ", 1)[1].rstrip("\n")]
        assert doc["kube_dns"]["cluster_ips"] == ["10.100.0.10"] and doc["kube_dns"]["local_ips"] == ["10.96.0.10"]
        deadline = time.monotonic() + 10
        while not [r for r in caplog.records if "is not the ClusterIP of the Service kube-system/kube-dns"
                   in r.getMessage() and r.levelno == logging.WARNING]:
            assert time.monotonic() < deadline, "no warning in the log: " + caplog.text
            time.sleep(0.1)
        # the Service as the API has it now: fixed there, the warning goes
        api.put("Service", service("kube-system", "kube-dns", ["10.96.0.10"], [("dns", 53)]))
        deadline = time.monotonic() + 10
        while readyz(agent) != (200, "ready\n"):
            assert time.monotonic() < deadline, readyz(agent)
            time.sleep(0.1)
        assert status(agent)["warnings"] == []


def test_the_kube_dns_cluster_ip_among_the_local_ips_says_ready_alone(api: FakeApiServer, kubeconfig: str) -> None:
    api.put("Service", service("kube-system", "kube-dns", ["10.100.0.10"], [("dns", 53)]))
    with serving(api, kubeconfig, f"{LINK_LOCAL},10.100.0.10") as agent:
        wait_synced(agent)
        assert readyz(agent) == (200, "ready\n")


def test_no_kube_dns_service_to_check_against_is_said(api: FakeApiServer, kubeconfig: str) -> None:
    with serving(api, kubeconfig, f"{LINK_LOCAL},10.96.0.10") as agent:
        wait_synced(agent)
        code, body = readyz(agent)
        assert code == 200 and "the API has no Service kube-system/kube-dns to check it against" in body, body


def test_the_link_local_address_alone_is_not_checked(api: FakeApiServer, kubeconfig: str) -> None:
    """kube-proxy's IPVS mode: 169.254.20.10 alone (and kubelet --cluster-dns 169.254.20.10)."""
    with serving(api, kubeconfig, LINK_LOCAL) as agent:
        wait_synced(agent)
        assert readyz(agent) == (200, "ready\n")
        assert "kube_dns" not in status(agent)


def test_the_check_waits_for_the_sync_and_reads_every_cluster_ip_of_a_dual_stack_service() -> None:
    index = Index()
    report = KubeDnsReport(index=index, local_ips=(LINK_LOCAL, "10.96.0.10", "fd00::a"))
    assert report.expected == ("10.96.0.10", "fd00::a") == cluster_dns_ips((LINK_LOCAL, "fe80::1", "10.96.0.10",
                                                                            "fd00::a"))
    assert report.warnings() == []  # not synced: nothing to say yet
    index.apply("Namespace", "ADDED", namespace("kube-system"))
    index.apply("Service", "ADDED", service("kube-system", "kube-dns", ["10.96.0.10", "fd00::a"], [("dns", 53)]))
    index.mark_synced()
    assert report.warnings() == []
    index.apply("Service", "MODIFIED", service("kube-system", "kube-dns", ["10.96.0.10"], [("dns", 53)]))
    [said] = report.warnings()
    assert said.startswith("local IP fd00::a is not the ClusterIP") and "set local-ip to 169.254.20.10,10.96.0.10 " \
        in said
