"""The status page's HTML (nodedns.observe.page): sections, charts drawn from the history, words, escaping."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest

from nodedns.metrics.counters import TIME_BUCKETS
from nodedns.observe.history import History, Reading
from nodedns.observe.observer import ABSENT
from nodedns.observe.page import SECTIONS, PageData, Section, fmt_ms, fmt_pct, render_page
from tests.support.helpers import ROOT

N = len(TIME_BUCKETS) + 1
CHARTS = ("qps", "latency", "hits", "rcodes", "sources", "upstreams")


def status(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "version": "0.1.0", "state": "running", "ready": True, "unready": [], "uptime_seconds": 125.0,
        "config": {"node-name": "node-a"},
        "listeners": [{"server": "dns://127.0.0.1:5353"}],
        "queries": {"total": 1234, "hit_path": 1000, "by_rcode": {"NOERROR": 1200, "NXDOMAIN": 34},
                    "by_path": {"cluster": 1234}},
        "index": {"synced": True, "generation": 54, "counts": {"services": 13}, "seconds_since_change": 30.0},
        "source": {"kind": "manifests", "path": "examples/cluster.yaml"},
        "upstream": {"upstreams": [{"to": "10.0.0.2:53", "zone": ".", "healthy": True}]},
        "cache": {"caches": []},
        "sync": {"present": False, "note": ABSENT["sync"]},
        "node": {"present": False, "note": ABSENT["node"]},
    }
    doc.update(over)
    return doc


def history_doc(points: int = 20, *, upstreams: tuple[str, ...] = ("10.0.0.2:53",), down_from: int = 1000,
                refused: bool = False) -> dict[str, Any]:
    clock = [0.0]
    wall = [1_800_000_000.0]
    h = History(clock=lambda: clock[0], wall=lambda: wall[0])
    q = mem = worked = hit = 0
    rcodes = {"NOERROR": 0, "NXDOMAIN": 0, "REFUSED": 0}
    paths = {"cluster": 0, "cache": 0, "upstream": 0}
    timed = [0] * N
    for i in range(points + 1):
        h.add(Reading(q, dict(rcodes), mem, worked, tuple(timed), hit,
                      tuple((u, i < down_from) for u in upstreams), dict(paths)))
        paths["cluster"] += 400
        paths["cache"] += 90 + 10 * i
        paths["upstream"] += 10
        clock[0] += 5
        wall[0] += 5
        q += 500 + 10 * i
        rcodes["NOERROR"] += 450
        rcodes["NXDOMAIN"] += 40 + 10 * i
        if refused:
            rcodes["REFUSED"] += 10
        mem += 450
        worked += 50
        hit += 440
        timed[3] += 50
        timed[6] += 1
    return h.document()


def chart(page: str, name: str) -> str:
    m = re.search(rf'<figure class=chart id="chart-{name}">(.*?)</figure>', page, flags=re.S)
    assert m, f"no chart {name}"
    return m.group(1)


def drawn(fragment: str) -> int:
    m = re.search(r"data-drawn=(\d+)", fragment)
    return int(m.group(1)) if m else 0


def test_every_chart_draws_the_points_of_the_history() -> None:
    page = render_page(status(), history_doc(20))
    for name in CHARTS:
        assert drawn(chart(page, name)) > 0, name
    # line charts: one path per series with a point per interval
    assert re.findall(r'class=line d="[^"]+" stroke="#2563eb" data-points=(\d+)', chart(page, "qps")) == ["20"]
    assert len(re.findall(r"data-points=20", chart(page, "latency"))) == 2  # p50 and p99
    assert "10.0.0.2:53" in chart(page, "upstreams")


def test_without_points_yet_each_chart_says_when_the_first_comes() -> None:
    page = render_page(status(), History().document())
    for name in CHARTS:
        assert "the first point comes 5 s after the agent starts" in chart(page, name), name
        assert drawn(chart(page, name)) == 0


def test_upstream_health_shows_the_change_from_answering_to_failing() -> None:
    page = render_page(status(), history_doc(20, upstreams=("10.0.0.2:53", "10.0.0.3:53"), down_from=12))
    health = chart(page, "upstreams")
    assert health.count('fill="#16a34a"') == 2 and health.count('fill="#dc2626"') == 2  # one run of each, per row
    assert "10.0.0.3:53 failing its health checks" in health
    assert "<b>0 of 2</b> answering" in health


def test_the_upstreams_now_say_which_answers_and_which_fails() -> None:
    ups = {"upstreams": [{"to": "10.0.0.2:53", "zone": ".", "healthy": True},
                         {"to": "10.0.0.3:53", "zone": "corp.example", "healthy": False}]}
    page = render_page(status(upstream=ups), history_doc(3))
    now = page[page.index("<section id=now>"):page.index("<section id=insight>")]
    assert "<tr><td>10.0.0.2:53</td><td class=n><b class=ok>answering</b></td></tr>" in now
    assert ("<tr><td>10.0.0.3:53 <small>corp.example</small></td><td class=n><b class=bad>failing</b></td></tr>"
            in now)


def test_where_answers_came_from_is_said_in_words() -> None:
    page = render_page(status(), history_doc(10))
    sources = chart(page, "sources")
    assert "cluster names, from the index" in sources and "asked of an upstream" in sources
    assert drawn(sources) == 30  # 10 bars of 3 parts


def test_without_an_upstream_the_page_says_what_that_means() -> None:
    doc = status(upstream={"present": False, "note": ABSENT["upstream"]},
                 cache={"present": False, "note": ABSENT["cache"]})
    page = render_page(doc, history_doc(5, upstreams=(), refused=True))
    assert "no upstream configured: names outside the cluster are refused" in chart(page, "upstreams")
    assert "REFUSED: not answered here" in chart(page, "rcodes")
    assert "wired" not in page


def test_the_latency_chart_speaks_of_stored_answers_as_under_a_quarter_millisecond() -> None:
    page = render_page(status(), history_doc(10))
    head = re.search(r"<span class=now>(.*?)</span>", chart(page, "latency"), flags=re.S)
    assert head and "p50 <b>≤ 0.25 ms</b>" in head.group(1)
    assert "p99 <b>" in head.group(1)


def test_an_unready_agent_says_why_at_the_top() -> None:
    page = render_page(status(ready=False, unready=["the cluster index has not synced yet"], state="starting"),
                       {})
    assert '<b class="badge bad">not ready</b>' in page
    assert "<li>the cluster index has not synced yet</li>" in page


@pytest.mark.parametrize("where", ["upstream", "unready", "node-name"], ids=["upstream", "unready", "node-name"])
def test_text_from_the_agent_is_escaped(where: str) -> None:
    evil = "<script>alert(1)</script>"
    doc = {
        "upstream": status(upstream={"upstreams": [{"to": evil, "healthy": True}]}),
        "unready": status(ready=False, unready=[evil]),
        "node-name": status(config={"node-name": evil}),
    }[where]
    page = render_page(doc, history_doc(3, upstreams=(evil,)))
    assert evil not in page and "&lt;script&gt;" in page


def test_the_page_is_self_contained() -> None:
    page = render_page(status(), history_doc(5))
    assert not re.search(r"(src|href)=\"?(https?:)?//", page)
    assert "@import" not in page and "url(" not in page


def test_another_part_slots_its_own_section_in() -> None:
    """How the per-Pod insight (or any part) adds a section: a function of PageData, placed in the list."""

    def pods(data: PageData) -> str:
        top = data.status.get("insight", {}).get("top", [])
        return "<section id=pods><h2>Busiest Pods</h2>" + "".join(f"<p>{t}</p>" for t in top) + "</section>"

    sections = [*SECTIONS[:2], Section("pods", pods), *SECTIONS[2:]]
    page = render_page(status(insight={"top": ["default/client"]}), history_doc(3), sections=sections)
    order = [m.group(1) for m in re.finditer(r"<section id=(\w+)>", page)]
    assert order == ["summary", "charts", "pods", "now", "insight"]
    assert "<p>default/client</p>" in page


@pytest.mark.parametrize(
    ("ms", "text"),
    [(None, "–"), (0.25, "≤ 0.25 ms"), (0.6, "0.6 ms"), (3.14, "3.1 ms"), (42.0, "42 ms"), (2500.0, "2.5 s")],
    ids=["none", "first-bucket", "sub-ms", "ms", "tens", "seconds"],
)
def test_answer_times_in_words(ms: float | None, text: str) -> None:
    assert fmt_ms(ms) == text


@pytest.mark.parametrize(("ratio", "text"), [(None, "–"), (1.0, "100%"), (0.9, "90%"), (0.9234, "92.3%")],
                         ids=["none", "all", "round", "fraction"])
def test_ratios_in_words(ratio: float | None, text: str) -> None:
    assert fmt_pct(ratio) == text


@pytest.mark.parametrize(
    ("insight", "expect"),
    [
        (None, "off: this agent runs with --insight off"),
        ({"enabled": True, "top": [], "groups": {}, "advice": []},
         "no queries yet, from this node's Pods or from the node itself"),
        ({"enabled": True, "pods_live": 2, "top": [], "advice": [],
          "groups": {"(host-network)": {"queries": 1870, "qps": 0.5, "nxdomain": 3, "search_misses": 0, "waste": 0.0,
                                        "top_name": "dns-version.cluster.local"}, "(unknown)": {"queries": 0}}},
         "<tr><td><i>(host-network)</i></td><td class=n>0.5</td><td class=n>1,870</td>"),
        ({"enabled": True, "pods_live": 1, "groups": {"(host-network)": {"queries": 3}},
          "top": [{"pod": "orders/checkout-7d9", "qps": 0.8, "queries": 48, "nxdomain": 36, "search_misses": 36,
                   "waste": 0.75, "top_name": "api.example.com"}],
          "advice": ["orders/checkout-7d9: 75% of its queries are search-list misses for external names"]},
         "<td>orders/checkout-7d9</td>"),
    ],
    ids=["insight-off", "nothing-seen-yet", "only-the-node-itself-asked", "a-wasteful-pod"],
)
def test_the_insight_section_says_what_the_pods_asked(insight: dict[str, Any] | None, expect: str) -> None:
    page = render_page(status(insight=insight) if insight is not None else status(), history_doc(3))
    start = page.index("<section id=insight>")
    section = page[start:page.index("</section>", start)]
    assert expect in section
    assert "no queries from this node's Pods yet" not in section  # never beside the node's own queries
    if insight and insight.get("groups", {}).get("(host-network)", {}).get("queries") and not insight.get("top"):
        assert "No Pod of this node has asked anything yet" in section
        assert "<td><i>(unknown)</i></td>" not in section  # a group with no queries has no row
    if insight and insight.get("top"):
        assert "75%" in section and "search-list misses for external names" in section


def test_each_share_says_once_what_it_is() -> None:
    """The hit ratio, the hit path and the cluster names' share are three figures with three meanings: each
    is said once, with a label that says what it is, and no two bare percentages stand side by side."""
    page = render_page(status(), history_doc(10))
    hits, sources = chart(page, "hits"), chart(page, "sources")
    assert re.search(r"answered from memory: <b>[0-9.]+%</b> now · [0-9.]+% (over|since)", hits), hits
    assert re.search(r"for names in the cluster: <b>[0-9.]+%</b> of the answers", sources), sources
    start = page.index("<section id=now>")
    now = page[start:page.index("</section>", start)]
    assert re.search(r"sent by the hit path \(a stored answer sent back before the query is even parsed\): "
                     r"[0-9,]+</p>", now), now
    assert "of them by the hit path" not in page and "% cluster names<" not in page


def test_the_upstream_chart_says_what_the_servers_are() -> None:
    page = render_page(status(), history_doc(10, upstreams=("10.0.0.2:53",)))
    assert "The upstream servers, which answer the names outside the cluster: green while" in chart(page, "upstreams")
    assert "The servers names outside" not in page


def test_the_policy_section_lists_each_policy_and_the_denials_per_pod_and_rule() -> None:
    status = {"policy": {
        "policies": [{"policy": "team-a/no-ads", "kind": "DNSPolicy", "mode": "enforce", "rules": 1, "pods": 2,
                      "problems": ["rules[1]: the name 'a.*.b' cannot be used"]},
                     {"policy": "watch", "kind": "ClusterDNSPolicy", "mode": "audit", "rules": 1, "pods": 0,
                      "problems": []}],
        "denied": [{"pod": "team-a/web-1", "policy": "team-a/no-ads", "rule": "rules[0]", "count": 7},
                   {"pod": "team-b/app", "policy": "watch", "rule": "rules[0] (audit)", "count": 1200}]}}
    html = render_page(status)
    part = html[html.index("<section id=policy>"):]
    part = part[:part.index("</section>")]
    assert "team-a/no-ads" in part and "audit" in part and "a.*.b" in part
    assert part.index("team-b/app") < part.index("team-a/web-1")  # the most denied first
    assert "1,200" in part
    assert "<section id=policy>" not in render_page({"policy": {"policies": []}})


def shadow_status(answers: dict[str, int], **over: Any) -> dict[str, Any]:
    mismatches = {"records": answers.get("mismatch", 0)} if answers.get("mismatch") else {}
    return status(shadow={"answers": {"match": 0, "mismatch": 0, "known": 0, "unknown": 0, **answers},
                          "mismatches": mismatches, "known": {}, "dropped": {}, "interface": "any", "port": 53,
                          "recent": []},
                  listeners=[], queries={"total": 0, "hit_path": 0, "by_rcode": {}, "by_path": {}},
                  insight={"enabled": False}, **over)


def test_a_shadows_page_leads_with_its_verdict_and_shows_no_serving_figures() -> None:
    page = render_page(shadow_status({"match": 998, "known": 2, "unknown": 5}), history_doc())
    summary = page[page.index("<section id=summary>"):page.index("</section>")]
    assert "nodedns shadow" in summary and "answering nothing" in summary and "on any port 53" in summary
    assert ("No mismatch: 998 of 1,000 answers judged are the same as the node&#x27;s DNS sent (2 documented "
            "differences, 5 not judged).") in summary
    assert "answering DNS" not in page and "no address yet" not in page  # it answers nothing, on no address
    assert page.index("<section id=summary>") < page.index("<section id=shadow>") < page.index("<section id=now>")
    for serving in ("<section id=charts>", "Answers since the start", "By rcode", "<section id=insight>",
                    "forward cache", "interface and firewall rules"):
        assert serving not in page, serving
    assert "Cluster index" in page and "Kubernetes API watch" in page  # what it judges with


@pytest.mark.parametrize(("answers", "cls", "words"), [
    ({}, "absent", "Nothing judged yet: no query and response seen on any port 53."),
    ({"unknown": 3}, "absent", "Nothing judged yet: no query and response seen on any port 53; 3 not judged"),
    ({"match": 10, "mismatch": 2}, "bad", "2 mismatches in 12 answers judged (records 2; 0 not judged): nodedns "
                                          "would have answered these differently."),
    ({"match": 10}, "ok", "No mismatch: 10 of 10 answers judged are the same"),
], ids=["nothing", "only-unknown", "mismatches", "all-match"])
def test_the_shadows_verdict_in_words(answers: dict[str, int], cls: str, words: str) -> None:
    page = render_page(shadow_status(answers))
    verdict = re.search(r'<p id=verdict class="verdict (\w+)">(.*?)</p>', page)
    assert verdict is not None and verdict.group(1) == cls
    assert words.replace("'", "&#x27;") in verdict.group(2), verdict.group(2)


def test_warnings_show_under_the_summary_and_a_shadow_drops_those_that_do_not_apply() -> None:
    said = ["kube_dns: local IP 10.96.0.10 is not the ClusterIP of the Service kube-system/kube-dns",
            "limits: answering every client", "sync: an optional resource is forbidden"]
    agent = render_page(status(warnings=said))
    summary = agent[agent.index("<section id=summary>"):agent.index("</section>")]
    assert all(w in summary for w in said) and "<ul class=warnings>" in summary
    assert "badge ok" in summary  # still ready: warnings are no reason not to answer
    shadow = render_page(shadow_status({"match": 1}, warnings=said))
    summary = shadow[shadow.index("<section id=summary>"):shadow.index("</section>")]
    assert "sync: an optional resource is forbidden" in summary
    assert "answering every client" not in shadow and "kube-system/kube-dns" not in shadow


def test_the_pods_tables_number_headers_are_aligned_like_their_numbers() -> None:
    insight = {"enabled": True, "pods_live": 1,
               "top": [{"pod": "default/client", "qps": 0.5, "queries": 30, "nxdomain": 6, "search_misses": 6,
                        "waste": 0.2, "top_name": "web.default.svc.cluster.local"}]}
    page = render_page(status(insight=insight))
    table = re.search(r"<table class=pods>(.*?)</table>", page, flags=re.S)
    assert table is not None
    heads = re.findall(r"<th( class=n)?>([^<]+)</th>", table.group(1))
    cells = re.findall(r"<td( class=n)?>", table.group(1))
    assert len(heads) == len(cells) == 7
    for (head_class, name), (cell_class,) in zip(heads, [(c,) for c in cells], strict=True):
        assert head_class == cell_class, f"{name}: the header is not aligned as its column"
    assert [n for c, n in heads if c] == ["q/s", "queries", "NXDOMAIN", "search-list misses", "waste"]
    style = page[page.index("<style>"):page.index("</style>")]
    assert "table.pods th.n{text-align:right}" in style and "td.n{text-align:right" in style


def test_the_pages_html_styles_and_script_are_package_files_declared_as_package_data() -> None:
    """The skeleton, styles and refresh script are files under nodedns/observe/static/ that an installed
    package carries (pyproject.toml's package data), and the page is made of them, nothing from elsewhere."""
    static = ROOT / "nodedns" / "observe" / "static"
    assert sorted(p.name for p in static.iterdir()) == ["page.css", "page.html", "page.js"]
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["nodedns"]
    assert "observe/static/*" in declared
    out = render_page({"version": "9.9"}, {})
    assert (static / "page.css").read_text().strip() in out and "setInterval(refresh, 5 * 1000)" in out
    assert "<script src" not in out and "<link" not in out and "@import" not in out  # nothing fetched
