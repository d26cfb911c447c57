"""The README's two set-up commands: CI runs exactly them, and the first works in a fresh copy of the
repository (a new virtual environment, the install, the bundled example served and answering)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.helpers import IN_CI, ROOT
from tests.support.netns import NETNS_MISSING, netns

README = ROOT / "README.md"
CI_RUN = ROOT / ".ci" / "run"


def readme_commands() -> tuple[str, str]:
    """The two commands of "## Two commands": the lines after `# 1.` and `# 2.` in its sh block."""
    section = README.read_text().split("## Two commands", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.S)
    assert block, "no sh block under ## Two commands"
    lines = block.group(1).splitlines()
    found = {}
    for i, line in enumerate(lines):
        m = re.match(r"# ([12])\. ", line)
        if m:
            found[m.group(1)] = lines[i + 1].strip()
    assert set(found) == {"1", "2"}, lines
    return found["1"], found["2"]


def ci_commands() -> list[str]:
    """The commands .ci/run runs at its top level (not comments, not the apt-get block)."""
    skip = (" ", "#", "\t", "if ", "fi", "set ", "cd ", "export ")
    return [line.strip() for line in CI_RUN.read_text().splitlines() if line and not line.startswith(skip)]


def test_ci_runs_the_readmes_test_command_exactly() -> None:
    _, test = readme_commands()
    assert ci_commands()[-1] == test


def test_ci_runs_the_install_part_of_the_readmes_first_command_exactly() -> None:
    first, _ = readme_commands()
    install = first.split(" && ")[0]
    assert install in ci_commands()
    assert ci_commands().index(install) == len(ci_commands()) - 2


def test_the_readmes_commands_use_the_virtual_environment_they_make() -> None:
    first, test = readme_commands()
    install, serve = first.split(" && ", 1)
    assert install == "scripts/install-venv"
    assert shlex.split(serve)[0] == ".venv/bin/nodedns"
    # every tier, one pytest run each (as scripts/run-tests runs them), with the venv's python
    assert test.split(" && ") == [".venv/bin/python -m pytest", ".venv/bin/python -m pytest -m e2e",
                                  ".venv/bin/python -m pytest -m slow", ".venv/bin/python -m pytest -m timing"]
    assert 'PY=${PYTHON:-.venv/bin/python}' in (ROOT / "scripts" / "run-tests").read_text()


@pytest.mark.skipif(NETNS_MISSING is not None and not IN_CI, reason=NETNS_MISSING or "")
@pytest.mark.skipif(shutil.which("git") is None, reason="git lists the repository's files")
def test_the_first_command_works_in_a_fresh_copy(tmp_path: Path) -> None:
    first, _ = readme_commands()
    install, serve = first.split(" && ", 1)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    copy = tmp_path / "nodedns"
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, copy / name)
    assert not (copy / ".venv").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(ROOT)))  # not this checkout's venv
    r = subprocess.run(["bash", "-c", install], cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (copy / ".venv" / "bin" / "nodedns").exists()
    # the serve part as written, in a namespace of its own (its ports are then free whatever else runs)
    with netns("quick", "ndqs") as ns:
        log = tmp_path / "serve.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([*ns.exec_prefix, "bash", "-c", f"exec {serve}"], cwd=copy,
                                    env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            ask = ("import dns.resolver as r; x=r.Resolver(configure=False); x.nameservers=['127.0.0.1']; "
                   "x.port=5353; print(x.resolve('web.default.svc.cluster.local').rrset)")
            deadline = time.monotonic() + 30
            while True:
                q = ns.run(str(copy / ".venv" / "bin" / "python"), "-c", ask, check=False, timeout=10)
                if q.returncode == 0:
                    break
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text() + q.stderr
                time.sleep(0.2)
            assert "web.default.svc.cluster.local. 5 IN A 10.96.12.34" in q.stdout
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


@pytest.mark.parametrize("script", ["install-venv", "build-image", "lock-requirements", "run-tests"],
                         ids=["install-venv", "build-image", "lock-requirements", "run-tests"])
def test_the_set_up_scripts_are_executable_bash(script: str) -> None:
    path = ROOT / "scripts" / script
    assert os.access(path, os.X_OK), f"{path} is not executable (git update-index --chmod=+x)"
    r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
