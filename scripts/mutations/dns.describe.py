"""Mutations of nodedns/dns/describe.py (a JSON view of a message, for the explainer, the shadow and logs)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_status.py",)

MUTATIONS = (
    Mutation(
        'describe-data-is-the-owner',
        'nodedns/dns/describe.py',
        '"data": str(rr.rdata)',
        '"data": str(rr.rname)',
        ('tests/unit/observe/test_status.py',),
        "the explainer shows each record's owner name where its data belongs",
    ),
    Mutation(
        'describe-rcode-always-noerror',
        'nodedns/dns/describe.py',
        '"rcode": RCODE.name(h.rcode)',
        '"rcode": RCODE.name(0)',
        ('tests/unit/observe/test_status.py',),
        'the explainer reports NOERROR for a REFUSED answer',
    ),
    Mutation(
        'describe-answer-is-the-additional',
        'nodedns/dns/describe.py',
        '"answer": rrs(record.rr)',
        '"answer": rrs(record.ar)',
        ('tests/unit/observe/test_status.py',),
        'the explainer shows the additional section as the answer',
    ),
)
