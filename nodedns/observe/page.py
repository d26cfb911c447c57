"""The status page (`GET /` on the debug listener): HTML with inline SVG charts, from /status and the history (pure).

The page is assembled from sections (`SECTIONS`): each is a function of `PageData` (the /status
document, the history document of `nodedns.observe.history`) that returns one `<section>`; another part
adds its own by appending a `Section` (or passing `sections=`). Its HTML, styles and script are package
files (nodedns/observe/static/), put inline; the charts are SVG (nodedns.observe.charts), so the page shows
them without JavaScript too; the script fetches the page again every few seconds and swaps the sections in
(a `<meta refresh>` without JavaScript). No external asset, no web font: the page works on a node without
a network. The words are for a newcomer: what each figure means, and what an absent part means.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, NamedTuple

from nodedns.observe.charts import (
    OTHER_COLOR,
    RCODE_COLORS,
    Frame,
    Series,
    _m,
    fmt_age,
    fmt_count,
    fmt_ms,
    fmt_pct,
    health_chart,
    latency_scale,
    line_chart,
    linear,
    stacked_chart,
)

REFRESH_SECONDS = 5

# What an absent part means (observe.ABSENT puts the same words in /status; these are the fallback).
ABSENT = {
    "sync": "not used: the cluster objects come from a manifest file (--manifests), not from the Kubernetes API",
    "cache": "no upstream configured: names outside the cluster are refused, so nothing is cached",
    "upstream": "no upstream configured: names outside the cluster are refused",
    "node": "not managed: this agent adds no network interface and no firewall rules",
}

# How an answer was made (metrics.SlotLabels.path), in words.
PATH_WORDS = {
    "cluster": "cluster names, from the index",
    "cache": "from the forward cache",
    "upstream": "asked of an upstream",
    "stub": "asked of a stub domain's server",
    "filtered": "AAAA filtered, NODATA here (--filter-aaaa)",
    "refused": "refused",
    "formerr": "malformed queries (FORMERR)",
    "notimp": "not implemented (NOTIMP)",
    "servfail": "failed (SERVFAIL)",
    "badvers": "unsupported EDNS version",
    "dropped": "dropped, not answered",
    "unknown": "not classified",
}

PART_WORDS = {
    "sync": "Kubernetes API watch",
    "cache": "forward cache",
    "upstream": "upstreams",
    "node": "interface and firewall rules",
}

RCODE_WORDS = {
    "NOERROR": "the name exists (with or without records of the type)",
    "NXDOMAIN": "no such name",
    "SERVFAIL": "no answer could be had (upstream down, index not synced yet)",
    "REFUSED": "not answered here (no upstream for the name, or a client not allowed)",
    "FORMERR": "the query was malformed",
    "NOTIMP": "a kind of query the agent does not do",
}
PATH_COLORS = {"cluster": "#0ea5e9", "cache": "#7c3aed", "upstream": "#ea580c", "stub": "#c2410c",
               "refused": "#9ca3af", "servfail": "#dc2626", "formerr": "#a16207", "notimp": "#78716c"}


class PageData(NamedTuple):
    status: Mapping[str, Any]  # the /status document
    history: Mapping[str, Any]  # nodedns.observe.history.History.document() ({} when there is none)


@dataclass(frozen=True, slots=True)
class Section:
    """One part of the page: `render(data)` returns a whole `<section id=...>` element."""

    id: str
    render: Callable[[PageData], str]


e = html.escape


# ----------------------------------------------------------------------------------------------
# Sections


MIN_SHOWN = 60.0  # seconds the time axis spans at least (a young agent's charts fill it)


def _frame(history: Mapping[str, Any]) -> Frame:
    """The time axis: the history's window (15 minutes), or, while the agent is younger, the time since
    its first point (at least a minute), so a new agent's charts are not a sliver at the right."""
    points = history.get("points") or []
    window = float(history.get("window_seconds", 900))
    interval = float(history.get("interval_seconds", 5))
    if not points:
        return Frame(now=0.0, window=window, interval=interval)
    now = float(points[-1]["t"])
    start = float(points[0]["t"]) - float(points[0].get("seconds") or interval)
    shown = window if now - start >= window - 2 * interval else max(MIN_SHOWN, now - start)
    return Frame(now=now, window=shown, interval=interval)


