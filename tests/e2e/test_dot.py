"""DNS over TLS to the upstreams: `tls://ADDR[:PORT][#NAME]` in --upstream and --stub-domain, the server's
certificate verified (the system CAs or --upstream-tls-ca; the name from #NAME, --upstream-tls-servername,
else the address), queries pipelined on one reused connection, idle-closed, health-checked; a certificate
that does not verify is an error and an unhealthy upstream, never a plain fallback."""

from __future__ import annotations

import concurrent.futures
import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.rcode
import pytest

from nodedns import config as cfgmod
from nodedns.config import TLSUpstream, upstream_address
from nodedns.errors import ConfigError
from tests.support.helpers import EXAMPLE, IN_CI, RunningAgent, query, rrset_values, running_agent, wait_for
from tests.support.privateca import PrivateCA, ServerCert, needs_openssl
from tests.support.upstream_double import UpstreamDouble

pytestmark = [needs_openssl, pytest.mark.usefixtures("hit_path")]  # answers pass through both hit paths

NAME = "dns.nodedns.test"
ZONE = {"www.example.com": {"A": ["192.0.2.1"]}, "slow.example.com": {"A": ["192.0.2.9"]},
        **{f"n{i}.example.com": {"A": [f"192.0.2.{100 + i}"]} for i in range(40)},
        "host.corp.example": {"A": ["198.51.100.7"]}}


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCA:
    return PrivateCA.create(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def named_cert(ca: PrivateCA) -> ServerCert:
    return ca.issue("named", dns_names=(NAME,))


@pytest.fixture
def upstream(named_cert: ServerCert) -> Iterator[UpstreamDouble]:
    with UpstreamDouble(ZONE, tls=named_cert.context()) as up:
        yield up


def config(**extra: Any) -> dict[str, Any]:
    return {"manifests": str(EXAMPLE), "status-listen": "127.0.0.1:0", **extra}


def tls_upstream(up: UpstreamDouble, name: str | None = NAME) -> str:
    return f"tls://{up.tls_address}" + (f"#{name}" if name else "")


def upstream_status(agent: RunningAgent) -> list[dict[str, Any]]:
    fw = agent.agent.forwarder
    assert fw is not None
    return agent.call(lambda: fw.status()["upstreams"])


def a_values(agent: RunningAgent, name: str) -> list[str]:
    return rrset_values(agent.query(name, "A"), rdtype="A")


def test_forwarded_names_go_over_one_verified_tls_connection(ca: PrivateCA, upstream: UpstreamDouble) -> None:
    with running_agent(config(upstream=tls_upstream(upstream), **{"upstream-tls-ca": str(ca.cert)})) as agent:
        assert a_values(agent, "www.example.com") == ["192.0.2.1"]
        assert upstream.count("www.example.com", transport="tls") == 1
        names = [f"n{i}.example.com" for i in range(30)]
        with concurrent.futures.ThreadPoolExecutor(30) as pool:  # pipelined on the one connection
            got = list(pool.map(lambda n: a_values(agent, n), names))
        assert got == [[f"192.0.2.{100 + i}"] for i in range(30)]
        assert upstream.tls_connections == 1
        assert set(upstream.transports) == {"tls"}  # never plain UDP or TCP
        assert a_values(agent, "www.example.com") == ["192.0.2.1"]  # from the cache: not asked again
        assert upstream.count("www.example.com", transport="tls") == 1
        (entry,) = upstream_status(agent)
        assert entry["to"] == f"tls://{upstream.tls_address}" and entry["healthy"]
        assert entry["tls"]["name"] == NAME and entry["tls"]["connections"] == 1 and entry["tls"]["open"]
        assert entry["tls"]["reused"] >= 30 and entry["tls"]["error"] == ""


def test_answers_out_of_order_on_the_connection_go_to_their_own_queries(ca: PrivateCA,
                                                                         upstream: UpstreamDouble) -> None:
    upstream.per_name["slow.example.com"] = "delay"
    upstream.delay = 0.4
    with running_agent(config(upstream=tls_upstream(upstream), **{"upstream-tls-ca": str(ca.cert)})) as agent:
        assert a_values(agent, "www.example.com") == ["192.0.2.1"]  # the connection is open
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            slow = pool.submit(a_values, agent, "slow.example.com")
            time.sleep(0.05)
            started = time.monotonic()
            assert a_values(agent, "n1.example.com") == ["192.0.2.101"]
            assert time.monotonic() - started < 0.3  # not behind the slow one
            assert slow.result() == ["192.0.2.9"]
        assert upstream.tls_connections == 1


def test_a_certificate_for_another_name_is_refused_and_nothing_is_asked_in_plain(
        ca: PrivateCA, upstream: UpstreamDouble, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="nodedns.upstream")
    raw = config(upstream=tls_upstream(upstream, "other.nodedns.test"), **{"upstream-tls-ca": str(ca.cert),
                                                                             "health-check": "100ms"})
    with running_agent(raw) as agent:
        assert agent.query("www.example.com", "A").rcode() == dns.rcode.SERVFAIL
        assert not upstream.transports  # the handshake failed: no query was sent, over TLS or in plain
        wait_for(lambda: not upstream_status(agent)[0]["healthy"], timeout=10, what="the upstream marked down")
        (entry,) = upstream_status(agent)
        assert "does not verify for other.nodedns.test" in entry["tls"]["error"]
        assert entry["tls"]["connections"] == 0
        assert any("does not verify" in r.getMessage() for r in caplog.records)
        assert agent.agent.forwarder is not None
        assert agent.call(lambda: agent.agent.forwarder.stats["tls_handshake_failures"]) >= 1  # type:
        # ignore[union-attr]
        assert not upstream.transports


def test_a_private_ca_is_not_trusted_without_upstream_tls_ca(upstream: UpstreamDouble) -> None:
    with running_agent(config(upstream=tls_upstream(upstream))) as agent:
        assert agent.query("www.example.com", "A").rcode() == dns.rcode.SERVFAIL
        assert "does not verify" in upstream_status(agent)[0]["tls"]["error"]
        assert not upstream.transports


def test_without_a_name_the_servername_flag_then_the_address_is_verified(ca: PrivateCA) -> None:
    by_ip = ca.issue("by-ip", ips=("127.0.0.1",))
    with UpstreamDouble(ZONE, tls=by_ip.context()) as up, \
            running_agent(config(upstream=tls_upstream(up, None), **{"upstream-tls-ca": str(ca.cert)})) as agent:
        assert a_values(agent, "www.example.com") == ["192.0.2.1"]  # the certificate names 127.0.0.1
        assert upstream_status(agent)[0]["tls"]["name"] == "127.0.0.1"
    named = ca.issue("named-only", dns_names=(NAME,))
    with UpstreamDouble(ZONE, tls=named.context()) as up:
        with running_agent(config(upstream=tls_upstream(up, None), **{"upstream-tls-ca": str(ca.cert)})) as agent:
            assert agent.query("www.example.com", "A").rcode() == dns.rcode.SERVFAIL  # 127.0.0.1 is not in it
        with running_agent(config(upstream=tls_upstream(up, None), **{"upstream-tls-ca": str(ca.cert),
                                                                      "upstream-tls-servername": NAME})) as agent:
            assert a_values(agent, "www.example.com") == ["192.0.2.1"]


def test_a_connection_the_server_closed_is_opened_again_within_the_query(ca: PrivateCA,
                                                                         upstream: UpstreamDouble) -> None:
    with running_agent(config(upstream=tls_upstream(upstream), **{"upstream-tls-ca": str(ca.cert)})) as agent:
        assert a_values(agent, "n1.example.com") == ["192.0.2.101"]
        assert upstream.drop_tls_connections() == 1
        assert a_values(agent, "n2.example.com") == ["192.0.2.102"]
        assert upstream.tls_connections == 2
        assert upstream_status(agent)[0]["healthy"]


def test_an_idle_connection_is_closed_and_the_next_query_opens_one(ca: PrivateCA, upstream: UpstreamDouble) -> None:
    with running_agent(config(upstream=tls_upstream(upstream), **{"upstream-tls-ca": str(ca.cert)})) as agent:
        fw = agent.agent.forwarder
        assert fw is not None
        agent.call(lambda: setattr(fw, "tls_idle", 0.2))
        assert a_values(agent, "n3.example.com") == ["192.0.2.103"]
        wait_for(lambda: not upstream_status(agent)[0]["tls"]["open"], timeout=5, what="the idle connection closed")
        wait_for(lambda: not upstream._tls_writers, timeout=5, what="the upstream to see it closed")
        assert a_values(agent, "n4.example.com") == ["192.0.2.104"]
        assert upstream.tls_connections == 2


def test_a_wedged_connection_is_abandoned_and_every_query_answered_within_5s(ca: PrivateCA,
                                                                             upstream: UpstreamDouble) -> None:
    """The server accepts new connections, but the one open stops answering (read, never answered)."""
    with running_agent(config(upstream=tls_upstream(upstream), **{"upstream-tls-ca": str(ca.cert)})) as agent:
        assert a_values(agent, "n1.example.com") == ["192.0.2.101"]
        assert upstream.wedge_tls_connections() == 1
        wedged = time.monotonic()
        names = [f"n{i}.example.com" for i in range(2, 22)]
        with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:  # 20 pipelined on the wedged connection
            got = list(pool.map(lambda n: a_values(agent, n), names))
        assert got == [[f"192.0.2.{100 + i}"] for i in range(2, 22)]  # none lost: re-sent on a new connection
        assert time.monotonic() - wedged < 5.0
        assert a_values(agent, "n30.example.com") == ["192.0.2.130"]  # and the next ones go on the new one
        (entry,) = upstream_status(agent)
        tls = entry["tls"]
        assert tls["abandoned"] == 1 and tls["connections"] == 2 and tls["open"]
        assert tls["connection"]["pending"] == 0 and tls["connection"]["timeouts_in_a_row"] == 0
        assert upstream.tls_connections == 2


def test_a_wedged_connection_met_by_one_query_at_a_time_is_abandoned_at_its_first_timeout(
        ca: PrivateCA, upstream: UpstreamDouble) -> None:
    raw = config(upstream=tls_upstream(upstream), **{"upstream-tls-ca": str(ca.cert), "upstream-timeout": "1s"})
    with running_agent(raw) as agent:
        assert a_values(agent, "n1.example.com") == ["192.0.2.101"]
        upstream.wedge_tls_connections()
        started = time.monotonic()
        assert a_values(agent, "n2.example.com") == ["192.0.2.102"]  # the second try opens a new connection
        assert time.monotonic() - started < 2.0  # within the two tries
        (entry,) = upstream_status(agent)
        assert entry["tls"]["abandoned"] == 1 and entry["tls"]["connections"] == 2


def test_a_server_closing_after_each_answer_loses_none_of_a_pipelined_burst(ca: PrivateCA,
                                                                            upstream: UpstreamDouble) -> None:
    with running_agent(config(upstream=tls_upstream(upstream), **{"upstream-tls-ca": str(ca.cert)})) as agent:
        assert a_values(agent, "www.example.com") == ["192.0.2.1"]
        upstream.tls_close_after_answer = True
        names = [f"n{i}.example.com" for i in range(16)]  # a handshake each, one after another: within the timeout
        with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
            got = list(pool.map(lambda n: a_values(agent, n), names))
        assert got == [[f"192.0.2.{100 + i}"] for i in range(16)]
        (entry,) = upstream_status(agent)
        assert entry["tls"]["closed_by_server"] >= 2 and entry["tls"]["retried"] >= 1 and entry["healthy"]


def test_a_server_that_closes_every_connection_unanswered_costs_one_retry_per_try(
        ca: PrivateCA, upstream: UpstreamDouble) -> None:
    upstream.per_name["never.example.com"] = "close"
    with running_agent(config(upstream=tls_upstream(upstream), **{"upstream-tls-ca": str(ca.cert),
                                                                   "health-check": "0s"})) as agent:
        assert a_values(agent, "www.example.com") == ["192.0.2.1"]  # a connection open, that has answered
        before = upstream.tls_connections
        assert agent.query("never.example.com", "A").rcode() == dns.rcode.SERVFAIL
        # two tries (one server): the first re-sent after the connection that had answered closed under it,
        # then once after a new one closed unanswered; the second once; never more
        assert upstream.tls_connections - before == 4
        assert a_values(agent, "n5.example.com") == ["192.0.2.105"]


def test_a_stub_domain_over_tls_beside_plain_root_upstreams(ca: PrivateCA, upstream: UpstreamDouble) -> None:
    with UpstreamDouble({"www.example.com": {"A": ["203.0.113.1"]}}) as root:
        raw = config(upstream=root.address, **{"stub-domain": f"corp.example={tls_upstream(upstream)}",
                                                "upstream-tls-ca": str(ca.cert)})
        with running_agent(raw) as agent:
            assert a_values(agent, "host.corp.example") == ["198.51.100.7"]
            assert a_values(agent, "www.example.com") == ["203.0.113.1"]
            assert upstream.count("host.corp.example", transport="tls") == 1
            assert upstream.count("www.example.com") == 0
            zones = {e["zone"]: e for e in upstream_status(agent)}
            assert zones["corp.example"]["tls"]["connections"] == 1 and "tls" not in zones["."]


# -- configuration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "host", "port", "name"), [
    ("tls://192.0.2.53", "192.0.2.53", 853, None),
    ("tls://192.0.2.53:8853#dns.example.com", "192.0.2.53", 8853, "dns.example.com"),
    ("TLS://[2001:db8::53]:853#DNS.Example.COM.", "2001:db8::53", 853, "dns.example.com"),
    ("tls://2001:db8::53", "2001:db8::53", 853, None),
])
def test_tls_addresses_parse_with_port_853_by_default(text: str, host: str, port: int, name: str | None) -> None:
    addr = upstream_address(text)
    assert isinstance(addr, TLSUpstream) and tuple(addr) == (host, port) and addr.name == name
    assert addr != (host, port) and (host, port) != addr  # a change between plain and TLS is a change of route


