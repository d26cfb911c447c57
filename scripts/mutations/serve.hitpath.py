"""Mutations of nodedns/serve/hitpath.py (the Python hit path)."""

from mutate import HIT_PATH_BOUNDARIES as BOUNDARIES
from mutate import HIT_PATH_DIFFERENTIAL as DIFFERENTIAL
from mutate import HIT_PATH_PRODUCTION as PRODUCTION
from mutate import HIT_PATH_TESTS, Mutation

TESTS = HIT_PATH_TESTS

MUTATIONS = (
    Mutation(
        "python-hit-path-limit-takes-the-larger-payload",
        "nodedns/serve/hitpath.py",
        "                        size = max_udp if size > max_udp else size",
        "                        size = max_udp if size < max_udp else size",
        (BOUNDARIES, DIFFERENTIAL, PRODUCTION),
        "the Python hit path sends a stored answer whole up to our --max-udp-size to a client that offered less",
        found="yes",
    ),
    Mutation(
        "python-hit-path-passes-one-over-the-rate-limit",
        "nodedns/serve/hitpath.py",
        "            elif seen >= rate:",
        "            elif seen > rate:",
        (PRODUCTION, "tests/e2e/test_hostile.py::test_a_client_flooding_a_stored_name_gets_take_s_verdicts_query_for_"
                     "query_and_its_neighbour_its_own_budget"),
        "the Python hit path answers one query a second more than a client's --rate-limit budget",
    ),
    Mutation(
        "python-hit-path-rate-limit-table-grows-past-full",
        "nodedns/serve/hitpath.py",
        "                if len(rl) >= max_clients:",
        "                if len(rl) > max_clients:",
        (PRODUCTION, "tests/e2e/test_hostile.py::test_clients_beyond_the_rate_limit_table_share_one_budget_on_the_hit_"
                     "path"),
        "the Python hit path gives one client more than --rate-limit's table holds a budget of its own",
    ),
    Mutation(
        "python-hit-path-skips-allow-list",
        "nodedns/serve/hitpath.py",
        "        if host in allowed:",
        "        if True:",
        (PRODUCTION,
         "tests/e2e/test_hostile.py::test_clients_outside_the_allow_list_are_refused_even_for_stored_answers"),
        "the Python hit path answers stored answers to clients the allow list refuses",
        found="yes",
    ),
    Mutation(
        "python-hit-path-sends-big-answers-whole",
        "nodedns/serve/hitpath.py",
        "                    if out is not None and len(out) > 512:\n                        out = _cut(out, n, 512)",
        "                    pass",
        (PRODUCTION, "tests/unit/serve/test_interop.py::test_a_big_headless_answer_keeps_the_whole_records_that_fit_on_"
                     "every_hit_path"),
        "the Python hit path sends a stored answer over 512 bytes whole to a client without EDNS",
    ),
    Mutation(
        "python-hit-path-tally-counts-the-cut",
        "nodedns/serve/hitpath.py",
        "not count_hit(tally, host, w)",
        "not count_hit(tally, host, out)",
        (PRODUCTION,),
        "insight counts a cut answer apart from the stored one: the two hit paths tally different answers",
    ),
    Mutation(
        "python-hit-path-full-tally-piece-never-set-aside",
        "nodedns/serve/hitpath.py",
        "            on_full(host, w)  # type: ignore[arg-type]",
        "            pass  # type: ignore[arg-type]",
        (PRODUCTION, "tests/unit/serve/test_hitpath_differential.py::test_a_client_whose_tally_piece_is_full_is_"
                     "answered_by_both_and_the_piece_set_aside"),
        "a hit that does not fit its client's tally piece is answered but counted nowhere: insight loses names",
    ),
)
