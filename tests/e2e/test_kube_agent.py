"""End to end: an agent watching the API server double answers DNS from the live index.

Changes made through the double show up in answers (dnspython over real sockets) within a bounded
time; before the first sync would-be NXDOMAINs are SERVFAIL or go to --fallback-upstream.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dns.message
import dns.rcode
import pytest
from dnslib import QTYPE, RR, A, DNSRecord

from nodedns.app.agent import Agent
from nodedns.config import Config
from tests.support import kube_agent
from tests.support.apiserver import FakeApiServer, Fault, endpoint_slice, namespace, service
from tests.support.helpers import (
    PROPAGATION_BOUND,
    RunningAgent,
    answer_of,
    free_port,
    nodedns_cmd,
    query,
    rrset_values,
    running_agent,
    subprocess_env,
    until_answer,
)
from tests.support.kube_agent import fast_agent, wait_synced

api = kube_agent.api

ZONE = "svc.cluster.local"


STEPS: list[tuple[str, Callable[[FakeApiServer], Any], str, tuple[str, list[str]]]] = [
    ("create a ClusterIP service", lambda api: api.put("Service", service("default", "web", ["10.96.0.50"])),
     "web", ("NOERROR", ["10.96.0.50"])),
    ("change its cluster IP", lambda api: api.put("Service", service("default", "web", ["10.96.0.51"])),
     "web", ("NOERROR", ["10.96.0.51"])),
    ("create a headless service without endpoints", lambda api: api.put("Service", service("default", "db", None)),
     "db", ("NXDOMAIN", [])),
    ("add its first EndpointSlice",
     lambda api: api.put("EndpointSlice", endpoint_slice("default", "db-1", "db", ["10.244.0.5"])),
     "db", ("NOERROR", ["10.244.0.5"])),
    ("add an endpoint to the slice",
     lambda api: api.put("EndpointSlice", endpoint_slice("default", "db-1", "db", ["10.244.0.5", "10.244.0.6"])),
     "db", ("NOERROR", ["10.244.0.5", "10.244.0.6"])),
    ("add a second slice",
     lambda api: api.put("EndpointSlice", endpoint_slice("default", "db-2", "db", ["10.244.0.7"])),
     "db", ("NOERROR", ["10.244.0.5", "10.244.0.6", "10.244.0.7"])),
    ("mark the second slice's endpoint not ready",
     lambda api: api.put("EndpointSlice", endpoint_slice("default", "db-2", "db", ["10.244.0.7"], ready=False)),
     "db", ("NOERROR", ["10.244.0.5", "10.244.0.6"])),
    ("delete the first slice", lambda api: api.delete("EndpointSlice", "default", "db-1"),
     "db", ("NXDOMAIN", [])),
    ("delete the ClusterIP service", lambda api: api.delete("Service", "default", "web"),
     "web", ("NXDOMAIN", [])),
]


def test_service_and_endpointslice_changes_show_up_in_dns_answers(api: FakeApiServer, kubeconfig: str) -> None:
    with running_agent({"kubeconfig": kubeconfig, "node-name": "node-a"}, agent_factory=fast_agent) as agent:
        wait_synced(agent)
        delays = {}
        for what, change, name, expected in STEPS:
            change(api)
            delays[what] = until_answer(agent, f"{name}.default.{ZONE}", expected)
        assert max(delays.values()) < PROPAGATION_BOUND, delays


def test_agent_status_reports_the_sync(api: FakeApiServer, kubeconfig: str) -> None:
    with running_agent({"kubeconfig": kubeconfig, "node-name": "node-a"}, agent_factory=fast_agent) as agent:
        wait_synced(agent)
        status = agent.call(agent.agent.status)
        assert status["synced"] is True
        assert status["kube"]["synced"] is True
        assert set(status["kube"]["resources"]) == {"services", "endpointslices", "namespaces", "pods", "nodes",
                                                    "dnspolicies", "clusterdnspolicies"}
        assert status["kube"]["server"] == api.url


def test_outage_keeps_answering_from_the_last_index(api: FakeApiServer, kubeconfig: str) -> None:
    api.put("Service", service("default", "web", ["10.96.0.50"]))
    with running_agent({"kubeconfig": kubeconfig, "node-name": "node-a"}, agent_factory=fast_agent) as agent:
        wait_synced(agent)
        api.stop()
        deadline = time.monotonic() + 5
        while agent.call(agent.agent.status)["kube"]["stale_seconds"] < 0.5:
            assert time.monotonic() < deadline, "staleness never grew"
            time.sleep(0.05)
        assert answer_of(agent, f"web.default.{ZONE}") == ("NOERROR", ["10.96.0.50"])
        assert answer_of(agent, f"nothing.default.{ZONE}")[0] == "NXDOMAIN"


@pytest.mark.parametrize("gone_as_http", [False, True], ids=["error-event-410", "http-410"])
def test_relist_after_gone_removes_services_deleted_while_disconnected(tmp_path: Path, gone_as_http: bool) -> None:
    with FakeApiServer(gone_as_http=gone_as_http) as api:
        api.put("Namespace", namespace("default"))
        api.put("Service", service("default", "web", ["10.96.0.50"]))
        api.put("Service", service("default", "old", ["10.96.0.51"]))
        kc = api.write_kubeconfig(tmp_path / "kc")
        with running_agent({"kubeconfig": kc, "node-name": "node-a"}, agent_factory=fast_agent) as agent:
            wait_synced(agent)
            until_answer(agent, f"old.default.{ZONE}", ("NOERROR", ["10.96.0.51"]))
            deadline = time.monotonic() + 5
            while not agent.call(agent.agent.status)["kube"]["resources"]["services"]["connected"]:
                assert time.monotonic() < deadline, "the services watch never opened"
                time.sleep(0.01)
            api.inject("services", "watch", Fault(delay=0.5))  # the reconnect waits: it misses what follows
            assert api.kick("services") == 1
            api.delete("Service", "default", "old")
            api.compact()
            until_answer(agent, f"old.default.{ZONE}", ("NXDOMAIN", []))
            assert answer_of(agent, f"web.default.{ZONE}") == ("NOERROR", ["10.96.0.50"])
            services = agent.call(agent.agent.status)["kube"]["resources"]["services"]
            assert (services["gone"], services["relists"]) == (1, 1)


def test_unsynced_index_answers_servfail_until_the_first_sync(api: FakeApiServer, kubeconfig: str) -> None:
    api.put("Service", service("default", "web", ["10.96.0.50"]))
    api.inject("endpointslices", "list", Fault(delay=1.5))
    with running_agent({"kubeconfig": kubeconfig, "node-name": "node-a"}, agent_factory=fast_agent) as agent:
        assert answer_of(agent, f"missing.default.{ZONE}") == ("SERVFAIL", [])
        assert agent.call(agent.agent.ready) == (False, ["the cluster index has not synced yet"])  # /readyz 503
        until_answer(agent, f"web.default.{ZONE}", ("NOERROR", ["10.96.0.50"]))  # services are listed already
        wait_synced(agent)
        assert answer_of(agent, f"missing.default.{ZONE}") == ("NXDOMAIN", [])
        assert agent.call(agent.agent.ready) == (True, [])


# -- --fallback-upstream ---------------------------------------------------------------------------


class Upstream:
    """A tiny authoritative server: every A query gets 192.0.2.1; over UDP it can answer TC=1 only."""

    def __init__(self, *, truncate_udp: bool = False) -> None:
        self.truncate_udp = truncate_udp
        self.queries: list[tuple[str, int]] = []  # (transport, query ID)
        outer = self

        class UDP(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                data, sock = self.request
                sock.sendto(outer.reply(data, "udp"), self.client_address)

        class TCP(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                (n,) = struct.unpack("!H", self.rfile.read(2))
                out = outer.reply(self.rfile.read(n), "tcp")
                self.wfile.write(struct.pack("!H", len(out)) + out)

        # UDP takes a free port, TCP must get the same one: retry when another socket holds it,
        # and never leave the UDP server behind on failure
        for _ in range(50):
            self.udp = socketserver.ThreadingUDPServer(("127.0.0.1", 0), UDP)
            port = self.udp.server_address[1]
            try:
                self.tcp = socketserver.ThreadingTCPServer(("127.0.0.1", port), TCP)
            except OSError:
                self.udp.server_close()
                continue
            break
        else:
            raise OSError("no port free for both UDP and TCP")
        self.port = port
        for srv in (self.udp, self.tcp):
            threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def reply(self, data: bytes, transport: str) -> bytes:
        q = DNSRecord.parse(data)
        self.queries.append((transport, q.header.id))
        r = q.reply()
        if transport == "udp" and self.truncate_udp:
            r.header.tc = 1
        else:
            r.add_answer(RR(q.q.qname, QTYPE.A, rdata=A("192.0.2.1"), ttl=30))
        return bytes(r.pack())

    def close(self) -> None:
        for srv in (self.udp, self.tcp):
            srv.shutdown()
            srv.server_close()


@contextlib.contextmanager
def upstream(**kw: Any) -> Iterator[Upstream]:
    u = Upstream(**kw)
    try:
        yield u
    finally:
        u.close()


@pytest.mark.parametrize(
    ("truncate_udp", "transports"),
    [(False, ["udp"]), (True, ["udp", "tcp"])],
    ids=["udp", "truncated-then-tcp"],
)
def test_fallback_upstream_answers_would_be_nxdomain_before_the_first_sync(
    api: FakeApiServer, kubeconfig: str, truncate_udp: bool, transports: list[str]
) -> None:
    api.inject("endpointslices", "list", Fault(delay=1.5))
    with upstream(truncate_udp=truncate_udp) as up, running_agent(
        {"kubeconfig": kubeconfig, "node-name": "node-a", "fallback-upstream": f"127.0.0.1:{up.port}"},
        agent_factory=fast_agent,
    ) as agent:
        msg = dns.message.make_query(f"missing.default.{ZONE}", "A", use_edns=0)
        msg.id = 0x1234
        raw = agent.send_raw(msg.to_wire())
        assert raw is not None
        r = dns.message.from_wire(raw)
        assert r.id == 0x1234  # the client's ID restored ...
        assert [t for t, _ in up.queries] == transports
        assert {qid for _, qid in up.queries} != {0x1234}  # ... the upstream saw a random one
        assert dns.rcode.to_text(r.rcode()) == "NOERROR"
        assert rrset_values(r) == ["192.0.2.1"]
        wait_synced(agent)
        assert answer_of(agent, f"missing.default.{ZONE}") == ("NXDOMAIN", [])
        assert len(up.queries) == len(transports)  # after the sync the index answers


def test_fallback_upstream_failure_answers_servfail(api: FakeApiServer, kubeconfig: str) -> None:
    api.inject("endpointslices", "list", Fault(delay=1.5))
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # bound, never answers
    silent.bind(("127.0.0.1", 0))
    try:
        with running_agent(
            {"kubeconfig": kubeconfig, "node-name": "node-a", "upstream-timeout": "300ms",
             "fallback-upstream": f"127.0.0.1:{silent.getsockname()[1]}"},
            agent_factory=fast_agent,
        ) as agent:
            started = time.monotonic()
            assert answer_of(agent, f"missing.default.{ZONE}") == ("SERVFAIL", [])
            assert time.monotonic() - started < 2
            assert agent.agent.fallback is not None and agent.agent.fallback.failures == 1
    finally:
        silent.close()


# -- the CLI -------------------------------------------------------------------------------------------


def test_serve_command_watches_the_api_server_from_a_kubeconfig(api: FakeApiServer, kubeconfig: str) -> None:
    api.put("Service", service("default", "web", ["10.96.0.50"]))
    port = free_port()
    proc = subprocess.Popen(
        nodedns_cmd("serve", "--kubeconfig", kubeconfig, "--listen", f"127.0.0.1:{port}", "--status-listen", "none",
                    "--node-name", "node-a", "--upstream", "none"),
        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                r = query("127.0.0.1", port, f"web.default.{ZONE}", "A", timeout=0.5)
                if dns.rcode.to_text(r.rcode()) == "NOERROR":
                    break
            except (TimeoutError, OSError, dns.exception.Timeout):
                pass
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the agent never answered"
            time.sleep(0.1)
        assert rrset_values(r) == ["10.96.0.50"]
        api.put("Service", service("default", "web", ["10.96.0.51"]))
        deadline = time.monotonic() + PROPAGATION_BOUND
        while rrset_values(query("127.0.0.1", port, f"web.default.{ZONE}", "A")) != ["10.96.0.51"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert {r.query.get("fieldSelector") for r in api.requests_for("pods")} == {"spec.nodeName=node-a"}
    finally:
        proc.terminate()
        out = proc.communicate(timeout=20)[0]
    assert proc.returncode == 0, out
    assert "synced with the API server" in out


def test_serve_command_outside_a_cluster_without_a_source_is_a_config_error() -> None:
    env = subprocess_env()
    env.pop("KUBERNETES_SERVICE_HOST", None)
    r = subprocess.run(nodedns_cmd("serve", "--listen", f"127.0.0.1:{free_port()}", "--status-listen", "none"),
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "kubeconfig: no cluster source" in r.stderr


def test_the_log_says_ready_only_when_readyz_does_and_says_why_not_before(
        api: FakeApiServer, kubeconfig: str, caplog: pytest.LogCaptureFixture) -> None:
    """The log and /readyz agree: while a required resource is forbidden the agent is not ready, and the log
    says why instead of `ready:`; once it is listed, `ready:` and a 200 together."""
    import logging
    import urllib.error
    import urllib.request

    def readyz(agent: RunningAgent) -> int:
        try:
            with urllib.request.urlopen(agent.status_url + "/readyz", timeout=5) as resp:  # noqa: S310
                return int(resp.status)
        except urllib.error.HTTPError as err:
            return int(err.code)

    def said(what: str) -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "nodedns.app" and r.getMessage().startswith(what)]

    def quick(config: Config) -> Agent:
        agent = fast_agent(config)
        agent.UNREADY_AFTER = 0.3
        return agent

    caplog.set_level(logging.INFO, logger="nodedns.app")
    api.forbid("services")
    with running_agent({"kubeconfig": kubeconfig, "status-listen": "127.0.0.1:0"}, agent_factory=quick) as agent:
        deadline = time.monotonic() + 10
        while not said("not ready yet"):
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.05)
        assert readyz(agent) == 503 and not said("ready:"), said("not ready yet")
        why = said("not ready yet")[0]
        assert why.startswith("not ready yet (GET /readyz says 503): the cluster index has not synced yet")
        assert "services: 403 Forbidden" in why
        api.allow("services")
        deadline = time.monotonic() + 10
        while not said("ready:"):
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.05)
        assert readyz(agent) == 200
        assert len(said("ready:")) == 1 and said("ready:")[0].startswith("ready: namespaces 1, services")
