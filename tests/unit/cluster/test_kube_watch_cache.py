"""What the agent asks of the API server (nodedns.cluster.apisync): initial state from the watch cache, spread
retries."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from nodedns.cluster import kubeapi, watcher
from tests.support.apiserver import (
    CONSISTENT,
    STREAM,
    WATCH_CACHE,
    FakeApiServer,
    Fault,
    endpoint_slice,
    namespace,
    service,
)
from tests.support.kube_sync import eventually, syncing

FAST = watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5, connect_timeout=2,
                            backoff_initial=0.05,                    backoff_max=0.2, relist_spread=0.0)
REFUSAL = "does not stream the initial state"


def kubeconfig_for(api: FakeApiServer, tmp_path: Path) -> str:
    return api.write_kubeconfig(tmp_path / "kubeconfig")


def populate(api: FakeApiServer) -> None:
    api.put("Namespace", namespace("default"))
    api.put("Service", service("default", "web", ["10.96.0.10"]))
    api.put("EndpointSlice", endpoint_slice("default", "web-1", "web", ["10.1.0.1", "10.1.0.2"]))


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if REFUSAL in r.getMessage()]


# -- the initial state -----------------------------------------------------------------------------


async def test_watch_list_streams_the_initial_state_when_the_server_serves_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with FakeApiServer(watch_list="serve") as api:
        populate(api)
        async with syncing(kubeconfig_for(api, tmp_path), timing=FAST) as (index, sync):
            assert index.synced
            assert index.service("default", "web") is not None
            assert [s.name for s in index.slices_of("default", "web")] == ["web-1"]
            assert api.requests_for("services", "list") == []
            (stream,) = api.requests_for("services", "watchlist")
            assert stream.query["sendInitialEvents"] == "true"
            assert stream.query["resourceVersionMatch"] == "NotOlderThan"
            assert stream.query["allowWatchBookmarks"] == "true"
            assert stream.query["resourceVersion"] == "0"
            assert sync.status()["resources"]["services"]["initial_state"] == "stream"
            # the same stream goes on with live events after the end bookmark
            api.put("Service", service("default", "api", ["10.96.0.11"]))
            await eventually(lambda: index.service("default", "api") is not None, what="a live event")
            assert len(api.requests_for("services")) == 1
            assert refusals(caplog) == []


async def test_the_index_is_not_synced_before_the_initial_events_end_bookmark(tmp_path: Path) -> None:
    with FakeApiServer(watch_list="serve") as api:
        populate(api)
        for i in range(5):
            api.put("Service", service("default", f"svc-{i}", [f"10.96.1.{i}"]))
        api.inject("services", "watchlist", Fault(drop_after=3))  # cut before the end bookmark
        async with syncing(kubeconfig_for(api, tmp_path), timing=FAST, wait=False) as (index, sync):
            await eventually(lambda: len(api.requests_for("services", "watchlist")) >= 1, what="the first stream")
            async with asyncio.timeout(10):
                await sync.wait_synced()
            assert len(api.requests_for("services", "watchlist")) == 2  # a dropped stream is asked again
            assert len(index.services) == 6
            assert sync.status()["resources"]["services"]["errors"] == 1
            assert sync.status()["initial_state"] == "stream"


@pytest.mark.parametrize("mode", ["422", "400"], ids=["422-feature-gated", "400-bad-request"])
async def test_a_server_refusing_watch_list_makes_the_agent_list_for_the_life_of_the_process(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str) -> None:
    caplog.set_level(logging.INFO, logger="nodedns.kube")
    with FakeApiServer(watch_list=mode) as api:
        populate(api)
        async with syncing(kubeconfig_for(api, tmp_path), timing=FAST) as (index, sync):
            assert index.service("default", "web") is not None
            assert len(refusals(caplog)) == 1
            assert sync.status()["initial_state"] == "list"
            assert mode in sync.status()["stream_refused"]
            (listed,) = api.requests_for("services", "list")
            assert listed.query["resourceVersion"] == "0"
            # a later relist does not ask for the stream again
            api.expire()
            api.put("Service", service("default", "api", ["10.96.0.11"]))
            await eventually(lambda: len(api.requests_for("services", "list")) == 2, what="the relist")
            await eventually(lambda: index.service("default", "api") is not None, what="the relisted service")
            assert len(api.requests_for("services", "watchlist")) == 1
            assert len(refusals(caplog)) == 1
            assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_an_older_server_ignoring_send_initial_events_is_detected_by_its_bare_bookmark(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nodedns.kube")
    with FakeApiServer(watch_list="ignore", bookmark_interval=0.2) as api:
        populate(api)
        async with syncing(kubeconfig_for(api, tmp_path), timing=FAST) as (index, sync):
            assert index.service("default", "web") is not None
            assert len(refusals(caplog)) == 1
            assert "without the k8s.io/initial-events-end annotation" in refusals(caplog)[0]
            assert [r.query["resourceVersion"] for r in api.requests_for("services", "list")] == ["0"]
            assert sync.status()["initial_state"] == "list"


async def test_an_older_server_without_bookmarks_is_detected_by_its_silence(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nodedns.kube")
    timing = watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5, connect_timeout=2,
                            backoff_initial=0.05, backoff_max=0.2, relist_spread=0.0,
                            initial_events_timeout=1.0)
    with FakeApiServer(watch_list="ignore") as api:  # initial ADDED events, then nothing: no bookmark at all
        populate(api)
        async with syncing(kubeconfig_for(api, tmp_path), timing=timing) as (index, sync):
            assert index.service("default", "web") is not None
            assert len(refusals(caplog)) == 1
            assert "silent for 1s" in refusals(caplog)[0]
            assert sync.status()["initial_state"] == "list"


async def test_after_the_initial_state_a_quiet_stream_keeps_the_watch_read_timeout(tmp_path: Path) -> None:
    timing = watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5, connect_timeout=2,
                            backoff_initial=0.05, backoff_max=0.2, relist_spread=0.0,
                            initial_events_timeout=0.5)
    with FakeApiServer(watch_list="serve") as api:
        populate(api)
        async with syncing(kubeconfig_for(api, tmp_path), timing=timing) as (index, sync):
            opened = time.monotonic()
            await eventually(lambda: time.monotonic() - opened > 1.5, what="a quiet second and a half")
            st = sync.status()["resources"]["services"]
            assert (st["errors"], st["watches"], st["connected"]) == (0, 1, True)
            assert sync.status()["initial_state"] == "stream"


# -- after a 410 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["422", "serve"], ids=["lists", "streams"])
async def test_a_410_brings_the_state_again_from_the_watch_cache(tmp_path: Path, mode: str) -> None:
    with FakeApiServer(watch_list=mode) as api:
        populate(api)
        async with syncing(kubeconfig_for(api, tmp_path), timing=FAST) as (index, sync):
            api.delete("Service", "default", "web")
            api.expire()
            api.put("Service", service("default", "api", ["10.96.0.11"]))
            await eventually(lambda: index.service("default", "api") is not None and
                             index.service("default", "web") is None, what="the state after the 410")
            assert sync.status()["resources"]["services"]["gone"] == 1
            initial = [r for r in api.requests_for("services") if r.verb != "watch"]
            assert [(r.verb, r.query["resourceVersion"]) for r in initial][-1] == (
                ("list", "0") if mode == "422" else ("watchlist", "0"))
            assert len(initial) == (3 if mode == "422" else 2)  # 422 refused once, then two lists


async def test_no_list_is_a_consistent_read_and_every_watch_asks_for_bookmarks(tmp_path: Path) -> None:
    for mode in ("serve", "422"):
        with FakeApiServer(watch_list=mode, gone_as_http=mode == "422") as api:
            populate(api)
            async with syncing(kubeconfig_for(api, tmp_path), timing=FAST) as (index, sync):
                api.expire()
                api.put("Service", service("default", "api", ["10.96.0.11"]))
                await eventually(lambda: index.service("default", "api") is not None, what="the relist")
                await eventually(lambda: all(r["connected"] for r in sync.status()["resources"].values()))
                seen = api.requests_for("services") + api.requests_for("endpointslices")
                assert {r.cost for r in seen} <= {WATCH_CACHE, STREAM}, mode
                assert all(r.cost != CONSISTENT for r in api.requests), mode
                assert all(r.bookmarks for r in api.requests if r.cost == STREAM), mode
                assert sum(r.verb in ("list", "watchlist") for r in api.requests_for("services")) >= 2, mode


# -- spreading retries -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("objects", "window"),
    [(0, 1.5), (400, 1.5), (1_000, 1.5), (2_000, 3.0), (10_000, 15.0), (20_000, 30.0), (1_000_000, 30.0)],
    ids=["empty", "tiny", "floor", "small", "half", "full", "huge"],
)
def test_the_relist_window_grows_with_the_cluster_up_to_the_configured_spread(objects: int, window: float) -> None:
    assert watcher.spread_window(30.0, objects) == pytest.approx(window)


@pytest.mark.parametrize("draw", [0.0, 0.5, 0.999], ids=["low", "middle", "high"])
async def test_a_410_relist_waits_its_random_share_of_the_window(tmp_path: Path, draw: float) -> None:
    timing = watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5, connect_timeout=2,
                         backoff_initial=0.05, backoff_max=0.2, relist_spread=40.0)  # 3 objects: window 2 s
    with FakeApiServer(watch_list="serve") as api:
        populate(api)
        async with syncing(kubeconfig_for(api, tmp_path), timing=timing, rng=lambda: draw) as (index, sync):
            assert sync.status()["relist_window_seconds"] == pytest.approx(2.0)
            kicked = time.monotonic()
            api.expire()
            await eventually(lambda: len(api.requests_for("services", "watchlist")) == 2, what="the relist")
            waited = api.requests_for("services", "watchlist")[1].at - kicked
            st = sync.status()["resources"]["services"]
            assert st["retry_waits"] == 1
            assert st["last_retry_wait_seconds"] == pytest.approx(2.0 * draw, abs=0.01)
            assert 2.0 * draw - 0.05 <= waited <= 2.0 * draw + 1.0


@pytest.mark.parametrize("status", [429, 503], ids=["429", "503"])
async def test_retry_after_is_honoured(tmp_path: Path, status: int) -> None:
    with FakeApiServer(watch_list="serve") as api:
        populate(api)
        api.inject("services", "watchlist", Fault(status=status, retry_after=2))
        async with syncing(kubeconfig_for(api, tmp_path), timing=FAST, wait=False) as (index, sync):
            async with asyncio.timeout(10):
                await sync.wait_synced()
            first, second = api.requests_for("services", "watchlist")
            assert second.at - first.at >= 2.0
            assert sync.status()["resources"]["services"]["last_retry_wait_seconds"] >= 2.0


async def test_an_outage_spreads_the_reconnects_over_the_window(tmp_path: Path) -> None:
    timing = watcher.Timing(watch_timeout=30, read_slack=1.0, request_timeout=5, connect_timeout=2,
                         backoff_initial=0.05, backoff_max=0.05, relist_spread=20.0)  # 3 objects: window 1 s
    with FakeApiServer(watch_list="serve") as api:
        populate(api)
        async with syncing(kubeconfig_for(api, tmp_path), timing=timing, rng=lambda: 1.0) as (index, sync):
            api.go_down()
            await eventually(lambda: sync.status()["resources"]["services"]["retry_waits"] >= 1,
                             what="a second failure in a row")
            assert sync.status()["resources"]["services"]["last_retry_wait_seconds"] == pytest.approx(1.0)
            api.come_back()
            await eventually(lambda: all(r["connected"] for r in sync.status()["resources"].values()))
            assert index.service("default", "web") is not None


def test_retry_after_headers_are_read_as_seconds() -> None:
    assert kubeapi.retry_after_of("3") == 3.0
    assert kubeapi.retry_after_of(" 0 ") == 0.0
    assert kubeapi.retry_after_of("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert kubeapi.retry_after_of("99999") == kubeapi.RETRY_AFTER_MAX
    assert kubeapi.retry_after_of("nan") is None
    assert kubeapi.retry_after_of(None) is None
    body = {"kind": "Status", "code": 429, "reason": "TooManyRequests", "details": {"retryAfterSeconds": 4}}
    assert kubeapi.status_error(429, body).retry_after == 4.0
