"""Mutations of nodedns/serve/server.py (the UDP and TCP listeners, the Python hit path)."""

from mutate import Mutation

TESTS = ("tests/unit/serve/test_hit_paths.py", "tests/e2e/test_hitpath_c.py", "tests/e2e/test_hostile.py",
         "tests/unit/serve/test_interop.py",
         "tests/unit/observe/test_insight_hitpath.py", "tests/e2e/test_lifecycle.py",
         "tests/unit/forward/test_forward.py", "tests/unit/metrics/test_metrics.py",
         "tests/e2e/test_tcp_bounds.py")

DIFFERENTIAL = ("tests/unit/serve/test_hit_paths.py::test_the_c_and_python_hit_paths_send_the_same_bytes_and_count_the_"
                "same")
BOUNDARIES = ("tests/unit/serve/test_hit_paths.py::test_a_cut_at_each_section_boundary_counts_the_records_kept_in_the_"
              "header")

MUTATIONS = (
    Mutation(
        "python-hit-path-limit-takes-the-larger-payload",
        "nodedns/serve/server.py",
        """                    if w is not None and len(w) > 512 and len(w) > min((data[n - 8] << 8) | data[n - 7],
                                                                       self.max_udp):""",
        """                    if w is not None and len(w) > 512 and len(w) > max((data[n - 8] << 8) | data[n - 7],
                                                                       self.max_udp):""",
        (BOUNDARIES, DIFFERENTIAL),
        "the Python hit path sends a stored answer whole up to our --max-udp-size to a client that offered less",
        found="yes",
    ),
    Mutation(
        "general-ignores-our-max-udp-size",
        "nodedns/serve/server.py",
        "                if limit > self.max_udp:\n                    limit = self.max_udp\n",
        "",
        (BOUNDARIES, DIFFERENTIAL),
        "an answer found by the canonical key is cut to the client's payload size (4096) rather than ours (1232)",
        found="yes",
    ),
    Mutation(
        "general-sends-the-stored-case",
        "nodedns/serve/server.py",
        "                self.sendto(data[:2] + w[2:12] + data[12:qend] + w[qend:], addr)",
        "                self.sendto(data[:2] + w[2:], addr)",
        (DIFFERENTIAL,),
        "a query in odd case (0x20) gets the question back lowercase (clients that check the case drop it)",
    ),
    Mutation(
        "c-misses-skip-the-allow-list",
        "nodedns/serve/server.py",
        """                    if addr[0] not in allowed:
                        self.slow(data, addr)  # the resolver admits (and remembers) the client, or refuses it
                    else:
                        self.general(data, addr)""",
        """                    self.general(data, addr)""",
        (DIFFERENTIAL,),
        "what the C hit path hands back goes to the canonical lookup first: a refused client gets stored "
        "answers in odd case",
        found="yes",
    ),
    Mutation(
        "python-tally-forgets-the-answer-bound",
        "nodedns/serve/server.py",
        "                elif len(cd) < MAX_ANSWERS:\n                    cd[w] = 1",
        "                elif True:\n                    cd[w] = 1",
        ("tests/unit/serve/test_hit_paths.py::test_a_client_asking_more_names_than_an_interval_counts_by_name_is_"
         "counted_alike_"
         "on_both_paths",),
        "the Python hit path counts any number of distinct answers per client (a client spraying names grows "
        "the tally without bound)",
        found="yes",
    ),
    Mutation(
        "general-forgets-the-tally",
        "nodedns/serve/server.py",
        "            if w is not None:\n                if self.tally is not None:\n"
        "                    self.tally.hit(addr[0], w)\n                if limit > self.max_udp:",
        "            if w is not None:\n                if limit > self.max_udp:",
        (DIFFERENTIAL,),
        "answers the canonical lookup finds (odd case, EDNS options, cut ones) are not counted for insight",
    ),
    Mutation(
        "tcp-takes-frames-whatever-is-unsent",
        "nodedns/serve/server.py",
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
        "nodedns/serve/server.py",
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
        "nodedns/serve/server.py",
        "            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)",
        "            pass",
        ("tests/e2e/test_tcp_bounds.py::test_a_connection_that_never_reads_is_reset_at_the_idle_timeout_even_with_a_"
         "full_send_buffer",),
        "an aborted connection leaves its unsent answers queued in the kernel behind a FIN its client never gets",
        found="yes",
    ),
    Mutation(
        "tcp-process-owed-bound-doubled",
        "nodedns/serve/server.py",
        "while total > TCP_PROCESS_OWED_MAX and held:",
        "while total > 2 * TCP_PROCESS_OWED_MAX and held:",
        ("tests/e2e/test_tcp_bounds.py::test_past_the_process_bound_on_answers_unsent_the_largest_holders_are_reset_"
         "and_"
         "the_rest_kept",),
        "clients that never read make one process hold twice the answers it may",
        found="yes",
    ),
    Mutation(
        "tcp-process-owed-never-shed",
        "nodedns/serve/server.py",
        "            self.server.shed_owed()\n",
        "            pass\n",
        ("tests/e2e/test_tcp_bounds.py::test_past_the_process_bound_on_answers_unsent_the_largest_holders_are_reset_"
         "and_"
         "the_rest_kept",),
        "what all connections hold unsent is never bounded",
        found="yes",
    ),
    Mutation(
        "tcp-process-owed-sheds-the-smallest",
        "nodedns/serve/server.py",
        "victim = max(held, key=held.__getitem__)",
        "victim = min(held, key=held.__getitem__)",
        ("tests/e2e/test_tcp_bounds.py::test_past_the_process_bound_on_answers_unsent_the_largest_holders_are_reset_"
         "and_"
         "the_rest_kept",),
        "the connections holding least are reset first: more are reset than needed",
        found="yes",
    ),
    Mutation(
        "tcp-in-flight-cap-off-by-one",
        "nodedns/serve/server.py",
        "self.pending * TCP_QUERY_COST >= TCP_OWED_PAUSE",
        "self.pending * TCP_QUERY_COST > TCP_OWED_PAUSE",
        ("tests/e2e/test_tcp_bounds.py::test_a_connection_has_at_most_four_queries_worked_on_at_once_and_every_answer_"
         "comes",),
        "a fifth query of a connection worked on at once: its answers landing together can exceed what it may hold",
        found="yes",
    ),
    Mutation(
        "tcp-per-client-cap-off-by-one",
        "nodedns/serve/server.py",
        "if held >= server.tcp_max_per_client:",
        "if held > server.tcp_max_per_client:",
        ("tests/e2e/test_tcp_bounds.py::test_the_per_client_cap_refuses_the_connection_after_the_nth_from_one_address_"
         "while_another_address_connects",),
        "one address gets one connection more than --tcp-max-connections-per-client",
        found="yes",
    ),
    Mutation(
        "tcp-per-client-count-never-released",
        "nodedns/serve/server.py",
        """            if mine is not None:
                mine.pop(self, None)
                if not mine:
                    del server.tcp_by_client[self.client]""",
        """            pass""",
        ("tests/e2e/test_tcp_bounds.py::test_the_per_client_cap_refuses_the_connection_after_the_nth_from_one_address_"
         "while_another_address_connects",),
        "closed connections still count against their address: a client that reconnected N times is refused "
        "for good",
        found="yes",
    ),
    Mutation(
        "tcp-cap-never-makes-room",
        "nodedns/serve/server.py",
        "if len(conns) < held + 2 or victim is None:",
        "if True:",
        ("tests/e2e/test_tcp_bounds.py::test_at_the_connection_cap_a_client_holding_fewer_gets_in_and_the_largest_"
         "holder_loses_its_oldest",),
        "once attacker Pods fill --tcp-max-connections, every other client's TCP connection is refused",
        found="yes",
    ),
    Mutation(
        "python-hit-path-passes-one-over-the-rate-limit",
        "nodedns/serve/server.py",
        "                elif seen >= rate:",
        "                elif seen > rate:",
        ("tests/e2e/test_hostile.py::test_a_client_flooding_a_stored_name_gets_take_s_verdicts_query_for_query_and_its_"
         "neighbour_its_own_budget",),
        "the inlined Python hit path answers one query a second more than a client's --rate-limit budget",
    ),
    Mutation(
        "c-hit-path-rate-limit-window-never-turns",
        "nodedns/serve/server.py",
        "                limiter.tick()  # a new second: its counts cleared in place\n                limit = (",
        "                limit = (",
        ("tests/e2e/test_hostile.py::test_a_rate_limited_client_gets_its_budget_again_the_next_second_and_no_more",),
        "the C hit path counts a new second against the last one's budget until a client over it turns the window",
    ),
    Mutation(
        "python-hit-path-rate-limit-window-never-turns",
        "nodedns/serve/server.py",
        "            limiter.tick()  # a new second: its counts cleared in place\n            rl, rate,",
        "            rl, rate,",
        ("tests/e2e/test_hostile.py::test_a_rate_limited_client_gets_its_budget_again_the_next_second_and_no_more",),
        "the inlined Python hit path counts a new second against the last one's budget",
    ),
    Mutation(
        "c-hit-path-rate-limit-rate-and-table-size-swapped",
        "nodedns/serve/server.py",
        "limit = (limiter.counts, limiter.rate, limiter.max_clients, over)",
        "limit = (limiter.counts, limiter.max_clients, limiter.rate, over)",
        ("tests/e2e/test_hostile.py::test_a_client_flooding_a_stored_name_gets_take_s_verdicts_query_for_query_and_its_"
         "neighbour_its_own_budget",),
        "the C hit path takes the rate limit table's size for the budget and the budget for its size",
    ),
    Mutation(
        "python-hit-path-rate-limit-table-grows-past-full",
        "nodedns/serve/server.py",
        "                    if len(rl) >= max_clients:",
        "                    if len(rl) > max_clients:",
        ("tests/e2e/test_hostile.py::test_clients_beyond_the_rate_limit_table_share_one_budget_on_the_hit_path",),
        "the inlined Python hit path gives one client more than --rate-limit's table holds a budget of its own",
    ),
)
