"""The clusterset PTR records over real sockets, on both hit paths, one process and `--workers 2`.

The MCS DNS specification (schema 1.0.0, sections 2.3.3 and 2.4.3) gives each clusterset IP a PTR to
`<svc>.<ns>.svc.<clusterset-zone>` and each ready named endpoint of a headless import a PTR to
`<hostname>.<clusterid>.<svc>.<ns>.svc.<clusterset-zone>`, unless the cluster zone already has a PTR for
the address (its Limitations). The answers are stored for the hit path like every reverse answer: these
tests watch them follow the API double's changes (an import added, a cluster-local Service taking the
address and giving it back, an endpoint going unready, the import removed), twice per answer so the
second comes from the stored bytes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import dns.rcode
import dns.reversename
import pytest

from tests.support import cluster_fixture as cf
from tests.support import clusterset_fixture as mc
from tests.support.agentproc import AgentProcess
from tests.support.apiserver import FakeApiServer
from tests.support.clusterset_agent import fast_agent, live_config, wait_synced
from tests.support.helpers import RunningAgent, query, rrset_values, running_agent, wait_for

pytestmark = pytest.mark.usefixtures("hit_path")

REVERSE = "10.0.0.0/8,2001:db8::/32"  # authoritative: an address without a PTR is NXDOMAIN, not forwarded
MY = f"myservice.test.svc.{mc.ZONE}."
PET = f"my-pet-1.cluster-a.headless.test.svc.{mc.ZONE}."
PET6 = f"my-pet-3.cluster-a.headless.test.svc.{mc.ZONE}."
Answer = tuple[str, list[str]]


def reverse(ip: str) -> str:
    return dns.reversename.from_address(ip).to_text()


def ptr(host: str, port: int, ip: str) -> Answer:
    r = query(host, port, reverse(ip), "PTR")
    return dns.rcode.to_text(r.rcode()), rrset_values(r, rdtype="PTR")


def imports(api: FakeApiServer) -> None:
    api.put("ServiceImport", mc.service_import("test", "myservice", ips=["10.42.42.42", "2001:db8::1"],
                                               ports=[mc.HTTPS]))
    api.put("ServiceImport", mc.service_import("test", "headless", headless=True, ports=[mc.HTTPS]))
    api.put("EndpointSlice", mc.imported_slice("test", "headless-a", "headless", "cluster-a", "IPv4",
                                               [mc.ep("10.3.0.1", "my-pet-1"), mc.ep("10.3.0.2", "my-pet-2")],
                                               [mc.HTTPS]))
    api.put("EndpointSlice", mc.imported_slice("test", "headless-a6", "headless", "cluster-a", "IPv6",
                                               [mc.ep("2001:db8::3", "my-pet-3")], [mc.HTTPS]))


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.put("Namespace", cf.namespace("test"))
        imports(server)
        yield server


def until(agent: RunningAgent, ip: str, expected: Answer, within: float = 3.0) -> None:
    wait_for(lambda: ptr(agent.host, agent.port, ip) == expected, timeout=within,
             what=f"PTR {ip} to be {expected} (now {ptr(agent.host, agent.port, ip)})")


def test_clusterset_ptrs_follow_imports_and_yield_to_the_cluster_zone(api: FakeApiServer, kubeconfig: str) -> None:
    config = live_config(kubeconfig, **{"authoritative-reverse": REVERSE})
    with running_agent(config, agent_factory=fast_agent) as agent:
        wait_synced(agent)
        hits = agent.call(lambda: agent.agent.server.hits)
        for ip, target in (("10.42.42.42", MY), ("2001:db8::1", MY), ("10.3.0.1", PET), ("2001:db8::3", PET6)):
            for _ in range(2):  # the second from the stored bytes
                assert ptr(agent.host, agent.port, ip) == ("NOERROR", [target]), ip
        assert agent.call(lambda: agent.agent.server.hits) >= hits + 4
        # a cluster-local Service takes the clusterset IP: its own PTR wins; it goes: the clusterset one is back
        api.put("Service", cf.service("test", "local", cluster_ips=["10.42.42.42"]))
        until(agent, "10.42.42.42", ("NOERROR", [f"local.test.svc.{cf.ZONE}."]))
        assert ptr(agent.host, agent.port, "2001:db8::1") == ("NOERROR", [MY])
        api.delete("Service", "test", "local")
        until(agent, "10.42.42.42", ("NOERROR", [MY]))
        # an endpoint going unready loses its PTR; the other endpoints keep theirs
        api.put("EndpointSlice", mc.imported_slice("test", "headless-a", "headless", "cluster-a", "IPv4",
                                                   [mc.ep("10.3.0.1", "my-pet-1", ready=False),
                                                    mc.ep("10.3.0.2", "my-pet-2")], [mc.HTTPS]))
        until(agent, "10.3.0.1", ("NXDOMAIN", []))
        pet2 = f"my-pet-2.cluster-a.headless.test.svc.{mc.ZONE}."
        assert ptr(agent.host, agent.port, "10.3.0.2") == ("NOERROR", [pet2])
        # removed imports take their PTRs with them, in both families
        api.delete("ServiceImport", "test", "myservice")
        until(agent, "10.42.42.42", ("NXDOMAIN", []))
        until(agent, "2001:db8::1", ("NXDOMAIN", []))
        api.delete("EndpointSlice", "test", "headless-a6")
        until(agent, "2001:db8::3", ("NXDOMAIN", []))
        # and one arriving later gets its PTR (the stored NXDOMAIN goes)
        api.put("ServiceImport", mc.service_import("test", "myservice", ips=["10.42.42.42"], ports=[mc.HTTPS]))
        until(agent, "10.42.42.42", ("NOERROR", [MY]))


def test_without_an_authoritative_reverse_zone_an_import_turns_a_forwarded_ptr_into_ours(
        api: FakeApiServer, kubeconfig: str) -> None:
    """Without --authoritative-reverse an address nobody here has is forwarded (REFUSED here: no upstream);
    the "not ours" mark stored for it goes when an import takes the address."""
    with running_agent(live_config(kubeconfig), agent_factory=fast_agent) as agent:
        wait_synced(agent)
        assert ptr(agent.host, agent.port, "10.42.0.7") == ("REFUSED", [])
        api.put("ServiceImport", mc.service_import("test", "late", ips=["10.42.0.7"], ports=[mc.HTTPS]))
        until(agent, "10.42.0.7", ("NOERROR", [f"late.test.svc.{mc.ZONE}."]))


def test_two_workers_answer_clusterset_ptrs_and_drop_them_on_removal(api: FakeApiServer, kubeconfig: str,
                                                                     tmp_path: Path) -> None:
    """With --workers 2 a reverse miss is asked of the supervisor, which holds the index; every worker
    drops its stored PTR when the import goes (asked many times, from fresh sockets, to reach both)."""
    args = ["--kubeconfig", kubeconfig, "--node-name", "node-a", "--multicluster-zone", mc.ZONE,
            "--authoritative-reverse", REVERSE, "--workers", "2"]
    with AgentProcess(args, log=tmp_path / "agent.log") as agent:
        agent.wait_ready()

        def every(ip: str, expected: Answer) -> bool:
            return all(ptr("127.0.0.1", agent.port, ip) == expected for _ in range(12))

        for ip, target in (("10.42.42.42", MY), ("2001:db8::1", MY), ("10.3.0.1", PET), ("2001:db8::3", PET6)):
            assert every(ip, ("NOERROR", [target])), ip
        api.delete("ServiceImport", "test", "myservice")
        api.delete("EndpointSlice", "test", "headless-a")
        deadline = time.monotonic() + 5
        while not (every("10.42.42.42", ("NXDOMAIN", [])) and every("2001:db8::1", ("NXDOMAIN", []))
                   and every("10.3.0.1", ("NXDOMAIN", []))):
            assert agent.alive(), agent.log_text()[-2000:]
            assert time.monotonic() < deadline, "a worker kept a PTR of a removed import"
            time.sleep(0.02)
        assert every("2001:db8::3", ("NOERROR", [PET6]))
