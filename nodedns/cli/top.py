"""`nodedns top [--sort queries|nxdomain|waste] [--namespace NS]`: which Pod of the node asks what, like `kubectl top`.

Fetches `/debug/top` from the agent's debug listener (found as nodedns.cli.endpoint says: an
explicit `--debug`, `$NODEDNS_DEBUG`, the Unix socket /run/nodedns/debug.sock, 127.0.0.1:9254)
and prints one line per Pod of the node (the busiest first by the sort key; DENIED: its queries a DNS
policy denied), the host-network and unknown clients, the denials by Pod, policy and rule, then the
advice; `--json` prints the agent's JSON as is. Stdlib only: this command
stays light. docs/insight.md says what each column means.

Exit codes: 0 printed; 1 the agent is unreachable, its /debug routes are off, or it runs with
`--insight off`; 2 the agent rejected the question (a bad namespace; the reason is printed).
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from nodedns.cli import endpoint

SORTS = ("queries", "nxdomain", "waste")
COLUMNS = ("NAMESPACE", "POD", "OWNER", "QPS", "QUERIES", "NXDOMAIN", "SEARCH-MISSES", "WASTE", "CLUSTER",
           "FORWARDED", "CACHED", "UPSTREAM", "DENIED", "TOP NAME")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "top",
        help="which Pod of this node asks what, and what it costs (per-Pod DNS insight)",
        description="Ask a running agent (its /debug/top route) which Pods of its node send which queries: "
                    "queries, NXDOMAIN answers, search-list misses (the ndots:5 amplification) and their share "
                    "(WASTE), cluster and forwarded answers, cache hits, upstream time, the top name; then "
                    "the advice per Pod and owner.",
    )
    p.add_argument("--sort", choices=SORTS, default="queries", help="order of the Pods (default queries)")
    p.add_argument("--namespace", "-n", metavar="NS", help="only the Pods of this namespace")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="at most N Pods (default 50)")
    p.add_argument("--debug", "--status", dest="endpoint", metavar="ENDPOINT", help=endpoint.HELP)
    p.add_argument("--json", action="store_true", help="print the agent's JSON as is")
    p.set_defaults(run=run)


def fetch(explicit: str | None, sort: str, namespace: str | None, limit: int) -> tuple[str, int, str]:
    """(endpoint, HTTP status, body) of /debug/top; `endpoint.Failed` when the agent cannot be reached."""
    params = {"sort": sort, "limit": str(limit)}
    if namespace:
        params["namespace"] = namespace
    where, code, _, body = endpoint.reach(explicit, "GET", "/debug/top?" + urllib.parse.urlencode(params))
    return where, code, body


def _count(n: Any) -> str:
    return f"{int(n):,}" if isinstance(n, int | float) else "-"


def _upstream(u: Any) -> str:
    if not isinstance(u, Mapping) or not u.get("queries"):
        return "-"
    return f"{u['queries']:,}/{u.get('mean_ms') or 0:.1f}ms"


def _row(ns: str, pod: str, owner: str, fig: Mapping[str, Any]) -> list[str]:
    top = fig.get("top_names") or []
    name = str(top[0]["name"]) if top and isinstance(top[0], Mapping) else "-"
    waste = f"{round(float(fig.get('waste') or 0) * 100)}%"
    return [ns, pod, owner, f"{fig.get('qps', 0):g}", _count(fig.get("queries")), _count(fig.get("nxdomain")),
            _count(fig.get("search_misses")), waste, _count(fig.get("cluster")), _count(fig.get("forwarded")),
            _count(fig.get("cache_hits")), _upstream(fig.get("upstream")), _count(fig.get("denied_total")), name]


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns as `kubectl top` lays them out: left-aligned, three spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def format_top(data: Mapping[str, Any]) -> str:
    rows: list[list[str]] = [list(COLUMNS)]
    for p in data.get("pods", []):
        owner = p.get("owner")
        owner_text = f"{owner['kind']}/{owner['name']}" if isinstance(owner, Mapping) else "-"
        state = p.get("state", "running")
        name = p["name"] + ("" if state == "running" else f" ({state})")
        rows.append(_row(p["namespace"], name, owner_text, p))
    rows.extend(_row(g["group"], "-", "-", g) for g in data.get("groups", []) if g.get("queries"))
    lines = table(rows)
    if len(rows) == 1:
        where = f" in namespace {data['namespace']}" if data.get("namespace") else ""
        lines.append(f"(no queries from Pods of this node{where} yet)")
    denied = [d for d in data.get("policy_denied") or [] if isinstance(d, Mapping)]
    if denied:
        lines.append("")
        lines.append("denied by DNS policies (audit: would have been denied):")
        lines.extend("  " + line for line in table([["POD", "POLICY", "RULE", "QUERIES"]] + [
            [str(d.get("pod")), str(d.get("policy")), str(d.get("rule")), _count(d.get("count"))]
            for d in sorted(denied, key=lambda d: (-int(d.get("count") or 0), str(d.get("pod"))))]))
    advice = data.get("advice") or []
    if advice:
        lines.append("")
        lines.append("advice:")
        lines.extend(f"  - {a}" for a in advice)
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.limit < 1:
        print("nodedns top: --limit must be at least 1", file=sys.stderr)
        return 2
    try:
        where, code, body = fetch(args.endpoint, args.sort, args.namespace, args.limit)
        endpoint.check(where, code, body, "/debug/top")
        data = endpoint.json_of(where, body)
    except endpoint.Failed as failed:
        print(f"nodedns: {failed}", file=sys.stderr)
        return failed.status
    if data.get("insight") != "on":
        print(f"nodedns: {where}: insight is off on this agent (it runs with --insight off): nothing is counted "
              f"per client\n{endpoint.agent_line(data, where)}", file=sys.stderr)
        return 1
    sys.stdout.write(body if args.json else endpoint.agent_line(data, where) + "\n" + format_top(data))
    return 0
