"""`nodedns serve` as a user runs it: a subprocess of this checkout, real sockets, real signals."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import dns.exception
import dns.message
import dns.rcode
import pytest
import yaml

from tests.support import cluster_fixture as fx
from tests.support.helpers import EXAMPLE, ROOT, free_port, no_default_upstream, nodedns_cmd, query, subprocess_env

START_TIMEOUT = 20.0


@contextlib.contextmanager
def serving(*args: str, port: int, zone: str = "cluster.local",
            cwd: Path | None = None) -> Iterator[subprocess.Popen[str]]:
    """`nodedns serve ARGS` until its index is loaded; stopped with SIGTERM afterwards (no lameduck
    unless ARGS set one).

    The listeners answer before the manifest is loaded (SERVFAIL for would-be NXDOMAIN), so the
    probe waits for a name that does not exist to come back NXDOMAIN.
    """
    if "--lameduck" not in args:
        args = (*args, "--lameduck", "0s")  # the default 5 s lameduck would only slow these tests down
    proc = subprocess.Popen(nodedns_cmd("serve", *no_default_upstream(args), *args), env=subprocess_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                _, err = proc.communicate(timeout=5)
                pytest.fail(f"nodedns exited with {proc.returncode}: {err}")
            with contextlib.suppress(dns.exception.Timeout, OSError):
                probe = query("127.0.0.1", port, f"probe.no-such-namespace.svc.{zone}", "A", timeout=0.3)
                if probe.rcode() == dns.rcode.NXDOMAIN:
                    break
            if time.monotonic() > deadline:
                pytest.fail("nodedns did not get ready in time")
            time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def run_serve(*args: str, timeout: float = 20.0, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(nodedns_cmd("serve", *args), env=subprocess_env(), capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def a_records(port: int, name: str, **kw: object) -> list[str]:
    r = query("127.0.0.1", port, name, "A", **kw)  # type: ignore[arg-type]
    return sorted(rd.to_text() for rrset in r.answer for rd in rrset)


# ----------------------------------------------------------------------------------------------
# Serving


def test_serve_answers_the_example_cluster_on_the_listen_address() -> None:
    port = free_port()
    with serving("--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}", port=port):
        assert a_records(port, "web.default.svc.cluster.local") == ["10.96.12.34"]
        r = query("127.0.0.1", port, "web.default.svc.cluster.local", "AAAA", tcp=True)
        assert [rd.to_text() for rd in r.answer[0]] == ["fd00:10:96::1234"]
        r = query("127.0.0.1", port, "nope.default.svc.cluster.local", "A")
        assert r.rcode() == dns.rcode.NXDOMAIN


def test_serve_listens_on_every_listen_address() -> None:
    p1, p2 = free_port(), free_port()
    with serving("--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{p1}", "--listen", f"127.0.0.1:{p2}",
                 "--status-listen", "none", port=p1):
        for port in (p1, p2):
            for tcp in (False, True):
                assert a_records(port, "web.default.svc.cluster.local", tcp=tcp) == ["10.96.12.34"]


def test_sigterm_stops_serve_promptly_with_exit_0() -> None:
    port = free_port()
    with serving("--manifests", str(EXAMPLE), "--listen", f"127.0.0.1:{port}", "--status-listen", "none",
                 port=port) as proc:
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 8.0  # prompt: the default lameduck is 5 s at most
        err = proc.stderr.read() if proc.stderr else ""
        assert "Traceback" not in err


def test_config_file_with_the_same_keys_works_and_flags_override_it(tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "nodedns.yaml"
    cfg.write_text(yaml.safe_dump({
        "manifests": str(EXAMPLE),
        "listen": [f"127.0.0.1:{port}"],
        "ttl": "30s",
        "cluster_domain": "cluster.local",  # underscores work too
        "pods": "disabled",
        "status-listen": "none",
    }), encoding="utf-8")
    with serving("--config", str(cfg), port=port):
        r = query("127.0.0.1", port, "web.default.svc.cluster.local", "A")
        assert r.answer[0].ttl == 30
        assert query("127.0.0.1", port, "10-244-1-5.default.pod.cluster.local", "A").rcode() == dns.rcode.NXDOMAIN
    with serving("--config", str(cfg), "--ttl", "7s", "--pods", "insecure", port=port):
        r = query("127.0.0.1", port, "web.default.svc.cluster.local", "A")
        assert r.answer[0].ttl == 7
        assert a_records(port, "10-244-1-5.default.pod.cluster.local") == ["10.244.1.5"]


def test_relative_paths_in_a_config_file_are_read_from_its_folder(tmp_path: Path) -> None:
    """As the kubelet reads its configuration file: `manifests: ../data/cluster.yaml` in conf/nodedns.yaml
    is data/cluster.yaml, whatever the current directory; a relative flag stays relative to it."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "data" / "cluster.yaml").write_bytes(EXAMPLE.read_bytes())
    port = free_port()
    cfg = tmp_path / "conf" / "nodedns.yaml"
    cfg.write_text(yaml.safe_dump({"manifests": "../data/cluster.yaml", "listen": [f"127.0.0.1:{port}"],
                                   "status-listen": "none", "debug-listen": "none"}), encoding="utf-8")
    with serving("--config", str(cfg), port=port, cwd=tmp_path / "elsewhere"):
        assert a_records(port, "web.default.svc.cluster.local") == ["10.96.12.34"]
    with serving("--config", "conf/nodedns.yaml", port=port, cwd=tmp_path):  # the file itself: from here
        assert a_records(port, "web.default.svc.cluster.local") == ["10.96.12.34"]
    with serving("--config", str(cfg), "--manifests", "data/cluster.yaml", port=port, cwd=tmp_path):
        assert a_records(port, "web.default.svc.cluster.local") == ["10.96.12.34"]
    # a flag is read from the current directory, not from the file's folder
    r = run_serve("--config", str(cfg), "--manifests", "cluster.yaml", cwd=tmp_path)
    assert r.returncode == 2 and "manifests: cannot read cluster.yaml" in r.stderr


