"""Mutations of nodedns/observe/observer.py (readiness, the metrics scrape, /status, the history's readings)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_status.py", "tests/unit/metrics/test_metrics.py", "tests/e2e/test_lifecycle.py",
         "tests/e2e/test_history_agent.py",
         "tests/unit/forward/test_forward.py")

STORED = "tests/unit/observe/test_status.py::test_status_counts_stored_cluster_answers_by_kind_and_their_hit_ratio"

MUTATIONS = (
    Mutation("a-parts-unready-reasons-ignored", "nodedns/observe/observer.py",
             '                reasons.extend(f"{section}: {r}" for r in unready)',
             "                pass", ("tests/unit/observe/test_status.py", "tests/unit/forward/test_forward.py"),
             "a part that says it cannot serve (a forwarding loop, an unsynced source) leaves /readyz ready"),
    Mutation("a-broken-provider-does-not-make-the-agent-unready", "nodedns/observe/observer.py",
             '''                out[section] = {"error": f"{exc.__class__.__name__}: {exc}",
                                "unready": [f"{section}: status unavailable"]}''',
             '''                out[section] = {"error": f"{exc.__class__.__name__}: {exc}"}''',
             ("tests/unit/observe/test_status.py",),
             "a part whose status raises is shown broken but the agent stays ready"),
    Mutation("stored-denials-counted-as-successes", "nodedns/observe/observer.py",
             "                entries[1 if slot < len(labels) and labels[slot].denial else 0] += 1",
             "                entries[0] += 1", (STORED,),
             "coredns_cache_entries{type=\"denial\"} of the cluster zone stays 0", found="yes"),
    Mutation("cluster-hit-ratio-over-misses-only", "nodedns/observe/observer.py",
             '"hit_ratio": round(cc_hits / (cc_hits + cc.misses), 4) if cc_hits + cc.misses else None,',
             '"hit_ratio": round(cc_hits / cc.misses, 4) if cc.misses else None,',
             (STORED,), "/status shows a cluster hit ratio over 1", found="yes"),
    Mutation("sigterm-not-said-before-the-shutdown", "nodedns/observe/observer.py",
             '        if self.stopping and "shutting down" not in reasons:', "        if False:",
             ("tests/e2e/test_lifecycle.py", "tests/unit/observe/test_status.py"),
             "/readyz stays ready between SIGTERM and the start of the shutdown (the Service keeps sending)"),
)
