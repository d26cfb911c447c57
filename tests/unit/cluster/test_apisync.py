"""The API watch loop (nodedns.cluster.apisync) against the API server double: every branch of list and watch."""

from __future__ import annotations

import asyncio
import ctypes
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3

from nodedns.cluster import apisync, kubeapi, watcher
from nodedns.cluster import index as index_mod
from nodedns.errors import ApiError, ApiGone, ApiUnauthorized, ConfigError
from tests.support.apiserver import FakeApiServer, Fault, endpoint_slice, namespace, pod, service
from tests.support.helpers import ROOT, subprocess_env
from tests.support.kube_sync import eventually, syncing

TOKEN = "token-1"


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(tokens={TOKEN}) as server:
        server.put("Namespace", namespace("default"))
        server.put("Service", service("default", "web", ["10.96.0.10"]))
        yield server


@pytest.fixture
def kubeconfig(api: FakeApiServer, tmp_path: Path) -> str:
    return api.write_kubeconfig(tmp_path / "kubeconfig", token=TOKEN)


def state(sync: apisync.KubeSync, resource: str = "services") -> dict[str, Any]:
    result: dict[str, Any] = sync.status()["resources"][resource]
    return result


# -- list ----------------------------------------------------------------------------------------


async def test_list_from_the_watch_cache_fills_the_index_in_one_piece(api: FakeApiServer, kubeconfig: str) -> None:
    for i in range(1, 1200):
        api.put("Service", service("default", f"svc-{i}", [f"10.97.{i // 256}.{i % 256}"]))
    async with syncing(kubeconfig) as (index, sync):
        assert index.synced
        assert len(index.services) == 1200
        lists = api.requests_for("services", "list") + api.requests_for("services", "continue")
        assert [(r.query["resourceVersion"], r.query["limit"]) for r in lists] == [("0", "500")]
        assert [r.cost for r in lists] == ["watch-cache"]
        watch = api.requests_for("services", "watch")[0]
        assert watch.query["allowWatchBookmarks"] == "true"
        assert int(watch.query["resourceVersion"]) >= 1200


async def test_a_server_that_pages_cached_lists_is_followed_through_its_continue_tokens(
        tmp_path: Path) -> None:
    with FakeApiServer(page_cached_lists=True) as paging:
        for i in range(1, 1200):
            paging.put("Service", service("default", f"svc-{i}", [f"10.97.{i // 256}.{i % 256}"]))
        async with syncing(paging.write_kubeconfig(tmp_path / "paging")) as (index, sync):
            assert len(index.services) == 1199
            lists = paging.requests_for("services", "list") + paging.requests_for("services", "continue")
            assert [r.query["limit"] for r in lists] == ["500", "500", "500"]
            assert [bool(r.query.get("continue")) for r in lists] == [False, True, True]
            assert [r.query.get("resourceVersion") for r in lists] == ["0", None, None]
            assert sync.status()["synced"] is True


async def test_index_is_not_synced_until_every_resource_is_listed(api: FakeApiServer, kubeconfig: str) -> None:
    api.inject("endpointslices", "list", Fault(delay=0.5))
    async with syncing(kubeconfig, wait=False) as (index, sync):
        await eventually(lambda: state(sync)["synced"], what="services listed")
        assert not index.synced
        assert not sync.status()["synced"]
        async with asyncio.timeout(5):
            await sync.wait_synced()
        assert index.synced


async def test_expired_continue_token_restarts_the_list(tmp_path: Path) -> None:
    with FakeApiServer(page_cached_lists=True) as paging:
        for i in range(1, 600):
            paging.put("Service", service("default", f"svc-{i}", [f"10.97.{i // 256}.{i % 256}"]))
        paging.inject("services", "continue", Fault(status=410))
        async with syncing(paging.write_kubeconfig(tmp_path / "paging")) as (index, sync):
            assert len(index.services) == 599
            assert [r.query.get("resourceVersion") for r in paging.requests_for("services", "list")] == ["0", "0"]
            assert state(sync)["gone"] == 1


