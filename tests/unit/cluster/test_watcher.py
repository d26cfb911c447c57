"""A watch as a state machine: the watcher of one resource driven through generated sequences of what an API
server does (a list, a stream of events, a bookmark, a stream ending empty, 410 as an event or as HTTP, 429 and
503 with and without Retry-After, an ERROR event, an outage), with a fake clock and a fixed random draw, and
checked against a small reference model at every request it makes: what it asks (a list from the watch
cache, or a watch from the last resourceVersion it was given, with timeoutSeconds drawn from [t, 2t)), and
how long it waited before asking.

The model holds what docs/sync.md's table ("Behaviour") promises, not the watcher's code: a healthy watch
(anything in it) resets the back-off and is followed at once; a 410 relists after a random share of the
relist window, the first in a row at once otherwise; a 429 waits its Retry-After (a second without one, as
client-go) plus a random share of the window, never less than the back-off; a 503 waits its Retry-After the
same way; without one, and for every other failure, the back-off (doubling from its start, each drawn
from [d/2, d)), spread over the window from the second failure in a row (an outage's end is not met by the
whole fleet at once)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodedns.cluster import watcher
from nodedns.cluster.kubeapi import status_error
from tests.support.apiserver import service

INITIAL, MAXIMUM = 0.5, 30.0

LIST_OUTCOMES = ["ok", "throttled", "throttled-after", "unavailable", "unavailable-after", "outage"]
WATCH_OUTCOMES = ["events", "bookmark", "empty", "gone-event", "gone-http", "error-event", "throttled",
                  "throttled-after", "unavailable", "unavailable-after", "outage"]


class Stop:
    """The watcher's stop event: every wait is recorded and returns at once."""

    def __init__(self) -> None:
        self.stopped = False
        self.waits: list[float] = []

    def is_set(self) -> bool:
        return self.stopped

    def set(self) -> None:
        self.stopped = True

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0.0))
        return self.stopped


class Response:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, _n: int) -> Any:
        if self.body:
            yield self.body

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


@dataclass
class Model:
    """What the watcher must do next, from what the API server did."""

    r: float  # the random draw (every draw)
    spread: float  # the relist window
    rv: str | None = None
    failures: int = 0  # the back-off's count since the last healthy watch
    gone_in_a_row: int = 0
    waits: list[float] = field(default_factory=list)  # expected before the next request
    spread_waits: int = 0

    def _delay(self) -> float:
        d = min(MAXIMUM, INITIAL * float(1 << min(self.failures, 30)))
        self.failures += 1
        return d / 2 + self.r * d / 2

    def _spread_wait(self, base: float, floor: float = 0.0) -> None:
        self.waits.append(max(floor, base + self.r * self.spread))
        self.spread_waits += 1

    def failed(self, retry_after: float | None) -> None:
        in_a_row = self.failures
        delay = self._delay()
        if retry_after is not None:
            self._spread_wait(retry_after, delay)
        elif in_a_row >= 1:
            self._spread_wait(0.0, delay)
        else:
            self.waits.append(delay)

    def outcome(self, kind: str, what: str, rv: str) -> None:
        if what in ("ok", "events", "bookmark"):
            self.rv = rv
            if kind == "watch":
                self.failures = self.gone_in_a_row = 0
        elif what == "empty":
            self.failed(None)
        elif what.startswith("gone"):
            self.rv = None
            self.gone_in_a_row += 1
            if self.gone_in_a_row == 1:
                self._spread_wait(0.0)
            else:
                self.failed(None)
        elif what in ("throttled", "throttled-after"):
            self.failed(7.0 if what == "throttled-after" else 1.0)
        elif what == "unavailable-after":
            self.failed(7.0)
        else:  # unavailable without Retry-After, outage, an ERROR event
            self.failed(None)


