"""Every reader of a file that can change under the agent survives any byte: the upstream resolv.conf, the
kube-dns ConfigMap directory, the node's resolv.conf the Pod resolv.conf files are rendered from, the
--config YAML at start, manifests. A bad file is logged once with the reason, the last good state is
kept, the task that reads it never ends, and the failure shows in /status and /metrics."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodedns import config as cfgmod
from nodedns.cluster import manifests
from nodedns.errors import ConfigError, ManifestError, NodednsError
from nodedns.forward.routes import ConfigWatcher, RouteSources, read_config_text
from nodedns.forward.upstream import Forwarder, Routes
from nodedns.podconf import resolvconf
from nodedns.podconf.noderesolv import HostFile, read_host_text
from nodedns.podconf.resolvhttp import handle_http
from tests.support import manifests as m
from tests.support.apiserver import FakeApiServer
from tests.support.helpers import EXAMPLE, running_agent, wait_for
from tests.support.shipped import ShippedAgent, cluster
from tests.support.upstream_double import UpstreamDouble

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# bytes around the shapes the readers look for, so the fuzz reaches past the first check
LINES = st.sampled_from([b"nameserver 127.0.0.1\n", b"nameserver ::1\n", b"search a.example b\n", b"options ndots:2\n",
                         b"nameserver\n", b"# comment\n", b'{"a.example": ["127.0.0.1"]}', b'["127.0.0.1:5353"]',
                         b"fed=example.com", b"\xff", b"\x00", b"\xc3\x28", b"\xed\xa0\x80", b"[" * 200, b"\n"])
FILES = st.one_of(st.binary(max_size=512),
                  st.lists(st.one_of(LINES, st.binary(max_size=16)), max_size=12).map(b"".join))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# ----------------------------------------------------------------------------------------------
# The upstream sources (resolv.conf, the kube-dns ConfigMap)


@FUZZ
@given(FILES)
def test_the_upstream_resolv_conf_reader_gives_text_or_a_config_error_for_any_bytes(tmp_path: Path,
                                                                                     data: bytes) -> None:
    path = tmp_path / "resolv.conf"
    path.write_bytes(data)
    sources = RouteSources(resolv_conf=str(path))
    try:
        sources.build(sources.snapshot())
    except ConfigError:
        pass


@FUZZ
@given(st.tuples(FILES, FILES, FILES))
def test_the_kube_dns_configmap_readers_give_routes_or_a_config_error_for_any_bytes(tmp_path: Path,
                                                                                   files: tuple[bytes, ...]) -> None:
    for name, data in zip(("stubDomains", "upstreamNameservers", "federations"), files, strict=True):
        (tmp_path / name).write_bytes(data)
    sources = RouteSources(upstream=(("127.0.0.1", 53),), kube_dns_dir=str(tmp_path))
    try:
        snap = sources.snapshot()
        sources.build(snap)
        sources.federations(snap)
    except ConfigError:
        pass


def test_a_non_utf8_byte_names_the_file_the_byte_and_its_offset(tmp_path: Path) -> None:
    path = tmp_path / "resolv.conf"
    path.write_bytes(b"nameserver 127.0.0.1\n# caf\xe9\n")
    with pytest.raises(ConfigError) as err:
        read_config_text(str(path), "upstream-resolv-conf")
    assert err.value.key == "upstream-resolv-conf"
    assert "not UTF-8" in str(err.value) and "0xe9" in str(err.value) and "offset 26" in str(err.value)


@FUZZ
@given(st.lists(FILES, min_size=1, max_size=4))
def test_the_upstream_config_task_keeps_the_last_good_routes_through_any_bytes_and_applies_the_next_good_file(
        tmp_path: Path, bad_files: list[bytes]) -> None:
    path = tmp_path / "resolv.conf"
    path.write_text("nameserver 127.0.0.7\n")
    sources = RouteSources(resolv_conf=str(path))
    snap = sources.snapshot()
    forwarder = Forwarder(routes=sources.build(snap))
    watcher = ConfigWatcher(sources, forwarder, snapshot=snap)

    async def main() -> None:
        for data in bad_files:
            path.write_bytes(data)
            await watcher.poll_once()  # never raises
            assert forwarder.routes().root in ((("127.0.0.7", 53),), forwarder.routes().root)
        path.write_text("nameserver 127.0.0.9\n")
        await watcher.poll_once()
        assert forwarder.routes().root == (("127.0.0.9", 53),)
        assert watcher.status()["conditions"] == [] and watcher.status()["invalid"] is False

    run(main())


def test_a_bad_upstream_file_is_logged_once_and_shows_as_a_condition_until_fixed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "resolv.conf"
    path.write_text("nameserver 127.0.0.7\n")
    sources = RouteSources(resolv_conf=str(path))
    snap = sources.snapshot()
    forwarder = Forwarder(routes=sources.build(snap))
    watcher = ConfigWatcher(sources, forwarder, snapshot=snap)

    async def main() -> None:
        path.write_bytes(b"nameserver 127.0.0.8\n\xff\n")
        with caplog.at_level(logging.ERROR, logger="nodedns.upstream"):
            for _ in range(5):  # re-read every period: the same bad file is one error
                await watcher.poll_once()
        status = watcher.status()
        assert status["errors"] == 1 and status["invalid"] is True
        assert [c["type"] for c in status["conditions"]] == ["UpstreamConfigInvalid"]
        assert "not UTF-8" in status["conditions"][0]["message"]
        assert forwarder.routes().root == (("127.0.0.7", 53),)
        assert len([r for r in caplog.records if "invalid upstream config" in r.getMessage()]) == 1
        path.unlink()  # another problem: a new error
        await watcher.poll_once()
        await watcher.poll_once()
        assert watcher.status()["errors"] == 2

    run(main())


def test_an_unexpected_failure_while_reading_is_counted_and_the_task_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "resolv.conf"
    path.write_text("nameserver 127.0.0.7\n")
    sources = RouteSources(resolv_conf=str(path))
    snap = sources.snapshot()
    forwarder = Forwarder(routes=sources.build(snap))

    class Broken(RouteSources):
        def build(self, snapshot: tuple[str | None, ...]) -> Routes:
            raise RuntimeError("a bug")

    watcher = ConfigWatcher(Broken(resolv_conf=str(path)), forwarder, snapshot=snap, period=0.01)

    async def main() -> None:
        path.write_text("nameserver 127.0.0.8\n")
        task = asyncio.ensure_future(watcher.run())
        for _ in range(100):
            await asyncio.sleep(0.01)
            if watcher.errors:
                break
        assert not task.done() and watcher.errors == 1 and "RuntimeError: a bug" in watcher.last_error
        task.cancel()

    run(main())


def test_the_agents_upstream_config_survives_a_non_utf8_byte_and_takes_the_next_good_file(tmp_path: Path) -> None:
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver 127.0.0.254\n")
    raw = {"manifests": str(EXAMPLE), "upstream-resolv-conf": str(conf), "kube-dns-config-period": "100ms",
           "status-listen": "127.0.0.1:0", "debug-listen": "127.0.0.1:0"}
    with running_agent(raw) as agent:
        fw = agent.agent.forwarder
        assert fw is not None

        def upstreams() -> list[str]:
            return [u["to"] for u in agent.call(fw.status)["upstreams"]]

        conf.write_bytes(b"nameserver 127.0.0.253\n# r\xe9solveur\n")
        wait_for(lambda: _status(agent.debug_url)["upstream_config"]["invalid"], what="the bad file seen")
        doc = _status(agent.debug_url)
        assert doc["upstream_config"]["conditions"][0]["type"] == "UpstreamConfigInvalid"
        assert doc["ready"] is True  # the previous config still forwards: not a reason to be unready
        assert upstreams() == ["127.0.0.254:53"]
        metrics = _get(agent.status_url + "/metrics")
        assert "nodedns_upstream_config_invalid 1.0" in metrics
        assert "nodedns_upstream_config_errors_total 1.0" in metrics
        conf.write_text("nameserver 127.0.0.253\n")
        wait_for(lambda: upstreams() == ["127.0.0.253:53"], what="the next good file applied")
        # /status is rendered at most every 250 ms under load: poll it
        wait_for(lambda: _status(agent.debug_url)["upstream_config"]["conditions"] == [], what="the condition gone")


def test_every_worker_of_the_shipped_agent_takes_a_good_configmap_after_a_non_utf8_one(tmp_path: Path) -> None:
    kube_dns = tmp_path / "kube-dns"
    kube_dns.mkdir()
    with FakeApiServer() as api, UpstreamDouble({"www.example.com": {"A": ["192.0.2.1"]}}) as first, \
            UpstreamDouble({"www.example.com": {"A": ["192.0.2.2"]}}) as second:
        cluster(api)
        (kube_dns / "upstreamNameservers").write_text(json.dumps([first.address]))
        with ShippedAgent(tmp_path, api, first, **{"kube-dns-config-dir": str(kube_dns),
                                                   "kube-dns-config-period": "200ms", "cache-success": "0",
                                                   "cache-denial": "0"}) as agent:
            agent.wait_ready()
            assert _answers(agent.port, 20) == {"192.0.2.1"}
            (kube_dns / "upstreamNameservers").write_bytes(b'["' + second.address.encode() + b'"]\xff')
            wait_for(lambda: agent.metric("nodedns_upstream_config_invalid") == 1, timeout=10, what="seen as bad")
            assert _answers(agent.port, 20) == {"192.0.2.1"}  # the last good config, in both workers
            assert agent.get("/readyz")[0] == 200
            (kube_dns / "upstreamNameservers").write_text(json.dumps([second.address]))
            # fresh source ports spread the queries over both workers: each must have taken the new file
            wait_for(lambda: _answers(agent.port, 20) == {"192.0.2.2"}, timeout=10, what="every worker reloaded")
            wait_for(lambda: agent.metric("nodedns_upstream_config_invalid") == 0, what="the condition gone")
            assert "Traceback" not in agent.log.read_text()


def _answers(port: int, n: int) -> set[str]:
    import dns.message
    import dns.query

    out = set()
    for _ in range(n):
        r = dns.query.udp(dns.message.make_query("www.example.com", "A"), "127.0.0.1", port=port, timeout=3)
        assert r.rcode() == dns.rcode.NOERROR, r
        out.update(rd.to_text() for rrset in r.answer for rd in rrset)
    return out


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - our own loopback URL
        return str(resp.read().decode())


def _status(debug_url: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_get(debug_url + "/status"))
    return doc


# ----------------------------------------------------------------------------------------------
# The node's resolv.conf (Pod resolv.conf rendering)


SETTINGS = resolvconf.KubeletDNS(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local")
POD = json.dumps({"metadata": {"name": "p", "namespace": "default"},
                  "spec": {"dnsPolicy": "Default", "containers": [{"name": "c"}]}}).encode()


@FUZZ
@given(FILES)
def test_the_host_resolv_conf_reader_takes_any_bytes_and_the_renderer_answers(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "resolv.conf"
    path.write_bytes(data)
    text = read_host_text(str(path))
    reply = handle_http(POD, SETTINGS, text)
    assert reply.status in (200, 400, 422, 500)
    reply.body.encode("utf-8", "surrogateescape")  # what the HTTP layer sends
    try:
        resolvconf.parse_host_resolv_conf(text)
    except NodednsError:
        pass


def test_the_host_resolv_conf_is_read_again_and_an_unreadable_one_keeps_the_last_text(tmp_path: Path) -> None:
    path = tmp_path / "resolv.conf"
    path.write_text("nameserver 192.0.2.53\nsearch corp.example\n")
    seen: list[str | None] = []
    host = HostFile(str(path), on_change=seen.append)

    async def main() -> None:
        assert await host.load() == "nameserver 192.0.2.53\nsearch corp.example\n"
        path.write_bytes(b"nameserver 192.0.2.54\nsearch caf\xe9.example\n")  # the kubelet takes bytes: so do we
        assert await host.poll_once()
        assert host.text is not None and "192.0.2.54" in host.text and host.status()["conditions"] == []
        path.unlink()
        path.mkdir()  # now unreadable
        for _ in range(3):
            assert not await host.poll_once()
        status = host.status()
        assert [c["type"] for c in status["conditions"]] == ["HostResolvConfUnreadable"]
        assert status["errors"] == 1 and host.text is not None and "192.0.2.54" in host.text
        path.rmdir()
        path.write_text("nameserver\n")  # the kubelet refuses this one: taken all the same, and said so
        assert await host.poll_once()
        assert [c["type"] for c in host.status()["conditions"]] == ["HostResolvConfUnusable"]
        assert host.status()["changes"] == 2 and host.status()["errors"] == 2

    run(main())
    assert len(seen) == 3


def test_the_agent_renders_pod_resolv_conf_from_the_hosts_file_as_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "host-resolv.conf"
    path.write_text("nameserver 192.0.2.53\nsearch corp.example\n")
    raw = {"manifests": str(EXAMPLE), "host-resolv-conf": str(path), "kube-dns-config-period": "100ms",
           "debug-listen": "127.0.0.1:0", "cluster-dns": "10.96.0.10"}
    with running_agent(raw) as agent:
        def rendered() -> str:
            import urllib.request

            req = urllib.request.Request(agent.debug_url + "/v1/resolv-conf", data=POD, method="POST")
            with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310 - our own loopback URL
                return str(resp.read().decode())

        assert "nameserver 192.0.2.53" in rendered()
        path.write_bytes(b"nameserver 192.0.2.99\n\xff\n")
        wait_for(lambda: "nameserver 192.0.2.99" in rendered(), what="the new host file rendered")
        wait_for(lambda: _status(agent.debug_url)["host_resolv_conf"]["changes"] == 1, what="the change counted")


# ----------------------------------------------------------------------------------------------
# --config at start, manifests


@FUZZ
@given(FILES)
def test_a_config_file_with_any_bytes_is_a_config_or_a_config_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(data)
    try:
        cfgmod.from_sources({"config": str(path)}, environ={})
    except ConfigError as exc:
        assert exc.key  # names the key
    except NodednsError as exc:  # pragma: no cover - the message says which
        raise AssertionError(f"not a ConfigError: {exc!r}") from exc


def test_a_config_file_that_is_not_utf8_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"cluster-domain: cluster.local\nlog-level: d\xe9bug\n")
    with pytest.raises(ConfigError, match=r"config: .* is not UTF-8 text \(byte 0xe9 at offset 42\)"):
        cfgmod.load_file(str(path))


@FUZZ
@given(FILES)
def test_a_manifest_with_any_bytes_loads_or_is_a_manifest_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_bytes(data)
    try:
        list(manifests.read(str(path)))
    except ManifestError:
        pass


def test_a_manifest_with_a_non_utf8_byte_is_a_manifest_error_naming_it(tmp_path: Path) -> None:
    path = m.write(tmp_path / "cluster.yaml", [m.namespace("default")])
    path.write_bytes(path.read_bytes() + b"# \xff\n")
    with pytest.raises(ManifestError, match="not UTF-8"):
        list(manifests.read(str(path)))