# -- watch events --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda api: api.put("Service", service("default", "api", ["10.96.0.11"])), {"web": "10.96.0.10",
                                                                                     "api": "10.96.0.11"}),
        (lambda api: api.put("Service", service("default", "web", ["10.96.0.99"])), {"web": "10.96.0.99"}),
        (lambda api: api.delete("Service", "default", "web"), {}),
    ],
    ids=["added", "modified", "deleted"],
)
async def test_watch_events_change_the_index(
    api: FakeApiServer, kubeconfig: str, change: Callable[[FakeApiServer], Any], expected: dict[str, str]
) -> None:
    async with syncing(kubeconfig) as (index, sync):
        generation = index.generation
        rv = change(api)

        def current() -> dict[str, str]:
            return {name: svc.cluster_ips[0] for (_, name), svc in index.services.items()}

        await eventually(lambda: current() == expected, what=f"index == {expected}")
        assert index.generation > generation
        assert state(sync)["resource_version"] == str(rv)


async def test_bookmarks_move_the_resource_version(tmp_path: Path) -> None:
    with FakeApiServer(bookmark_interval=0.05) as api:
        api.put("Service", service("default", "web", ["10.96.0.10"]))
        kc = api.write_kubeconfig(tmp_path / "kc")
        async with syncing(kc) as (_, sync):
            api.put("Namespace", namespace("other"))  # moves the global resourceVersion, not the services'
            await eventually(lambda: state(sync)["bookmarks"] > 0 and state(sync)["resource_version"] == str(api.rv),
                             what="a bookmark with the newest resourceVersion")
            assert state(sync)["events"] == 0
            assert state(sync)["seconds_since_event"] is not None
            api.kick("services")
            await eventually(lambda: len(api.requests_for("services", "watch")) == 2, what="a new watch")
            assert api.requests_for("services", "watch")[1].query["resourceVersion"] == str(api.rv)


async def test_clean_end_of_stream_watches_again_from_the_last_resource_version(
    api: FakeApiServer, kubeconfig: str
) -> None:
    timing = watcher.Timing(watch_timeout=1, read_slack=1, backoff_initial=5, backoff_max=5)  # back-off would show
    async with syncing(kubeconfig, timing=timing) as (_, sync):
        rv = api.put("Service", service("default", "api", ["10.96.0.11"]))
        await eventually(lambda: state(sync)["watches"] >= 2, within=6, what="the stream to time out")
        assert state(sync)["errors"] == 0
        assert api.requests_for("services", "watch")[-1].query["resourceVersion"] == str(rv)
        assert int(api.requests_for("services", "watch")[0].query["timeoutSeconds"]) in (1, 2)


async def test_streams_that_end_at_once_and_empty_are_retried_with_backoff(
    api: FakeApiServer, kubeconfig: str
) -> None:
    timing = watcher.Timing(watch_timeout=30, backoff_initial=0.4, backoff_max=0.4)
    async with syncing(kubeconfig, timing=timing) as (index, sync):
        api.inject("services", "watch", Fault(body=b""), times=3)  # 200, then the stream ends at once
        api.kick("services")
        started = time.monotonic()
        await eventually(lambda: state(sync)["watches"] == 5 and state(sync)["connected"], what="the fifth watch")
        assert time.monotonic() - started >= 0.5  # three back-offs of 0.2-0.4 s, not a tight loop
        assert state(sync)["errors"] == 1  # only the kick; empty streams are not errors
        rv = api.put("Service", service("default", "api", ["10.96.0.11"]))
        await eventually(lambda: state(sync)["resource_version"] == str(rv), what="the event")


@pytest.mark.parametrize("gone_as_http", [False, True], ids=["error-event-410", "http-410"])
async def test_gone_relists_and_removes_objects_deleted_meanwhile(tmp_path: Path, gone_as_http: bool) -> None:
    with FakeApiServer(gone_as_http=gone_as_http) as api:
        api.put("Namespace", namespace("default"))
        api.put("Service", service("default", "web", ["10.96.0.10"]))
        api.put("Service", service("default", "old", ["10.96.0.12"]))
        kc = api.write_kubeconfig(tmp_path / "kc")
        async with syncing(kc) as (index, sync):
            assert set(n for _, n in index.services) == {"web", "old"}
            api.inject("services", "watch", Fault(delay=0.5))  # the reconnect waits: the changes below are missed
            assert api.kick("services") == 1
            api.delete("Service", "default", "old")
            api.put("Service", service("default", "new", ["10.96.0.13"]))
            api.compact()
            await eventually(lambda: set(n for _, n in index.services) == {"web", "new"}, what="the relist")
            assert state(sync)["gone"] == 1
            assert state(sync)["relists"] == 1
            assert index.synced  # a relist never goes back to SERVFAIL


