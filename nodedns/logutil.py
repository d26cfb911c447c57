"""Logging helpers: consolidation of repeated errors, and the text/JSON formatters.

`Consolidated(log, what).report(exc)` logs the first error of a kind at once (with traceback),
then counts repeats and writes one summary line per interval (`... 1234 more in the last 60s`),
never one line per failed query.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable


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
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
