"""`nodedns lookup NAME [TYPE] [--client IP] [--debug ENDPOINT]`: ask a running agent how it answers a name.

Fetches `/debug/lookup` from the agent's debug listener (found as nodedns.cli.endpoint says: an
explicit `--debug`, `$NODEDNS_DEBUG`, the Unix socket /run/nodedns/debug.sock, 127.0.0.1:9254)
and prints the explanation as text, or the raw JSON with `--json`. Exit codes: 0 printed, 1 the
agent is unreachable or its /debug routes are off, 2 the agent rejected the question (bad name,
type or client; the agent's reason is printed).
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from nodedns.cli import endpoint


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "lookup",
        help="explain how a running agent answers a name",
        description="Ask a running agent (its /debug/lookup route) how it answers NAME: the path (cluster "
                    "index, cache, stub domain, upstream, refused), the records and the TTL left; with "
                    "--client, the search-list expansion that Pod's resolver would try.",
    )
    p.add_argument("name", metavar="NAME", help="the name to look up")
    p.add_argument("type", metavar="TYPE", nargs="?", default="A", help="record type (default A)")
    p.add_argument("--client", metavar="IP", help="a Pod IP: show its search-list expansion")
    p.add_argument("--debug", "--status", dest="endpoint", metavar="ENDPOINT", help=endpoint.HELP)
    p.add_argument("--json", action="store_true", help="print the agent's JSON as is")
    p.set_defaults(run=run)


def fetch(explicit: str | None, name: str, qtype: str, client: str | None) -> tuple[str, int, str]:
    """(endpoint, HTTP status, body) of /debug/lookup; `endpoint.Failed` when the agent cannot be reached."""
    params = {"name": name, "type": qtype}
    if client:
        params["client"] = client
    where, code, _, body = endpoint.reach(explicit, "GET", "/debug/lookup?" + urllib.parse.urlencode(params))
    return where, code, body


def _records(rrs: Sequence[Mapping[str, Any]]) -> list[str]:
    return [f"{r['name']} {r['ttl']} {r['type']} {r['data']}" for r in rrs]


PATHS = {"cluster": "cluster index", "cache": "cache", "stub": "stub domain", "upstream": "upstream",
         "refused": "refused", "filtered": "AAAA filter", "last-known-good": "last-known-good (stale over NXDOMAIN)",
         "hosts": "hosts file"}


def format_answer(a: Mapping[str, Any], indent: str = "", note: str = "") -> list[str]:
    q = a["question"]
    lines = [f"{indent}{q['name']} {q['type']}{note}"]
    how = a.get("how", "")
    lines.append(f"{indent}  path:     {PATHS.get(a['path'], a['path'])}" + (f" ({how})" if how else ""))
    flags = " ".join(a.get("flags", []))
    lines.append(f"{indent}  rcode:    {a['rcode'] or '-'}" + (f" (flags: {flags})" if flags else ""))
    if a.get("answer"):
        lines.append(f"{indent}  answer:")
        lines.extend(f"{indent}    {r}" for r in _records(a["answer"]))
    elif a.get("authority"):
        lines.append(f"{indent}  authority:")
        lines.extend(f"{indent}    {r}" for r in _records(a["authority"]))
    if a.get("additional"):
        lines.append(f"{indent}  additional:")
        lines.extend(f"{indent}    {r}" for r in _records(a["additional"]))
    if a.get("ttl_left") is not None:
        lines.append(f"{indent}  ttl left: {a['ttl_left']}s")
    if a.get("forward"):
        lines.append(f"{indent}  forward:  " + ", ".join(f"{k}={v}" for k, v in a["forward"].items()))
    return lines


def format_explanation(data: Mapping[str, Any]) -> str:
    c = data.get("client")
    lines = format_answer(data, note="  (as an absolute name)" if c is not None else "")
    if c is not None:
        lines.append("")
        if not c.get("pod"):
            lines.append(f"client {c['ip']}: {c.get('note', 'no pod')}")
        else:
            lines.append(f"client {c['ip']}: pod {c['pod']}, dnsPolicy {c['dns_policy']}"
                         + (", host network" if c.get("host_network") else ""))
            if c.get("error"):
                lines.append(f"  error:    {c['error']}")
                return "\n".join(lines) + "\n"
            lines.append(f"  nameservers: {' '.join(c.get('nameservers', [])) or '(none)'}")
            lines.append(f"  search:   {' '.join(c['search']) or '(none)'}")
            lines.append(f"  ndots:    {c['ndots']}    (from {c['search_source']})")
            lines.extend(f"  note:     {n}" for n in c.get("notes", []))
            lines.append("  queries its resolver sends, in order:")
            for i, q in enumerate(c.get("queries", []), 1):
                sub = format_answer(q, "      ")
                lines.append(f"   {i:2d}. {sub[0].strip()}")
                lines.extend(sub[1:])
            lines.append(f"  result:   {c.get('result', '')}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    try:
        where, code, body = fetch(args.endpoint, args.name, args.type, args.client)
        endpoint.check(where, code, body, "/debug/lookup")
        if args.json:
            sys.stdout.write(body)
            return 0
        data = endpoint.json_of(where, body)
    except endpoint.Failed as failed:
        print(f"nodedns: {failed}", file=sys.stderr)
        return failed.status
    sys.stdout.write(endpoint.agent_line(data, where) + "\n" + format_explanation(data))
    return 0
