"""scripts/restart-under-load: a restart of the agent under dnsperf load, on the node-local IP in
a network namespace, loses no query; the interface and the rules stay through it and go with the
last agent."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.support.helpers import IN_CI, ROOT
from tests.support.netns import NETNS_MISSING

SCRIPT = ROOT / "scripts" / "restart-under-load"
MISSING = NETNS_MISSING or (None if shutil.which("dnsperf") else "dnsperf is not installed")



@pytest.mark.skipif(MISSING is not None and not IN_CI, reason=MISSING or "")
@pytest.mark.parametrize("firewall", ["iptables", "nftables"])
def test_a_restart_under_load_loses_no_query_and_keeps_the_node_setup(firewall: str) -> None:
    env = dict(os.environ, PYTHON=sys.executable,
               RATE="3000", RESTARTS="1", ROUND="15", WORKERS="2", FIREWALL=firewall, LAMEDUCK="1s")
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=180, env=env, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    line = next((x for x in r.stdout.splitlines() if x.startswith("restart 1:")), "")
    m = re.match(r"restart 1: sent (\d+) lost (\d+) bad-rcode (\d+) \|", line)
    assert m, r.stdout + r.stderr
    sent, lost, bad = map(int, m.groups())
    assert sent > 30_000 and (lost, bad) == (0, 0), line
    assert "within the load: yes" in line and "interface present, 12 rules" in line, line
    assert "last agent stopped: interface removed, 0 rules left" in r.stdout
