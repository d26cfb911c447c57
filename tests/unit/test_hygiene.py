"""The code base stays clean: ruff, mypy (strict) and the import-layer contract pass."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import IN_CI, ROOT


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    paths = [p for p in ("nodedns", "tests", "scripts") if (ROOT / p).exists()]
    r = _run(sys.executable, "-m", "ruff", "check", *paths)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_passes_on_the_package() -> None:
    r = _run(sys.executable, "-m", "mypy")
    assert r.returncode == 0, r.stdout + r.stderr


def lint_imports() -> str:
    """import-linter's command: the one installed beside the interpreter running the tests (a venv's
    bin/, found whether or not the venv is activated), else the one on PATH. Missing: a failure in CI
    (.ci/run installs the dev requirements), a skip elsewhere."""
    beside = Path(sys.executable).parent / "lint-imports"  # not resolved: a venv's python is a symlink
    if beside.is_file():
        return str(beside)
    found = shutil.which("lint-imports")
    if found is not None:
        return found
    if IN_CI:
        pytest.fail(f"import-linter is not installed beside {sys.executable} nor on PATH: CI must check the layers")
    pytest.skip("import-linter is not installed here (pip install -e '.[dev]')")


def test_import_layers_are_kept() -> None:
    r = _run(lint_imports())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout and "KEPT" in r.stdout, r.stdout


def test_the_import_layer_check_reports_a_broken_contract(tmp_path: Path) -> None:
    """The check can fail: a contract the tree breaks (the workers' module may not import the agent)
    is reported broken, with a non-zero exit status."""
    config = tmp_path / "broken.toml"
    config.write_text('[tool.importlinter]\nroot_package = "nodedns"\n\n[[tool.importlinter.contracts]]\n'
                      'name = "the fleet without the agent"\ntype = "forbidden"\n'
                      'source_modules = ["nodedns.workers.launch"]\nforbidden_modules = ["nodedns.app"]\n')
    r = _run(lint_imports(), "--config", str(config))
    assert r.returncode != 0 and "BROKEN" in r.stdout and "nodedns.workers.launch -> nodedns.app" in r.stdout, r.stdout


SHELL_SCRIPTS = sorted([str(p.relative_to(ROOT)) for p in (ROOT / "scripts").iterdir()
                        if p.is_file() and p.read_text().startswith("#!/usr/bin/env bash")]
                       + [str(p.relative_to(ROOT)) for p in (ROOT / "scripts" / "lib").glob("*.sh")])


@pytest.mark.parametrize("script", SHELL_SCRIPTS)
def test_every_shell_script_is_valid_bash_and_runnable(script: str) -> None:
    path = ROOT / script
    r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    sourced = path.parent.name == "lib"  # scripts/lib/*.sh are sourced by the commands, not run
    assert sourced or os.access(path, os.X_OK), f"{script} is run as a command: it must be executable"


def test_every_command_of_scripts_is_named_with_dashes_without_a_suffix_and_says_its_interpreter() -> None:
    """One naming style in scripts/: its commands are `words-with-dashes`, executable, with a #! line; what they
    share (Python modules they import or run, shell they source) is in scripts/lib/, the mutation tables in
    scripts/mutations/."""
    for path in sorted((ROOT / "scripts").iterdir()):
        if path.is_dir():
            assert path.name in ("lib", "mutations"), path
            continue
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", path.name), f"scripts/{path.name}: dashes, no suffix"
        assert os.access(path, os.X_OK), f"scripts/{path.name} is not executable (git update-index --chmod=+x)"
        assert path.read_text().startswith("#!/usr/bin/env "), f"scripts/{path.name} has no #! line"
