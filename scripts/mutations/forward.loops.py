"""Mutations of nodedns/forward/loops.py (loop detection: a probe name sent to each upstream must not come back)."""

from mutate import Mutation

TESTS = ("tests/unit/forward/test_forward.py",)

MUTATIONS = (
    Mutation(
        'loop-probe-answer-ignored',
        'nodedns/forward/loops.py',
        '                answered = True\n                break',
        '                break',
        ('tests/unit/forward/test_forward.py',),
        'a probe that came back through the upstream is not taken for a loop',
    ),
    Mutation(
        'loop-probe-not-registered',
        'nodedns/forward/loops.py',
        '        register(name)\n',
        '',
        ('tests/unit/forward/test_forward.py',),
        'the agent does not know its own probe when it comes back, so no loop is found',
    ),
    Mutation(
        'loop-probe-outside-the-stub-zone',
        'nodedns/forward/loops.py',
        '    return f"{labels}.{zone}" if zone else labels',
        '    return labels',
        ('tests/unit/forward/test_forward.py',),
        "a stub domain's probe is asked of the root group: its loop is never seen",
    ),
)