async def test_repeated_gone_backs_off(api: FakeApiServer, kubeconfig: str) -> None:
    async with syncing(kubeconfig) as (_, sync):
        api.inject("services", "watch", Fault(error_event=410), times=3)
        api.kick("services")
        await eventually(lambda: state(sync)["gone"] == 3 and state(sync)["connected"], what="three relists")
        # the dropped connection, then: the first Gone relists at once, the repeats count and back off
        assert state(sync)["errors"] == 3
        assert state(sync)["relists"] == 3


# -- failures --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verb", "fault"),
    [
        ("list", Fault(status=500)),
        ("list", Fault(status=429)),
        ("watch", Fault(status=500)),
        ("watch", Fault(error_event=500)),
    ],
    ids=["list-500", "list-429", "watch-500", "watch-error-event-500"],
)
async def test_server_errors_are_counted_and_retried(
    api: FakeApiServer, kubeconfig: str, verb: str, fault: Fault
) -> None:
    api.inject("services", verb, fault, times=2)
    async with syncing(kubeconfig) as (index, sync):
        rv = api.put("Service", service("default", "api", ["10.96.0.11"]))
        await eventually(lambda: ("default", "api") in index.services, what="the event after the errors")
        assert state(sync)["errors"] == 2
        assert state(sync)["relists"] == 0
        assert state(sync)["resource_version"] == str(rv)
        assert str(fault.status or fault.error_event) in state(sync)["last_error"]


@pytest.mark.parametrize(
    ("verb", "body", "message"),
    [
        ("list", b"<html>proxy error</html>", "malformed list response"),
        ("list", b'{"kind":"ServiceList","metadata":{},"items":[]}', "without metadata.resourceVersion"),
        ("list", b'{"kind":"ServiceList","metadata":{"resourceVersion":"5"},"items":{}}', "malformed list"),
        ("watch", b"this is not json\n", "malformed watch event"),
        ("watch", b'{"type":"ADDED","object":[]}\n', "without an object"),
        ("watch", b'{"type":"SURPRISE","object":{"metadata":{"resourceVersion":"9"}}}\n', "unknown watch event"),
    ],
    ids=["list-not-json", "list-without-resource-version", "list-items-not-a-list", "watch-line-not-json",
         "watch-object-not-an-object", "watch-unknown-type"],
)
async def test_malformed_responses_are_errors_that_are_retried(
    api: FakeApiServer, kubeconfig: str, verb: str, body: bytes, message: str
) -> None:
    api.inject("services", verb, Fault(body=body))
    async with syncing(kubeconfig) as (index, sync):
        rv = api.put("Service", service("default", "api", ["10.96.0.11"]))
        await eventually(lambda: ("default", "api") in index.services, what="the event after the bad response")
        assert state(sync)["errors"] == 1
        assert message in state(sync)["last_error"]
        assert state(sync)["resource_version"] == str(rv)


async def test_slow_responses_within_the_timeout_are_waited_for(api: FakeApiServer, kubeconfig: str) -> None:
    api.inject("services", "list", Fault(delay=0.3))
    api.inject("services", "watch", Fault(delay=0.3))
    async with syncing(kubeconfig) as (index, sync):
        api.put("Service", service("default", "api", ["10.96.0.11"]))
        await eventually(lambda: ("default", "api") in index.services, what="the event")
        assert state(sync)["errors"] == 0


async def test_list_slower_than_the_request_timeout_is_retried(api: FakeApiServer, kubeconfig: str) -> None:
    timing = watcher.Timing(watch_timeout=30, request_timeout=0.3, backoff_initial=0.05, backoff_max=0.1)
    api.inject("services", "list", Fault(delay=1.0))
    async with syncing(kubeconfig, timing=timing) as (index, sync):
        assert ("default", "web") in index.services
        assert state(sync)["errors"] == 1
        assert "timed out" in state(sync)["last_error"].lower()


