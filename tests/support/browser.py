"""Headless Chromium for tests, driven over the DevTools protocol (aiohttp's WebSocket client).

    with Chromium(tmp_path / "profile") as browser:
        shot = browser.load("http://127.0.0.1:9254/", ready="!!document.querySelector('#chart-qps')")
        shot.png                      # the screenshot (PNG bytes), shot.value: `ready`'s last value
        browser.evaluate("document.title")

Debian's `chromium`, started as the CI runs it (root: --no-sandbox), with a fresh profile, no GPU, no
QUIC, no first-run, no background networking, component updates or sync: it fetches nothing but the
page. `--remote-debugging-port=0` makes it write the port it picked to DevToolsActivePort in the
profile; the first page target is driven over its WebSocket.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio")


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass(frozen=True)
class Shot:
    png: bytes
    value: Any  # what the `ready` expression gave when it became true


class Chromium:
    def __init__(self, profile: Path, *, width: int = 1280, height: int = 1600, timeout: float = 30.0) -> None:
        self.profile = profile
        self.width = width
        self.height = height
        self.timeout = timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = profile.parent / f"{profile.name}.log"
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None

    def __enter__(self) -> Chromium:
        exe = chromium_path()
        assert exe is not None, "chromium is not installed (apt-get install chromium)"
        self.profile.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [exe, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
                 "--remote-debugging-address=127.0.0.1", f"--window-size={self.width},{self.height}", "about:blank"],
                stdout=out, stderr=subprocess.STDOUT)
        try:
            self._loop.run_until_complete(self._connect())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(self._close())
        self._loop.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    async def _connect(self) -> None:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while not port_file.exists() or not port_file.read_text().strip():
            assert self.proc is not None and self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "chromium did not open its DevTools port: " + self.log.read_text()
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        targets: list[dict[str, Any]] = []
        while not any(t.get("type") == "page" for t in targets):
            assert time.monotonic() < deadline, "chromium has no page target"
            with contextlib.suppress(aiohttp.ClientError):
                async with self._session.get(f"http://127.0.0.1:{port}/json/list") as resp:
                    targets = await resp.json()
            await asyncio.sleep(0.1)
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=64 << 20)
        await self._call("Emulation.setDeviceMetricsOverride",
                         {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})

    async def _close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()

    async def _call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self._ws is not None
        ident = next(self._ids)
        await self._ws.send_str(json.dumps({"id": ident, "method": method, "params": params or {}}))
        async with asyncio.timeout(self.timeout):
            while True:
                msg = await self._ws.receive()
                assert msg.type == aiohttp.WSMsgType.TEXT, f"DevTools connection: {msg.type} {msg.data!r}"
                reply = json.loads(msg.data)
                if reply.get("id") == ident:
                    assert "error" not in reply, f"{method}: {reply['error']}"
                    result: dict[str, Any] = reply.get("result", {})
                    return result

    async def _evaluate(self, expression: str) -> Any:
        result = await self._call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                       "awaitPromise": True})
        assert "exceptionDetails" not in result, f"{expression}: {result['exceptionDetails']}"
        return result["result"].get("value")

    async def _wait(self, expression: str) -> Any:
        while True:
            value = await self._evaluate(expression)
            if value:
                return value
            await asyncio.sleep(0.2)

    async def _wait_within(self, expression: str, seconds: float) -> Any:
        try:
            async with asyncio.timeout(seconds):
                return await self._wait(expression)
        except TimeoutError:
            raise AssertionError(f"not true within {seconds}s: {expression}") from None

    async def _load(self, url: str, ready: str) -> Shot:
        await self._call("Page.navigate", {"url": url})
        value = await self._wait_within(f"document.readyState === 'complete' && ({ready})", self.timeout)
        shot = await self._call("Page.captureScreenshot", {"format": "png"})
        return Shot(base64.b64decode(shot["data"]), value)

    def load(self, url: str, *, ready: str = "true") -> Shot:
        """Open `url`, wait until `ready` (a JavaScript expression) is truthy, take a screenshot."""
        return self._loop.run_until_complete(self._load(url, ready))

    def evaluate(self, expression: str) -> Any:
        return self._loop.run_until_complete(self._evaluate(expression))

    def wait(self, expression: str, timeout: float = 30.0) -> Any:
        """The value of `expression` once it is truthy (polled every 0.2 s)."""
        return self._loop.run_until_complete(self._wait_within(expression, timeout))

    def screenshot(self) -> bytes:
        shot = self._loop.run_until_complete(self._call("Page.captureScreenshot", {"format": "png"}))
        return base64.b64decode(shot["data"])
