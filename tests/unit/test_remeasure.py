"""scripts/remeasure: how it tells a stale figure from a fresh one, and how it rewrites what is quoted.

Each benchmark and table of docs/measured.json names the commit it was measured on, the paths whose
change can move it, and a digest of those paths then. A change to any of them makes the figure stale
until it is measured again (`scripts/remeasure`) or a review records why that change cannot move it
(`scripts/remeasure --accept SECTION --why ...`). The digest is of the work tree's files (git blob ids
of the tracked and new files), so the check needs no history: it holds in a shallow clone too.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.helpers import load_script

REMEASURE = load_script("remeasure")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def test_a_change_to_a_measured_path_is_caught_and_a_review_clears_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself, on a repository of its own: the digest follows a file's bytes, a file added under
    a path, and a file that leaves; a review of the new state makes the figure fresh again, for that state only."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "docs").mkdir()
    git(repo, "init", "-q")
    (repo / "pkg" / "hot.py").write_text("FAST = True\n")
    (repo / "pkg" / "cold.py").write_text("SLOW = True\n")
    (repo / "elsewhere.py").write_text("x = 1\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    commit = git(repo, "rev-parse", "HEAD").strip()
    monkeypatch.setattr(REMEASURE, "ROOT", repo)
    monkeypatch.setattr(REMEASURE, "RECORD", repo / "docs" / "measured.json")
    entry = {"section": "S", "command": "true", "commit": commit, "paths": ["pkg/"],
             "digest": REMEASURE.digest_at(commit, ["pkg/"]), "output": []}
    assert REMEASURE.digest_now(["pkg/"]) == entry["digest"]  # the work tree and the commit agree
    assert REMEASURE.is_fresh(entry)

    (repo / "elsewhere.py").write_text("x = 2\n")
    assert REMEASURE.is_fresh(entry)  # outside its paths
    (repo / "pkg" / "hot.py").write_text("FAST = False\n")
    assert not REMEASURE.is_fresh(entry)  # its bytes
    (repo / "pkg" / "hot.py").write_text("FAST = True\n")
    assert REMEASURE.is_fresh(entry)
    (repo / "pkg" / "new.py").write_text("")
    assert not REMEASURE.is_fresh(entry)  # a new file, not yet added
    (repo / "pkg" / "new.py").unlink()
    (repo / "pkg" / "cold.py").unlink()
    assert not REMEASURE.is_fresh(entry)  # a file gone

    (repo / "docs" / "measured.json").write_text(json.dumps({"benchmarks": [entry], "tables": [], "figures": []}))
    assert REMEASURE.accept(REMEASURE.load(), "S", "cold.py was never on the path") == 0
    reviewed = REMEASURE.load()["benchmarks"][0]
    assert reviewed["checked"][0]["why"] == "cold.py was never on the path"
    assert REMEASURE.is_fresh(reviewed)
    (repo / "pkg" / "hot.py").write_text("FAST = 0\n")
    assert not REMEASURE.is_fresh(reviewed)  # a review clears the state it saw, not the next change


def test_remeasure_rewrites_the_quoted_output_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "README.md"
    doc.write_text("text\n```\n$ scripts/bench\nold 1\nold 2\n```\nold 1 elsewhere\n")
    monkeypatch.setattr(REMEASURE, "ROOT", tmp_path)
    monkeypatch.setattr(REMEASURE, "documents", lambda: [doc])
    assert REMEASURE.requote("scripts/bench", ["old 1", "old 2"], ["new 1", "new 2", "new 3"]) == ["README.md"]
    assert doc.read_text() == "text\n```\n$ scripts/bench\nnew 1\nnew 2\nnew 3\n```\nold 1 elsewhere\n"


def test_remeasure_rewrites_a_table_from_the_markdown_its_command_prints(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A table with a command is run and rewritten where a document has it, with its record."""
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "README.md"
    doc.write_text("before\n| a | b |\n|---|---|\n| 1 | 2 |\nafter\n")
    bench = tmp_path / "bench"
    bench.write_text("echo 'some line'\necho '| a | b |'\necho '|---|---|'\necho '| 3 | 4 |'\necho '| 5 | 6 |'\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    monkeypatch.setattr(REMEASURE, "ROOT", tmp_path)
    monkeypatch.setattr(REMEASURE, "RECORD", tmp_path / "docs" / "measured.json")
    monkeypatch.setattr(REMEASURE, "documents", lambda: [doc])
    table = {"section": "S", "command": "bash bench", "commit": "0" * 40, "paths": ["bench"], "digest": "",
             "rows": [["a", "b"], ["1", "2"]]}
    record = {"benchmarks": [], "tables": [table], "figures": []}
    REMEASURE.remeasure(record, [table])
    assert doc.read_text() == "before\n| a | b |\n|---|---|\n| 3 | 4 |\n| 5 | 6 |\nafter\n"
    saved = REMEASURE.load()["tables"][0]
    assert saved["rows"] == [["a", "b"], ["3", "4"], ["5", "6"]]
    assert REMEASURE.is_fresh(saved) and saved["commit"] == git(tmp_path, "rev-parse", "HEAD").strip()


def test_a_stale_figure_is_flagged_under_its_heading_and_unflagged_when_measured_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "pkg.py").write_text("A = 1\n")
    (tmp_path / "README.md").write_text("# nodedns\n")
    doc = tmp_path / "docs" / "measured.md"
    doc.write_text("# Measured\n\n## Fast path\n\n```\n$ echo 1\n1\n```\n\n## Other\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    commit = git(tmp_path, "rev-parse", "HEAD").strip()
    monkeypatch.setattr(REMEASURE, "ROOT", tmp_path)
    monkeypatch.setattr(REMEASURE, "RECORD", tmp_path / "docs" / "measured.json")
    monkeypatch.setattr(REMEASURE, "documents", lambda: [doc])
    bench = {"section": "Fast path", "command": "echo 1", "commit": commit, "date": "2026-01-01", "paths": ["pkg.py"],
             "digest": REMEASURE.digest_at(commit, ["pkg.py"]), "output": ["1"]}
    record = {"benchmarks": [bench], "tables": [], "figures": []}
    REMEASURE.save(record)
    assert REMEASURE.flag_stale(REMEASURE.load()) == 0
    assert doc.read_text().count(REMEASURE.FLAG) == 0  # fresh: nothing to say

    (tmp_path / "pkg.py").write_text("A = 2\n")
    record = REMEASURE.load()
    assert REMEASURE.flag_stale(record) == 0
    line = record["benchmarks"][0]["flagged"]
    assert line.startswith(REMEASURE.FLAG) and commit[:10] in line and "1 file of pkg.py changed" in line
    assert doc.read_text().startswith(f"# Measured\n\n## Fast path\n\n{line}\n\n```\n$ echo 1\n")
    REMEASURE.flag_stale(record)
    assert doc.read_text().count(REMEASURE.FLAG) == 1  # once, however often it runs

    monkeypatch.setattr(REMEASURE, "machine", lambda: "quiet")
    REMEASURE.remeasure(record, record["benchmarks"])
    assert REMEASURE.FLAG not in doc.read_text() and "flagged" not in REMEASURE.load()["benchmarks"][0]
    assert doc.read_text() == "# Measured\n\n## Fast path\n\n```\n$ echo 1\n1\n```\n\n## Other\n"


def test_a_second_writer_of_the_record_waits_for_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run loads docs/measured.json first and saves it after each benchmark: a second run meanwhile would
    overwrite the first's figures, so it waits for the first to end."""
    import fcntl
    import threading

    record = tmp_path / "measured.json"
    record.write_text("{}")
    monkeypatch.setattr(REMEASURE, "RECORD", record)
    first = os.open(record, os.O_RDONLY)
    fcntl.flock(first, fcntl.LOCK_EX)
    second = threading.Thread(target=REMEASURE.writer_lock, daemon=True)
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waiting
    os.close(first)  # the first run ends
    second.join(5)
    assert not second.is_alive()
