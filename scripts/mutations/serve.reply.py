"""Mutations of nodedns/serve/reply.py (a reply sized for the client: its UDP limit, the cut)."""

from mutate import Mutation

TESTS = ("tests/unit/serve/test_interop.py", "tests/unit/serve/test_hit_paths.py",
         "tests/e2e/test_tcp_bounds.py", "tests/e2e/test_hostile.py")

BIG_HEADLESS = ("tests/unit/serve/test_interop.py::test_a_big_headless_answer_keeps_the_whole_records_that_fit_on_"
                "every_hit_path")

MUTATIONS = (
    Mutation(
        "slow-path-udp-limit-ignores-our-max",
        "nodedns/serve/reply.py",
        "            return min(fk[2], max_udp_size) if fk[2] > 512 else 512",
        "            return fk[2] if fk[2] > 512 else 512",
        (BIG_HEADLESS,),
        "an answer made on the slow path is cut to the client's payload size (4096) rather than ours (1232)",
    ),
    Mutation(
        "slow-path-never-cuts",
        "nodedns/serve/reply.py",
        "    if len(response) <= limit:\n        return response\n    try:",
        "    if True:\n        return response\n    try:",
        (BIG_HEADLESS,),
        "an answer made on the slow path is sent whole however large, to a client that takes 512 bytes",
    ),
    Mutation(
        "slow-path-cuts-mid-record",
        "nodedns/serve/reply.py",
        "        return truncate(response, question_end(response), limit)",
        "        return response[:limit]",
        (BIG_HEADLESS,),
        "an answer too big for the client is cut at the byte, mid-record, instead of to the whole records that fit",
    ),
)
