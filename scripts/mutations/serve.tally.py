"""Mutations of nodedns/serve/tally.py (answers counted by client, the rows insight is made of)."""

from mutate import Mutation

TESTS = ("tests/unit/serve/test_tally.py", "tests/unit/observe/test_insight.py",
         "tests/unit/observe/test_insight_hitpath.py", "tests/unit/serve/test_hit_paths.py",
         "tests/unit/serve/test_tail.py", "tests/unit/serve/test_hitpath_differential.py")

MUTATIONS = (
    Mutation(
        "python-tally-forgets-the-answer-bound",
        "nodedns/serve/tally.py",
        "    if len(cd) < MAX_ANSWERS:\n        cd[w] = 1\n        return True",
        "    if True:\n        cd[w] = 1\n        return True",
        ("tests/unit/serve/test_hit_paths.py::test_a_client_asking_more_names_than_an_interval_counts_by_name_is_"
         "counted_alike_on_both_paths",
         "tests/unit/serve/test_hitpath_differential.py::test_a_client_whose_tally_piece_is_full_is_handed_back_by_"
         "both"),
        "the Python hit path counts any number of distinct answers per client (a client spraying names grows the "
        "tally without bound)",
        found="yes",
    ),
    Mutation("python-tally-never-marks-a-full-piece", "nodedns/serve/tally.py",
             "            cd[BY_SLOT] = 0\n", "",
             ("tests/unit/observe/test_insight_hitpath.py::test_a_marked_piece_counts_new_answers_by_slot_without_"
              "tally_hit",
              "tests/unit/observe/test_insight_hitpath.py::test_a_client_cycling_more_names_than_the_tally_names_"
              "costs_no_call_per_hit"),
             "a full piece is never marked: both hit paths call Tally.hit for nine hits in ten of a client asking "
             "more names than an interval names"),
    Mutation("flush-counts-the-by-slot-mark", "nodedns/serve/tally.py",
             "                if w is BY_SLOT:\n                    continue\n", "",
             ("tests/unit/serve/test_tally.py::test_a_client_spraying_names_is_counted_whole_but_named_only_up_to_the_"
              "bound",),
             "the flush reads the mark as a stored answer (the interval's rows fail, insight loses them)"),
    Mutation("kept-questions-never-dropped", "nodedns/serve/tally.py",
             "        if len(names) > NAMES_KEPT:  # not kept past the bound: the next interval starts from none\n"
             "            self.names = {}\n", "",
             ("tests/unit/serve/test_tally.py::test_the_questions_of_hot_answers_are_read_once_and_kept_within_their_"
              "bound",),
             "the questions of every stored answer ever counted are kept: a client spraying names holds their "
             "answers in the tally without bound"),
    Mutation("questions-read-again-every-interval", "nodedns/serve/tally.py",
             "        names = self.names  # stored answer -> (name, type): shared by every client",
             "        names: dict[bytes, tuple[str, int]] = {}",
             ("tests/unit/serve/test_tally.py::test_the_questions_of_hot_answers_are_read_once_and_kept_within_their_"
              "bound",),
             "every interval reads the question of every hot answer again (the once-a-second block grows)"),
    Mutation("large-answers-kept", "nodedns/serve/tally.py",
             "                    if len(w) <= KEPT_ANSWER_BYTES:", "                    if True:",
             ("tests/unit/serve/test_tally.py::test_large_answers_are_named_but_not_kept_past_their_interval",),
             "the kept questions hold a tenant's large answers alive after the cache let them go (up to "
             "NAMES_KEPT of them)"),
    Mutation("retag-installs-the-map-before-handing-on", "nodedns/serve/tally.py",
             "        rows = self.flush(labels)\n        self.gens = gens",
             "        self.gens = gens\n        rows = self.flush(labels)",
             ("tests/unit/serve/test_tally.py::test_retag_hands_on_what_was_counted_under_the_old_map_first",),
             "what a Pod asked before another Pod took its address is counted for the newcomer"),
    Mutation("tally-clients-unbounded", "nodedns/serve/tally.py",
             "        if len(hits) >= MAX_CLIENTS and host not in hits:",
             "        if False:",
             ("tests/unit/serve/test_tally.py::test_clients_beyond_the_bound_share_the_overflow_entry",),
             "a flood of client addresses grows the tally without bound"),
    Mutation("hit-answers-past-the-bound-dropped", "nodedns/serve/tally.py",
             "            cd[BY_SLOT] = 0\n            cd[w[0]] = cd.get(w[0], 0) + 1",
             "            cd[BY_SLOT] = 0",
             ("tests/unit/serve/test_tally.py::test_a_client_spraying_names_is_counted_whole_but_named_only_up_to_the_"
              "bound",),
             "answers beyond the per-client bound of names are not counted at all"),
    Mutation("loop-probes-counted-as-a-clients-questions", "nodedns/serve/tally.py",
             "        if q is not None and q[1] == QT.HINFO and _probe_shaped(q[0]):", "        if False:",
             ("tests/unit/serve/test_tally.py::test_loop_probes_are_no_clients_questions",),
             "the agent's own loop probes show in /debug/top as a client's questions"),
    Mutation("cached-slow-answers-not-cached", "nodedns/serve/tally.py",
             "                cached = int(answered) if lab is not None and lab.plugin == PLUGIN_CACHE else 0",
             "                cached = 0",
             ("tests/unit/serve/test_tally.py::test_hits_and_slow_answers_become_one_row_per_client_name_and_rcode",),
             "answers from the forward cache on the slow path (TCP) do not count as cached", found="yes"),
    Mutation(
        "tally-drops-names-of-a-fast-walker",
        "nodedns/serve/tally.py",
        "        if len(self.sealed) < MAX_SEALED:",
        "        if False:",
        ("tests/unit/serve/test_tally.py::test_a_client_asking_many_names_in_an_interval_is_counted_name_by_name_in_"
         "pieces",
         "tests/unit/observe/test_insight_hitpath.py::test_a_fast_walk_of_50_external_names_counts_every_search_list_"
         "miss"),
        "a client asking more than 64 names a second loses their names: insight undercounts its search-list misses",
        found="yes (insight counted 48 of 150)",
    ),
    Mutation("flush-in-slices-never-yields", "nodedns/serve/tally.py",
             "        for host, answers in hits:\n            done += len(answers)\n"
             "            if step and done >= step:",
             "        for host, answers in hits:\n            done += len(answers)\n            if False:",
             ("tests/unit/serve/test_tally.py::test_the_flush_in_slices_yields_every_step_and_gives_the_rows_of_a_"
              "flush_at_once",
              "tests/unit/serve/test_tail.py::test_the_insight_hand_over_lets_the_loop_run_between_its_slices"),
             "the once-a-second hand-over of a busy node's counts holds the event loop for tens of milliseconds"),
    Mutation("flush-in-slices-swaps-late", "nodedns/serve/tally.py",
             "        hits, slow = [*self.sealed, *self.hits.items()], [*self.sealed_slow, *self.slow.items()]\n"
             "        self.hits, self.slow, self.sealed, self.sealed_slow = {}, {}, [], []\n"
             "        if not hits and not slow:\n            return []\n        done = 0",
             "        hits, slow = list(self.sealed), list(self.slow.items())\n"
             "        if not hits and not slow and not self.hits:\n            return []\n"
             "        hits += list(self.hits.items())\n        done = 0",
             ("tests/unit/serve/test_tally.py::test_a_flush_in_slices_leaves_later_counts_to_the_next_interval",
              "tests/unit/serve/test_tally.py::test_the_flush_in_slices_yields_every_step_and_gives_the_rows_of_a_"
              "flush_at_once"),
             "counts are not taken at the start of a sliced flush: an interval's counts are handed on twice"),
)
