"""scripts/remeasure rewrites what the documents quote where they quote it now: each recorded output in
docs/measured.md, and it names the README's headline figures that came from a re-measured section."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.helpers import ROOT, load_script


def load_remeasure(root: Path) -> ModuleType:
    module = load_script("remeasure")
    module.ROOT = root  # the documents it rewrites: a copy, never the checkout's
    return module


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    for page in (ROOT / "docs").glob("*.md"):
        shutil.copy(page, tmp_path / "docs" / page.name)
    return tmp_path


def test_each_recorded_output_is_requoted_in_measured_md(copy: Path) -> None:
    remeasure = load_remeasure(copy)
    record = json.loads((ROOT / "docs" / "measured.json").read_text())
    for bench in (b for b in record["benchmarks"] if b["command"]):
        new = [f"new output of {bench['section']}"]
        before = (copy / "docs" / "measured.md").read_text()
        changed = remeasure.requote(bench["command"], bench["output"], new)
        assert changed[:1] == ["docs/measured.md"], (bench["section"], changed)
        after = (copy / "docs" / "measured.md").read_text()
        assert new[0] in after and after != before
        remeasure.requote(bench["command"], new, bench["output"])  # back, for the next entry of the same command
    assert (copy / "docs" / "measured.md").read_text() == (ROOT / "docs" / "measured.md").read_text()
    assert (copy / "README.md").read_text() == (ROOT / "README.md").read_text()  # the README quotes no output


def test_the_headline_rows_of_a_section_are_named(copy: Path) -> None:
    remeasure = load_remeasure(copy)
    rows = remeasure.headline_rows("Shadow mode")
    assert len(rows) == 1 and "(docs/measured.md#shadow-mode)" in rows[0]
    assert remeasure.headline_rows("The interface and the rules") == []  # a section the table does not quote
    (copy / "README.md").write_text("# nodedns\n\nno headline table\n")
    assert remeasure.headline_rows("Shadow mode") == []
