"""Mutations of nodedns/dns/wire.py (the wire format basics: codes, header and question read by hand, OPT read)."""

from mutate import Mutation

TESTS = ("tests/unit/dns/test_wire.py", "tests/unit/forward/test_forward.py", "tests/unit/serve/test_interop.py")

MUTATIONS = (
    Mutation(
        "upstream-query-drops-the-do-bit",
        "nodedns/dns/wire.py",
        '    return b"\\x00\\x00\\x29" + struct.pack("!HBBHH", udp_size, ext_rcode & 0xFF, 0, 0x8000 if do else 0, 0)',
        '    return b"\\x00\\x00\\x29" + struct.pack("!HBBHH", udp_size, ext_rcode & 0xFF, 0, 0, 0)',
        ("tests/unit/forward/test_forward.py",),
        "queries forwarded for a DO client go upstream without DO (no DNSSEC records come back)",
    ),
    Mutation(
        'plain-name-not-lowercased',
        'nodedns/dns/wire.py',
        '        return raw.lower().decode("ascii")  # nothing to escape (the common case)',
        '        return raw.decode("ascii")  # nothing to escape (the common case)',
        ('tests/unit/dns/test_wire.py',),
        'a mixed-case plain name keeps its case: it misses the lowercase records and stored answers',
    ),
    Mutation(
        'query-opt-do-read-as-off',
        'nodedns/dns/wire.py',
        '        return (data[pos + 2] << 8) | data[pos + 3], bool(data[pos + 6] & 0x80)',
        '        return (data[pos + 2] << 8) | data[pos + 3], False',
        ('tests/unit/dns/test_wire.py',),
        'a short reply to a DO query does not echo DO',
    ),
    Mutation(
        'nsid-asked-never-seen',
        'nodedns/dns/wire.py',
        '        if (data[pos] << 8) | data[pos + 1] == OPT_NSID:\n            return True',
        '        if (data[pos] << 8) | data[pos + 1] == OPT_NSID + 1:\n            return True',
        ('tests/unit/dns/test_wire.py', 'tests/unit/serve/test_interop.py'),
        'a query asking for NSID gets no identity back',
    ),
)