async def test_dropped_connection_resumes_from_the_last_resource_version(
    api: FakeApiServer, kubeconfig: str
) -> None:
    api.inject("services", "watch", Fault(drop_after=1))
    async with syncing(kubeconfig) as (index, sync):
        rv1 = api.put("Service", service("default", "one", ["10.96.0.21"]))
        await eventually(lambda: state(sync)["errors"] == 1, what="the drop")
        rv2 = api.put("Service", service("default", "two", ["10.96.0.22"]))
        await eventually(lambda: ("default", "two") in index.services, what="the event after the drop")
        assert ("default", "one") in index.services
        assert api.requests_for("services", "watch")[1].query["resourceVersion"] == str(rv1)
        assert state(sync)["resource_version"] == str(rv2)
        assert state(sync)["relists"] == 0


async def test_silent_stream_is_dropped_after_the_read_timeout(api: FakeApiServer, kubeconfig: str) -> None:
    timing = watcher.Timing(watch_timeout=1, read_slack=0.5, backoff_initial=0.05, backoff_max=0.1)
    api.inject("services", "watch", Fault(stall=30))
    async with syncing(kubeconfig, timing=timing) as (index, sync):
        started = time.monotonic()
        api.put("Service", service("default", "api", ["10.96.0.11"]))
        await eventually(lambda: ("default", "api") in index.services, within=6, what="the event after the stall")
        assert 1.0 <= time.monotonic() - started < 6  # the read timeout: timeoutSeconds (1 or 2) + 0.5 s slack
        assert state(sync)["errors"] == 1
        assert "timed out" in state(sync)["last_error"].lower()


async def test_rotated_token_is_picked_up_after_401(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("old-token")
    with FakeApiServer(tokens={"old-token"}) as api:
        api.put("Service", service("default", "web", ["10.96.0.10"]))
        kc = api.write_kubeconfig(tmp_path / "kc", token_file=str(token_file))
        async with syncing(kc) as (index, sync):
            token_file.write_text("new-token")
            api.set_tokens({"new-token"})
            api.kick()
            api.put("Service", service("default", "api", ["10.96.0.11"]))
            await eventually(lambda: ("default", "api") in index.services, what="the event with the new token")
            assert sync.status()["credential_reloads"] >= 1
            assert api.requests_for("services", "watch")[-1].token == "new-token"
            # the first watcher back met the 401 and reloaded the shared credentials for all
            assert any("401" in r["last_error"] for r in sync.status()["resources"].values())
            assert any(r.token == "old-token" for r in api.requests_for("services") + api.requests_for("pods"))


async def test_invalid_objects_are_skipped_and_counted(api: FakeApiServer, kubeconfig: str) -> None:
    async with syncing(kubeconfig) as (index, sync):
        api.put("Service", service("default", "bad", ["not-an-ip"]))
        api.put("Service", service("default", "good", ["10.96.0.11"]))
        await eventually(lambda: ("default", "good") in index.services, what="the valid object")
        assert ("default", "bad") not in index.services
        assert state(sync)["skipped"] == 1
        assert index.skipped == 1


async def test_outage_keeps_the_index_and_reports_staleness(tmp_path: Path) -> None:
    api = FakeApiServer().start()
    try:
        api.put("Namespace", namespace("default"))
        api.put("Service", service("default", "web", ["10.96.0.10"]))
        kc = api.write_kubeconfig(tmp_path / "kc")
        async with syncing(kc) as (index, sync):
            assert sync.status()["stale_seconds"] == 0.0
            api.stop()
            await eventually(lambda: sync.status()["stale_seconds"] > 0.3 and not any(
                r["connected"] for r in sync.status()["resources"].values()), what="staleness to grow")
            assert index.services[("default", "web")].cluster_ips == ("10.96.0.10",)
            assert index.synced
            status = sync.status()
            assert not state(sync)["connected"]
            assert state(sync)["errors"] >= 1
            assert state(sync)["seconds_since_contact"] >= 0.3
            assert status["resources"]["namespaces"]["seconds_since_contact"] >= 0.3
    finally:
        api.stop()


# -- pods --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "node", "selector", "pods"),
    [
        ("insecure", "node-a", "spec.nodeName=node-a", {"a1", "a2"}),
        ("verified", "node-a", None, {"a1", "a2", "b1"}),
        ("disabled", "", None, None),
    ],
    ids=["this-node-only", "verified-all-pods", "no-node-name-no-pods"],
)
async def test_pods_are_watched_per_mode(
    api: FakeApiServer, kubeconfig: str, mode: str, node: str, selector: str | None, pods: set[str] | None
) -> None:
    api.put("Pod", pod("default", "a1", "10.244.0.1", "node-a"))
    api.put("Pod", pod("default", "a2", "10.244.0.2", "node-a"))
    api.put("Pod", pod("default", "b1", "10.244.1.1", "node-b"))
    async with syncing(kubeconfig, pods=mode, node_name=node) as (index, sync):
        if pods is None:
            assert "pods" not in sync.status()["resources"]
            assert api.requests_for("pods") == []
            return
        assert {name for _, name in index.pods} == pods
        for r in api.requests_for("pods"):
            assert r.query.get("fieldSelector") == selector
        api.put("Pod", pod("default", "a3", "10.244.0.3", "node-a"))
        api.put("Pod", pod("default", "b2", "10.244.1.2", "node-b"))
        api.delete("Pod", "default", "a1")
        expected = (pods | {"a3"} | ({"b2"} if mode == "verified" else set())) - {"a1"}
        await eventually(lambda: {name for _, name in index.pods} == expected, what=f"pods == {expected}")