class Api:
    """The API server: each request answered with an outcome drawn for it, the model told, the request and
    the waits before it checked."""

    def __init__(self, data: st.DataObject, model: Model, stop: Stop, requests: int, timeout: float) -> None:
        self.data = data
        self.model = model
        self.stop = stop
        self.left = requests
        self.timeout = timeout
        self.generation = 0
        self.watcher: watcher.Watcher | None = None
        self.seen = 0

    def reload(self, _seen: int) -> None:
        self.generation += 1

    def get(self, path: str, params: dict[str, str], *, connect: float, read: float) -> Response:
        m = self.model
        assert self.stop.waits == pytest.approx(m.waits, abs=1e-9), \
            f"waited {self.stop.waits}, the model says {m.waits} (after {self.seen} requests)"
        assert self.watcher is not None and self.watcher.state.retry_waits == m.spread_waits
        self.stop.waits.clear()
        m.waits.clear()
        kind = "watch" if params.get("watch") else "list"
        if m.rv is None:
            assert kind == "list" and params["resourceVersion"] == "0", params
        else:
            assert kind == "watch" and params["resourceVersion"] == m.rv, (params, m.rv)
            seconds = int(params["timeoutSeconds"])
            assert self.timeout <= seconds < 2 * self.timeout
            assert seconds == max(1, int(self.timeout * (1 + m.r))), "timeoutSeconds without its jitter"
        self.seen += 1
        self.left -= 1
        if self.left < 0:
            self.stop.set()
            raise OSError("the end of the sequence")
        what = self.data.draw(st.sampled_from(LIST_OUTCOMES if kind == "list" else WATCH_OUTCOMES), label=kind)
        rv = str(1000 + self.seen)
        m.outcome(kind, what, rv)
        if what == "ok":
            return Response(orjson.dumps({"kind": "ServiceList", "metadata": {"resourceVersion": rv},
                                          "items": [service("default", "web", ["10.96.0.10"])]}))
        if what == "events":
            obj = service("default", f"s{self.seen}", ["10.96.0.11"])
            obj["metadata"]["resourceVersion"] = rv
            return Response(_line({"type": "ADDED", "object": obj}))
        if what == "bookmark":
            return Response(_line({"type": "BOOKMARK", "object": {"kind": "Service",
                                                                   "metadata": {"resourceVersion": rv}}}))
        if what == "empty":
            return Response(b"")
        if what == "gone-event":
            return Response(_line({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                                               "message": "too old resource version"}}))
        if what == "error-event":
            return Response(_line({"type": "ERROR", "object": {"kind": "Status", "code": 500,
                                                               "message": "internal error"}}))
        if what == "outage":
            raise OSError("connection refused")
        code = {"gone-http": 410, "throttled": 429, "throttled-after": 429, "unavailable": 503,
                "unavailable-after": 503}[what]
        raise status_error(code, b'{"kind":"Status","message":"no"}',
                           retry_after=7.0 if what.endswith("-after") else None)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), r=st.floats(0.0, 0.999), spread=st.sampled_from([0.0, 1.5, 30.0]),
       timeout=st.sampled_from([30.0, 300.0]), requests=st.integers(1, 30))
def test_a_watch_follows_the_model_through_any_sequence_of_answers(data: st.DataObject, r: float, spread: float,
                                                                   timeout: float, requests: int) -> None:
    stop = Stop()
    model = Model(r=r, spread=spread)
    api = Api(data, model, stop, requests, timeout)
    timing = watcher.Timing(watch_timeout=timeout, backoff_initial=INITIAL, backoff_max=MAXIMUM, watch_list=False)
    w = watcher.Watcher(watcher.SERVICES, http=api, post=lambda _batch: w.release_slot(),  # type: ignore[arg-type]
                        timing=timing, rng=lambda: r, clock=lambda: 5000.0, spread=lambda: spread)
    w._stopping = stop  # type: ignore[assignment]
    api.watcher = w
    w.run()
    assert api.seen == requests + 1  # every request checked, none lost on the way

