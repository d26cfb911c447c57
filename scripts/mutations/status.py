"""Mutations of nodedns/status.py (the HTTP listeners: routes, roles, bounds)."""

from mutate import Mutation

TESTS = ("tests/test_status.py", "tests/test_status_limits.py", "tests/test_cli_lookup.py")

MUTATIONS = (
    Mutation(
        "content-length-over-the-limit-waits-for-the-body",
        "nodedns/status.py",
        "            if length is not None and length > self.limits.max_body:",
        "            if False:",
        ("tests/test_status_limits.py::test_a_content_length_over_64_kib_is_413_at_once_without_the_body",),
        "a request whose head says its body is over 64 KiB is held until the body timeout (408) instead of "
        "413 from the head",
        found="yes",
    ),
    Mutation(
        "a-body-of-exactly-the-limit-refused",
        "nodedns/status.py",
        "            if length is not None and length > self.limits.max_body:",
        "            if length is not None and length >= self.limits.max_body:",
        ("tests/test_status_limits.py::test_request_bodies_over_64_kib_are_413",),
        "a body of exactly 64 KiB gets 413",
    ),
    Mutation(
        "a-reply-over-the-limit-sent-anyway",
        "nodedns/status.py",
        "            if isinstance(body, bytes) and len(body) > self.limits.max_reply:",
        "            if False:",
        ("tests/test_status_limits.py::test_a_reply_over_the_limit_is_a_500_that_says_so",),
        "a reply over the largest the listener sends (HttpLimits.max_reply) is sent whole",
    ),
    Mutation(
        "busy-refused-at-once",
        "nodedns/status.py",
        "                await asyncio.sleep(self.limits.max_wait)\n                return web.Response(status=503,",
        "                return web.Response(status=503,",
        ("tests/test_status_limits.py::test_requests_over_the_pace_wait_their_turn_or_get_503",),
        "a client over the pace gets its 503 at once, so asking again at once costs it nothing",
    ),
)
