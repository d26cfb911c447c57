"""No quoted figure is older than the code it describes.

Each benchmark and table of docs/measured.json names the commit it was measured on, the paths whose
change can move it, and a digest of those paths then. A change to any of them makes the figure stale
until it is measured again (`scripts/remeasure`) or a review records why that change cannot move it
(`scripts/remeasure --accept SECTION --why ...`); until then the document must tell its reader, under
the section's heading, that the figures describe an older tree (`scripts/remeasure --flag-stale`).
The digest is of the work tree's files (git blob ids of the tracked and new files), so the check needs
no history: it holds in a shallow clone too.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.helpers import ROOT, load_script

REMEASURE = load_script("remeasure")
RECORD = REMEASURE.load()
ENTRIES = REMEASURE.entries(RECORD)


@pytest.mark.parametrize("entry", [e for _, e in ENTRIES], ids=[n[:90] for n, _ in ENTRIES])
def test_each_figure_names_its_commit_and_the_paths_that_move_it(entry: dict[str, Any]) -> None:
    assert len(entry["commit"]) == 40 and int(entry["commit"], 16) >= 0
    assert isinstance(entry["paths"], list)
    if not entry["paths"]:
        assert entry.get("why"), "a figure that no change can move (it describes an older tree) says why"
    for path in entry["paths"]:
        assert (ROOT / path).exists(), f"{entry['section']}: {path} does not exist (moved? name where it went)"
    for review in entry.get("checked", ()):
        assert len(review["commit"]) == 40 and review["why"].strip() and review["digest"]


def section_text(section: str) -> str:
    for doc in REMEASURE.documents():
        lines = doc.read_text().split("\n")
        at = REMEASURE.section_heading(lines, section)
        if at is not None:
            level = len(lines[at]) - len(lines[at].lstrip("#"))
            end = next((i for i in range(at + 1, len(lines))
                        if lines[i].startswith("#") and len(lines[i]) - len(lines[i].lstrip("#")) <= level), len(lines))
            return "\n".join(lines[at:end])
    raise AssertionError(f"no document has the section {section!r}")


@pytest.mark.parametrize("entry", [e for _, e in ENTRIES], ids=[n[:90] for n, _ in ENTRIES])
def test_each_figure_is_true_of_the_code_it_describes_or_says_it_is_not(entry: dict[str, Any]) -> None:
    now = REMEASURE.digest_now(entry["paths"])
    text = section_text(entry["section"])
    if REMEASURE.is_fresh(entry, now):
        assert not entry.get("flagged") or entry["flagged"] not in text, (
            f"{entry['section']}: fresh, but the document still says it is not: run `scripts/remeasure --flag-stale`")
        return
    assert entry.get("flagged") and entry["flagged"] in text, (
        f"{entry['section']} ({entry.get('command') or 'table'}): measured on {entry['commit'][:12]}, and "
        f"{', '.join(entry['paths'])} changed since; run `scripts/remeasure --section "
        f"{entry['section']!r}` (a quiet machine where the figure is a time; otherwise it is recorded as "
        f"provisional with the load), or record why the change cannot move it: `scripts/remeasure --accept "
        f"{entry['section']!r} --why ...`; or, until then, tell the reader: `scripts/remeasure --flag-stale`")