@pytest.mark.parametrize("text", ["tls://dns.example.com", "tls://192.0.2.1#", "tls://192.0.2.1#bad_name!",
                                  "tls://192.0.2.1:99999", "tls://"])
def test_a_bad_tls_address_is_a_config_error_naming_the_key(text: str) -> None:
    with pytest.raises(ConfigError, match="upstream"):
        cfgmod.build({"upstream": [text], "manifests": str(EXAMPLE)}, environ={})
    with pytest.raises(ConfigError, match="stub-domain"):
        cfgmod.build({"stub-domain": [f"corp.example={text}"], "manifests": str(EXAMPLE)}, environ={})


def test_an_unusable_ca_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"upstream-tls-ca.*does not exist"):
        cfgmod.build({"upstream-tls-ca": str(tmp_path / "missing.pem"), "manifests": str(EXAMPLE)}, environ={})
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="upstream-tls-ca"):
        cfgmod.build({"upstream-tls-ca": str(junk), "manifests": str(EXAMPLE)}, environ={})


def test_the_routes_log_line_names_tls_upstreams(ca: PrivateCA, upstream: UpstreamDouble,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with running_agent(config(upstream=tls_upstream(upstream), **{"upstream-tls-ca": str(ca.cert)})):
        pass
    assert any(f"tls://{upstream.tls_address}#{NAME}" in r.getMessage() for r in caplog.records)


# -- a real DNS-over-TLS server --------------------------------------------------------------------


@pytest.fixture
def unbound_dot(ca: PrivateCA, named_cert: ServerCert, tmp_path: Path) -> Iterator[int]:
    """unbound serving a static zone over DNS over TLS only, with a certificate of the private CA."""
    if shutil.which("unbound") is None:
        if IN_CI:
            pytest.fail("CI installs unbound")
        pytest.skip("needs unbound (a Debian package .ci/run installs)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp_path / "unbound.conf"
    conf.write_text(f"""server:
  interface: 127.0.0.1@{port}
  tls-port: {port}
  tls-service-key: "{named_cert.key}"
  tls-service-pem: "{named_cert.cert}"
  do-daemonize: no
  use-syslog: no
  logfile: ""
  username: ""
  chroot: ""
  directory: "{tmp_path}"
  pidfile: ""
  num-threads: 1
  access-control: 127.0.0.0/8 allow
  verbosity: 0
  local-zone: "." static
  local-zone: "dot.test." static
  local-data: "dot.test. 3600 IN SOA ns.dot.test. hostmaster.dot.test. 1 3600 600 86400 3600"
  local-data: "www.dot.test. 300 IN A 192.0.2.80"
""")
    log = tmp_path / "unbound.log"
    with log.open("w") as out:
        proc = subprocess.Popen(["unbound", "-d", "-c", str(conf)], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"unbound did not start: {log.read_text()}") from None
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_unbound_over_dns_over_tls_with_a_private_ca(ca: PrivateCA, unbound_dot: int) -> None:
    raw = config(upstream=f"tls://127.0.0.1:{unbound_dot}#{NAME}", **{"upstream-tls-ca": str(ca.cert)})
    with running_agent(raw) as agent:
        assert a_values(agent, "www.dot.test") == ["192.0.2.80"]
        assert agent.query("nx.dot.test", "A").rcode() == dns.rcode.NXDOMAIN
        (entry,) = upstream_status(agent)
        assert entry["tls"]["connections"] == 1 and entry["healthy"]
    wrong = config(upstream=f"tls://127.0.0.1:{unbound_dot}#wrong.nodedns.test", **{"upstream-tls-ca": str(ca.cert)})
    with running_agent(wrong) as agent:
        assert agent.query("www.dot.test", "A").rcode() == dns.rcode.SERVFAIL
        assert "does not verify" in upstream_status(agent)[0]["tls"]["error"]


def test_the_agent_process_serves_over_tls_from_the_command_line(ca: PrivateCA, upstream: UpstreamDouble) -> None:
    from tests.support.helpers import free_port, nodedns_cmd, subprocess_env  # noqa: PLC0415

    port = free_port()
    proc = subprocess.Popen(nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}",
                                        "--status-listen", "none", "--upstream", tls_upstream(upstream),
                                        "--upstream-tls-ca", str(ca.cert)),
                            env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: _answers(port), timeout=20, what="the agent answering over its TLS upstream")
        assert upstream.count("www.example.com", transport="tls") >= 1 and "udp" not in upstream.transports
    finally:
        proc.terminate()
        proc.wait(10)


def _answers(port: int) -> bool:
    try:
        return rrset_values(query("127.0.0.1", port, "www.example.com", timeout=0.5)) == ["192.0.2.1"]
    except Exception:  # noqa: BLE001 - not up yet
        return False


