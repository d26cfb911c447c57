"""The code base stays clean: ruff, mypy (strict) and the import-layer contract pass."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    paths = [p for p in ("nodedns", "tests", "scripts") if (ROOT / p).exists()]
    r = _run(sys.executable, "-m", "ruff", "check", *paths)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_passes_on_the_package() -> None:
    r = _run(sys.executable, "-m", "mypy")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter is not installed")
def test_import_layers_are_kept() -> None:
    r = _run("lint-imports")
    assert r.returncode == 0, r.stdout + r.stderr