def _span(frame: Frame, history: Mapping[str, Any]) -> str:
    """The section's title: the window when it is full, else the time since the first point."""
    full = float(history.get("window_seconds", 900))
    if frame.window >= full:
        return f"The last {_duration_words(full)}"
    return f"Since the start ({_duration_words(frame.window)} shown; the charts widen to {_duration_words(full)})"


def _duration_words(seconds: float) -> str:
    s = round(seconds)
    if s < 90:
        return f"{s} seconds"
    if s < 5400:
        return f"{round(s / 60)} minutes"
    return f"{s / 3600:.1f} hours"


def _chart_card(cid: str, title: str, headline: str, chart: str, note: str, legend: str = "") -> str:
    return (f'<figure class=chart id="chart-{cid}"><figcaption><span class=t>{e(title)}</span>'
            f'<span class=now>{headline}</span></figcaption>{chart}{legend}<p class=note>{note}</p></figure>')


def _lat(p: Mapping[str, Any], q: str) -> float | None:
    v = _m(p.get("latency_ms")).get(q)
    return float(v) if isinstance(v, int | float) else None


def _num(p: Mapping[str, Any], key: str) -> float | None:
    v = p.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def is_shadow(status: Mapping[str, Any]) -> bool:
    """`nodedns shadow`: it answers nothing, so its page leads with the verdict and shows no serving figures."""
    return isinstance(status.get("shadow"), Mapping)


# the parts a shadow has no use for: it answers no client, caches nothing, owns no address, counts no Pod's queries
NOT_IN_SHADOW = ("cache", "node", "insight", "limits", "kube_dns")


def _warnings(st: Mapping[str, Any]) -> list[str]:
    """The warnings of the /status document that apply to this agent (a shadow's, not those of what it does not do)."""
    said = [str(w) for w in st.get("warnings") or []]
    if is_shadow(st):
        said = [w for w in said if w.split(":", 1)[0] not in NOT_IN_SHADOW]
    return said


def shadow_verdict(section: Mapping[str, Any]) -> tuple[str, str]:
    """(class, words): what the shadow found so far, in one sentence."""
    answers = _m(section.get("answers"))
    n = {k: int(_num(answers, k) or 0) for k in ("match", "mismatch", "known", "unknown")}
    judged = n["match"] + n["mismatch"] + n["known"]
    where = f'{section.get("interface", "")} port {section.get("port", 53)}'
    if not judged:
        seen = (f'; {fmt_count(n["unknown"])} not judged (no response seen, not synced, or the other DNS failed)'
                if n["unknown"] else "")
        return "absent", f"Nothing judged yet: no query and response seen on {where}{seen}."
    tail = ((f'{fmt_count(n["known"])} documented differences, ' if n["known"] else "")
            + f'{fmt_count(n["unknown"])} not judged')
    if not n["mismatch"]:
        return "ok", (f'No mismatch: {fmt_count(n["match"])} of {fmt_count(judged)} answers judged are the same as '
                      f"the node's DNS sent ({tail}).")
    reasons = ", ".join(f"{k} {fmt_count(v)}" for k, v in sorted(_m(section.get("mismatches")).items()))
    return "bad", (f'{fmt_count(n["mismatch"])} mismatches in {fmt_count(judged)} answers judged ({reasons}; '
                   f"{tail}): nodedns would have answered these differently. Each is listed below.")


def section_summary(data: PageData) -> str:
    """Who this is, whether it answers, and why not (a shadow: what it watches, and its verdict)."""
    st = data.status
    if is_shadow(st):
        return _shadow_summary(st)
    cfg = _m(st.get("config"))
    ready = bool(st.get("ready"))
    node = cfg.get("node-name") or ""
    listeners = ", ".join(str(ls.get("server", "")).removeprefix("dns://") for ls in st.get("listeners") or []
                          if isinstance(ls, Mapping))
    state = str(st.get("state", ""))
    badge = ("<b class=\"badge ok\">ready</b> answering DNS" if ready else
             "<b class=\"badge bad\">not ready</b>" + (" still answering DNS" if state == "stopping" else ""))
    reasons = "".join(f"<li>{e(str(r))}</li>" for r in st.get("unready") or [])
    warned = "".join(f"<li>{e(w)}</li>" for w in _warnings(st))
    who = f" on <b>{e(str(node))}</b>" if node else ""
    return (f'<section id=summary><h1>nodedns <small>{e(str(st.get("version", "")))}</small>{who}</h1>'
            f'<p class=lead>{badge} on {e(listeners) or "no address yet"} · {e(state)} for '
            f'{fmt_age(_num(st, "uptime_seconds"))}</p>'
            + (f'<ul class=problems>{reasons}</ul>' if reasons else "")
            + (f'<ul class=warnings>{warned}</ul>' if warned else "") + "</section>")


