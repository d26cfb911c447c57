"""Mutations of nodedns/shadow/judge.py (`nodedns shadow`: pairing and judging)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_shadow.py",)

PROCESS = "tests/e2e/test_shadow.py::test_shadow_beside_a_stand_in_dns_reports_the_wrong_service_and_matches_the_rest"

MUTATIONS = (
    Mutation("shadow-srv-weight-compared", "nodedns/shadow/judge.py",
             'return f"{rdata.priority} {rdata.port} {str(rdata.target).lower()}"',
             'return f"{rdata.priority} {rdata.weight} {rdata.port} {str(rdata.target).lower()}"',
             ("tests/e2e/test_shadow.py::test_the_srv_weight_is_not_compared_but_the_port_is",),
             "an SRV answer with CoreDNS's weight against kube-dns's is a mismatch"),
    Mutation("shadow-owner-case-compared", "nodedns/shadow/judge.py",
             "rrs = frozenset((str(rr.rname).lower(),", "rrs = frozenset((str(rr.rname),",
             ("tests/e2e/test_shadow.py::test_the_same_records_in_another_order_case_and_ttl_match",),
             "the query's spelling echoed in the owner (CoreDNS does) is a mismatch"),
    Mutation("shadow-propagation-window-inverted", "nodedns/shadow/judge.py",
             "if hit is not None and asked_at - hit[0] < self.propagation:",
             "if hit is not None and asked_at - hit[0] > self.propagation:",
             ("tests/e2e/test_shadow.py::test_a_service_changed_under_a_second_ago_is_a_propagation_race_and_later_a_"
              "mismatch",),
             "a Service created 0.4 s ago is a mismatch, and one the other DNS never learnt a known race"),
    Mutation("shadow-first-load-counted-as-a-change", "nodedns/shadow/judge.py",
             "if not self.index.synced or not kind:", "if not kind:", (PROCESS,),
             "every name is a propagation race for a second after the start: the wrong Service is no mismatch"),
    Mutation("shadow-unpaired-queries-expire-at-once", "nodedns/shadow/judge.py",
             "cut = now - self.pair_timeout", "cut = now + self.pair_timeout",
             ("tests/e2e/test_shadow.py::test_a_query_without_response_is_unknown_after_the_timeout",),
             "a query waiting for its response is judged unknown before the response can come"),
    Mutation("shadow-rate-bound-off-by-one", "nodedns/shadow/judge.py",
             "        if self._tokens < 1:", "        if self._tokens < 0:",
             ("tests/e2e/test_shadow.py::test_queries_beyond_the_rate_are_dropped_and_counted",),
             "one query a second more than --max-rate is judged (the bucket goes below empty)"),
    Mutation("shadow-truncation-one-way", "nodedns/shadow/judge.py",
             "            if ours.tc != theirs.tc:", "            if ours.tc and not theirs.tc:",
             ("tests/e2e/test_shadow.py::test_a_truncated_answer_against_a_whole_one_is_a_truncation_mismatch",),
             "the other DNS truncating what nodedns sends whole is a match"),
    Mutation("shadow-retransmit-judged-twice", "nodedns/shadow/judge.py",
             "        if key in self.pending:\n            self.skipped", "        if False:\n            self.skipped",
             ("tests/e2e/test_shadow.py::test_a_retransmitted_query_is_judged_once",),
             "a retransmitted query replaces the first (the retransmit is not counted)"),
    Mutation(
        "shadow-padded-queries-held",
        "nodedns/shadow/judge.py",
        "        if len(msg) > MAX_QUERY_BYTES:\n            self.skipped[\"oversize\"] += 1",
        "        if False:\n            self.skipped[\"oversize\"] += 1",
        ("tests/e2e/test_shadow.py::test_a_query_over_4_kb_is_skipped_and_pending_queries_are_bounded_in_bytes",),
        "a Pod's TCP query padded to 64 KB is held whole until its response (20,000 of them: over a GB)",
    ),
    Mutation(
        "shadow-pending-bytes-unbounded",
        "nodedns/shadow/judge.py",
        " or self.pending_bytes + len(msg) > self.max_pending_bytes:",
        ":",
        ("tests/e2e/test_shadow.py::test_a_query_over_4_kb_is_skipped_and_pending_queries_are_bounded_in_bytes",),
        "the queries waiting for their response are bounded in count only, not in bytes",
    ),
)
