#!/usr/bin/env python3
"""The upstream goes down: how long each kind of query takes, with fast test timings and with the defaults.

Runs the agent of this checkout in-process (the bundled example cluster) against an upstream double,
caches two names (one with a TTL of 1 s), then makes the upstream drop every query and times, in
order: a cached name, an uncached name while the failure is new, an uncached name once the upstream
is marked down, the same name again, the name whose TTL ran out (served stale), and how long the
health checks take to see the upstream again once it answers. Each row prints the milliseconds of
every variant side by side, the median of the rounds:

    python3 scripts/bench_outage.py               # --upstream-timeout 500ms --health-check 100ms, and the defaults
    python3 scripts/bench_outage.py --rounds 3
    python3 scripts/bench_outage.py --fast-only         # only the fast timings (seconds instead of a minute)

docs/hardening.md ("The upstream is down") quotes its table; tests/e2e/test_outages.py asserts the bounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import dns.rcode  # noqa: E402

from tests.support.helpers import EXAMPLE, rrset_values, running_agent, wait_for  # noqa: E402 - the checkout's helpers
from tests.support.upstream_double import UpstreamDouble  # noqa: E402

ZONE = {"cached.example.com": {"A": ["192.0.2.1"]}, "short.example.com": {"A": ["192.0.2.2"]},
        "later.example.com": {"A": ["192.0.2.3"]}}
STEPS = ("a cached name", "an uncached name, failure new", "an uncached name, upstream marked down",
         "the same name again", "an expired name (served stale)", "the upstream returns: healthy again after")
VARIANTS = {"--upstream-timeout 500ms --health-check 100ms": {"upstream-timeout": "500ms", "health-check": "100ms"},
            "defaults (2s, 0.5s)": {}}


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    out = fn()
    return out, time.monotonic() - started


def one_round(flags: dict[str, str]) -> list[float]:
    """The seconds of each step of STEPS, in order."""
    with UpstreamDouble(ZONE) as upstream:
        upstream.ttls["short.example.com"] = 1
        raw = {"manifests": str(EXAMPLE), "upstream": upstream.address, "prefetch": "false", **flags}
        with running_agent(raw) as agent:
            fw = agent.agent.forwarder
            assert fw is not None
            wait_for(lambda: any(t == "HINFO" for _, t in upstream.seen) and fw.inflight == 0, 10, "the loop probe")
            ask = agent.query
            assert rrset_values(ask("cached.example.com")) == ["192.0.2.1"]
            assert rrset_values(ask("short.example.com")) == ["192.0.2.2"]
            upstream.mode = "drop"
            out = []
            r, took = timed(lambda: ask("cached.example.com"))
            assert rrset_values(r) == ["192.0.2.1"]
            out.append(took)
            r, took = timed(lambda: ask("new1.example.com", timeout=10))
            assert r.rcode() == dns.rcode.SERVFAIL
            out.append(took)
            wait_for(lambda: fw.status()["upstreams"][0]["healthy"] is False, 10, "the upstream marked down")
            r, took = timed(lambda: ask("new2.example.com", timeout=10))
            assert r.rcode() == dns.rcode.SERVFAIL
            out.append(took)
            r, took = timed(lambda: ask("new2.example.com", timeout=10))
            assert r.rcode() == dns.rcode.SERVFAIL
            out.append(took)
            time.sleep(max(0.0, 1.2 - sum(out)))  # the TTL of 1 s runs out (a duration to wait, not a state)
            r, took = timed(lambda: ask("short.example.com", timeout=10))
            assert rrset_values(r) == ["192.0.2.2"] and r.answer[0].ttl == 30, r
            out.append(took)
            upstream.mode = "answer"
            out.append(wait_for(lambda: fw.status()["upstreams"][0]["healthy"] is True, 10, "the upstream back",
                                interval=0.005))
            return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1, help="rounds per variant; the table shows the median")
    ap.add_argument("--fast-only", action="store_true", help="only the variant with the fast test timings")
    args = ap.parse_args()
    variants = dict(list(VARIANTS.items())[:1]) if args.fast_only else VARIANTS
    results: dict[str, list[list[float]]] = {name: [] for name in variants}
    for r in range(args.rounds):
        for name, flags in variants.items():
            results[name].append(one_round(flags))
            print(f"round {r + 1} {name}: " + ", ".join(f"{t * 1000:.1f}" for t in results[name][-1]) + " ms",
                  file=sys.stderr, flush=True)
    print(f"\n{'step':<44}" + "".join(f"{name:>48}" for name in variants))
    for i, step in enumerate(STEPS):
        cells = [statistics.median(rnd[i] for rnd in results[name]) * 1000 for name in variants]
        print(f"{step:<44}" + "".join(f"{c:>45.1f} ms" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
