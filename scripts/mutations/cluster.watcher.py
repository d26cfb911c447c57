"""Mutations of nodedns/cluster/watcher.py (the watch loop of one resource: lists, watches, errors, back-off)."""

from mutate import Mutation

TESTS = (
    "tests/unit/cluster/test_apisync.py",
    "tests/unit/cluster/test_kube_watch_cache.py",
    "tests/unit/cluster/test_own_node.py",
)

MUTATIONS = (
    Mutation("backoff-without-doubling", "nodedns/cluster/watcher.py",
             "        d = min(self.maximum, self.initial * float(1 << min(self.failures, 30)))",
             "        d = min(self.maximum, self.initial)",
             ("tests/unit/cluster/test_apisync.py::test_backoff_doubles_with_jitter_up_to_the_maximum_and_resets",),
             "a failing API server is asked again every half second, forever"),
    Mutation("every-pod-of-the-cluster-watched", "nodedns/cluster/watcher.py",
             "        if self.resource.field_selector:\n"
             "            params[\"fieldSelector\"] = self.resource.field_selector",
             "        if False:\n            params[\"fieldSelector\"] = self.resource.field_selector",
             ("tests/unit/cluster/test_apisync.py", "tests/unit/cluster/test_own_node.py"),
             "the agent lists and watches every Pod of the cluster instead of its node's"),
    Mutation("list-is-a-consistent-read", "nodedns/cluster/watcher.py",
             '        params = {"resourceVersion": "0", "limit": str(res.page_size)}',
             '        params = {"limit": str(res.page_size)}',
             ("tests/unit/cluster/test_kube_watch_cache.py::test_no_list_is_a_consistent_read_and_every_watch_asks_for_"
              "bookmarks",),
             "every list is a quorum read of etcd instead of the watch cache's state"),
    Mutation("refused-stream-asked-again", "nodedns/cluster/watcher.py",
             "            self.enabled = False\n            self.refusal", "            self.refusal",
             ("tests/unit/cluster/test_kube_watch_cache.py::test_a_server_refusing_watch_list_makes_the_agent_list_for_"
              "the_life_of_the_process",),
             "a server without WatchList is asked for the stream again before every list"),
    Mutation("bare-bookmark-taken-as-the-end", "nodedns/cluster/watcher.py",
             '                if not isinstance(annotations, dict) or annotations.get(INITIAL_EVENTS_END) != "true":',
             "                if False:",
             ("tests/unit/cluster/test_kube_watch_cache.py::test_an_older_server_ignoring_send_initial_events_is_"
              "detected_by_its_bare_bookmark",),
             "an older server's plain bookmark ends the initial state: the agent never learns the server ignored "
             "sendInitialEvents"),
    Mutation("initial-event-moves-the-resource-version", "nodedns/cluster/watcher.py",
             "        if not self._initial:  # an initial event's", "        if True:  # an initial event's",
             ("tests/unit/cluster/test_kube_watch_cache.py::test_the_index_is_not_synced_before_the_initial_events_end_"
              "bookmark",),
             "a stream cut during its initial state is resumed from one object's resourceVersion: the rest of "
             "the state is never sent"),
    Mutation("relist-after-410-not-spread", "nodedns/cluster/watcher.py",
             "                    self._spread_wait(0.0)\n                    continue", "                    continue",
             ("tests/unit/cluster/test_kube_watch_cache.py::test_a_410_relist_waits_its_random_share_of_the_window",),
             "after a compaction every agent of the fleet relists in the same second"),
    Mutation("retry-after-ignored", "nodedns/cluster/watcher.py",
             "                self._spread_wait(retry_after, floor=delay)",
             "                self._spread_wait(0.0, floor=delay)",
             ("tests/unit/cluster/test_kube_watch_cache.py::test_retry_after_is_honoured",),
             "a throttled agent (429 with Retry-After) asks again long before the server said"),
    Mutation("relist-window-not-scaled-down", "nodedns/cluster/watcher.py",
             "    return spread * min(1.0, max(SPREAD_FLOOR, objects / SPREAD_FULL_AT))",
             "    return spread * max(1.0, max(SPREAD_FLOOR, objects / SPREAD_FULL_AT))",
             ("tests/unit/cluster/test_kube_watch_cache.py::test_the_relist_window_grows_with_the_cluster_up_to_the_"
              "configured_spread",),
             "a small cluster's agents wait the whole 5,000-node window after each 410, and a huge one's longer"),
    Mutation("stream-keeps-the-initial-read-timeout", "nodedns/cluster/watcher.py",
             "                sock.settimeout(self._read_timeout)", "                pass",
             ("tests/unit/cluster/test_kube_watch_cache.py::test_after_the_initial_state_a_quiet_stream_keeps_the_"
              "watch_read_timeout",),
             "a WatchList stream quiet for a minute after its initial state is dropped and reopened, over and over"),
)
