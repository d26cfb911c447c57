"""Mutations of nodedns/serve/_hitpath.c (the UDP hit path in C)."""

from mutate import Mutation

POLICED_DIFFERENTIAL = ("tests/unit/serve/test_hitpath_differential.py::test_a_client_under_a_dns_policy_gets_from_"
                        "both_exactly_what_its_groups_memo_holds")
POLICED_COUNTED = ("tests/unit/serve/test_hitpath_differential.py::test_a_memo_entry_is_counted_once_per_answer_and_"
                   "a_stale_one_is_handed_back_by_both")
POLICED_INTERLEAVED = ("tests/unit/serve/test_hitpath_differential.py::test_a_policed_pods_answers_between_other_"
                       "pods_in_one_batch_are_counted_exactly_and_hold_no_reference")
POLICED_AGENT = ("tests/e2e/test_policy_agent.py::test_a_policed_pods_repeat_questions_are_answered_without_the_"
                 "resolver_and_never_past_a_rule")

TESTS = ("tests/e2e/test_hitpath_c.py", "tests/unit/serve/test_hit_paths.py",
         "tests/unit/observe/test_insight_hitpath.py", "tests/e2e/test_hostile.py",
         "tests/unit/serve/test_interop.py", "tests/unit/serve/test_hitpath_differential.py",
         "tests/e2e/test_policy_agent.py")

DIFFERENTIAL = ("tests/unit/serve/test_hit_paths.py::test_the_c_and_python_hit_paths_send_the_same_bytes_and_count_the_"
                "same")
BOUNDARIES = ("tests/unit/serve/test_hit_paths.py::test_a_cut_at_each_section_boundary_counts_the_records_kept_in_the_"
              "header")

