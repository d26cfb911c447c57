"""Mutations of nodedns/cluster/apisync.py (KubeSync: the watchers started, supervised, their batches applied)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_apisync.py", "tests/unit/cluster/test_sync_degraded.py")

MUTATIONS = (
    Mutation(
        'crashed-watcher-resumes-from-its-version',
        'nodedns/cluster/apisync.py',
        '                w.rv = None  # where it stopped is unknown: relist\n',
        '',
        ('tests/unit/cluster/test_apisync.py',),
        'a watcher that crashed mid-batch goes on from its resourceVersion, so what it dropped is never listed again',
    ),
    Mutation(
        'relist-sweep-skipped',
        'nodedns/cluster/apisync.py',
        '                gone = index.end_relist(kind)',
        '                gone = 0',
        ('tests/unit/cluster/test_apisync.py',),
        'objects deleted while the watch was down stay in the index after the relist',
    ),
)