def _shadow_summary(st: Mapping[str, Any]) -> str:
    """A shadow's top: it answers nothing; what it watches; whether it judges (and why not); the verdict."""
    section = _m(st.get("shadow"))
    node = _m(st.get("config")).get("node-name") or ""
    who = f" on <b>{e(str(node))}</b>" if node else ""
    judging = ("<b class=\"badge ok\">judging</b>" if st.get("ready") else "<b class=\"badge bad\">not judging</b>")
    reasons = "".join(f"<li>{e(str(r))}</li>" for r in st.get("unready") or [])
    warned = "".join(f"<li>{e(w)}</li>" for w in _warnings(st))
    cls, words = shadow_verdict(section)
    return (f'<section id=summary><h1>nodedns shadow <small>{e(str(st.get("version", "")))}</small>{who}</h1>'
            f'<p class=lead>{judging} the answers of the node\'s DNS on {e(str(section.get("interface", "")))} port '
            f'{e(str(section.get("port", 53)))}; answering nothing · {e(str(st.get("state", "")))} for '
            f'{fmt_age(_num(st, "uptime_seconds"))}</p>'
            + (f'<ul class=problems>{reasons}</ul>' if reasons else "")
            + (f'<ul class=warnings>{warned}</ul>' if warned else "")
            + f'<p id=verdict class="verdict {cls}">{e(words)}</p></section>')


