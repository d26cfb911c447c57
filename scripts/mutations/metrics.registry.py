"""Mutations of nodedns/metrics/registry.py (the Collector: DNS traffic, caches and the index as metrics)."""

from mutate import Mutation

TESTS = ("tests/unit/metrics/test_metrics.py", "tests/e2e/test_monitoring.py", "tests/unit/observe/test_status.py")

MUTATIONS = (
    Mutation("requests-counted-once-per-protocol-not-summed", "nodedns/metrics/registry.py",
             "                    requests[k] = requests.get(k, 0) + n",
             "                    requests[k] = n",
             ("tests/unit/metrics/test_metrics.py::test_requests_total_has_coredns_labels_and_sums_hit_and_slow_path",),
             "coredns_dns_requests_total shows the slow path's UDP answers only, not the hit path's beside them"),
    Mutation("dropped-queries-counted-as-responses", "nodedns/metrics/registry.py",
             "                    if lab.rcode:\n                        r = (lab.zone, lab.rcode, lab.plugin)",
             "                    if True:\n                        r = (lab.zone, lab.rcode, lab.plugin)",
             ("tests/unit/metrics/test_metrics.py::test_responses_total_counts_by_rcode_and_plugin_but_not_dropped_"
              "queries",),
             "queries dropped without an answer show in coredns_dns_responses_total under an empty rcode"),
    Mutation("cluster-cache-requests-without-misses", "nodedns/metrics/registry.py",
             "c.hits_success + c.hits_denial + c.misses)",
             "c.hits_success + c.hits_denial)",
             ("tests/unit/metrics/test_metrics.py::test_cluster_answers_show_as_a_coredns_cache",),
             "coredns_cache_requests_total of the cluster zones leaves the misses out (hit ratio 100%)"),
)