def test_the_example_config_serves_from_any_directory(tmp_path: Path) -> None:
    port = free_port()
    with serving("--config", str(EXAMPLE.parent / "config.yaml"), "--listen", f"127.0.0.1:{port}",
                 "--status-listen", "none", "--debug-listen", "none", port=port, cwd=tmp_path):
        assert a_records(port, "web.default.svc.cluster.local") == ["10.96.12.34"]


def test_serve_flags_change_the_answers(tmp_path: Path) -> None:
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(yaml.safe_dump(fx.as_list(fx.cluster_objects())), encoding="utf-8")
    port = free_port()
    with serving("--manifests", str(manifest), "--listen", f"127.0.0.1:{port}", "--status-listen", "none",
                 "--cluster-domain", "k8s.test", "--endpoint-pod-names", "--pods", "verified",
                 "--authoritative-reverse", "10.96.0.0/12,10.244.0.0/16", port=port, zone="k8s.test"):
        assert a_records(port, "api-7f9c-abcde.api.prod.svc.k8s.test") == ["10.244.1.21"]
        assert query("127.0.0.1", port, "1-2-3-4.default.pod.k8s.test", "A").rcode() == dns.rcode.NXDOMAIN
        assert query("127.0.0.1", port, "web.default.svc.cluster.local", "A").rcode() == dns.rcode.REFUSED
        r = query("127.0.0.1", port, "10.0.96.10.in-addr.arpa", "PTR")
        assert [rd.to_text() for rd in r.answer[0]] == ["web.default.svc.k8s.test."]
        r = query("127.0.0.1", port, "98.0.96.10.in-addr.arpa", "PTR")
        assert r.rcode() == dns.rcode.NXDOMAIN and r.authority[0].name.to_text() == "96.10.in-addr.arpa."