def section_charts(data: PageData) -> str:
    """The last 15 minutes (or since the start): query rate, answer time, hit ratio, rcodes, upstream health."""
    hist = data.history
    points: list[Mapping[str, Any]] = [p for p in hist.get("points") or [] if isinstance(p, Mapping) and "t" in p]
    frame = _frame(hist)
    window = _m(hist.get("window"))
    full = frame.window >= float(hist.get("window_seconds", 900))
    over = f"over {fmt_age(frame.window)}" if full else "since the start"
    last = points[-1] if points else {}
    cards = []

    qps_top = max((_num(p, "qps") or 0.0 for p in points), default=0.0)
    cards.append(_chart_card(
        "qps", "Queries per second",
        f'<b>{fmt_count(_num(last, "qps") or 0)}</b> now, peak {fmt_count(qps_top)}' if points else "",
        line_chart(frame, points, [Series("queries", "#2563eb", lambda p: _num(p, "qps"), fill=True)],
                   linear(qps_top, fmt_count), lambda p: f'{fmt_count(_num(p, "qps") or 0)} q/s',
                   "queries per second over time"),
        "Answers sent each second, every listener, UDP and TCP."))

    lat_top = max((_lat(p, "p99") or 0.0 for p in points), default=0.0)
    wl = _m(window.get("latency_ms"))
    legend = ('<p class=legend><span><i style="background:#16a34a"></i>p50: half the answers took at most '
              'this long</span><span><i style="background:#dc2626"></i>p99: 99 in 100 did</span></p>')
    cards.append(_chart_card(
        "latency", "Answer time",
        f'p50 <b>{fmt_ms(_lat(last, "p50"))}</b> · p99 <b>{fmt_ms(_lat(last, "p99"))}</b>' if points else "",
        line_chart(frame, points, [Series("p99", "#dc2626", lambda p: _lat(p, "p99")),
                                   Series("p50", "#16a34a", lambda p: _lat(p, "p50"))],
                   latency_scale(lat_top),
                   lambda p: f'p50 {fmt_ms(_lat(p, "p50"))}, p99 {fmt_ms(_lat(p, "p99"))}',
                   "answer time p50 and p99 over time"),
        "Time from a query's arrival to its answer, in the agent. Stored answers leave in microseconds "
        "and are counted as under 0.25 ms; the rest (built from the index, or asked of an upstream) are timed. "
        f"All of them {over}: p50 {fmt_ms(_num(wl, 'p50'))}, p99 {fmt_ms(_num(wl, 'p99'))}.",
        legend))

    cards.append(_chart_card(
        "hits", "Hit ratio",
        f'answered from memory: <b>{fmt_pct(_num(last, "hit_ratio"))}</b> now · '
        f'{fmt_pct(_num(window, "hit_ratio"))} {over}' if points else "",
        line_chart(frame, points, [Series("hit ratio", "#7c3aed", lambda p: _num(p, "hit_ratio"), fill=True)],
                   linear(1.0, lambda v: f"{v * 100:.0f}%"),
                   lambda p: f'{fmt_pct(_num(p, "hit_ratio"))} from memory ({p.get("from_memory", 0)} of '
                             f'{(p.get("from_memory") or 0) + (p.get("worked_out") or 0)})',
                   "hit ratio over time"),
        "Answers sent from memory (an answer stored earlier), out of all the answers that were either "
        "stored or had to be built from the cluster index or asked of an upstream."))

    shares = _m(window.get("rcodes"))
    order = [k for k, _ in sorted(shares.items(), key=lambda kv: -kv[1])]
    total = sum(v for v in shares.values() if isinstance(v, int | float))
    legend = "".join(
        f'<span title="{e(RCODE_WORDS.get(k, k))}"><i style="background:{RCODE_COLORS.get(k, OTHER_COLOR)}"></i>'
        f'{e(k)} {fmt_pct(shares[k] / total)}</span>' for k in order) if total else ""
    words = "; ".join(f"{k}: {RCODE_WORDS[k]}" for k in order if k in RCODE_WORDS)
    cards.append(_chart_card(
        "rcodes", "Answers by rcode",
        f'{fmt_count(total)} answers {over}' if points else "",
        stacked_chart(frame, points, order, "answers by rcode over time"),
        (e(words) + "." if words else "Each bar: one interval's answers, split by their rcode."),
        f"<p class=legend>{legend}</p>" if legend else ""))

    made = _m(window.get("paths"))
    made_total = sum(v for v in made.values() if isinstance(v, int | float))
    made_order = [k for k, _ in sorted(made.items(), key=lambda kv: -kv[1])]
    legend = "".join(
        f'<span><i style="background:{PATH_COLORS.get(k, OTHER_COLOR)}"></i>{e(PATH_WORDS.get(k, k))} '
        f'{fmt_pct(made[k] / made_total)}</span>' for k in made_order) if made_total else ""
    cards.append(_chart_card(
        "sources", "Where answers came from",
        f'for names in the cluster: <b>{fmt_pct(made.get("cluster", 0) / made_total)}</b> of the answers {over}'
        if made_total else "",
        stacked_chart(frame, points, made_order, "answers by where they came from over time", key="paths",
                      colors=PATH_COLORS),
        "Cluster names come from the agent's index; other names from the forward cache, or from an "
        "upstream when the cache did not have them; refused: names no upstream is configured for, or a "
        "client not allowed.",
        f"<p class=legend>{legend}</p>" if legend else ""))

    upstream = _m(data.status.get("upstream"))
    names: list[str] = []
    for p in points:
        for name in _m(p.get("upstreams")):
            if name not in names:
                names.append(name)
    if upstream.get("present") is False and not names:
        chart = f'<p class=absent>{e(str(upstream.get("note") or ABSENT["upstream"]))}</p>'
        headline = ""
    else:
        now = _m(last.get("upstreams"))
        up = sum(1 for v in now.values() if v)
        headline = f'<b>{up} of {len(now)}</b> answering' if now else ""
        chart = health_chart(frame, points, names, "upstream health over time")
    cards.append(_chart_card(
        "upstreams", "Upstream health", headline, chart,
        "The upstream servers, which answer the names outside the cluster: green while they answer the "
        "agent's health checks, red while they fail them (their names are then answered from the stale "
        "cache or with SERVFAIL)."))
    return f'<section id=charts><h2>{e(_span(frame, hist))}</h2><div class=charts>{"".join(cards)}</div></section>'


