"""Mutations of nodedns/observe/page.py (the status page: its words, figures and charts)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_page.py", "tests/e2e/test_status_page_browser.py",
         "tests/unit/observe/test_looplag.py")

MUTATIONS = (
    Mutation("upstream-address-not-escaped", "nodedns/observe/page.py",
             '    up_rows = [(e(str(u.get("to", "?"))) + (f\' <small>',
             '    up_rows = [(str(u.get("to", "?")) + (f\' <small>',
             ("tests/unit/observe/test_page.py::test_text_from_the_agent_is_escaped",),
             "an upstream's address from the config reaches the page unescaped (HTML injection)"),
    Mutation("failing-upstream-shown-answering", "nodedns/observe/page.py",
             "                '<b class=ok>answering</b>' if u.get(\"healthy\") else '<b class=bad>failing</b>')",
             "                '<b class=ok>answering</b>')",
             ("tests/unit/observe/test_page.py::test_the_upstreams_now_say_which_answers_and_which_fails",),
             "a failing upstream shows as answering", found="yes"),
    Mutation(
        "page-says-no-queries-beside-the-nodes-own",
        "nodedns/observe/page.py",
        '    rows = pods + [_insight_row(f"<i>{e(name)}</i>", g) for name, g in groups]',
        "    rows = pods",
        ("tests/unit/observe/test_page.py::test_the_insight_section_says_what_the_pods_asked",),
        "the status page says no queries were seen beside the node's own queries",
        found="yes",
    ),
    Mutation("page-without-the-longest-stall", "nodedns/observe/page.py",
             "        _event_loop_card(_m(st.get(\"event_loop\"))),\n", "",
             ("tests/unit/observe/test_looplag.py::test_one_process_shows_its_loop_lag_and_a_stall_in_metrics_status_"
              "and_the_page",),
             "the status page does not show the longest event-loop stall"),
    Mutation(
        "pods-headers-left-over-right-aligned-numbers",
        "nodedns/observe/page.py",
        "<th class=n>q/s</th>",
        "<th>q/s</th>",
        ("tests/unit/observe/test_page.py::test_the_pods_tables_number_headers_are_aligned_like_their_numbers",),
        "the Pods table's q/s header sits left over its right-aligned numbers",
    ),
    Mutation(
        "shadow-page-shows-serving-charts",
        "nodedns/observe/page.py",
        "        sections = SHADOW_SECTIONS if is_shadow(status) else SECTIONS",
        "        sections = SECTIONS",
        ("tests/unit/observe/test_page.py::test_a_shadows_page_leads_with_its_verdict_and_shows_no_serving_figures",),
        "a shadow's page opens with serving charts of the answers it never sends, the verdict last",
    ),
)
