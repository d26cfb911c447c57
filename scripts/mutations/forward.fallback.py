"""Mutations of nodedns/forward/fallback.py (--fallback-upstream before the first sync)."""

from mutate import Mutation

TESTS = ("tests/unit/forward/test_fallback.py", "tests/e2e/test_kube_agent.py")

MUTATIONS = (
    Mutation(
        "fallback-takes-a-reply-to-another-question",
        "nodedns/forward/fallback.py",
        "    return data[12:qend].lower() == ours[12:qend].lower()",
        "    return True",
        ("tests/unit/forward/test_fallback.py::test_a_reply_with_our_id_but_another_question_is_ignored_and_the_"
         "genuine_one_taken",),
        "the fallback upstream's reply with our ID but another question (a spoof) is handed to the client",
        found="yes",
    ),
    Mutation(
        "fallback-takes-a-reply-of-another-id",
        "nodedns/forward/fallback.py",
        "if len(data) < qend or data[:2] != ours[:2] or not data[2] & 0x80",
        "if len(data) < qend or not data[2] & 0x80",
        ("tests/unit/forward/test_fallback.py::test_a_reply_of_another_id_is_ignored",),
        "a reply with another query ID is taken as the answer",
        found="yes",
    ),
    Mutation(
        "fallback-tcp-reply-unchecked",
        "nodedns/forward/fallback.py",
        "        if not _matches(data, ours, qend):\n            raise UpstreamError",
        "        if False:\n            raise UpstreamError",
        ("tests/unit/forward/test_fallback.py::test_a_tcp_reply_to_another_question_after_a_truncated_one_is_refused",),
        "after a truncated UDP reply, any TCP reply is taken, whatever question it answers",
        found="yes",
    ),
    Mutation(
        "fallback-keeps-the-upstream-id",
        "nodedns/forward/fallback.py",
        "        return query[:2] + reply[2:]",
        "        return reply",
        ("tests/unit/forward/test_fallback.py::test_the_question_echoed_in_another_case_is_ours_and_the_client_keeps_"
         "its_id_and_case",
         "tests/e2e/test_kube_agent.py::test_fallback_upstream_answers_would_be_nxdomain_before_the_first_sync"),
        "the client gets the random ID we sent upstream instead of its own (it drops the answer)",
    ),
    Mutation(
        "fallback-never-retries-over-tcp",
        "nodedns/forward/fallback.py",
        "        if struct.unpack_from(\"!H\", reply, 2)[0] & TC:",
        "        if False:",
        ("tests/unit/forward/test_fallback.py::test_a_tcp_reply_to_another_question_after_a_truncated_one_is_refused",
         "tests/e2e/test_kube_agent.py::test_fallback_upstream_answers_would_be_nxdomain_before_the_first_sync"),
        "a truncated UDP reply of the fallback upstream is handed on as it is (no TCP retry)",
    ),
)
