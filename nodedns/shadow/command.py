"""`nodedns shadow`: check nodedns against the node's current DNS without answering a query; `--report` reads one.

`nodedns shadow [serve's options] [--interface IF] [--port 53]` runs a shadow agent
(nodedns.shadow.agent): the same sync options and configuration file as `nodedns serve` (the flags
are serve's, from nodedns.config), no DNS listener, a read-only capture of the port's UDP and TCP
traffic, every query's answer judged against the one the current DNS sent (nodedns.shadow.judge). Its
findings are at GET /debug/shadow on the debug listener, in /metrics and on the status page.

`nodedns shadow --report [--debug ENDPOINT]` asks a running shadow's debug listener (found as
nodedns.cli.endpoint says, like `nodedns top`) and prints the counts and the last mismatches in
words; `--json` prints the document as is. Exit codes: 0 printed; 1 unreachable, or not a shadow
(no /debug/shadow there); 2 a bad flag.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from nodedns.cli import endpoint
from nodedns.cli.serve import add_config_options

# What would touch the node, set aside before the configuration is checked: the ConfigMap's setup-interface and
# firewall need a local-ip, which a shadow is not given (nodedns.shadow.agent.shadow_config sets aside the rest)
SET_ASIDE = {"setup_interface": "", "firewall": "none"}
OWN = ("interface", "port", "max_rate", "report", "endpoint", "json", "limit")
RESULT_WORDS = {
    "match": "the same answer",
    "mismatch": "a different answer",
    "known": "a documented difference (not a fault)",
    "unknown": "not judged (no response seen, not synced, the other DNS failed)",
}


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "shadow",
        help="watch the node's DNS traffic and compare its answers with nodedns's, answering nothing",
        description="Run beside the node's current DNS (node-cache, kube-dns, CoreDNS) with serve's options and "
                    "configuration, bind no DNS address, change nothing on the node: capture the DNS traffic of "
                    "--port on --interface (CAP_NET_RAW), answer every query from nodedns's own index and compare "
                    "with the answer the current DNS sent. GET /debug/shadow on the debug listener, nodedns shadow "
                    "--report, the nodedns_shadow_* metrics and the status page show what differs "
                    "(docs/shadow.md).",
        argument_default=argparse.SUPPRESS,
    )
    p.add_argument("--interface", metavar="IF", default="any",
                   help="the interface to watch; any: every interface (default any)")
    p.add_argument("--port", type=_port, metavar="PORT", default=53, help="the DNS port to watch (default 53)")
    p.add_argument("--max-rate", type=float, metavar="QPS", default=None,
                   help="queries judged a second at most; beyond it they are counted dropped (default 2000)")
    p.add_argument("--report", action="store_true", default=False,
                   help="print what a running shadow found (its /debug/shadow) and exit")
    p.add_argument("--debug", dest="endpoint", metavar="ENDPOINT", default=None,
                   help="--report: " + endpoint.HELP)
    p.add_argument("--json", action="store_true", default=False, help="--report: print the JSON as is")
    p.add_argument("--limit", type=int, metavar="N", default=10, help="--report: at most N mismatches (default 10)")
    add_config_options(p)
    p.set_defaults(run=run)


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return int(text)


def run(args: argparse.Namespace) -> int:
    if args.report:
        return report(args.endpoint, args.limit, as_json=args.json)
    from nodedns import config as cfgmod
    from nodedns.cli.serve import _unreadable
    from nodedns.errors import ConfigError
    from nodedns.runtime import logutil

    if args.max_rate is not None and not args.max_rate > 0:
        print("nodedns shadow: --max-rate must be above 0", file=sys.stderr)
        return 2
    try:
        config = cfgmod.from_sources(config_flags(args))
    except ConfigError as exc:
        print(f"nodedns: config error: {exc}", file=sys.stderr)
        return 2
    if config.manifests is not None:
        problem = _unreadable(config.manifests)
        if problem:
            print(f"nodedns: config error: manifests: {problem}", file=sys.stderr)
            return 2
    logutil.setup(config.log_level, config.log_format)

    from nodedns.app.run import run_agent
    from nodedns.shadow.agent import shadow

    return run_agent(config, make=lambda cfg: shadow(cfg, interface=args.interface, port=args.port,
                                                     max_rate=args.max_rate))


def config_flags(args: argparse.Namespace) -> dict[str, Any]:
    """serve's flags of the command line, with what would touch the node set aside (SET_ASIDE)."""
    return {**{k: v for k, v in vars(args).items() if k not in ("run", "command", *OWN)}, **SET_ASIDE}


