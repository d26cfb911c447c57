"""Mutations of nodedns/dns/pack.py (answers packed by hand, byte for byte what dnslib packs)."""

from mutate import Mutation

TESTS = ("tests/unit/dns/test_wire.py",)

MUTATIONS = (
    Mutation(
        'pack-compression-pointer-off-by-one',
        'nodedns/dns/pack.py',
        '        names[suffix] = len(buf)\n',
        '        names[suffix] = len(buf) + 1\n',
        ('tests/unit/dns/test_wire.py',),
        'a compressed name points one byte past the name it repeats',
    ),
    Mutation(
        'pack-cd-from-ad',
        'nodedns/dns/pack.py',
        '(0x0010 if query.cd else 0)',
        '(0x0010 if query.ad else 0)',
        ('tests/unit/dns/test_wire.py',),
        "a packed answer carries AD's value in its CD bit",
    ),
    Mutation(
        'pack-opt-without-do',
        'nodedns/dns/pack.py',
        '        buf += opt_record(max_udp_size, query.do, rcode >> 4)',
        '        buf += opt_record(max_udp_size, False, rcode >> 4)',
        ('tests/unit/dns/test_wire.py',),
        'a packed answer to a DO query does not echo DO',
    ),
)
