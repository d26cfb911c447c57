"""Mutations of nodedns/dns/queries.py (the queries nodedns sends upstream and by name)."""

from mutate import Mutation

TESTS = ("tests/unit/dns/test_wire.py", "tests/unit/forward/test_forward.py", "tests/unit/observe/test_explain.py")

MUTATIONS = (
    Mutation(
        'upstream-query-drops-cd',
        'nodedns/dns/queries.py',
        '    b3 = kflags & (KF_CD | KF_AD)',
        '    b3 = kflags & KF_AD',
        ('tests/unit/forward/test_forward.py',),
        'a CD query is forwarded without CD (the upstream validates what the client asked it not to)',
    ),
    Mutation(
        'make-query-allows-a-long-label',
        'nodedns/dns/queries.py',
        '        if len(label) > 63:\n            raise ValueError',
        '        if len(label) > 64:\n            raise ValueError',
        ('tests/unit/observe/test_explain.py', 'tests/unit/dns/test_wire.py'),
        'the explainer builds a query with a 64-byte label',
    ),
)