def _table(rows: Iterable[tuple[str, str]], cls: str = "kv") -> str:
    """Two columns: a figure table (`kv`, numbers right-aligned) or a table of words (`words`)."""
    value = " class=n" if cls == "kv" else ""
    body = "".join(f"<tr><td>{k}</td><td{value}>{v}</td></tr>" for k, v in rows)
    return f"<table class={cls}>{body}</table>" if body else "<p class=absent>none yet</p>"


def part_words(st: Mapping[str, Any], name: str) -> str:
    """A part of the agent in words: absent (what that means), not ready (why), or fine."""
    if st.get("present") is False:
        return str(st.get("note") or ABSENT.get(name, "not configured"))
    if st.get("unready"):
        return "; ".join(str(r) for r in st["unready"])
    return "ok"


def section_now(data: PageData) -> str:
    """Since the start: answers by how they were made and by rcode, the index, the parts."""
    st = data.status
    q = _m(st.get("queries"))
    ix = _m(st.get("index"))
    total = q.get("total", 0)
    paths = _table((e(PATH_WORDS.get(str(k), str(k))), fmt_count(v)) for k, v in _m(q.get("by_path")).items())
    rcodes = _table((f'<span title="{e(RCODE_WORDS.get(str(k), ""))}">{e(str(k))}</span>', fmt_count(v))
                    for k, v in _m(q.get("by_rcode")).items())
    counts = _table((e(str(k)), fmt_count(v)) for k, v in _m(ix.get("counts")).items())
    src = _m(st.get("source"))
    sync = _m(st.get("sync"))
    if src.get("kind") == "manifests":
        origin = f'from the file {e(str(src.get("path", "")))}'
    elif sync.get("present") is not False:
        origin = "watching the Kubernetes API"
    else:
        origin = ""
    synced = ('<b class=ok>synced</b>' if ix.get("synced") else
              '<b class=bad>not synced yet</b> (names that would not exist get SERVFAIL until it is)')
    hit_share = fmt_count(q.get("hit_path", 0))
    shadow = is_shadow(st)
    parts = _table(((e(PART_WORDS[n]), e(part_words(_m(st.get(n)), n))) for n in PART_WORDS
                    if not (shadow and n in NOT_IN_SHADOW)), "words")
    ups = _m(st.get("upstream"))
    up_rows = [(e(str(u.get("to", "?"))) + (f' <small>{e(str(u.get("zone")))}</small>' if u.get("zone") not in
                                           (None, ".") else ""),
                '<b class=ok>answering</b>' if u.get("healthy") else '<b class=bad>failing</b>')
               for u in ups.get("upstreams") or [] if isinstance(u, Mapping)]
    upstreams = _table(up_rows) if up_rows else f'<p class=absent>{e(part_words(ups, "upstream"))}</p>'
    upstreams += _zones(ups)
    upstreams += _operators(st)
    serving = [
        f'<div class=card><h3>Answers since the start</h3><p class=big>{fmt_count(total)}</p>'
        f'<p class=small>sent by the hit path (a stored answer sent back before the query is even parsed): '
        f'{hit_share}</p>{paths}</div>',
        f'<div class=card><h3>By rcode</h3>{rcodes}</div>',
    ]
    cards = [
        *([] if shadow else serving),  # a shadow answers nothing: its answers are the verdict's
        f'<div class=card><h3>Cluster index</h3><p>{synced} {origin}</p>'
        f'<p class=small>last change {fmt_age(_num(ix, "seconds_since_change"))} ago</p>{counts}</div>',
        f'<div class=card><h3>Names outside the cluster</h3>{upstreams}</div>',
        _event_loop_card(_m(st.get("event_loop"))),
        f'<div class="card wide"><h3>Parts of the agent</h3>{parts}</div>',
    ]
    return f'<section id=now><h2>Since the start</h2><div class=cards>{"".join(cards)}</div></section>'


