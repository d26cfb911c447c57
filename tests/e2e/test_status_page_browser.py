"""The status page in a real browser: headless Chromium loads the page of a live agent under load and the
screenshot shows every chart drawn.

The agent runs as the DaemonSet runs it (tests/support/shipped.py: the ConfigMap's config, its workers, the
allow list; the API server double as the cluster, an upstream double), so the page's charts come
from the --workers supervisor's samples of its workers' counters. The load mixes cluster names,
NXDOMAINs and names that go upstream; the upstream stops answering for a while, so its health
changes during the run. Chromium (tests/support/browser.py) loads the page, and for each chart:

- the DOM says it drew points (`data-drawn` on its SVG: path points, bars, health runs);
- the screenshot has data pixels in the chart's box: saturated colours (the data's greens, blues,
  reds, purples), which neither the background, the grid, the axes nor the labels have (greys);
- the upstream health chart has both green (answering) and red (failing) pixels.

Then the page's script refreshes the sections in place (a marker set on the old ones disappears).
The screenshot is kept in the test's tmp_path, and copied to $NODEDNS_ARTIFACTS when that is set.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.support.apiserver import FakeApiServer
from tests.support.browser import Chromium, chromium_path
from tests.support.helpers import IN_CI
from tests.support.loadgen import UdpLoad
from tests.support.shipped import ShippedAgent, cluster
from tests.support.upstream_double import UpstreamDouble

pytestmark = pytest.mark.skipif(chromium_path() is None and not IN_CI,
                                reason="chromium is not installed (CI installs it: apt-get install chromium)")

CHARTS = ("qps", "latency", "hits", "rcodes", "sources", "upstreams")
NAMES = (["web.default.svc.cluster.local"] * 60 + ["db.prod.svc.cluster.local"] * 10
         + ["nope.default.svc.cluster.local"] * 10 + ["api.example.com"] * 10
         + [f"n{i}.example.org" for i in range(10)])  # NXDOMAIN upstream, kept 5 s: asked again and again
BOXES = """JSON.stringify([...document.querySelectorAll("figure.chart")].map((f) => {
  const svg = f.querySelector("svg"), r = svg ? svg.getBoundingClientRect() : null;
  return {id: f.id, drawn: svg ? Number(svg.dataset.drawn) : 0,
          points: [...f.querySelectorAll("path.line")].map((p) => Number(p.dataset.points)),
          box: r ? [r.left, r.top, r.right, r.bottom] : null, text: f.innerText};
}))"""


def history(agent: ShippedAgent) -> dict[str, Any]:
    code, body = agent.get("/debug/history")
    assert code == 200, body
    doc: dict[str, Any] = json.loads(body)
    return doc


def wait_for_page(agent: ShippedAgent, what: str, ok: Callable[[list[dict[str, Any]]], bool],
             timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok(history(agent)["points"]):
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s: {history(agent)['points'][-3:]}"
        time.sleep(0.5)


def saturated(img: Image.Image, box: list[float], colour: Callable[[tuple[int, int, int]], bool]) -> int:
    """Pixels inside `box` (CSS pixels, scale 1) whose colour passes `colour`."""
    left, top, right, bottom = (round(v) for v in box)
    data = img.crop((left, top, right, bottom)).convert("RGB").tobytes()
    return sum(1 for i in range(0, len(data), 3) if colour((data[i], data[i + 1], data[i + 2])))


def vivid(px: tuple[int, int, int]) -> bool:
    return max(px) - min(px) > 60  # the data's colours; greys (background, grid, text) are below 30


def green(px: tuple[int, int, int]) -> bool:
    r, g, b = px
    return g > 120 and g - r > 60 and g - b > 40


def red(px: tuple[int, int, int]) -> bool:
    r, g, b = px
    return r > 180 and r - g > 100 and r - b > 100


def test_a_live_agent_s_page_draws_every_chart_in_chromium(tmp_path: Path) -> None:
    with FakeApiServer() as api, UpstreamDouble({"api.example.com": {"A": ["192.0.2.80"]}}) as up:
        cluster(api)
        with ShippedAgent(tmp_path, api, up) as agent:
            agent.wait_ready()
            assert agent.config["workers"] > 1  # the supervisor samples its workers' counters
            with UdpLoad("127.0.0.1", agent.port, qps=300, names=NAMES):
                wait_for_page(agent, "two points with answers", lambda ps: sum(p["queries"] > 0 for p in ps) >= 2)
                up.mode = "drop"
                wait_for_page(agent, "the upstream marked down",
                         lambda ps: any(False in p["upstreams"].values() for p in ps))
                up.mode = "answer"
                wait_for_page(agent, "the upstream answering again",
                         lambda ps: bool(ps[-1]["upstreams"]) and all(ps[-1]["upstreams"].values()))
            doc = history(agent)
            assert doc["window"]["queries"] > 1000 and doc["window"]["hit_ratio"] > 0.5

            with Chromium(tmp_path / "chromium") as browser:
                shot = browser.load(agent.debug_url + "/", ready="document.querySelectorAll('figure.chart').length")
                charts = {c["id"].removeprefix("chart-"): c for c in json.loads(browser.evaluate(BOXES))}
                (tmp_path / "status-page.png").write_bytes(shot.png)
                if os.environ.get("NODEDNS_ARTIFACTS"):
                    shutil.copy(tmp_path / "status-page.png", Path(os.environ["NODEDNS_ARTIFACTS"]))
                img = Image.open(io.BytesIO(shot.png))

                assert sorted(charts) == sorted(CHARTS)
                for name in CHARTS:
                    c = charts[name]
                    assert c["drawn"] > 0, f"{name}: nothing drawn: {c['text']}"
                    assert c["box"] and c["box"][3] <= img.height, f"{name}: not on the screenshot: {c['box']}"
                    pixels = saturated(img, c["box"], vivid)
                    assert pixels > 40, f"{name}: {pixels} data pixels in {c['box']}"
                for name in ("qps", "hits"):
                    assert charts[name]["points"] and max(charts[name]["points"]) >= 2, charts[name]
                assert len(charts["latency"]["points"]) >= 2  # p50 and p99
                health = charts["upstreams"]["box"]
                assert saturated(img, health, green) > 20 and saturated(img, health, red) > 5

                # the script brings fresh sections in place, without a reload
                browser.evaluate("document.getElementById('sections').dataset.old = 'yes'")
                browser.wait("!document.getElementById('sections').dataset.old", timeout=20)
                again = {c["id"]: c for c in json.loads(browser.evaluate(BOXES))}
                assert all(c["drawn"] > 0 for c in again.values()), again
