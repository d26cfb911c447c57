"""Mutations of nodedns/observe/httpgate.py (admission to the HTTP listeners: caps, pace, unread replies)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_status_limits.py", "tests/e2e/test_liveness_under_load.py")

POOLS = ("tests/unit/observe/test_status_limits.py::"
         "test_this_nodes_connections_have_a_pool_of_exactly_max_local_connections")
REAL_POOL = ("tests/unit/observe/test_status_limits.py::"
             "test_the_local_pool_turns_away_this_nodes_connection_over_max_local_connections")

MUTATIONS = (
    Mutation(
        "malformed-http-logged-each-time",
        "nodedns/observe/httpgate.py",
        '        self.malformed.report(f"{exc.__class__.__name__}: {text}")',
        '        log.error("malformed HTTP request: %s", text, exc_info=exc)',
        ("tests/e2e/test_liveness_under_load.py::test_malformed_requests_are_counted_and_logged_once_never_a_traceback_"
         "each",),
        "every malformed HTTP request logs a traceback (megabytes of log in seconds)",
        found="yes",
    ),
    Mutation(
        "local-connections-share-the-other-hosts-pool",
        "nodedns/observe/httpgate.py",
        "        if self.open[local] >= cap or",
        "        if self.open[False] + self.open[True] >= cap or",
        ("tests/unit/observe/test_status_limits.py::test_pods_filling_the_status_port_cannot_lock_the_kubelet_out",),
        "Pods that fill the status port's connections lock the kubelet's probes out",
    ),
    Mutation(
        "local-connections-capped-at-max-connections",
        "nodedns/observe/httpgate.py",
        "        cap = self.limits.max_local_connections if local else",
        "        cap = self.limits.max_connections if local else",
        (POOLS, REAL_POOL),
        "this node's connections (the kubelet's probes, local scrapers) get the other hosts' cap, not their own",
        found="yes (the kubelet test's per-client cap of 2 hid the local cap's value)",
    ),
    Mutation(
        "connection-pools-swapped",
        "nodedns/observe/httpgate.py",
        "        cap = self.limits.max_local_connections if local else self.limits.max_connections",
        "        cap = self.limits.max_connections if local else self.limits.max_local_connections",
        (POOLS, REAL_POOL),
        "this node's connections get the other hosts' cap and the other hosts this node's",
    ),
    Mutation(
        "closed-local-connection-frees-the-other-hosts-slot",
        "nodedns/observe/httpgate.py",
        "        self.open[conn.local] -= 1",
        "        self.open[False] -= 1",
        (POOLS, REAL_POOL),
        "a closed connection of this node gives its slot to other hosts: this node's pool stays full for ever",
    ),
    Mutation(
        "unread-reply-never-aborted",
        "nodedns/observe/httpgate.py",
        "            elif now - conn.stalled_since >= self.limits.send_timeout:",
        "            elif False:",
        ("tests/unit/observe/test_status_limits.py::test_a_reply_nobody_reads_is_aborted_after_the_send_timeout",),
        "a client that never reads its reply holds the connection and its buffered reply for ever",
    ),
    Mutation(
        "own-address-not-this-node",
        "nodedns/observe/httpgate.py",
        "    return client, loopback or client == own",
        "    return client, loopback",
        ("tests/unit/observe/test_status_limits.py::test_who_counts_as_this_node",),
        "the kubelet probing the node's own address counts as another host: it shares the Pods' cap",
    ),
)
