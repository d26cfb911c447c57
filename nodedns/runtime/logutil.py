"""Logging helpers: consolidation of repeated errors, the query log, and the text/JSON formatters.

`Consolidated(log, what).report(exc)` logs the first error of a kind at once (with traceback),
then counts repeats and writes one summary line per interval (`... 1234 more in the last 60s`),
never one line per failed query. `flush_due()` (the agent calls it on a timer: `flush_on_time`) writes
the summary of a finished interval even when no further error arrives; `error_totals()` feeds
`nodedns_errors_total{kind}`.

`log_query(...)` writes one query-log line (logger `nodedns.query`); the transports call it only
for the sampled share of queries (`--query-log 1%`). With `--log-format json` every field is a
JSON key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections.abc import Callable

query_log = logging.getLogger("nodedns.query")
_ALL: weakref.WeakSet[Consolidated] = weakref.WeakSet()


class Consolidated:
    """Rate-consolidated error reporting for one kind of error."""

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        *,
        interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.what = what
        self.interval = interval
        self.clock = clock
        self.window_start = -1e18
        self.suppressed = 0
        self.total = 0
        self.last: str = ""
        _ALL.add(self)

    def report(self, exc: BaseException | str) -> None:
        self.total += 1
        now = self.clock()
        text = exc if isinstance(exc, str) else f"{exc.__class__.__name__}: {exc}"
        self.last = text
        if now - self.window_start >= self.interval:
            self.flush(now)
            self.window_start = now
            if isinstance(exc, BaseException):
                self.log.error("%s: %s", self.what, text, exc_info=exc)
            else:
                self.log.error("%s: %s", self.what, text)
        else:
            self.suppressed += 1

    def flush_due(self) -> None:
        """Write the summary of a finished interval (called on a timer)."""
        if self.suppressed and self.clock() - self.window_start >= self.interval:
            self.flush()

    def flush(self, now: float | None = None) -> None:
        if self.suppressed:
            self.log.error(
                "%s: %d more in the last %ds (latest: %s)",
                self.what,
                self.suppressed,
                int(self.interval),
                self.last,
            )
            self.suppressed = 0


def flush_due() -> None:
    """Write the pending summary line of every error kind whose interval has ended."""
    for c in list(_ALL):
        c.flush_due()


async def flush_on_time(period: float = 5.0) -> None:
    """Every `period` seconds, `flush_due()`: the summaries go out when their interval ends (the agent's task)."""
    while True:
        await asyncio.sleep(period)
        flush_due()


def error_totals() -> dict[str, int]:
    """Errors reported so far, by kind (all Consolidated reporters of the process)."""
    out: dict[str, int] = {}
    for c in list(_ALL):
        out[c.what] = out.get(c.what, 0) + c.total
    return out


def log_query(*, client: str, name: str, qtype: str, rcode: str, duration: float, path: str, proto: str) -> None:
    """One query-log line: `query client=10.244.0.21 name=web.default.svc.cluster.local. type=A ...`.

    Builds the record directly (no caller lookup): this runs for every sampled query.
    """
    if not query_log.isEnabledFor(logging.INFO):
        return
    fields = {"client": client, "name": name, "type": qtype, "rcode": rcode,
              "duration_ms": round(duration * 1000, 3), "path": path, "proto": proto}
    record = query_log.makeRecord(
        query_log.name, logging.INFO, "", 0,
        "query client=%s name=%s type=%s rcode=%s duration=%.3fms path=%s proto=%s",
        (client, name, qtype, rcode, duration * 1000, path, proto), None, extra={"fields": fields},
    )
    query_log.handle(record)


class JSONFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (+ exception)."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        extra = getattr(record, "fields", None)
        if isinstance(extra, dict):
            out.update(extra)
        return json.dumps(out, default=str)


def setup(level: str = "info", fmt: str = "text") -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JSONFormatter())
        handler.formatter.converter = time.gmtime  # type: ignore[union-attr]
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # nothing we format uses them, and every log record would pay for them (the query log is hot)
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
