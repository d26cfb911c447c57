"""Mutations of the documents in docs/ (what they may and may not say)."""

from mutate import Mutation

TESTS = ("tests/unit/test_measured.py",)

MUTATIONS = (
    Mutation(
        "a-doc-restates-a-measured-figure",
        "docs/restarts.md",
        "What it measured (queries sent and lost over the restarts,",
        "0 of 899,998 queries lost. What it measured (queries sent and lost over the restarts,",
        ("tests/unit/test_measured.py::test_no_other_document_repeats_a_measured_figure",),
        "a document outside docs/measured.md states a figure again (and drifts from it)",
        found="yes (the docs contradicted each other)",
    ),
)
