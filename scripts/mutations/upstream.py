"""Mutations of nodedns/upstream.py (the forwarder: routes, policies, health, EDNS fallback)."""

from mutate import Mutation

TESTS = ("tests/test_forward.py", "tests/test_interop.py", "tests/test_upstream_config.py",
         "tests/test_upstream_default.py", "tests/test_outages.py")

MUTATIONS = (
    Mutation(
        "edns-intolerance-remembered-when-the-plain-query-fails-too",
        "nodedns/upstream.py",
        "        if plain[3] & 0x0F in (RCODE.NOERROR, RCODE.NXDOMAIN, YXDOMAIN):",
        "        if True:",
        ("tests/test_interop.py::test_an_upstream_answering_formerr_with_and_without_edns_is_not_remembered_as_"
         "edns_intolerant",),
        "an upstream that answers FORMERR to every query is taken for EDNS-intolerant and asked without EDNS "
        "for 15 minutes",
        found="yes",
    ),
    Mutation(
        "edns-refusal-not-asked-again-without-edns",
        "nodedns/upstream.py",
        "        if not kflags & KF_EDNS or response[3] & 0x0F not in EDNS_REFUSALS:",
        "        if True:",
        ("tests/test_interop.py::test_an_edns_intolerant_upstream_is_asked_again_without_edns_and_remembered",),
        "a FORMERR or NOTIMP to our OPT record is handed to the client instead of asking again without EDNS",
    ),
    Mutation(
        "stub-domain-not-matched-below-its-zone",
        "nodedns/upstream.py",
        "                name = name.partition(\".\")[2]",
        "                break",
        ("tests/test_forward.py", "tests/test_upstream_config.py"),
        "names below a stub domain (a.b.corp for corp) go to the default upstreams",
    ),
    Mutation(
        "round-robin-always-starts-at-the-first-server",
        "nodedns/upstream.py",
        "            group.rr += 1",
        "            group.rr += 0",
        ("tests/test_forward.py", "tests/test_upstream_config.py"),
        "--upstream-policy round_robin sends every query to the same server first",
    ),
    Mutation(
        "a-down-server-never-counted-down",
        "nodedns/upstream.py",
        "        return self.health_check > 0 and server.fails >= MAX_FAILS",
        "        return self.health_check > 0 and server.fails > MAX_FAILS",
        ("tests/test_forward.py::test_an_upstream_is_down_after_two_failures_in_a_row_and_then_skipped",),
        "an upstream is marked down one failure later than MAX_FAILS says",
        found="yes",
    ),
    Mutation(
        "tcp-answer-to-another-question-accepted",
        "nodedns/upstream.py",
        "                if answers_query(data, qid, question):\n                    return data",
        "                if True:\n                    return data",
        ("tests/test_interop.py::test_a_tcp_answer_to_another_question_is_skipped_for_the_one_that_answers_ours",),
        "an upstream's TCP answer with another ID or question is taken",
        found="yes",
    ),
)
