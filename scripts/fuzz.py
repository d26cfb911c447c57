#!/usr/bin/env python3
"""Long fuzz runs against a live agent: hostile packets over UDP and TCP, memory watched as it goes.

Starts `nodedns serve` from this checkout (the bundled example cluster, node-a, an in-process
upstream double for names outside the cluster) and sends it the packets of tests/support/fuzzing.py in
rounds, each round UDP then TCP; after every round it prints the replies owed, answered, missing
and unexpected, the rcodes and the agent's RSS. It stops at the first round with a problem and
exits 1 (the first bad packets are printed in hex), else 0. The agent's log is checked for
tracebacks and errors at the end.

    python3 scripts/fuzz.py                                  # 1,000,000 packets, 20% over TCP
    python3 scripts/fuzz.py --packets 200000 --seed 7
    python3 scripts/fuzz.py --agent-arg=--allow-from=10.0.0.0/8     # every client refused
    python3 scripts/fuzz.py --agent-arg=--rate-limit=50 --may-drop --agent-arg=--query-log=1.0
    python3 scripts/fuzz.py --minutes 30                     # as many rounds as fit
    python3 scripts/fuzz.py --fill --agent-arg=--cache-denial=2000   # tables full first: RSS must stay flat

The test suite runs 100,000 of these packets (tests/e2e/test_hostile.py); this is for the long runs.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.agentproc import AgentProcess  # noqa: E402 - the checkout's test helpers
from tests.support.fuzzing import Generator, Report, blast_tcp, blast_udp, fill_tables  # noqa: E402
from tests.support.helpers import EXAMPLE  # noqa: E402
from tests.support.upstream_double import UpstreamDouble  # noqa: E402

ZONE = {"www.example.com": {"A": ["192.0.2.1"]}, "example.com": {"MX": ["10 mail.example.com."]}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=1_000_000, help="packets in all (default 1,000,000)")
    ap.add_argument("--minutes", type=float, default=0.0, help="run rounds until this much time has passed instead")
    ap.add_argument("--round", type=int, default=100_000, help="packets per round (default 100,000)")
    ap.add_argument("--tcp-share", type=float, default=0.2, help="share of packets sent as TCP frames (default 0.2)")
    ap.add_argument("--seed", type=int, default=int(time.time()), help="RNG seed (default: the time)")
    ap.add_argument("--agent-arg", action="append", default=[], help="extra `nodedns serve` argument (repeatable)")
    ap.add_argument("--no-parse-count", action="store_true", help="skip counting the dnspython-valid queries")
    ap.add_argument("--fill", action="store_true",
                    help="first fill the stored answers (50,000) and the denial cache (its --cache-denial, default "
                         "9984) with distinct names, so RSS can only stay flat afterwards")
    ap.add_argument("--may-drop", action="store_true",
                    help="unanswered UDP queries are allowed (with --agent-arg=--rate-limit=QPS)")
    args = ap.parse_args()

    print(f"seed {args.seed}", flush=True)
    gen = Generator(random.Random(args.seed))
    total = Report()
    with tempfile.TemporaryDirectory(prefix="nodedns-fuzz.") as tmp, UpstreamDouble(ZONE) as up:
        log = Path(tmp) / "agent.log"
        agent_args = ["--manifests", str(EXAMPLE), "--node-name", "node-a", "--upstream", up.address,
                      "--upstream-timeout", "500ms", "--tcp-idle-timeout", "2s", *args.agent_arg]
        with AgentProcess(agent_args, log=log) as agent:
            agent.wait_ready()
            print(f"agent pid {agent.pid} on 127.0.0.1:{agent.port}, RSS {agent.rss_kib()} KiB", flush=True)
            if args.fill:
                denial = next((int(a.split("=", 1)[1]) for a in args.agent_arg if a.startswith("--cache-denial=")),
                              9984)
                filled = fill_tables("127.0.0.1", agent.port, denial_cap=denial)
                print(f"filled: {filled.summary()}; RSS {agent.rss_kib()} KiB", flush=True)
            started = time.monotonic()
            sent = 0
            round_no = 0
            while (time.monotonic() - started < args.minutes * 60) if args.minutes else sent < args.packets:
                round_no += 1
                n = args.round if args.minutes else min(args.round, args.packets - sent)
                tcp_frames = int(n * args.tcp_share)
                udp = blast_udp("127.0.0.1", agent.port, (gen.packet() for _ in range(n - tcp_frames)),
                                count_parseable=not args.no_parse_count, may_drop=args.may_drop,
                                reply_timeout=0.5 if args.may_drop else 5.0)
                tcp = blast_tcp("127.0.0.1", agent.port, gen.tcp_batches(tcp_frames),
                                count_parseable=not args.no_parse_count)
                sent += n
                total.merge(udp)
                total.merge(tcp)
                print(f"round {round_no}: {sent} sent, RSS {agent.rss_kib()} KiB\n  udp: {udp.summary()}\n"
                      f"  tcp: {tcp.summary()}", flush=True)
                if not (udp.ok and tcp.ok and agent.alive()):
                    break
            panics = agent.metric("coredns_panics_total") if agent.alive() else None
            alive = agent.alive()
        text = log.read_text(errors="replace")
    bad_log = [line for line in text.splitlines() if "Traceback" in line or " ERROR " in line]
    print(f"total: {total.summary()}\npackets made: {dict(gen.made)}\npanics: {panics}, agent alive: {alive}, "
          f"log lines with errors: {len(bad_log)}")
    for line in total.problems[:10] + bad_log[:10]:
        print("  " + line)
    return 0 if total.ok and alive and panics == 0 and not bad_log else 1


if __name__ == "__main__":
    sys.exit(main())
