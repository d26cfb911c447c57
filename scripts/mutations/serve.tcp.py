"""Mutations of nodedns/serve/tcp.py (the TCP connections and their pool: its caps, the bound on what they owe)."""

from mutate import HIT_PATH_TESTS, Mutation

TESTS = (*HIT_PATH_TESTS, "tests/unit/serve/test_tcp_model.py", "tests/unit/serve/test_tcp_misses.py",
         "tests/e2e/test_policy_agent.py")

_MISSES = "tests/unit/serve/test_tcp_misses.py::"

MUTATIONS = (
    Mutation(
        "tcp-takes-frames-whatever-is-unsent",
        "nodedns/serve/tcp.py",
        "return self.transport.get_write_buffer_size() + self.pending * TCP_QUERY_COST >= TCP_OWED_PAUSE",
        "return self.pending * TCP_QUERY_COST >= TCP_OWED_PAUSE",
        ("tests/e2e/test_tcp_bounds.py::test_a_pipelining_client_that_never_reads_stays_within_a_bound_and_other_pods_"
         "udp_is_all_answered",),
        "a TCP connection takes its next frame however much it is owed: a client that pipelines and never reads "
        "has all its answers buffered in the agent",
        found="yes (before: every frame of a read was answered)",
    ),
    Mutation(
        "tcp-idle-closes-a-connection-that-does-not-read",
        "nodedns/serve/tcp.py",
        """            self.abort("not_reading")  # answers it never took: close() would wait for them forever""",
        """            self.close()""",
        ("tests/e2e/test_tcp_bounds.py::test_a_connection_that_never_reads_is_reset_at_the_idle_timeout_even_with_a_"
         "full_send_buffer",),
        "a connection still owed answers is closed at the idle timeout, which waits forever for a client that "
        "does not read: it holds its slot and its buffers",
        found="yes",
    ),
    Mutation(
        "tcp-abort-without-a-reset",
        "nodedns/serve/tcp.py",
        "            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)",
        "            pass",
        ("tests/e2e/test_tcp_bounds.py::test_a_connection_that_never_reads_is_reset_at_the_idle_timeout_even_with_a_"
         "full_send_buffer",),
        "an aborted connection leaves its unsent answers queued in the kernel behind a FIN its client never gets",
        found="yes",
    ),
    Mutation(
        "tcp-process-owed-never-shed",
        "nodedns/serve/tcp.py",
        "            self.pool.written()\n",
        "            pass\n",
        ("tests/e2e/test_tcp_bounds.py::test_past_the_process_bound_on_answers_unsent_the_largest_holders_are_reset_"
         "and_"
         "the_rest_kept",),
        "what all connections hold unsent is never bounded",
        found="yes",
    ),
    Mutation(
        "tcp-in-flight-cap-off-by-one",
        "nodedns/serve/tcp.py",
        "self.pending * TCP_QUERY_COST >= TCP_OWED_PAUSE",
        "self.pending * TCP_QUERY_COST > TCP_OWED_PAUSE",
        ("tests/e2e/test_tcp_bounds.py::test_a_connection_has_at_most_four_queries_worked_on_at_once_and_every_answer_"
         "comes",),
        "a fifth query of a connection worked on at once: its answers landing together can exceed what it may hold",
        found="yes",
    ),
    Mutation(
        "tcp-per-client-cap-off-by-one",
        "nodedns/serve/tcp.py",
        "if held >= self.max_per_client:",
        "if held > self.max_per_client:",
        ("tests/e2e/test_tcp_bounds.py::test_the_per_client_cap_refuses_the_connection_after_the_nth_from_one_address_"
         "while_another_address_connects",),
        "one address gets one connection more than --tcp-max-connections-per-client",
        found="yes",
    ),
    Mutation(
        "tcp-per-client-count-never-released",
        "nodedns/serve/tcp.py",
        """        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self.by_client[conn.client]""",
        """        pass""",
        ("tests/e2e/test_tcp_bounds.py::test_the_per_client_cap_refuses_the_connection_after_the_nth_from_one_address_"
         "while_another_address_connects",),
        "closed connections still count against their address: a client that reconnected N times is refused "
        "for good",
        found="yes",
    ),
    Mutation(
        "tcp-misses-never-budgeted",
        "nodedns/serve/tcp.py",
        "        if budget.take_tcp(peer):\n            return None",
        "        if budget.take_tcp(peer) or True:\n            return None",
        ("tests/e2e/test_hostile.py::test_a_client_s_tcp_misses_are_refused_over_its_budget_and_cost_no_one_else_"
         "their_answers",),
        "a client's misses over TCP reach the slow path whatever its --miss-limit: a TCP spray of new names "
        "takes the event loop from every other Pod's cached answers",
    ),
    Mutation(
        "tcp-hit-counted-as-a-miss",
        "nodedns/serve/tcp.py",
        "            if w is not None:\n                return patch(w, msg, qend)",
        "            if w is not None and False:\n                return patch(w, msg, qend)",
        ("tests/e2e/test_hostile.py::test_a_client_s_tcp_misses_are_refused_over_its_budget_and_cost_no_one_else_"
         "their_answers",),
        "a stored answer asked over TCP spends the client's miss budget: over it, its cached names are REFUSED",
    ),
    Mutation(
        "tcp-policed-stored-answer-counted-as-a-miss",
        "nodedns/serve/tcp.py",
        "                return None  # stored: the policy decides, then the stored answer (not a miss)",
        "                self.budget.take_tcp(peer)\n"
        "                return None  # stored: the policy decides, then the stored answer (not a miss)",
        (_MISSES + "test_a_policed_pods_stored_answers_never_take_from_its_tcp_miss_budget",
         "tests/e2e/test_policy_agent.py::test_a_pod_under_a_policy_has_its_tcp_misses_refused_over_its_budget_but_"
         "never_its_stored_answers"),
        "a Pod under a DNS policy spends its TCP miss budget on its stored answers: its misses after them are "
        "REFUSED within its --miss-limit",
        found="yes",
    ),
    Mutation(
        "tcp-re-rendered-answer-counted-as-a-miss",
        "nodedns/serve/tcp.py",
        "            if w is None:\n                w = self.rehit(key)",
        "            if w is None:\n                pass",
        (_MISSES + "test_an_admitted_pods_stored_and_re_rendered_answers_are_written_at_once_and_never_take_from_"
         "its_budget",),
        "a forwarded answer asked over TCP at the turn of a second (its hot copy gone, re-rendered) is a miss: "
        "it spends the client's budget and, over it, is REFUSED",
        found="yes",
    ),
    Mutation(
        "tcp-half-closed-holder-never-reset",
        "nodedns/serve/tcp.py",
        """            if self.counted and self.unsent():""",
        """            if False:""",
        ("tests/unit/serve/test_tcp_model.py::test_a_half_closed_client_that_never_takes_its_last_answer_is_reset_"
         "at_the_idle_timeout",),
        "a client that half-closes and never reads its last answers keeps its connection (a slot of both caps, "
        "and buffers outside the process bound) for ever: the close waits on a client that does not read",
        found="yes (the TCP state machine found it)",
    ),
    Mutation(
        "tcp-half-closed-with-nothing-owed-taken-for-open",
        "nodedns/serve/tcp.py",
        "        self.closed = True  # the transport closes itself once what was written is sent: closing, as after "
        "close()\n",
        "",
        ("tests/unit/serve/test_tcp_model.py::test_at_the_connection_cap_a_half_closed_connection_taking_its_last_"
         "answer_is_not_the_one_evicted",),
        "a connection whose client half-closed with nothing pending (closing while its last answers go out) "
        "counts as open: at the connection cap it is the one reset to make room, its answers lost, and the "
        "open connection kept",
        found="yes (the TCP state machine found it)",
    ),
    Mutation(
        "tcp-cap-looks-at-the-first-largest-holder-only",
        "nodedns/serve/tcp.py",
        "                    victim.abort(\"evicted\")\n                    return True\n        return False",
        "                    victim.abort(\"evicted\")\n                    return True\n                return False\n"
        "        return False",
        ("tests/unit/serve/test_tcp_model.py::test_at_the_cap_a_newcomer_evicts_from_an_equal_largest_holder_whose_"
         "connections_are_not_all_closing",),
        "at --tcp-max-connections, when the first of the addresses holding the most has only connections closing, "
        "the newcomer is refused though another address holding as many has open ones",
        found="yes (the TCP state machine found it)",
    ),
    Mutation(
        "tcp-drain-from-exactly-the-pause-untold",
        "nodedns/serve/tcp.py",
        "self.transport.set_write_buffer_limits(high=TCP_OWED_PAUSE - 1, low=0)",
        "self.transport.set_write_buffer_limits(high=TCP_OWED_PAUSE, low=0)",
        ("tests/unit/serve/test_tcp_model.py::test_answers_owed_of_exactly_the_pause_then_read_let_the_next_"
         "pipelined_query_in",),
        "a connection owed exactly 4 KiB stops taking frames and is never told when its client has read them: "
        "its pipelined queries wait in the kernel until the idle timeout closes the connection unanswered",
        found="yes (the TCP state machine found it)",
    ),
    Mutation(
        "tcp-process-owed-bound-doubled",
        "nodedns/serve/tcp.py",
        "while total > TCP_PROCESS_OWED_MAX and held:",
        "while total > 2 * TCP_PROCESS_OWED_MAX and held:",
        ("tests/e2e/test_tcp_bounds.py::test_past_the_process_bound_on_answers_unsent_the_largest_holders_are_reset_"
         "and_"
         "the_rest_kept",),
        "clients that never read make one process hold twice the answers it may",
        found="yes",
    ),
    Mutation(
        "tcp-process-owed-sheds-the-smallest",
        "nodedns/serve/tcp.py",
        "victim = max(held, key=held.__getitem__)",
        "victim = min(held, key=held.__getitem__)",
        ("tests/e2e/test_tcp_bounds.py::test_past_the_process_bound_on_answers_unsent_the_largest_holders_are_reset_"
         "and_"
         "the_rest_kept",),
        "the connections holding least are reset first: more are reset than needed",
        found="yes",
    ),
    Mutation(
        "tcp-cap-never-makes-room",
        "nodedns/serve/tcp.py",
        "        if most < held + 2:\n            return False",
        "        if True:\n            return False",
        ("tests/e2e/test_tcp_bounds.py::test_at_the_connection_cap_a_client_holding_fewer_gets_in_and_the_largest_"
         "holder_loses_its_oldest",),
        "once attacker Pods fill --tcp-max-connections, every other client's TCP connection is refused",
        found="yes",
    ),
    Mutation(
        "tcp-sends-the-raw-template",
        "nodedns/serve/tcp.py",
        "            w = self.hot.get(key)\n            if w is None:\n                w = self.rehit(key)",
        "            w = self.hot.view.get(key)\n            if w is None:\n                w = self.rehit(key)",
        ("tests/unit/serve/test_tcp_misses.py::test_a_forwarded_answer_in_the_hot_table_is_written_as_sent_now_its_"
         "ttl_counted_down",),
        "with --miss-limit, a TCP query for a hot forwarded name gets the stored template: bytes after the "
        "message (strict clients reject it), TTLs never counted down, answered past its expiry",
    ),
)
