"""Mutations of nodedns/dns/queries.py (the queries nodedns sends upstream and by name)."""

from mutate import Mutation

TESTS = ("tests/unit/dns/test_queries.py", "tests/unit/dns/test_wire.py",
         "tests/unit/forward/test_forward.py", "tests/unit/observe/test_explain.py")

MUTATIONS = (
    Mutation(
        'make-query-allows-an-empty-label',
        'nodedns/dns/queries.py',
        '        if not label:\n            raise ValueError(f"{name!r} has an empty label")\n',
        '',
        ('tests/unit/observe/test_explain.py', 'tests/unit/dns/test_wire.py'),
        'the explainer builds a query for a name with an empty label (a..b)',
    ),
    Mutation(
        'upstream-query-drops-cd',
        'nodedns/dns/queries.py',
        '    b3 = kflags & (KF_CD | KF_AD)\n',
        '    b3 = kflags & KF_AD\n',
        ('tests/unit/dns/test_queries.py',),
        'a client asking with CD (checking disabled) is forwarded without it: a validating upstream answers SERVFAIL',
    ),
    Mutation(
        'upstream-query-drops-do',
        'nodedns/dns/queries.py',
        '    return head + question + opt_record(udp_size, bool(kflags & KF_DO))',
        '    return head + question + opt_record(udp_size, False)',
        ('tests/unit/dns/test_queries.py',),
        'a client asking with DO gets answers without their signatures (the upstream was not asked for them)',
    ),
    Mutation(
        'reflected-query-taken-for-an-answer',
        'nodedns/dns/queries.py',
        '    if len(response) < 12 + n or response[2] & 0x80 == 0:\n',
        '    if len(response) < 12 + n:\n',
        ('tests/unit/dns/test_queries.py',),
        'a datagram with QR=0 (the query itself, reflected) is taken for the upstream\'s answer',
    ),
    Mutation(
        'upstream-answer-of-another-type-accepted',
        'nodedns/dns/queries.py',
        '    return got[-4:] == question[-4:] and got[:-4].lower() == question[:-4].lower()',
        '    return got[:-4].lower() == question[:-4].lower()',
        ('tests/unit/dns/test_queries.py',),
        'an answer for the same name and another type is stored as the answer to the query',
    ),
)
