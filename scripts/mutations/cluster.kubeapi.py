"""Mutations of nodedns/cluster/kubeapi.py (the API over HTTP: credentials, requests, a response's errors)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_apisync.py", "tests/unit/cluster/test_kube_watch_cache.py")

MUTATIONS = (
    Mutation("expired-status-not-a-relist", "nodedns/cluster/kubeapi.py",
             '    if code == 410 or reason in ("Expired", "Gone"):', "    if code == 410:",
             ("tests/unit/cluster/test_apisync.py::test_status_errors_map_to_the_decision",),
             "an ERROR watch event with reason Expired (no HTTP 410) is retried from the same resourceVersion "
             "forever instead of relisting"),
    Mutation(
        'retry-after-not-capped',
        'nodedns/cluster/kubeapi.py',
        '    return min(max(seconds, 0.0), RETRY_AFTER_MAX) if seconds == seconds else None',
        '    return max(seconds, 0.0) if seconds == seconds else None',
        ('tests/unit/cluster/test_kube_watch_cache.py',),
        'a huge Retry-After keeps a watcher waiting for it whole',
    ),
    Mutation(
        'unauthorized-not-told-apart',
        'nodedns/cluster/kubeapi.py',
        '    if code == 401:\n        return ApiUnauthorized',
        '    if code == 403:\n        return ApiUnauthorized',
        ('tests/unit/cluster/test_apisync.py',),
        'a 401 is not taken for expired credentials: the rotated token is never reloaded',
    ),
)
