"""Running one agent in this process on uvloop: the exit code, and the one line a fatal error prints."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable

from nodedns.app.agent import Agent
from nodedns.config import Config
from nodedns.errors import ConfigError, DuplicateAgent, ListenError, ManifestError, NetifError
from nodedns.runtime.heap import GC_FREEZE_AFTER

log = logging.getLogger("nodedns.app")

EXIT_CONFIG = 2


def print_error(code: int, text: str) -> None:
    """The one line a fatal error prints (stderr)."""
    print(text, file=sys.stderr)


def gc_freeze_after(text: str) -> float | None:
    """NODEDNS_GC_FREEZE: `off` (never freeze: to measure what freezing does), seconds after the sync to
    freeze again, or empty for GC_FREEZE_AFTER. Anything else is the default, with a warning."""
    text = text.strip().lower()
    if text == "off":
        return None
    if not text:
        return GC_FREEZE_AFTER
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 86400:
        log.warning("NODEDNS_GC_FREEZE=%r: not 'off' or seconds; freezing %gs after the sync", text, GC_FREEZE_AFTER)
        return GC_FREEZE_AFTER
    return value


def run_agent(config: Config, make: Callable[[Config], Agent] = Agent,
              report: Callable[[int, str], None] = print_error) -> int:
    """Run an agent (`make(config)`) on uvloop until stopped; the exit code. A fatal error is given to
    `report` as (exit code, one line): printed to stderr, or by a worker sent to its supervisor, which
    prints it once for all of them."""
    import uvloop

    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until the agent's own handler is in (Agent.run): never an exit
    try:
        agent = make(config)
        agent.freeze_gc_after = gc_freeze_after(os.environ.get("NODEDNS_GC_FREEZE", ""))
        return uvloop.run(agent.run())
    except ConfigError as exc:
        code, text = EXIT_CONFIG, f"nodedns: config error: {exc}"
    except DuplicateAgent as exc:
        code, text = EXIT_CONFIG, f"nodedns: refusing to start: {exc}"
    except ManifestError as exc:
        code, text = 1, f"nodedns: manifests: {' '.join(str(exc).split())}"
    except ListenError as exc:
        code, text = 1, f"nodedns: cannot start: {exc}"
    except NetifError as exc:
        code, text = 1, f"nodedns: cannot start: node setup: {exc.reason}"
    except OSError as exc:
        code, text = 1, f"nodedns: cannot start: {exc}"
    report(code, text)
    return code