def test_a_manifest_with_invalid_objects_still_serves_and_names_them(tmp_path: Path) -> None:
    manifest = tmp_path / "cluster.yaml"
    objs = [
        fx.namespace("default"),
        fx.service("default", "good", cluster_ips=["10.96.0.8"]),
        fx.service("default", "broken", cluster_ips=["10.96.0.300"]),
        fx.endpoint_slice("default", "orphan-slice", None, "IPv4", [fx.endpoint("10.1.1.1")]),
    ]
    manifest.write_text("---\n".join(yaml.safe_dump(o) for o in objs), encoding="utf-8")  # multi-document
    port = free_port()
    with serving("--manifests", str(manifest), "--listen", f"127.0.0.1:{port}", "--status-listen", "none",
                 port=port) as proc:
        assert a_records(port, "good.default.svc.cluster.local") == ["10.96.0.8"]
        assert query("127.0.0.1", port, "broken.default.svc.cluster.local", "A").rcode() == dns.rcode.NXDOMAIN
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        err = proc.stderr.read() if proc.stderr else ""
    assert "Service default/broken" in err
    assert "EndpointSlice default/orphan-slice" in err
    assert "Traceback" not in err


# ----------------------------------------------------------------------------------------------
# Bad input: exit non-zero, one line naming the key


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


BAD_FLAGS: list[tuple[str, list[str], str]] = [
    ("ttl-too-long", ["--ttl", "2h"], "ttl"),
    ("ttl-not-a-duration", ["--ttl", "soon"], "ttl"),
    ("ttl-negative", ["--ttl", "-1s"], "ttl"),
    ("pods-bogus", ["--pods", "bogus"], "pods"),
    ("listen-nonsense", ["--listen", "nonsense"], "listen"),
    ("listen-bad-port", ["--listen", "127.0.0.1:99999"], "listen"),
    ("listen-twice", ["--listen", "127.0.0.1:5353", "--listen", "127.0.0.1:5353"], "listen"),
    ("cluster-domain-invalid", ["--cluster-domain", "bad domain!"], "cluster-domain"),
    ("authoritative-reverse-not-a-cidr", ["--authoritative-reverse", "10.0.0.0/33"], "authoritative-reverse"),
    ("max-udp-size-too-small", ["--max-udp-size", "100"], "max-udp-size"),
    ("tcp-idle-timeout-zero", ["--tcp-idle-timeout", "0s"], "tcp-idle-timeout"),
    ("tcp-max-connections-zero", ["--tcp-max-connections", "0"], "tcp-max-connections"),
    ("unknown-flag", ["--bogus-flag"], "--bogus-flag"),
    ("flag-without-value", ["--ttl"], "--ttl"),
    ("manifests-missing", ["--manifests", "/nonexistent/nodedns/cluster.yaml"], "manifests"),
    ("debug-listen-relative-socket", ["--debug-listen", "unix:debug.sock"], "debug-listen"),
    ("debug-listen-socket-path-too-long", ["--debug-listen", "unix:/" + "d" * 120], "debug-listen"),
    ("debug-listen-nonsense", ["--debug-listen", "localhost:9254"], "debug-listen"),
    ("debug-listen-is-the-status-port", ["--status-listen", "127.0.0.1:9300", "--debug-listen", "127.0.0.1:9300"],
     "debug-listen"),
    ("filter-aaaa-bogus", ["--filter-aaaa", "sometimes"], "filter-aaaa"),
    ("cache-min-ttl-not-a-duration", ["--cache-min-ttl", "long"], "cache-min-ttl"),
    ("cache-min-ttl-over-a-day", ["--cache-min-ttl", "25h"], "cache-min-ttl"),
    ("stale-nxdomain-negative", ["--stale-nxdomain", "-5s"], "stale-nxdomain"),
    ("stale-nxdomain-not-a-duration", ["--stale-nxdomain", "forever"], "stale-nxdomain"),
    ("hosts-empty-path", ["--hosts", ""], "hosts"),
]


