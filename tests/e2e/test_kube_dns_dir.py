"""--kube-dns-config-dir that does not exist: the agent starts (the DaemonSet mounts the kube-dns ConfigMap
optionally, as node-local-dns does) and says so with the path, in the log and in /status; once the directory
appears it is read."""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from nodedns.forward.routes import RouteSources
from tests.support.helpers import EXAMPLE, RunningAgent, running_agent


def upstream_config(agent: RunningAgent) -> dict[str, Any]:
    with urllib.request.urlopen(agent.debug_url + "/status", timeout=10) as resp:
        section: dict[str, Any] = json.loads(resp.read())["upstream_config"]
        return section


def test_a_missing_kube_dns_config_dir_is_logged_with_its_path_and_read_once_it_appears(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "kube-dns"
    caplog.set_level(logging.INFO)
    with running_agent({"manifests": str(EXAMPLE), "upstream": "127.0.0.1:1", "kube-dns-config-dir": str(folder),
                        "kube-dns-config-period": "100ms", "debug-listen": "127.0.0.1:0"}) as agent:
        said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert f"kube-dns-config-dir {folder} does not exist: no stub domains, upstream nameservers or federations " \
               "from the kube-dns ConfigMap until it does (is the ConfigMap mounted there?)" in said, said
        assert upstream_config(agent)["kube_dns_config_dir"] == {"path": str(folder), "exists": False}
        folder.mkdir()
        (folder / "stubDomains").write_text('{"corp.example": ["127.0.0.2"]}')
        deadline = time.monotonic() + 10
        while not upstream_config(agent)["kube_dns_config_dir"]["exists"] or "corp.example" not in caplog.text:
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.1)
        assert f"kube-dns-config-dir {folder} exists now: reading it" in caplog.text
        assert upstream_config(agent)["errors"] == 0


def test_an_existing_or_unset_directory_says_nothing(tmp_path: Path) -> None:
    assert RouteSources(kube_dns_dir=str(tmp_path)).missing_dir() is None
    assert RouteSources().missing_dir() is None
    assert str(tmp_path / "no") in (RouteSources(kube_dns_dir=str(tmp_path / "no")).missing_dir() or "")
    (tmp_path / "file").write_text("")  # a file is no directory
    assert RouteSources(kube_dns_dir=str(tmp_path / "file")).missing_dir() is not None
