"""Mutations of nodedns/metrics/aggregate.py (the workers' counters summed for /metrics and /status)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_fleet.py",)

SUMMED = "tests/e2e/test_fleet.py::test_counts_from_two_workers_are_summed_under_the_same_labels"
SECTIONS = "tests/e2e/test_fleet.py::test_provider_sections_merge_key_by_key"

MUTATIONS = (
    Mutation("a-worker-health-flag-wins-over-the-others", "nodedns/metrics/aggregate.py",
             "        return bool(a) and bool(b) if a is not None and b is not None else (a if b is None else b)",
             "        return bool(a) or bool(b) if a is not None and b is not None else (a if b is None else b)",
             (SECTIONS, SUMMED), "an upstream one worker finds down shows healthy when another finds it up"),
    Mutation("worker-slots-added-without-their-labels", "nodedns/metrics/aggregate.py",
             "                    mine[remap[slot] if slot < len(remap) else 0] += n",
             "                    mine[slot] += n", (SUMMED,),
             "two workers' counts are added slot by slot although each numbers its label combinations its own way "
             "(NOERROR counted as NXDOMAIN)"),
    Mutation("panics-of-the-last-worker-only", "nodedns/metrics/aggregate.py", "        panics += s.panics",
             "        panics = s.panics", (SUMMED,), "coredns_panics_total shows one worker's panics"),
    Mutation("records-matched-on-every-field", "nodedns/metrics/aggregate.py",
             "    return tuple(sorted((k, v) for k, v in record.items() if isinstance(v, str)))",
             "    return tuple(sorted((k, repr(v)) for k, v in record.items()))", (SECTIONS,),
             "per-upstream records of two workers are listed twice instead of summed"),
)
