"""The suite's four tiers, the one place that says which tier a test is in (tests/conftest.py marks each test
with its tier at collection), and how each tier runs.

- `fast`: the tests of tests/unit/, in this process on 127.0.0.1. `pytest` alone runs this tier.
- `e2e`: the tests of tests/e2e/: network namespaces, root, real clients, agents and scripts run as whole
  processes. Namespaces are named with a random suffix and each xdist worker takes its ports from its own
  range (tests/support/ports.py), so the modules run side by side.
- `slow`: the benchmark smokes, the container image, the browser, the packages, the commands the documents
  show, and the long property-based sweeps. Run one at a time: the documents' commands bind the host's
  fixed ports 5353, 9253 and 9254, and each benchmark script wants the cores to itself.
- `timing`: the tests whose bounds are on timing under a load they make themselves. Run one at a time,
  and alone: nothing else of the suite runs beside them.
"""

from __future__ import annotations

from pathlib import PurePath

TIERS = ("fast", "e2e", "slow", "timing")
# The tiers `pytest -m TIER` runs on every core (-n auto --dist loadscope); the others run in one process.
PARALLEL = frozenset({"fast", "e2e"})

# Modules (by stem) and tests (`stem::name`, the name without parameters) of the slow tier.
SLOW = frozenset({
    # benchmark smokes: each runs a script of scripts/ small, or a benchmark's sizing at full size
    "test_bench_apiserver",
    "test_bench_cache",
    "test_bench_cluster",
    "test_bench_index",
    "test_bench_insight",
    "test_bench_scale",
    "test_bench_tail",
    "test_bench_workers",
    "test_scripts_smoke",
    "test_soak",
    "test_restart_under_load",
    "test_sync_memory",
    # the container image, built and run
    "test_image",
    "test_image_sizes",
    # the status page in headless Chromium
    "test_status_page_browser",
    # the sdist and the wheel, built and installed in fresh environments
    "test_packaging",
    # the README's first command in a fresh copy, and every command README.md and docs/ show (on the
    # host's fixed ports), and the other agents that bind those ports
    "test_quickstart",
    "test_doc_commands",
    "test_duplicates",
    # property-based sweeps of tens of seconds each
    "test_invalidation::test_answers_served_through_the_table_equal_answers_computed_fresh",
    "test_invalidation::test_a_worker_deciding_nxdomain_alone_serves_what_the_owner_would_compute_fresh",
    "test_invalidation::test_a_worker_without_an_index_serves_what_the_owner_would_compute_fresh",
    "test_clusterset::test_clusterset_answers_through_the_table_equal_answers_computed_fresh",
    "test_insight::test_a_client_spraying_100000_random_names_costs_a_fixed_amount",
    "test_store_model::test_a_forward_cache_entry_lives_as_the_model_says",
})

# Modules and tests of the timing tier.
TIMING = frozenset({
    "test_failover",  # a killed or hung agent: Pods without DNS for at most 3 s, under dnsperf load
    "test_http_flood::test_dns_p99_under_an_http_flood_stays_within_one_and_a_half_times_the_quiet_p99",
    "test_miss_budget::test_a_pod_spraying_misses_costs_another_pod_none_of_its_cached_answers",
})

# `pytest` and `pytest -m TIER` with no test named: -m fast when no -m is given.
DEFAULT = "fast"


def keys_of(nodeid: str) -> tuple[str, str]:
    """(module stem, `stem::name`) of a test id: the name is the part after the file, without parameters."""
    path, _, rest = nodeid.partition("::")
    stem = PurePath(path).stem
    name = rest.split("::", 1)[0].split("[", 1)[0]
    return stem, f"{stem}::{name}"


def tier_of(nodeid: str) -> str:
    """The tier of the test `nodeid` (a path from the repository's root, then `::` and the test's name)."""
    stem, test = keys_of(nodeid)
    if stem in TIMING or test in TIMING:
        return "timing"
    if stem in SLOW or test in SLOW:
        return "slow"
    return "e2e" if PurePath(nodeid.partition("::")[0]).parts[:2] == ("tests", "e2e") else "fast"


def parallel(markexpr: str) -> bool:
    """Whether a run of `-m markexpr` (no test named) goes on every core: a parallel tier's name alone."""
    return (markexpr or DEFAULT) in PARALLEL


def workers_for(cores: int) -> int:
    """The workers `-n auto` starts on `cores` cores: three for every two. The fast and e2e tiers mostly wait
    (agents starting, timers, scripts), so a third worker on two cores fills the idle time."""
    return max(1, cores * 3 // 2)