MUTATIONS = (
    Mutation(
        "c-tally-keeps-the-previous-clients-entry",
        "nodedns/serve/_hitpath.c",
        "            Py_CLEAR(memo);\n            cd = NULL;\n            who = host(&names[i]);",
        "            Py_CLEAR(memo);\n            who = host(&names[i]);",
        (DIFFERENTIAL,),
        "in a batch that interleaves clients, a client's hits are counted for the client before it (insight "
        "gives one Pod's queries to another)",
        found="yes",
    ),
    Mutation(
        "c-cut-drops-a-record-that-fits-exactly",
        "nodedns/serve/_hitpath.c",
        "        if (end > budget)\n            break;",
        "        if (end >= budget)\n            break;",
        (BOUNDARIES, DIFFERENTIAL),
        "a record that ends exactly at the client's UDP size is cut too",
    ),
    Mutation(
        "c-cut-counts-a-record-in-the-next-section",
        "nodedns/serve/_hitpath.c",
        "kept[i < counts[0] ? 0 : (i < counts[0] + counts[1] ? 1 : 2)]++;",
        "kept[i <= counts[0] ? 0 : (i < counts[0] + counts[1] ? 1 : 2)]++;",
        (BOUNDARIES,),
        "a cut answer's header counts the first authority record as an answer record",
        found="yes",
    ),
    Mutation(
        "c-cut-forgets-the-opt-in-arcount",
        "nodedns/serve/_hitpath.c",
        "    kept[2] += *opt_len ? 1 : 0;\n",
        "",
        (BOUNDARIES,),
        "a cut EDNS answer keeps its OPT record but the header's ARCOUNT does not count it",
        found="yes",
    ),
    Mutation(
        "c-limit-takes-the-larger-payload",
        "nodedns/serve/_hitpath.c",
        "*limit = payload < max_udp ? payload : max_udp;",
        "*limit = payload > max_udp ? payload : max_udp;",
        (BOUNDARIES, DIFFERENTIAL),
        "the C hit path sends up to our --max-udp-size to a client that offered less",
        found="yes",
    ),
    Mutation(
        "c-limit-below-512",
        "nodedns/serve/_hitpath.c",
        "        if (*limit < 512)\n            *limit = 512;\n",
        "",
        (DIFFERENTIAL,),
        "a client offering an EDNS payload under 512 gets fewer records than 512 bytes hold (RFC 6891: 512 "
        "at least)",
        found="yes",
    ),
    Mutation(
        "c-tc-not-set-when-one-record-is-left-out",
        "nodedns/serve/_hitpath.c",
        "kept[0] + kept[1] + kept[2] < total - (*opt_len ? 1 : 0) ? 0x02 : 0",
        "kept[0] + kept[1] + kept[2] + 1 < total - (*opt_len ? 1 : 0) ? 0x02 : 0",
        (BOUNDARIES, DIFFERENTIAL),
        "an answer cut by one record goes out without TC (the client takes it as whole)",
        found="yes",
    ),
    Mutation(
        "c-every-ipv4-client-is-the-same-host",
        "nodedns/serve/_hitpath.c",
        """        return memcmp(&((const struct sockaddr_in *)a)->sin_addr, &((const struct sockaddr_in *)b)->sin_addr,
                      sizeof(struct in_addr)) == 0;""",
        """        return 1;""",
        (DIFFERENTIAL,),
        "the allow-list decision of one client is reused for the next one in the batch (a refused client gets "
        "stored answers when it follows an allowed one)",
        found="yes",
    ),
    Mutation(
        "c-hit-path-counts-past-a-full-piece",
        "nodedns/serve/_hitpath.c",
        "        if (rc <= 0)\n            return rc < 0 ? -1 : 1;",
        "        if (rc <= 0)\n            return rc < 0 ? -1 : 0;",
        ("tests/unit/observe/test_insight_hitpath.py::test_the_c_hit_path_counts_each_hit_as_tally_hit_does",),
        "the C hit path counts past a client's full piece instead of handing the hit to the Python path",
    ),
    Mutation(
        "c-hit-path-passes-one-over-the-rate-limit",
        "nodedns/serve/_hitpath.c",
        "            if (rl_full || rl_n >= rate) {",
        "            if (rl_full || rl_n > rate) {",
        ("tests/e2e/test_hostile.py::test_a_client_flooding_a_stored_name_gets_take_s_verdicts_query_for_query_and_its_"
         "neighbour_its_own_budget",
         "tests/e2e/test_hitpath_c.py::test_a_client_under_its_rate_limit_is_answered_and_counted_and_the_rest_handed_"
         "to_the_"
         "limiter"),
        "the C hit path answers one query a second more than a client's --rate-limit budget",
    ),
    Mutation(
        "c-hit-path-rate-limit-count-not-written-back",
        "nodedns/serve/_hitpath.c",
        "    if (rl_dirty && rl_write(rl, who, rl_n) < 0)\n        goto fail;\n    while (sent < hits) {",
        "    while (sent < hits) {",
        ("tests/e2e/test_hostile.py::test_rate_limited_clients_get_every_reply_over_the_budget_truncated_while_the_agent_has_the_capacity",
         "tests/e2e/test_hitpath_c.py::test_a_client_under_its_rate_limit_is_answered_and_counted_and_the_rest_handed_"
         "to_the_"
         "limiter"),
        "the C hit path forgets the count of the last run of datagrams of a batch: that client's answers go uncounted",
    ),
    Mutation(
        "c-hit-path-rate-limit-run-count-not-written-back",
        "nodedns/serve/_hitpath.c",
        "            if (rl_dirty && rl_write(rl, who, rl_n) < 0)\n"
        "                goto fail;\n            rl_dirty = 0;",
        "            rl_dirty = 0;",
        ("tests/e2e/test_hostile.py::test_a_client_flooding_a_stored_name_gets_take_s_verdicts_query_for_query_and_its_"
         "neighbour_its_own_budget",
         "tests/e2e/test_hitpath_c.py::test_each_client_in_a_batch_has_its_own_rate_limit_count"),
        "the C hit path forgets a client's count when another address's datagrams follow in the batch",
    ),
    Mutation(
        "c-hit-path-rate-limit-table-grows-past-full",
        "nodedns/serve/_hitpath.c",
        "        *full = PyDict_GET_SIZE(rl) >= max_clients;",
        "        *full = PyDict_GET_SIZE(rl) > max_clients;",
        ("tests/e2e/test_hostile.py::test_clients_beyond_the_rate_limit_table_share_one_budget_on_the_hit_path",
         "tests/e2e/test_hitpath_c.py::test_a_new_client_when_the_rate_limit_table_is_full_is_handed_to_the_limiter"),
        "the C hit path gives one client more than --rate-limit's table holds a budget of its own",
    ),
    Mutation(
        "c-hit-path-ignores-the-by-slot-mark",
        "nodedns/serve/_hitpath.c",
        "        rc = PyDict_Contains(cd, Py_None); /* tally.BY_SLOT */",
        "        rc = 0;",
        ("tests/unit/observe/test_insight_hitpath.py::test_a_client_cycling_more_names_than_the_tally_names_costs_no_"
         "call_per_hit",),
        "a client asking more names than the tally names in an interval costs a call into Tally.hit (Python) for "
        "nine hits in ten: a tenth more per cached answer, the benchmark's client included",
    ),
    Mutation(
        "c-hit-path-counts-a-marked-piece-by-the-wrong-byte",
        "nodedns/serve/_hitpath.c",
        "        key = PyLong_FromLong((long)((const unsigned char *)PyBytes_AS_STRING(w))[0]);",
        "        key = PyLong_FromLong((long)((const unsigned char *)PyBytes_AS_STRING(w))[1]);",
        ("tests/unit/observe/test_insight_hitpath.py::test_a_client_cycling_more_names_than_the_tally_names_costs_no_"
         "call_per_hit",),
        "the hits counted by slot after the mark go under another label slot (another rcode or source in insight)",
    ),
    Mutation(
        "c-hit-path-keeps-a-set-aside-tally-piece",
        "nodedns/serve/_hitpath.c",
        "                cd = NULL; /* the client's entry may be a fresh one now: looked up again */",
        "",
        ("tests/unit/serve/test_hitpath_differential.py::test_a_client_whose_tally_piece_is_full_is_answered_by_"
         "both_and_the_piece_set_aside",),
        "after Tally.hit set a client's full piece aside, the C hit path counts the client's next hits in the "
        "piece set aside (counted twice, past its bound)",
    ),
    Mutation(
        "c-policed-memo-serves-an-answer-rendered-again",
        "nodedns/serve/_hitpath.c",
        "            && ((ok = PyTuple_GET_ITEM(e, 0)) == Py_True || ok == w)) {",
        "            && ((ok = PyTuple_GET_ITEM(e, 0)) != NULL)) {",
        (POLICED_DIFFERENTIAL, POLICED_COUNTED, POLICED_AGENT),
        "a Pod under a clusterZone gets from the C hit path an answer built again after the index changed (a "
        "PTR now naming a hidden namespace) because an older answer for the same key was let through",
    ),
    Mutation(
        "c-policed-client-served-without-its-memo",
        "nodedns/serve/_hitpath.c",
        "               : memo ? lookup(table, data, n, max_udp, &qend, &limit, memo, &cell) : NULL;",
        "               : memo ? lookup(table, data, n, max_udp, &qend, &limit, NULL, &cell) : NULL;",
        (POLICED_DIFFERENTIAL, POLICED_COUNTED, POLICED_AGENT),
        "once a Pod under a policy has one answer remembered, the C hit path serves it every stored answer, "
        "denied names and hidden namespaces included",
    ),
    Mutation(
        "c-policed-memo-answers-uncounted",
        "nodedns/serve/_hitpath.c",
        "        if (cell && bump(cell) < 0)",
        "        if (0 && cell && bump(cell) < 0)",
        (POLICED_DIFFERENTIAL, POLICED_COUNTED),
        "the questions the C hit path answers from a policy group's memo are missing from "
        "nodedns_policy_decisions_total",
    ),
    Mutation(
        "c-policed-memo-never-read",
        "nodedns/serve/_hitpath.c",
        "            if (!ok && policed) { /* only a client not in the allow list's memo: under a DNS policy? */",
        "            if (0) {",
        (POLICED_DIFFERENTIAL,),
        "every answer to a Pod under a policy is handed back by the C hit path to the Python one (the cost per "
        "cached answer of the Python path)",
    ),
    Mutation(
        "c-policed-memo-cell-kept-for-the-next-datagram",
        "nodedns/serve/_hitpath.c",
        "        Py_CLEAR(cell);\n        if (last >= 0 && same_host(&names[i], &names[last])) {",
        "        if (last >= 0 && same_host(&names[i], &names[last])) {",
        (POLICED_INTERLEAVED,),
        "in a batch, another Pod's hit after a policed Pod's answer from the memo is counted in the policy's "
        "decisions (nodedns_policy_decisions_total inflated), and the memo cell's reference leaks",
        found="yes",
    ),
    Mutation(
        "c-template-ttl-one-too-long",
        "nodedns/serve/_hitpath.c",
        "    ttl = expires - second;",
        "    ttl = expires - second + 1;",
        ("tests/unit/serve/test_hitpath_differential.py::test_the_c_and_python_hit_paths_return_send_and_count_the_"
         "same",),
        "the C hit path sends a forwarded answer with a TTL one second longer than it has left",
    ),
    Mutation(
        "c-template-sent-at-its-expiry",
        "nodedns/serve/_hitpath.c",
        "expires <= second)",
        "expires < second)",
        ("tests/unit/serve/test_hitpath_differential.py::test_the_c_and_python_hit_paths_return_send_and_count_the_"
         "same",),
        "the C hit path answers a forwarded answer in its expiry second, with TTL 0 (the slow path's refresh and "
        "serve-stale never see it)",
    ),
    Mutation(
        "c-asked-never-told",
        "nodedns/serve/_hitpath.c",
        "        if (template && asked && PySet_Add(asked, w) < 0)",
        "        if (0 && template && asked && PySet_Add(asked, w) < 0)",
        ("tests/unit/serve/test_hitpath_differential.py::test_the_c_and_python_hit_paths_return_send_and_count_the_"
         "same",),
        "the C hit path never says which templates it answered: a refreshed name in steady use leaves the hot "
        "table at each other prefetch point and its queries go through Python",
    ),
)