def _event_loop_card(loop: Mapping[str, Any]) -> str:
    """The longest event-loop stall of the last minute, over the processes and for each one: how long a
    query may have waited for the loop (docs/status.md "Event-loop lag")."""
    procs = [p for p in loop.get("processes") or [] if isinstance(p, Mapping)]
    if not procs:
        return '<div class=card><h3>Longest stall, last minute</h3><p class=absent>not measured yet</p></div>'
    longest = [(_num(p, "longest_last_minute_seconds") or 0.0) for p in procs]
    worst = max(longest)
    rows = _table((e(str(p.get("process", "?"))), f'{fmt_ms(v * 1000)} <small>({fmt_count(_num(p, "stalls") or 0)} '
                   'turns over 2 ms since it serves)</small>') for p, v in zip(procs, longest, strict=True))
    cls = "bad" if worst > 0.05 else "ok"
    startups = [_m(p.get("startup")) for p in procs if isinstance(p.get("startup"), Mapping)]
    startup = ""
    if startups:
        longest_start = max(_num(s, "longest_seconds") or 0.0 for s in startups)
        stalled = sum(int(_num(s, "stalls") or 0) for s in startups)
        if any(s.get("ready") is False for s in startups):
            startup = (f'<p class=small id=startup>starting: its turns count from when it serves (the longest so far '
                       f'{fmt_ms(longest_start * 1000)})</p>')
        else:
            took = max(_num(s, "seconds") or 0.0 for s in startups)
            startup = (f'<p class=small id=startup>start-up, not counted above: serving after {took:.1f} s; its '
                       f'longest turn {fmt_ms(longest_start * 1000)}, {fmt_count(stalled)} turns over 2 ms</p>')
    return (f'<div class=card><h3>Longest stall, last minute</h3><p class=big><b class={cls}>'
            f'{fmt_ms(worst * 1000)}</b></p><p class=small>the longest the event loop was held since the agent '
            f'serves: a query arriving then waited that long</p>{rows}{startup}</div>')


ZONE_WORDS = {"up": ('ok', "answering"), "degraded": ('ok', "answering, some upstreams down"),
              "down": ('bad', "every upstream down: stale or SERVFAIL at once"),
              "loop": ('bad', "forwarding loop: SERVFAIL")}


def _zones(ups: Mapping[str, Any]) -> str:
    """The forwarded zones of the "Names outside the cluster" card when there is more than `.`: each one's
    state, its queries in flight against its own bound, and its refusals and fast failures."""
    rows = [z for z in ups.get("zones") or [] if isinstance(z, Mapping)]
    if len(rows) < 2:
        return ""
    body = []
    for z in rows:
        cls, words = ZONE_WORDS.get(str(z.get("state")), ("bad", str(z.get("state"))))
        body.append((e(str(z.get("zone", "?"))),
                     f'<b class={cls}>{e(words)}</b> <small>{fmt_count(z.get("inflight", 0))} of '
                     f'{fmt_count(z.get("max_concurrent", 0))} in flight, {fmt_count(z.get("busy", 0))} refused at '
                     f'the bound, {fmt_count(z.get("failfast", 0))} failed at once; serve-stale '
                     f'{e(str(z.get("serve_stale", "")))}</small>'))
    return '<p id=zones>Zones (the longest match wins, <code>.</code> for the rest):</p>' + _table(body)


def _operators(st: Mapping[str, Any]) -> str:
    """The --filter-aaaa and --stale-nxdomain lines of the "Names outside the cluster" card (none when off)."""
    out = ""
    f = _m(st.get("filter_aaaa"))
    if f:
        state = '<b class=ok>filtering</b>' if f.get("filtering") else "<b>not filtering</b>"
        out += (f'<p id=filter-aaaa>AAAA filter ({e(str(f.get("mode", "")))}): {state}, '
                f'{fmt_count(f.get("filtered", 0))} answered NODATA here<br><small>{e(str(f.get("reason", "")))}'
                '</small></p>')
    caches = _m(st.get("cache")).get("caches") or []
    kept = sum(int(c.get("stale_nxdomain_served") or 0) for c in caches if isinstance(c, Mapping))
    if kept:
        out += (f'<p id=last-known-good>last-known-good over an NXDOMAIN/NODATA (--stale-nxdomain): '
                f'{fmt_count(kept)} answers</p>')
    return out


