"""Mutations of nodedns/dns/wire.py (the wire format: keys, parsing, building, truncation)."""

from mutate import Mutation

TESTS = ("tests/unit/dns/test_wire.py", "tests/unit/dns/test_wire_key.py", "tests/unit/serve/test_hit_paths.py",
         "tests/unit/forward/test_forward.py",
         "tests/unit/serve/test_interop.py", "tests/unit/dns/test_fuzz.py")

BOUNDARIES = ("tests/unit/serve/test_hit_paths.py::test_a_cut_at_each_section_boundary_counts_the_records_kept_in_the_"
              "header")
ONE_BIG = ("tests/unit/serve/test_hit_paths.py::test_a_record_too_big_for_a_client_without_edns_leaves_an_empty_answer_"
           "with_tc")

MUTATIONS = (
    Mutation(
        "truncate-drops-a-record-that-fits-exactly",
        "nodedns/dns/wire.py",
        "        if start != cut or end > budget:",
        "        if start != cut or end >= budget:",
        (BOUNDARIES, "tests/unit/dns/test_wire.py"),
        "a record that ends exactly at the client's UDP size is cut too",
    ),
    Mutation(
        "truncate-no-tc-when-the-only-record-does-not-fit",
        "nodedns/dns/wire.py",
        "    tc = 0x0200 if kept < len(rrs) - (1 if opt else 0) else 0",
        "    tc = 0x0200 if kept + 1 < len(rrs) - (1 if opt else 0) else 0",
        (ONE_BIG, "tests/unit/dns/test_wire.py"),
        "an answer whose one record does not fit a client without EDNS goes out empty without TC (the client "
        "takes it as NODATA and never asks over TCP)",
        found="yes",
    ),
    Mutation(
        "truncate-counts-every-record-as-an-answer",
        "nodedns/dns/wire.py",
        "        cut = end\n        counts[section] += 1",
        "        cut = end\n        counts[0] += 1",
        (BOUNDARIES, "tests/unit/dns/test_wire.py"),
        "a cut answer's header counts its authority and additional records as answer records",
    ),
    Mutation(
        "truncate-forgets-the-opt-in-the-budget",
        "nodedns/dns/wire.py",
        "    budget = limit - len(opt)",
        "    budget = limit",
        (BOUNDARIES, "tests/unit/dns/test_wire.py"),
        "a cut EDNS answer is larger than the client's UDP size by its OPT record",
    ),
    Mutation(
        "fast-key-reads-an-edns-version-as-zero",
        "nodedns/dns/wire.py",
        "        if data[qend + 6] != 0:  # EDNS version other than 0: the slow path answers BADVERS",
        "        if False:  # EDNS version other than 0: the slow path answers BADVERS",
        ("tests/unit/dns/test_wire.py", "tests/unit/serve/test_interop.py"),
        "a query with EDNS version 1 gets the stored answer instead of BADVERS (RFC 6891)",
    ),
    Mutation(
        "fast-key-serves-nsid-queries-from-the-store",
        "nodedns/dns/wire.py",
        "        if code == OPT_NSID or pos > end:",
        "        if pos > end:",
        ("tests/unit/dns/test_wire.py", "tests/unit/serve/test_interop.py"),
        "a query asking for the NSID (RFC 5001) gets a stored answer without our identity",
    ),
    Mutation(
        "short-reply-drops-the-cd-bit",
        "nodedns/dns/wire.py",
        "flags = 0x8000 | ((data[2] << 8) & 0x7900) | (data[3] & 0x10) | (0x0200 if tc else 0) | (rcode & 0xF)",
        "flags = 0x8000 | ((data[2] << 8) & 0x7900) | (0x0200 if tc else 0) | (rcode & 0xF)",
        ("tests/unit/dns/test_wire.py", "tests/unit/serve/test_interop.py", "tests/unit/dns/test_fuzz.py"),
        "REFUSED, FORMERR and rate-limited replies lose the query's CD bit",
    ),
    Mutation(
        "upstream-query-drops-the-do-bit",
        "nodedns/dns/wire.py",
        '    return b"\\x00\\x00\\x29" + struct.pack("!HBBHH", udp_size, ext_rcode & 0xFF, 0, 0x8000 if do else 0, 0)',
        '    return b"\\x00\\x00\\x29" + struct.pack("!HBBHH", udp_size, ext_rcode & 0xFF, 0, 0, 0)',
        ("tests/unit/forward/test_forward.py",),
        "queries forwarded for a DO client go upstream without DO (no DNSSEC records come back)",
    ),
)