# -- supervision and shutdown ---------------------------------------------------------------------------


async def test_crashed_watcher_is_restarted(
    api: FakeApiServer, kubeconfig: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = index_mod.change_of
    calls = {"n": 0}

    def flaky(kind: str, event: str, obj: Any) -> index_mod.SlimChange:
        if kind == "Service" and event == "ADDED" and obj["metadata"]["name"] == "boom" and calls["n"] == 0:
            calls["n"] += 1
            raise RuntimeError("bug")
        return real(kind, event, obj)

    monkeypatch.setattr(watcher, "change_of", flaky)
    async with syncing(kubeconfig) as (index, sync):
        api.put("Service", service("default", "boom", ["10.96.0.11"]))
        await eventually(lambda: ("default", "boom") in index.services, what="the event after the restart")
        await eventually(lambda: state(sync)["relists"] == 1, what="the relist after the crash")
        assert state(sync)["crashes"] == 1
        assert "bug" in state(sync)["last_error"]


async def test_stop_ends_every_watcher_promptly(api: FakeApiServer, kubeconfig: str) -> None:
    before = {t.name for t in threading.enumerate()}
    async with syncing(kubeconfig) as (_, sync):
        assert {"watch-services", "watch-endpointslices", "watch-namespaces", "watch-pods"} <= {
            t.name for t in threading.enumerate()}
        assert {t.get_name() for t in asyncio.all_tasks()} >= {"watch:services", "watch:pods"}
        started = time.monotonic()
    assert time.monotonic() - started < 2
    await eventually(lambda: not any(t.name.startswith("watch-") for t in threading.enumerate()) or
                     {t.name for t in threading.enumerate()} <= before, what="watcher threads to end")
    assert api.open_watches == 0 or await _watches_close(api)


async def _watches_close(api: FakeApiServer) -> bool:
    await eventually(lambda: api.open_watches == 0, what="the server to see the watches close")
    return True


# -- configuration ---------------------------------------------------------------------------------


def _service_account(directory: Path) -> tuple[str, str, Path]:
    """A self-signed server certificate and a service account directory (token + that CA)."""
    cert, key = directory / "server.crt", directory / "server.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )
    sa = directory / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("sa-token")
    (sa / "ca.crt").write_text(cert.read_text())
    return str(cert), str(key), sa


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command (a Debian package in CI)")
async def test_in_cluster_mode_uses_the_service_account_over_tls(tmp_path: Path) -> None:
    cert, key, sa = _service_account(tmp_path)
    with FakeApiServer(tokens={"sa-token"}, tls=(cert, key)) as api:
        api.put("Service", service("default", "web", ["10.96.0.10"]))
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(api.port)}
        source = kubeapi.ApiSource(service_account_dir=str(sa), environ=env)
        async with syncing("", source=source) as (index, sync):
            assert ("default", "web") in index.services
            assert sync.status()["server"] == f"https://127.0.0.1:{api.port}"
            assert api.requests_for("services")[0].token == "sa-token"
            # the kubelet rotates the projected token: the next 401 makes us read it again
            await asyncio.to_thread((sa / "token").write_text, "sa-token-2")
            api.set_tokens({"sa-token-2"})
            api.kick()
            api.put("Service", service("default", "api", ["10.96.0.11"]))
            await eventually(lambda: ("default", "api") in index.services, what="the event with the rotated token")
            assert api.requests_for("services")[-1].token == "sa-token-2"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kubeconfig": "/nonexistent/kubeconfig"}, "no such file"),
        ({"environ": {}}, "KUBERNETES_SERVICE_HOST is unset"),
        ({"environ": {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
          "service_account_dir": "/nonexistent"}, "token file does not exist"),
    ],
    ids=["missing-kubeconfig", "not-in-a-cluster", "no-service-account"],
)
def test_unusable_sources_are_config_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        kubeapi.ApiSource(**kwargs).load()
    assert err.value.key == "kubeconfig"
    assert message.lower() in str(err.value).lower()


