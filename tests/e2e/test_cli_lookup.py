"""`nodedns lookup` against a live agent: readable explanation, clear errors, exit codes."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodedns.cli import endpoint
from tests.support.helpers import EXAMPLE, RunningAgent, free_port, nodedns_cmd, running_agent, subprocess_env


@pytest.fixture(scope="module")
def agent() -> Iterator[RunningAgent]:
    with running_agent({"manifests": str(EXAMPLE), "debug-listen": "127.0.0.1:0", "status-listen": "127.0.0.1:0"}) as a:
        yield a


def lookup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(nodedns_cmd("lookup", *args), env=subprocess_env(), capture_output=True, text=True,
                          timeout=60)


def test_lookup_prints_path_records_and_ttl(agent: RunningAgent) -> None:
    r = lookup("web.default.svc.cluster.local", "--debug", agent.debug_url)
    assert r.returncode == 0, r.stderr
    first, name = r.stdout.splitlines()[:2]
    assert first.startswith("agent:    node ") and f"DNS {agent.host}:{agent.port} (debug listener" in first
    assert name == "web.default.svc.cluster.local. A"
    assert "path:     cluster index" in r.stdout
    assert "web.default.svc.cluster.local. 5 A 10.96.12.34" in r.stdout
    assert "ttl left: 5s" in r.stdout


def test_lookup_with_a_client_lists_the_search_list_queries(agent: RunningAgent) -> None:
    r = lookup("db.prod", "A", "--client", "10.244.0.21", "--debug", agent.debug_url)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "client 10.244.0.21: pod default/web-5d8f7c9b6-aaaaa, dnsPolicy ClusterFirst" in out
    assert "search:   default.svc.cluster.local svc.cluster.local cluster.local" in out
    assert out.index(" 1. db.prod.default.svc.cluster.local. A") < out.index(" 2. db.prod.svc.cluster.local. A")
    assert "result:   answered by query 2" in out


def test_lookup_json_is_the_agents_document(agent: RunningAgent) -> None:
    r = lookup("web.default.svc.cluster.local", "AAAA", "--json", "--debug", agent.debug_url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer"][0]["data"] == "fd00:10:96::1234"


FAILURES = [
    ("bad type", ["web", "BOGUS"], 2, "the agent rejected the question: unknown record type 'BOGUS'"),
    ("bad client", ["web", "A", "--client", "nope"], 2, "client 'nope' is not an IP address"),
]


@pytest.mark.parametrize(("args", "code", "message"), [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES])
def test_lookup_reports_rejected_questions(agent: RunningAgent, args: list[str], code: int, message: str) -> None:
    r = lookup(*args, "--debug", agent.debug_url)
    assert r.returncode == code
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_lookup_says_when_the_agent_is_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    r = lookup("web", "--debug", url)
    assert r.returncode == 1
    assert f"cannot reach the agent's debug listener at {url}" in r.stderr
    assert "Traceback" not in r.stderr


def test_lookup_says_when_debug_is_off() -> None:
    with running_agent({"manifests": str(EXAMPLE), "debug-listen": "127.0.0.1:0", "no-debug": True}) as a:
        r = lookup("web", "--debug", a.debug_url)
    assert r.returncode == 1
    assert "--no-debug" in r.stderr


# -- finding the debug listener -----------------------------------------------------------------


def test_nodedns_debug_in_the_environment_names_the_listener(agent: RunningAgent) -> None:
    r = subprocess.run(nodedns_cmd("lookup", "web.default.svc.cluster.local"), capture_output=True, text=True,
                       timeout=60, env=subprocess_env(NODEDNS_DEBUG=agent.debug_url))
    assert r.returncode == 0, r.stderr
    assert "path:     cluster index" in r.stdout


def test_the_status_flag_still_names_the_listener(agent: RunningAgent) -> None:
    r = lookup("web.default.svc.cluster.local", "--status", agent.debug_url)
    assert r.returncode == 0, r.stderr


def test_the_status_listener_is_told_apart(agent: RunningAgent) -> None:
    status = agent.agent.status_server.url  # type: ignore[union-attr]
    r = lookup("web", "--debug", status)
    assert r.returncode == 1
    assert "or this is its status listener (the debug routes are on --debug-listen" in r.stderr


def test_a_unix_socket_debug_listener_is_root_only_and_reachable(tmp_path: Path) -> None:
    sock = tmp_path / "debug.sock"
    with running_agent({"manifests": str(EXAMPLE), "debug-listen": f"unix:{sock}"}) as a:
        assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert a.debug_url == f"unix:{sock}"
        r = lookup("web.default.svc.cluster.local", "--debug", f"unix:{sock}")
        assert r.returncode == 0, r.stderr
        assert "path:     cluster index" in r.stdout
        r = subprocess.run(nodedns_cmd("explain", "web", "--pod-ref", "default/web-5d8f7c9b6-aaaaa", "--debug",
                                       f"unix:{sock}"), env=subprocess_env(), capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
    assert not sock.exists()  # removed at stop


CANDIDATES = [
    ("given", "http://10.0.0.1:9254", {}, False, ["http://10.0.0.1:9254"]),
    ("given wins over the environment", "http://10.0.0.1:9254", {"NODEDNS_DEBUG": "unix:/x.sock"}, True,
     ["http://10.0.0.1:9254"]),
    ("from the environment", None, {"NODEDNS_DEBUG": "unix:/x.sock"}, True, ["unix:/x.sock"]),
    ("the node's socket first", None, {}, True, ["unix:{sock}", "http://127.0.0.1:9254"]),
    ("no socket: the default port", None, {}, False, ["http://127.0.0.1:9254"]),
]


@pytest.mark.parametrize(("explicit", "environ", "socket_exists", "expected"), [c[1:] for c in CANDIDATES],
                         ids=[c[0] for c in CANDIDATES])
def test_where_the_commands_look_for_the_debug_listener(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        explicit: str | None, environ: dict[str, str],
                                                        socket_exists: bool, expected: list[str]) -> None:
    path = tmp_path / "debug.sock"
    if socket_exists:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    monkeypatch.setattr(endpoint, "DEFAULT_SOCKET", str(path))
    assert endpoint.candidates(explicit, environ) == [e.format(sock=path) for e in expected]


async def test_a_newer_agent_takes_the_socket_path_over_and_the_older_leaves_it_alone(tmp_path: Path) -> None:
    from nodedns.observe.status import DEBUG, StatusServer

    class Quiet:
        def liveness(self) -> list[str]:
            return []

        def readiness(self) -> list[str]:
            return []

        def status(self) -> dict[str, str]:
            return {}

        def metrics(self) -> bytes:
            return b""

    path = tmp_path / "debug.sock"
    old, new = StatusServer(Quiet()), StatusServer(Quiet())
    await old.listen(DEBUG, f"unix:{path}")
    first = path.stat().st_ino
    await new.listen(DEBUG, f"unix:{path}")
    assert path.stat().st_ino != first
    await old.stop()
    assert path.exists()  # the newer agent's socket stays
    await new.stop()
    assert not path.exists()


class PathServer:
    """An HTTP server on 127.0.0.1 that answers every GET with the path it was asked for."""

    def __init__(self) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.path.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_debug_listener_behind_a_path_is_asked_under_that_path() -> None:
    server = PathServer()
    try:
        assert endpoint.request(server.url + "/nodedns/", "GET", "/debug/lookup?name=x") == (
            200, "text/plain", "/nodedns/debug/lookup?name=x")
    finally:
        server.close()


def test_a_socket_path_nobody_listens_on_is_passed_over_for_the_next_candidate(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "debug.sock"  # an agent killed without cleaning up: the socket file stays
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()
    server = PathServer()
    try:
        monkeypatch.setattr(endpoint, "DEFAULT_SOCKET", str(stale))
        monkeypatch.setattr(endpoint, "DEFAULT_TCP", server.url)
        monkeypatch.delenv(endpoint.ENV, raising=False)
        assert endpoint.ask(None, "GET", "/status") == (server.url, 200, "text/plain", "/status")
    finally:
        server.close()
