"""docs/ say what nodedns does today: what it did before is CHANGELOG.md's (and git's), and what it measured is
docs/measured.md's. docs/sync.md, which mixed the two with today's behaviour, states memory and microsecond
figures only as the bounds a benchmark holds them to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.helpers import ROOT

DOCS = [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "measured.md"]

# how a page tells history: a figure of an older tree, a design given up, a fix told as a story
HISTORY = (
    r"\bused to\b",
    r"\bearlier figures\b",
    r"\bearlier states of the code\b",
    r"\bbefore this was fixed\b",
    r"\bthe old agent paged\b",
    r"^#+ .*\bEarlier\b",
    r"\b(was|were) \d[\d,.]* ?(MB|MiB|us|ms|%)",
    r"\bbefore (the compact index|the zygote|these bounds|these limits)\b",
)


@pytest.mark.parametrize("doc", DOCS, ids=[p.name for p in DOCS])
def test_a_page_states_todays_behaviour_not_its_history(doc: Path) -> None:
    text = doc.read_text()
    told = [(pattern, m.group(0)) for pattern in HISTORY for m in re.finditer(pattern, text, re.M | re.I)]
    assert not told, f"{doc.name} tells history (CHANGELOG.md keeps it): {told}"


def test_the_changelog_keeps_the_history_and_links_the_figures() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert changelog.startswith("# Changelog\n") and "## Unreleased" in changelog
    assert "[docs/measured.md](docs/measured.md)" in changelog
    assert "CHANGELOG.md" in (ROOT / "README.md").read_text()


def test_sync_md_states_memory_and_time_figures_only_as_bounds() -> None:
    text = (ROOT / "docs" / "sync.md").read_text()
    figures = re.finditer(r"(\S+ )?\b\d[\d,.]* ?(MB|MiB|GB|us|KB)\b", text)
    bounds = ("<=", "<")  # a target; and the DaemonSet's memory limit, a setting
    measured = [m.group(0) for m in figures
                if (m.group(1) or "").strip() not in bounds and "limit is" not in text[m.start() - 20:m.end()]]
    assert not measured, f"docs/sync.md quotes figures (they live in docs/measured.md): {measured}"


def test_the_checks_catch_what_was_there() -> None:
    """The check itself: sentences docs/sync.md and others held are caught."""
    for told in ("The old agent paged every list", "### Earlier figures", "that used to make 660 upstream queries",
                 "before this was fixed, a worker stopped", "was 14.9 %"):
        assert any(re.search(p, told, re.M | re.I) for p in HISTORY), told