def section_insight(data: PageData) -> str:
    """The Pods of this node asking most (nodedns.observe.insight, the "insight" section of /status): queries,
    search-list misses, the advice. Absent with --insight off."""
    section = _m(data.status.get("insight"))
    head = "<h2>Pods asking (insight)</h2>"
    if not section.get("enabled"):
        return (f"<section id=insight>{head}<p class=absent>off: this agent runs with --insight off; "
                "nothing is counted per client</p></section>")
    pods = [_insight_row(e(str(p.get("pod", ""))), p) for p in section.get("top") or [] if isinstance(p, Mapping)]
    groups = [(str(name), _m(g)) for name, g in _m(section.get("groups")).items() if _num(_m(g), "queries")]
    rows = pods + [_insight_row(f"<i>{e(name)}</i>", g) for name, g in groups]
    # a number's header sits over it: right-aligned like its column (class n)
    table = ("<table class=pods><tr><th>Pod</th><th class=n>q/s</th><th class=n>queries</th><th class=n>NXDOMAIN</th>"
             f"<th class=n>search-list misses</th><th class=n>waste</th><th>top name</th></tr>{''.join(rows)}</table>"
             if rows else "<p class=absent>no queries yet, from this node's Pods or from the node itself</p>")
    if not pods and groups:
        table = ("<p class=absent>No Pod of this node has asked anything yet; what was asked came from the "
                 "node itself (below).</p>" + table)
    advice = "".join(f"<li>{e(str(a))}</li>" for a in list(section.get("advice") or [])[:10])
    advice_html = f"<h3>Advice</h3><ul>{advice}</ul>" if advice else ""
    return (f"<section id=insight>{head}<div class=\"card wide\">"
            f"<p class=small>{e(str(section.get('pods_live', 0)))} Pods of this node seen. "
            "<i>(host-network)</i> is the node itself: loopback, its own addresses and the Pods on its network; "
            "<i>(unknown)</i>, addresses that are neither. "
            "A search-list miss is an NXDOMAIN for a name the Pod then asks with another search suffix "
            "(ndots:5 at work). Everything: <code>nodedns top</code> or <a href=\"debug/top\">/debug/top</a>.</p>"
            f"{table}{advice_html}</div></section>")


def _insight_row(who: str, p: Mapping[str, Any]) -> str:
    """One row of the insight table: a Pod, or a group of addresses (`who` is HTML already)."""
    waste = p.get("waste")
    return (f"<tr><td>{who}</td><td class=n>{e(str(p.get('qps', 0)))}</td>"
            f"<td class=n>{fmt_count(_num(p, 'queries') or 0)}</td>"
            f"<td class=n>{fmt_count(_num(p, 'nxdomain') or 0)}</td>"
            f"<td class=n>{fmt_count(_num(p, 'search_misses') or 0)}</td>"
            f"<td class=n>{fmt_pct(float(waste) if isinstance(waste, int | float) else None)}</td>"
            f"<td>{e(str(p.get('top_name') or ''))}</td></tr>")


def section_shadow(data: PageData) -> str:
    """`nodedns shadow`: its answers against the node's DNS (the "shadow" section of /status); nothing for an agent
    that is no shadow."""
    section = data.status.get("shadow")
    if not isinstance(section, Mapping):
        return ""
    answers = _m(section.get("answers"))
    rows = [(e(str(k)), fmt_count(_num(answers, k) or 0)) for k in ("match", "mismatch", "known", "unknown")]
    for key, title in (("mismatches", "mismatch"), ("known", "known"), ("dropped", "dropped")):
        rows += [(f"{title}: {e(str(k))}", fmt_count(_num(_m(section.get(key)), k) or 0))
                 for k in sorted(_m(section.get(key)))]
    recent = [m for m in section.get("recent") or [] if isinstance(m, Mapping)]
    items = "".join(
        f"<li><code>{e(str(_m(m.get('question')).get('name', '')))} {e(str(_m(m.get('question')).get('type', '')))}"
        f"</code> from {e(str(m.get('pod') or m.get('client') or ''))}: {e(str(m.get('why', '')))}; nodedns "
        f"{e(', '.join(m.get('only_ours') or []) or '-')}, the other DNS "
        f"{e(', '.join(m.get('only_theirs') or []) or '-')}"
        "</li>" for m in recent)
    listed = f"<h3>Last mismatches</h3><ul>{items}</ul>" if items else "<p class=absent>no mismatch yet</p>"
    return ("<section id=shadow><h2>Shadow: nodedns against the node's DNS</h2><div class=\"card wide\">"
            f"<p class=small>Watching {e(str(section.get('interface', '')))}; answering nothing. Every query's answer "
            "compared with the one the node's DNS sent. Everything: <code>nodedns shadow --report</code> or "
            "<a href=\"debug/shadow\">/debug/shadow</a>.</p>"
            f"{_table(rows)}{listed}</div></section>")