def test_malformed_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text("clusters: [")
    with pytest.raises(ConfigError, match="kubeconfig"):
        kubeapi.ApiSource(kubeconfig=str(path)).load()


# -- pure parts --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "body", "error"),
    [
        (410, b'{"kind":"Status","reason":"Expired","code":410}', ApiGone),
        (500, {"reason": "Expired", "message": "too old"}, ApiGone),
        (401, b"Unauthorized", ApiUnauthorized),
        (500, b'{"message":"boom"}', ApiError),
        (429, b"", ApiError),
    ],
    ids=["http-410", "expired-reason", "401", "500", "429"],
)
def test_status_errors_map_to_the_decision(code: int, body: Any, error: type[ApiError]) -> None:
    exc = kubeapi.status_error(code, body)
    assert type(exc) is error


def test_backoff_doubles_with_jitter_up_to_the_maximum_and_resets() -> None:
    values = iter([0.0, 1.0] * 10)
    b = watcher.Backoff(1.0, 8.0, rng=lambda: next(values) * 0.999)
    delays = [b.next() for _ in range(6)]
    assert delays[0] == 0.5 and 1.9 < delays[1] < 2.0  # [d/2, d)
    assert delays[2] == 2.0 and 7.9 < delays[3] < 8.0
    assert delays[4] == 4.0 and delays[5] < 8.0
    b.reset()
    assert b.next() <= 1.0


def test_resources_select_this_nodes_pods() -> None:
    names = {r.name: r.field_selector for r in apisync.resources(pods="insecure", node_name="n1")}
    assert names == {"services": "", "endpointslices": "", "namespaces": "", "pods": "spec.nodeName=n1",
                     "nodes": "metadata.name=n1", "dnspolicies": "", "clusterdnspolicies": ""}


def test_change_of_shrinks_objects_and_turns_deletes_into_keys() -> None:
    obj = endpoint_slice("default", "web-1", "web", ["10.244.0.1"])
    c = index_mod.change_of("EndpointSlice", "ADDED", obj)
    assert (c.kind, c.namespace, c.name) == ("EndpointSlice", "default", "web-1")
    assert c.record is not None and c.record.endpoints[0].addresses == ("10.244.0.1",)
    d = index_mod.change_of("EndpointSlice", "DELETED", obj)
    assert d.record is None
    fqdn = dict(obj, addressType="FQDN")
    assert index_mod.change_of("EndpointSlice", "MODIFIED", fqdn).record is None


