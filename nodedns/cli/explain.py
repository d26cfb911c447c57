"""`nodedns explain NAME --pod FILE | --pod-ref NS/NAME [--debug ENDPOINT]`: a Pod's resolver, simulated.

Posts the question to the agent's `POST /debug/explain` on its debug listener (found as
nodedns.cli.endpoint says; stdlib HTTP: this command stays light): with `--pod FILE` the manifest
(YAML or JSON, `-` for stdin), with `--pod-ref` a Pod of the agent's index. Prints what the agent
answers (every query the Pod's resolver sends for NAME, with its answer, the total and advice;
docs/beyond.md "`nodedns explain`"); `--json` prints the agent's JSON as is.

Exit codes: 0 printed; 1 the agent is unreachable, its /debug routes are off, or it failed;
2 bad input (the file cannot be read, is not a Pod, or the API server would reject it; a bad
name or type); 3 the agent does not know the Pod named by --pod-ref.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from nodedns.cli import endpoint
from nodedns.cli.resolv_conf import Fail, load_pod

EXIT_OK = 0
EXIT_AGENT = 1
EXIT_INPUT = 2
EXIT_UNKNOWN_POD = 3

_EPILOG = """\
exit status: 0 printed; 1 the agent is unreachable, runs with --no-debug, or failed; 2 bad input
(unreadable file, not a Pod, a Pod the API server would reject, a bad name or type); 3 the agent
does not know the Pod named by --pod-ref (it indexes only its own node's Pods: use --pod FILE).
"""


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "explain",
        help="simulate a Pod's resolver for a name: every query, the answers, the cost",
        description="Simulate the resolver of a Pod for NAME: its resolv.conf, every query its glibc resolver "
                    "sends (search list, ndots, A and AAAA) with the answer the agent gives, the total, and what "
                    "dnsConfig would make the lookup cheaper.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", metavar="NAME", help="the name the application looks up, as it writes it")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--pod", metavar="FILE", help="the Pod manifest, YAML or JSON; - for stdin")
    which.add_argument("--pod-ref", metavar="NS/NAME", help="a Pod of the agent's node, by namespace/name")
    p.add_argument("--type", dest="types", metavar="TYPE", action="append",
                   help="record type to ask (repeatable; default A and AAAA, as getaddrinfo)")
    p.add_argument("--debug", "--status", dest="endpoint", metavar="ENDPOINT", help=endpoint.HELP)
    p.add_argument("--json", action="store_true", help="print the agent's JSON as is")
    p.set_defaults(run=run)


def post(explicit: str | None, body: Mapping[str, Any]) -> tuple[str, int, str, str]:
    """(endpoint, HTTP status, content type, body) of POST /debug/explain; `endpoint.Failed` when the agent
    cannot be reached."""
    return endpoint.reach(explicit, "POST", "/debug/explain", json.dumps(body).encode(),
                          {"Content-Type": "application/json"})


def _records(rrs: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{r['type']} {r['data']}" for r in rrs) or "no records"


def format_query(i: int, q: Mapping[str, Any], width: int = 0) -> str:
    question = q["question"]
    head = f"  {i:3d}. {question['name']:<{width}} {question['type']:<5} {q['rcode'] or '-':<8}"
    walked = q.get("autopath")
    policy = q.get("policy")
    if policy is not None and (policy["action"] == "deny" or policy["rule"] != "default"):
        head += f" [{policy['how']}]"
    if walked is not None and walked["result"] == "searched":
        return f"{head} autopath, answered for {walked['name']}: {_records(q['answer'])}"
    if walked is not None:
        return f"{head} autopath ({walked['result'].replace('_', ' ')}): {_records(q['answer'])}"
    return f"{head} {q['path']}: {_records(q['answer'])}"


def format_explanation(data: Mapping[str, Any]) -> str:
    pod = data["pod"]
    where = "from the agent's index" if pod["source"] == "index" else "from the manifest given"
    details = ", ".join(x for x in (f"IP {pod['ip']}" if pod.get("ip") else "",
                                    f"node {pod['node']}" if pod.get("node") else "") if x)
    lines = [f"pod {pod['ref']} ({where}{'; ' + details if details else ''}), dnsPolicy {pod['dns_policy']}"
             + (", host network" if pod.get("host_network") else "")]
    lines.append("its /etc/resolv.conf:")
    lines.extend(f"    {line}" for line in data["resolv_conf"].splitlines())
    lines.extend(f"  warning: {w}" for w in data.get("warnings", []))
    name = data["name"]
    dots = name.rstrip(".").count(".")
    if name.endswith("."):
        lines.append(f"{name} ends with a dot: an absolute name, no search list")
    elif dots >= data["ndots"]:
        lines.append(f"{name} has {dots} dots, at least ndots {data['ndots']}: the name as is first, then the "
                     "search domains")
    else:
        lines.append(f"{name} has {dots} dot{'s' if dots != 1 else ''}, fewer than ndots {data['ndots']}: "
                     "the search domains first, the name as is last")
    lines.append(f"queries its resolver sends, in order ({' and '.join(data['types'])} per name):")
    width = max((len(q["question"]["name"]) for q in data["queries"]), default=0)
    lines.extend(format_query(i, q, width) for i, q in enumerate(data["queries"], 1))
    lines.append(f"result:   {data['result']}")
    total = f"total:    {data['total']} quer{'y' if data['total'] == 1 else 'ies'}"
    if "without_autopath" in data:
        total += f" ({data['without_autopath']['total']} without autopath)"
    lines.append(total)
    ap = data["autopath"]
    if not ap["enabled"]:
        lines.append(f"autopath: off ({ap['reason']})")
    elif ap["applies"]:
        lines.append("autopath: applies to this Pod" + (f" ({ap['reason']})" if ap["reason"] else ""))
    else:
        lines.append(f"autopath: not for this Pod: {ap['reason']}")
    policies = data.get("policies") or []
    lines.append("DNS policies: " + (", ".join(f"{p['policy']} ({p['mode']})" for p in policies) if policies
                                     else "none applies to this Pod"))
    if data.get("advice"):
        lines.append("advice:")
        lines.extend(f"  - {a}" for a in data["advice"])
    lines.extend(format_seen(data.get("seen"), pod))
    return "\n".join(lines) + "\n"


def format_seen(seen: Any, pod: Mapping[str, Any]) -> list[str]:
    """What per-Pod insight saw this Pod send (`nodedns top` has every Pod)."""
    if not isinstance(seen, Mapping):
        return []
    ns = pod["ref"].split("/", 1)[0]
    top = ", ".join(str(n["name"]) for n in seen.get("top_names", [])[:3] if isinstance(n, Mapping)) or "-"
    lines = [f"seen by this agent: {seen.get('queries', 0):,} queries from this Pod, "
             f"{seen.get('search_misses', 0):,} search-list misses ({round(float(seen.get('waste') or 0) * 100)}%), "
             f"{seen.get('nxdomain', 0):,} NXDOMAIN; most asked: {top} (nodedns top --namespace {ns})"]
    lines.extend(f"  - {a}" for a in seen.get("advice", []))
    return lines


def _fail(message: str, code: int) -> int:
    print(f"nodedns explain: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name}
    if args.types:
        body["types"] = [t for value in args.types for t in value.split(",") if t.strip()]
    if args.pod_ref is not None:
        body["podRef"] = args.pod_ref
    else:
        try:
            body["pod"] = load_pod(args.pod)
        except Fail as fail:
            return _fail(str(fail), EXIT_INPUT)
    try:
        where, code, ctype, text = post(args.endpoint, body)
        detail = _json(text) if "json" in ctype else None
        if code == 200 and detail is not None:
            sys.stdout.write(text if args.json else endpoint.agent_line(detail, where) + "\n"
                             + format_explanation(detail))
            return EXIT_OK
        if code == 404 and detail is not None and detail.get("reason") == "PodNotFound":
            return _fail(str(detail.get("error")), EXIT_UNKNOWN_POD)
        if code == 422 and detail is not None:
            errors = [f"  {e.get('field')}: {e.get('message')}" for e in detail.get("errors", [])]
            return _fail("\n".join(["the API server would reject this Pod:", *errors]), EXIT_INPUT)
        endpoint.check(where, code, text, "/debug/explain", asked="request", ok=(), missing=(404, 405),
                       reason=f"{detail.get('error')}" if detail is not None else None)
    except endpoint.Failed as failed:
        return _fail(str(failed), failed.status)
    raise AssertionError("endpoint.check raises for every status when none is ok")


def _json(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