# The page, top to bottom. A part with a section of its own adds it here: a function of PageData (its
# figures come in the /status document, as its provider's section) that returns one <section>.
def section_policy(data: PageData) -> str:
    """DNS policies (the "policy" section of /status, docs/policy.md): each policy with its mode, the Pods of
    this node it applies to and what of it the agent cannot use; the denied queries per Pod and rule.
    Nothing while no policy exists."""
    section = _m(data.status.get("policy"))
    policies = [p for p in section.get("policies") or [] if isinstance(p, Mapping)]
    if not policies:
        return ""
    rows = "".join(
        f"<tr><td>{e(str(p.get('policy', '')))}</td><td>{e(str(p.get('kind', '')))}</td>"
        f"<td>{e(str(p.get('mode', '')))}</td><td class=n>{fmt_count(_num(p, 'pods') or 0)}</td>"
        f"<td>{'; '.join(e(str(x)) for x in p.get('problems') or []) or '-'}</td></tr>" for p in policies)
    denied = [d for d in section.get("denied") or [] if isinstance(d, Mapping)]
    denied.sort(key=lambda d: -(_num(d, "count") or 0))
    drows = "".join(
        f"<tr><td>{e(str(d.get('pod', '')))}</td><td>{e(str(d.get('policy', '')))}</td>"
        f"<td>{e(str(d.get('rule', '')))}</td><td class=n>{fmt_count(_num(d, 'count') or 0)}</td></tr>"
        for d in denied[:20])
    denied_html = ("<h3>Denied queries per Pod and rule</h3><table class=pods><tr><th>Pod</th><th>policy</th>"
                   f"<th>rule</th><th>queries</th></tr>{drows}</table>" if drows
                   else "<p class=absent>no query denied yet (audit ones included)</p>")
    return ("<section id=policy><h2>DNS policies</h2><div class=\"card wide\">"
            "<table class=pods><tr><th>policy</th><th>kind</th><th>mode</th><th>Pods here</th>"
            f"<th>not used (problems)</th></tr>{rows}</table>{denied_html}</div></section>")


SECTIONS: tuple[Section, ...] = (
    Section("summary", section_summary),
    Section("charts", section_charts),
    Section("now", section_now),
    Section("insight", section_insight),
    Section("policy", section_policy),
    Section("shadow", section_shadow),
)


# A shadow's page: the verdict first, then what it found; none of the serving charts (it answers nothing), no
# per-Pod insight (it counts none)
SHADOW_SECTIONS: tuple[Section, ...] = (
    Section("summary", section_summary),
    Section("shadow", section_shadow),
    Section("now", section_now),
)


def render_page(status: Mapping[str, Any], history: Mapping[str, Any] | None = None, *,
                sections: Sequence[Section] | None = None) -> str:
    """The whole page: every section in order, the styles and the refresh script."""
    data = PageData(status, history or {})
    if sections is None:
        sections = SHADOW_SECTIONS if is_shadow(status) else SECTIONS
    body = "".join(s.render(data) for s in sections)
    return _PAGE.format(version=e(str(status.get("version", ""))), refresh=REFRESH_SECONDS, body=body,
                        style=_STYLE, script=_SCRIPT.replace("REFRESH", str(REFRESH_SECONDS)))




def _asset(name: str) -> str:
    """A file of the page (nodedns/observe/static/, package data): read once, when the module is imported."""
    return (resources.files(__package__) / "static" / name).read_text(encoding="utf-8")


_STYLE = _asset("page.css")
_SCRIPT = _asset("page.js")
_PAGE = _asset("page.html")
