"""How the suite is spread over xdist workers: the groups of modules that must not run side by side, and
the slow modules sent first (used by tests/conftest.py)."""

from __future__ import annotations

# xdist groups (relayout): the modules whose tests share a fixed resource run on one worker, in turn
# (`--dist loadgroup`): fixed ports 5353/9253/9254 on the host, the benchmark lock /tmp/nodedns-bench.lock.
XDIST_GROUPS = {
    "fixed-ports": frozenset({
        'test_doc_commands',
        'test_quickstart',
        'test_duplicates',
    }),
    "bench-lock": frozenset({
        'test_firewall',
        'test_handover',
        'test_bench_cache',
        'test_bench_cluster',
        'test_bench_index',
        'test_bench_insight',
        'test_bench_scale',
        'test_bench_workers',
        'test_scripts_smoke',
        'test_http_flood',
        'test_soak',
        'test_restart_under_load',
        'test_failover',
    }),
}


# The modules that take longest (over ~15 s on the 2-core machine, the slowest first), sent to the
# workers before the rest so that no long module starts last and keeps one worker busy alone at the end
# (longest-first scheduling); the groups above count as one long unit each.
SLOW_FIRST = (
    "bench-lock",
    "test_outages",
    "test_image",
    "test_hostile",
    "test_invalidation",
    "test_quickstart",
    "test_packaging",
    "test_status_page_browser",
    "test_insight",
    "test_clients",
    "test_bench_tail",
    "test_bench_apiserver",
)


def group_of(stem: str) -> str | None:
    return next((g for g, stems in XDIST_GROUPS.items() if stem in stems), None)


def rank(stem: str) -> int:
    """Where the module `stem` goes in the order of the run: its group's or its own place in SLOW_FIRST."""
    key = group_of(stem) or stem
    return SLOW_FIRST.index(key) if key in SLOW_FIRST else len(SLOW_FIRST)
