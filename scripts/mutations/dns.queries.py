"""Mutations of nodedns/dns/queries.py (the queries nodedns sends upstream and by name)."""

from mutate import Mutation

TESTS = ("tests/unit/dns/test_wire.py", "tests/unit/forward/test_forward.py", "tests/unit/observe/test_explain.py")

MUTATIONS = (
    Mutation(
        'make-query-allows-a-long-label',
        'nodedns/dns/queries.py',
        '        if len(label) > 63:\n            raise ValueError',
        '        if len(label) > 64:\n            raise ValueError',
        ('tests/unit/observe/test_explain.py', 'tests/unit/dns/test_wire.py'),
        'the explainer builds a query with a 64-byte label',
    ),
    Mutation(
        'make-query-allows-an-empty-label',
        'nodedns/dns/queries.py',
        '        if not label:\n            raise ValueError(f"{name!r} has an empty label")\n',
        '',
        ('tests/unit/observe/test_explain.py', 'tests/unit/dns/test_wire.py'),
        'the explainer builds a query for a name with an empty label (a..b)',
    ),
)
