"""Mutations of nodedns/dns/message.py (a query parsed, the short replies)."""

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
        "short-reply-drops-the-cd-bit",
        "nodedns/dns/message.py",
        "flags = 0x8000 | ((data[2] << 8) & 0x7900) | (data[3] & 0x10) | (0x0200 if tc else 0) | (rcode & 0xF)",
        "flags = 0x8000 | ((data[2] << 8) & 0x7900) | (0x0200 if tc else 0) | (rcode & 0xF)",
        ("tests/unit/dns/test_wire.py", "tests/unit/serve/test_interop.py", "tests/unit/dns/test_fuzz.py"),
        "REFUSED, FORMERR and rate-limited replies lose the query's CD bit",
    ),
    Mutation(
        'slow-parse-drops-do',
        'nodedns/dns/message.py',
        '        do = bool(opt.ttl & 0x8000)',
        '        do = False',
        ('tests/unit/dns/test_wire.py',),
        'a query dnslib parses (not the plain shape) loses its DO bit',
    ),
    Mutation(
        'short-reply-without-tc',
        'nodedns/dns/message.py',
        '(0x0200 if tc else 0)',
        '0',
        ('tests/unit/dns/test_wire.py',),
        'a short TC=1 reply goes out without TC (the client never retries over TCP)',
    ),
)
