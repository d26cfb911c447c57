"""Mutations of nodedns/shadow/command.py (`nodedns shadow` and its --report)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_shadow.py", "tests/e2e/test_shadow_overlay.py")

PROCESS = "tests/e2e/test_shadow.py::test_shadow_beside_a_stand_in_dns_reports_the_wrong_service_and_matches_the_rest"

MUTATIONS = (
    Mutation("cli-shadow-setup-interface-kept", "nodedns/shadow/command.py",
             'SET_ASIDE = {"setup_interface": "", "firewall": "none"}', 'SET_ASIDE = {"firewall": "none"}',
             ("tests/e2e/test_shadow_overlay.py::test_the_shadow_overlay_arguments_parse_and_set_the_node_settings_"
              "aside",),
             "the shadow overlay's pods fail at start: the ConfigMap's setup-interface wants a local IP"),
    Mutation("cli-shadow-report-counts-the-total", "nodedns/shadow/command.py",
             'rows.append([result, f"{n:,}", share, words])', 'rows.append([result, f"{total:,}", share, words])',
             (PROCESS,), "every result's line of the report shows the total"),
    Mutation("cli-shadow-report-no-route-unexplained", "nodedns/shadow/command.py",
             "    if code == 404:\n        print(f\"nodedns: {endpoint.no_route(where, '/debug/shadow')}",
             "    if code == 405:\n        print(f\"nodedns: {endpoint.no_route(where, '/debug/shadow')}",
             ("tests/e2e/test_shadow.py::test_report_of_an_agent_that_is_no_shadow_says_so",),
             "--report against nodedns serve says only 'HTTP 404'"),
)
