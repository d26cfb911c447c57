"""Mutations of nodedns/observe/status.py (the HTTP applications: routes, roles, bounds)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_status.py", "tests/unit/observe/test_status_limits.py",
         "tests/e2e/test_cli_lookup.py",
         "tests/e2e/test_liveness_under_load.py", "tests/e2e/test_shadow.py")

MUTATIONS = (
    Mutation(
        "content-length-over-the-limit-waits-for-the-body",
        "nodedns/observe/status.py",
        "            if length is not None and length > self.limits.max_body:",
        "            if False:",
        ("tests/unit/observe/test_status_limits.py::test_a_content_length_over_64_kib_is_413_at_once_without_the_body",),
        "a request whose head says its body is over 64 KiB is held until the body timeout (408) instead of "
        "413 from the head",
        found="yes",
    ),
    Mutation(
        "a-reply-over-the-limit-sent-anyway",
        "nodedns/observe/status.py",
        "            if isinstance(body, bytes) and len(body) > self.limits.max_reply:",
        "            if False:",
        ("tests/unit/observe/test_status_limits.py::test_a_reply_over_the_limit_is_a_500_that_says_so",),
        "a reply over the largest the listener sends (HttpLimits.max_reply) is sent whole",
    ),
    Mutation(
        "busy-refused-at-once",
        "nodedns/observe/status.py",
        "                await asyncio.sleep(self.limits.max_wait)\n                return web.Response(status=503,",
        "                return web.Response(status=503,",
        ("tests/unit/observe/test_status_limits.py::test_requests_over_the_pace_wait_their_turn_or_get_503",),
        "a client over the pace gets its 503 at once, so asking again at once costs it nothing",
    ),
    Mutation(
        "healthz-paced",
        "nodedns/observe/status.py",
        '            if request.path == "/healthz" and request.method == "GET":',
        '            if request.path == "/livez" and request.method == "GET":',
        ("tests/e2e/test_liveness_under_load.py::test_the_liveness_probe_is_answered_through_a_flood_of_healthz_"
         "scrapes_and_idle_connections",),
        "GET /healthz waits for its turn behind the other requests: a flood fails the kubelet's probe",
        found="yes (the over-the-caps flood alone let it through)",
    ),
    Mutation(
        "healthz-over-the-caps-aborted",
        "nodedns/observe/status.py",
        "        liveness = self.source.liveness if role == STATUS else None  # /healthz is the status listener's",
        "        liveness = None",
        ("tests/e2e/test_liveness_under_load.py::test_the_liveness_probe_is_answered_through_a_flood_of_healthz_"
         "scrapes_and_idle_connections",
         "tests/unit/observe/test_status_limits.py::test_connections_over_the_clients_cap_are_closed_at_once_and_"
         "counted"),
        "a probe's connection over the caps is closed: a flood from the kubelet's address fails its probe",
        found="yes",
    ),
    Mutation("status-shadow-route-only-without-a-shadow", "nodedns/observe/status.py",
             "if route.shadow and self.shadow is None:", "if route.shadow and self.shadow is not None:",
             ("tests/e2e/test_shadow.py::test_shadow_beside_a_stand_in_dns_reports_the_wrong_service_and_matches_"
              "the_rest",),
             "GET /debug/shadow is a 404 on the shadow"),
)
