"""Mutations of nodedns/dns/truncate.py (a stored answer cut to fit, options added)."""

from mutate import Mutation

TESTS = ("tests/unit/dns/test_wire.py", "tests/unit/serve/test_hit_paths.py", "tests/unit/serve/test_interop.py")

BOUNDARIES = ("tests/unit/serve/test_hit_paths.py::test_a_cut_at_each_section_boundary_counts_the_records_kept_in_the_"
              "header")

ONE_BIG = ("tests/unit/serve/test_hit_paths.py::test_a_record_too_big_for_a_client_without_edns_leaves_an_empty_answer_"
           "with_tc")

MUTATIONS = (
    Mutation(
        "truncate-no-tc-when-the-only-record-does-not-fit",
        "nodedns/dns/truncate.py",
        "    tc = 0x0200 if kept < len(rrs) - (1 if opt else 0) else 0",
        "    tc = 0x0200 if kept + 1 < len(rrs) - (1 if opt else 0) else 0",
        (ONE_BIG, "tests/unit/dns/test_wire.py"),
        "an answer whose one record does not fit a client without EDNS goes out empty without TC (the client "
        "takes it as NODATA and never asks over TCP)",
        found="yes",
    ),
    Mutation(
        "truncate-counts-every-record-as-an-answer",
        "nodedns/dns/truncate.py",
        "        cut = end\n        counts[section] += 1",
        "        cut = end\n        counts[0] += 1",
        (BOUNDARIES, "tests/unit/dns/test_wire.py"),
        "a cut answer's header counts its authority and additional records as answer records",
    ),
    Mutation(
        "truncate-forgets-the-opt-in-the-budget",
        "nodedns/dns/truncate.py",
        "    budget = limit - len(opt)",
        "    budget = limit",
        (BOUNDARIES, "tests/unit/dns/test_wire.py"),
        "a cut EDNS answer is larger than the client's UDP size by its OPT record",
    ),
)