@pytest.mark.parametrize(("args", "key"), [(a, k) for _, a, k in BAD_FLAGS], ids=[i for i, _, _ in BAD_FLAGS])
def test_bad_flags_exit_non_zero_with_one_line_naming_the_key(args: list[str], key: str) -> None:
    base = [] if "--manifests" in args else ["--manifests", str(EXAMPLE)]
    r = run_serve(*base, "--status-listen", "none", *args)
    assert r.returncode == 2  # a bad config exits 2 before anything is touched (docs/node.md)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert key in lines[0]
    assert "Traceback" not in r.stderr


BAD_CONFIGS: list[tuple[str, str, str]] = [
    ("unknown-key", "manifests: {example}\nlisten: 127.0.0.1:5353\nbogus-key: 1\n", "bogus-key"),
    ("bad-ttl", "manifests: {example}\nttl: 2h\n", "ttl"),
    ("bad-pods", "manifests: {example}\npods: sometimes\n", "pods"),
    ("list-for-a-single-value", "manifests: {example}\nttl: [1s, 2s]\n", "ttl"),
    ("not-a-mapping", "- just\n- a list\n", "config"),
    ("not-yaml", "ttl: [unclosed\n", "config"),
    ("nested-config", "config: other.yaml\n", "config"),
    ("bad-filter-aaaa", "manifests: {example}\nfilter-aaaa: 6\n", "filter-aaaa"),
    ("filter-aaaa-list", "manifests: {example}\nfilter-aaaa: [on, off]\n", "filter-aaaa"),
    ("bad-cache-min-ttl", "manifests: {example}\ncache-min-ttl: -1s\n", "cache-min-ttl"),
    ("bad-stale-nxdomain", "manifests: {example}\nstale-nxdomain: yes\n", "stale-nxdomain"),
    ("hosts-a-mapping", "manifests: {example}\nhosts: {{file: /etc/hosts}}\n", "hosts"),
    ("hosts-a-number", "manifests: {example}\nhosts: [42]\n", "hosts"),
    ("hosts-empty-path", "manifests: {example}\nhosts: ['']\n", "hosts"),
]


@pytest.mark.parametrize(("text", "key"), [(t, k) for _, t, k in BAD_CONFIGS], ids=[i for i, _, _ in BAD_CONFIGS])
def test_bad_config_files_exit_non_zero_with_one_line_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    cfg = write(tmp_path, "nodedns.yaml", text.format(example=EXAMPLE))
    r = run_serve("--config", cfg, "--status-listen", "none")
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert key in lines[0]


def test_unreadable_config_file_names_the_config_key() -> None:
    r = run_serve("--config", "/nonexistent/nodedns.yaml")
    assert r.returncode != 0
    (line,) = r.stderr.strip().splitlines()
    assert "config" in line and "/nonexistent/nodedns.yaml" in line


def test_unparseable_manifest_exits_non_zero_naming_manifests(tmp_path: Path) -> None:
    manifest = write(tmp_path, "broken.yaml", "kind: List\nitems: [\n  {unclosed\n")
    r = run_serve("--manifests", manifest, "--listen", f"127.0.0.1:{free_port()}", "--status-listen", "none")
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert "manifests" in last and "broken.yaml" in last
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("command", [[], ["serve"], ["resolv-conf"], ["lookup"], ["explain"]],
                         ids=lambda c: " ".join(c) or "nodedns")