def report(explicit: str | None, limit: int, *, as_json: bool = False) -> int:
    if not 0 <= limit <= 50:
        print("nodedns shadow: --limit must be from 0 to 50", file=sys.stderr)
        return 2
    try:
        where, code, _, body = endpoint.ask(explicit, "GET", f"/debug/shadow?limit={limit}")
    except (OSError, ValueError) as exc:
        print(f"nodedns: {endpoint.unreachable(explicit, exc)}", file=sys.stderr)
        return 1
    if code == 404:
        print(f"nodedns: {endpoint.no_route(where, '/debug/shadow')} (is it a nodedns shadow? nodedns serve has "
              "no /debug/shadow)", file=sys.stderr)
        return 1
    if code != 200:
        print(f"nodedns: {where} answered HTTP {code}: {body.strip()[:200]}", file=sys.stderr)
        return 1
    try:
        doc = json.loads(body)
    except ValueError:
        print(f"nodedns: {where} answered something that is not JSON", file=sys.stderr)
        return 1
    sys.stdout.write(body if as_json else format_report(doc))
    return 0


def _n(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def format_report(doc: Mapping[str, Any]) -> str:
    """The report in words: what was judged, how, why it differed, and the last mismatches."""
    answers = doc.get("answers") or {}
    total = sum(_n(v) for v in answers.values())
    agent = doc.get("agent") or {}
    lines = [f"nodedns shadow on {agent.get('node', '?')}, watching {doc.get('interface', '?')} port "
             f"{doc.get('port', '?')}: {total:,} queries judged"
             + ("" if doc.get("synced", True) else " (the index has NOT synced yet)")]
    rows = [["RESULT", "QUERIES", "SHARE", "MEANING"]]
    for result, words in RESULT_WORDS.items():
        n = _n(answers.get(result))
        share = f"{100 * n / total:.1f}%" if total else "-"
        rows.append([result, f"{n:,}", share, words])
    lines += ["", *_table(rows)]
    reasons = doc.get("reasons") or {}
    for section, title in (("mismatches", "mismatches"), ("known", "documented differences"),
                           ("unknown", "not judged")):
        counts = doc.get(section) or {}
        said = reasons.get("mismatch" if section == "mismatches" else section) or {}
        if any(_n(v) for v in counts.values()):
            lines += ["", f"{title} by reason:"]
            lines += [f"  {reason}: {_n(n):,} — {said.get(reason, '')}".rstrip(" —")
                      for reason, n in sorted(counts.items(), key=lambda kv: -_n(kv[1]))]
    dropped = doc.get("dropped") or {}
    if any(_n(v) for v in dropped.values()):
        lines += ["", "dropped (not judged, to stay within bounds): "
                  + ", ".join(f"{_n(n):,} {why}" for why, n in sorted(dropped.items()))]
    recent = doc.get("mismatch_list") or []
    if recent:
        lines += ["", "last mismatches (newest first):"]
        for m in recent:
            lines += _mismatch(m)
    elif total:
        lines += ["", "no mismatch: every judged answer was the same, or a documented difference."]
    else:
        lines += ["", "nothing judged yet: no query seen on the watched port (is it the right --interface?)"]
    return "\n".join(lines) + "\n"


def _mismatch(m: Mapping[str, Any]) -> list[str]:
    q = m.get("question") or {}
    pod = f" (Pod {m['pod']})" if m.get("pod") else ""
    out = [f"  {m.get('at', '')}  {q.get('name', '?')} {q.get('type', '?')} from {m.get('client', '?')}{pod} "
           f"to {m.get('server', '?')} over {m.get('transport', '?')}",
           f"    {m.get('reason', '')}: {m.get('why', '')}"]
    out.append("    nodedns answers:   " + _answer(m.get("ours")))
    out.append("    the other DNS:     " + _answer(m.get("theirs")))
    return out


def _answer(desc: Any) -> str:
    if not isinstance(desc, Mapping):
        return "-"
    if "forwarded" in desc:
        return str(desc["forwarded"])
    records = [f"{r.get('type')} {r.get('data')}" for r in desc.get("answer") or [] if isinstance(r, Mapping)]
    return f"{desc.get('rcode', '?')}" + (": " + ", ".join(records) if records else " (no records)")


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
