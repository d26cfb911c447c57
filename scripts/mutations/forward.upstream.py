"""Mutations of nodedns/forward/upstream.py (the forwarder: routes, policies, health, EDNS fallback)."""

from mutate import Mutation

TESTS = (
    "tests/e2e/test_dot.py",
    "tests/unit/forward/test_forward.py",
    "tests/unit/forward/test_upstream_config.py",
    "tests/unit/serve/test_interop.py",
)

MUTATIONS = (
    Mutation(
        "edns-intolerance-remembered-when-the-plain-query-fails-too",
        "nodedns/forward/upstream.py",
        "        if plain[3] & 0x0F in (RCODE.NOERROR, RCODE.NXDOMAIN, YXDOMAIN):",
        "        if True:",
        ("tests/unit/serve/test_interop.py::test_an_upstream_answering_formerr_with_and_without_edns_is_not_remembered_"
         "as_"
         "edns_intolerant",),
        "an upstream that answers FORMERR to every query is taken for EDNS-intolerant and asked without EDNS "
        "for 15 minutes",
        found="yes",
    ),
    Mutation(
        "edns-refusal-not-asked-again-without-edns",
        "nodedns/forward/upstream.py",
        "        if not kflags & KF_EDNS or response[3] & 0x0F not in EDNS_REFUSALS:",
        "        if True:",
        ("tests/unit/serve/test_interop.py::test_an_edns_intolerant_upstream_is_asked_again_without_edns_and_remembered",),
        "a FORMERR or NOTIMP to our OPT record is handed to the client instead of asking again without EDNS",
    ),
    Mutation(
        "stub-domain-not-matched-below-its-zone",
        "nodedns/forward/upstream.py",
        "                name = name.partition(\".\")[2]",
        "                break",
        ("tests/unit/forward/test_forward.py", "tests/unit/forward/test_upstream_config.py"),
        "names below a stub domain (a.b.corp for corp) go to the default upstreams",
    ),
    Mutation(
        "a-down-server-never-counted-down",
        "nodedns/forward/upstream.py",
        "        return self.health_check > 0 and server.fails >= MAX_FAILS",
        "        return self.health_check > 0 and server.fails > MAX_FAILS",
        ("tests/unit/forward/test_forward.py::test_an_upstream_is_down_after_two_failures_in_a_row_and_then_skipped",),
        "an upstream is marked down one failure later than MAX_FAILS says",
        found="yes",
    ),
    Mutation(
        "tcp-answer-to-another-question-accepted",
        "nodedns/forward/upstream.py",
        "                if answers_query(data, qid, question):\n                    return data",
        "                if True:\n                    return data",
        ("tests/unit/serve/test_interop.py::test_a_tcp_answer_to_another_question_is_skipped_for_the_one_that_answers_"
         "ours",),
        "an upstream's TCP answer with another ID or question is taken",
        found="yes",
    ),
    Mutation(
        "tls-verified-against-the-address-not-the-name",
        "nodedns/forward/upstream.py",
        "server.host, server.port, ssl=self._tls_context, server_hostname=server.tls_name,",
        "server.host, server.port, ssl=self._tls_context, server_hostname=server.host,",
        ("tests/e2e/test_dot.py::test_forwarded_names_go_over_one_verified_tls_connection",),
        "tls://ADDR#NAME and --upstream-tls-servername are ignored: certificates naming the server fail",
    ),
    Mutation(
        "tls-ca-file-ignored",
        "nodedns/forward/upstream.py",
        "                self._tls_context = tls_context(self.tls_ca)",
        "                self._tls_context = tls_context(None)",
        ("tests/e2e/test_dot.py::test_forwarded_names_go_over_one_verified_tls_connection",),
        "--upstream-tls-ca is checked at start but never used: upstreams of a private CA never verify",
    ),
    Mutation(
        "tls-new-connection-per-query",
        "nodedns/forward/upstream.py",
        "            if conn is not None and not conn.closed:\n                server.tls_reused += 1",
        "            if False:\n                server.tls_reused += 1",
        ("tests/e2e/test_dot.py::test_forwarded_names_go_over_one_verified_tls_connection",),
        "every forwarded query opens a TLS connection of its own (a handshake per query, nothing pipelined)",
    ),
    Mutation(
        "tls-queries-of-a-closed-connection-not-retried",
        "nodedns/forward/upstream.py",
        "                if not conn.answered:\n",
        "                if True:\n",
        ("tests/e2e/test_dot.py::test_a_server_closing_after_each_answer_loses_none_of_a_pipelined_burst",),
        "a server that closes after each answer loses the queries pipelined behind it (SERVFAIL)",
    ),
    Mutation(
        "tls-unanswered-closes-retried-without-end",
        "nodedns/forward/upstream.py",
        "                    if barren > 1:",
        "                    if barren > 3:",
        ("tests/e2e/test_dot.py::test_a_server_that_closes_every_connection_unanswered_costs_one_retry_per_try",),
        "a server that closes every connection unanswered costs a handshake after handshake for one query",
    ),
)
