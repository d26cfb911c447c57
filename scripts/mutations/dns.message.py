"""Mutations of nodedns/dns/message.py (a query parsed, the short replies)."""

from mutate import Mutation

TESTS = ("tests/unit/dns/test_fuzz.py", "tests/unit/dns/test_wire.py", "tests/unit/serve/test_interop.py")

MUTATIONS = (
    Mutation("tc-reply-without-the-query-s-opt", "nodedns/dns/message.py",
             "    if data[11]:  # its one OPT record, right after the question (fast_key's plain query)",
             "    if False:  # its one OPT record, right after the question (fast_key's plain query)",
             ("tests/unit/dns/test_wire.py::test_the_tc_reply_of_a_plain_query_is_short_reply_s_byte_for_byte",),
             "a shed EDNS query's TC=1 reply carries no OPT: the client's retry loses its EDNS (RFC 6891 section 7)"),
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