ARENAS_SCRIPT = """
import ctypes, sys, threading
from nodedns.cluster import apisync
if sys.argv[1] == "limit":
    apisync.limit_arenas()
barrier = threading.Barrier(6)
keep = []
def allocate():
    barrier.wait()  # all at once: each thread that allocates gets an arena unless they are limited
    keep.append([bytearray(50000) for _ in range(20)])  # malloc, below the mmap threshold
threads = [threading.Thread(target=allocate) for _ in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ctypes.CDLL(None).malloc_stats()  # glibc: one "Arena N:" block per arena, on stderr
"""


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "malloc_stats"), reason="needs glibc")
@pytest.mark.parametrize(("call", "environ", "low", "high"), [
    ("limit", {}, 1, apisync.WATCH_ARENAS),
    ("none", {}, apisync.WATCH_ARENAS + 1, 7),
    ("limit", {"MALLOC_ARENA_MAX": "4"}, 3, 4),
], ids=["watch-threads-share-two-arenas", "unlimited-without-the-call", "the-environment-wins"])
def test_the_watch_threads_share_a_few_malloc_arenas(call: str, environ: dict[str, str], low: int, high: int) -> None:
    env = {k: v for k, v in subprocess_env(**environ).items() if k != "MALLOC_ARENA_MAX" or environ}
    r = subprocess.run([sys.executable, "-c", ARENAS_SCRIPT, call], capture_output=True, text=True, timeout=60,
                       env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    arenas = sum(1 for line in r.stderr.splitlines() if line.startswith("Arena "))
    assert low <= arenas <= high, r.stderr


def test_the_api_credentials_load_without_the_kubernetes_packages_other_clients(kubeconfig: str) -> None:
    """A process that holds the node's index imports the kubernetes package's loaders and Configuration, not
    its dynamic client, watch, stream, informer, leader election, API client, REST client or utils (and what
    they import: pydantic among them)."""
    code = ("import sys; from nodedns.cluster.kubeapi import ApiSource, Http\n"
            f"http = Http(ApiSource(kubeconfig={kubeconfig!r})); assert http.base.startswith('http')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[:2] in (['kubernetes', 'dynamic'], "
            "['kubernetes', 'watch'], ['kubernetes', 'stream'], ['kubernetes', 'informer'], "
            "['kubernetes', 'leaderelection'], ['kubernetes', 'utils']) or m in ('kubernetes.client.api_client', "
            "'kubernetes.client.rest', 'pydantic')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


@pytest.mark.parametrize("settings", [
    {},
    {"verify_ssl": False},
    {"ssl_ca_cert": "/etc/ca.crt", "cert_file": "/etc/c.crt", "key_file": "/etc/c.key"},
    {"ca_cert_data": "-----BEGIN CERTIFICATE-----", "tls_server_name": "api.internal"},
    {"assert_hostname": False, "retries": 3, "connection_pool_maxsize": 7},
], ids=["defaults", "no-verify", "cert-files", "ca-data-and-server-name", "hostname-retries-maxsize"])
def test_the_pool_is_the_one_the_rest_client_would_make(settings: dict[str, object]) -> None:
    """The agent builds the REST client's urllib3 pool itself (so the REST client stays unimported): the same
    pool class with the same arguments as kubernetes.client.rest.RESTClientObject for the same Configuration."""
    from kubernetes.client import Configuration, rest

    cfg = Configuration()
    cfg.host = "https://10.0.0.1:6443"
    for key, value in settings.items():
        setattr(cfg, key, value)
    ours = kubeapi.pool_of(cfg)
    theirs = rest.RESTClientObject(cfg).pool_manager
    assert type(ours) is type(theirs)
    assert {k: repr(v) for k, v in ours.connection_pool_kw.items()} == {  # a Retry has no __eq__
        k: repr(v) for k, v in theirs.connection_pool_kw.items()}


def test_a_proxy_or_keep_alive_goes_through_the_rest_client() -> None:
    from kubernetes.client import Configuration

    cfg = Configuration()
    cfg.host = "https://10.0.0.1:6443"
    cfg.proxy = "http://proxy.internal:3128"
    pool = kubeapi.pool_of(cfg)
    assert isinstance(pool, urllib3.ProxyManager) and pool.proxy is not None and pool.proxy.host == "proxy.internal"
    cfg = Configuration()
    cfg.host = "https://10.0.0.1:6443"
    cfg.keep_alive = True
    options = kubeapi.pool_of(cfg).connection_pool_kw["socket_options"]
    assert any(opt[1] == socket.SO_KEEPALIVE for opt in options)
