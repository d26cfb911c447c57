"""Mutations of nodedns/forward/tls.py (one DNS-over-TLS connection: pipelined queries, answers by ID, idle close)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_dot.py",)

MUTATIONS = (
    Mutation(
        "tls-answer-given-to-the-oldest-query",
        "nodedns/forward/tls.py",
        "                waiting = self.pending.get(qid)",
        "                waiting = next(iter(self.pending.values()), None)",
        ("tests/e2e/test_dot.py::test_answers_out_of_order_on_the_connection_go_to_their_own_queries",),
        "a pipelined answer is taken for the oldest query on the connection: answers out of order reach the "
        "wrong clients (or are dropped as mismatched)",
    ),
    Mutation(
        "tls-connection-never-idle-closed",
        "nodedns/forward/tls.py",
        "            if not self.pending:\n                self._arm_idle()",
        "            pass",
        ("tests/e2e/test_dot.py::test_an_idle_connection_is_closed_and_the_next_query_opens_one",),
        "a DNS-over-TLS connection stays open forever once used: one per upstream held against the server's "
        "limits",
    ),
    Mutation(
        'tls-connection-never-closed-when-idle',
        'nodedns/forward/tls.py',
        '            if not self.pending:\n                self._arm_idle()',
        '            pass',
        ('tests/e2e/test_dot.py',),
        'a DNS-over-TLS connection with nothing in flight stays open for ever',
    ),
    Mutation(
        "tls-wedged-connection-kept-until-three-timeouts",
        "nodedns/forward/tls.py",
        "        if self.timeouts < MAX_TIMEOUTS and self.last_read > sent:",
        "        if self.timeouts < MAX_TIMEOUTS:",
        ("tests/e2e/test_dot.py::test_a_wedged_connection_met_by_one_query_at_a_time_is_abandoned_at_its_first_"
         "timeout",),
        "a connection that answers nothing is kept until three queries timed out on it: one query at a time, "
        "every forwarded miss SERVFAIL for as long as that takes",
    ),
)
