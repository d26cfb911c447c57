"""`nodedns lookup` against a live agent: readable explanation, clear errors, exit codes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.helpers import EXAMPLE, RunningAgent, free_port, nodedns_cmd, running_agent, subprocess_env


@pytest.fixture(scope="module")
def agent() -> Iterator[RunningAgent]:
    with running_agent({"manifests": str(EXAMPLE), "debug-listen": "127.0.0.1:0"}) as a:
        yield a


def lookup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(nodedns_cmd("lookup", *args), env=subprocess_env(), capture_output=True, text=True,
                          timeout=60)


def test_lookup_prints_path_records_and_ttl(agent: RunningAgent) -> None:
    r = lookup("web.default.svc.cluster.local", "--debug", agent.debug_url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "web.default.svc.cluster.local. A"
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