def test_every_help_page_prints(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from nodedns.cli import main

    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: nodedns")
    if command == ["serve"]:
        assert "--query-log PERCENT   log this share of queries (e.g. 1%)" in out  # a literal % in a help text


# ----------------------------------------------------------------------------------------------
# Listeners that cannot listen: the flag, the address and what is missing, in one line

def _without_net_bind_service(argv: list[str]) -> list[str]:
    """argv run without the NET_BIND_SERVICE capability: root drops it (capsh); anyone else has none."""
    if os.geteuid() != 0:
        return argv
    capsh = shutil.which("capsh")
    if capsh is None:
        pytest.skip("capsh (libcap2-bin) is not installed: root cannot drop NET_BIND_SERVICE here")
    return [capsh, "--drop=cap_net_bind_service", "--", "-c", shlex.join(argv)]


@pytest.mark.parametrize(("flags", "flag", "where"), [
    (["--listen", "127.0.0.1:530"], "--listen", "127.0.0.1:530"),
    (["--status-listen", "127.0.0.1:253"], "--status-listen", "127.0.0.1:253"),
], ids=["dns-listener", "status-listener"])
def test_a_privileged_port_refused_names_the_address_and_what_is_missing(flags: list[str], flag: str,
                                                                          where: str) -> None:
    argv = nodedns_cmd("serve", "--manifests", str(EXAMPLE), "--upstream", "none", "--debug-listen", "none",
                       "--status-listen", "none", "--listen", f"127.0.0.1:{free_port()}", *flags)
    r = subprocess.run(_without_net_bind_service(argv), env=subprocess_env(), capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"nodedns: cannot start: {flag} {where}: permission denied: "), last
    assert "NET_BIND_SERVICE" in last and f"give {flag} a port >= 1024" in last, last
    assert "Traceback" not in r.stderr


def test_a_taken_status_port_is_fatal_naming_the_flag_and_the_address() -> None:
    blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    try:
        port = blocker.getsockname()[1]
        r = run_serve("--manifests", str(EXAMPLE), "--upstream", "none", "--listen", f"127.0.0.1:{free_port()}",
                      "--status-listen", f"127.0.0.1:{port}", "--debug-listen", "none")
    finally:
        blocker.close()
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"nodedns: cannot start: --status-listen 127.0.0.1:{port}: address in use: "), last
    assert "give --status-listen another address" in last and "Errno" not in last, last


def test_a_taken_debug_port_is_a_warning_and_the_cli_names_the_agent_that_answers(tmp_path: Path) -> None:
    """Two quick-start agents on one machine: the second serves DNS without its debug listener and says
    so with the flag and the URL; `nodedns lookup`, `explain` and `top` at that URL say which agent
    answered them (the first: its pid and DNS address), so nobody mistakes it for the second."""
    from tests.support.agentproc import AgentProcess

    with AgentProcess(["--manifests", str(EXAMPLE)], log=tmp_path / "first.log") as first:
        first.wait_ready()
        second = AgentProcess(["--manifests", str(EXAMPLE)], log=tmp_path / "second.log")
        second.debug_port = first.debug_port
        second.args[second.args.index("--debug-listen") + 1] = f"127.0.0.1:{first.debug_port}"
        with second:
            second.wait_ready()
            url = f"http://127.0.0.1:{first.debug_port}"
            warning = [line for line in second.log_text().splitlines() if "debug listener" in line]
            assert len(warning) == 1 and "WARNING" in warning[0], second.log_text()
            assert f"--debug-listen {url}: address in use" in warning[0]
            assert "talk to whatever listens there, not to this agent" in warning[0]
            named = f"pid {first.pid}, DNS 127.0.0.1:{first.port} (debug listener {url})"
            for command in (["lookup", "web.default.svc.cluster.local"], ["top"],
                            ["explain", "web", "--pod", str(ROOT / "examples" / "explain" / "batch.yaml")]):
                r = subprocess.run(nodedns_cmd(*command, "--debug", url), env=subprocess_env(), capture_output=True,
                                   text=True, timeout=30)
                assert r.returncode == 0, r.stderr
                assert r.stdout.splitlines()[0].startswith("agent:    node ") and named in r.stdout.splitlines()[0]
                assert not re.search(rf"pid\W+{second.pid}\b", r.stdout.splitlines()[0])  # not a port of that number
                r = subprocess.run(nodedns_cmd(*command, "--debug", url, "--json"), env=subprocess_env(),
                                   capture_output=True, text=True, timeout=30)
                agent = json.loads(r.stdout)["agent"]
                assert agent["pid"] == first.pid and agent["dns"] == [f"127.0.0.1:{first.port}"] and agent["node"]
