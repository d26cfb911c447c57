"""nodedns.app.sections: the agent's parts are shown in /status and /metrics in one order, each only when it is
configured."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.app.parts import ONE_PROCESS
from nodedns.app.sections import register_sections
from nodedns.workers.modes import worker_mode
from tests.support.helpers import EXAMPLE


def test_the_sections_of_an_agent_come_in_their_order_each_only_when_configured(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("10.0.0.1 x.example\n")
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 10.0.0.53\nsearch corp.example\n")
    every = Agent(cfgmod.build({
        "manifests": str(EXAMPLE), "listen": "127.0.0.1:0", "upstream": "127.0.0.1:5353", "filter-aaaa": "on",
        "autopath": True, "hosts": [str(hosts)], "host-resolv-conf": str(resolv), "dnstap": "tcp:127.0.0.1:6000",
        "node-name": "node-a"}, environ={}))
    assert list(every.observer.providers) == [
        "upstream", "cache", "filter_aaaa", "policy", "dnstap", "autopath", "hosts", "host_resolv_conf", "limits",
        "event_loop", "insight"]
    bare = Agent(cfgmod.build({"manifests": str(EXAMPLE), "listen": "127.0.0.1:0", "upstream": "none",
                               "host-resolv-conf": "", "insight": "off"}, environ={}))
    assert list(bare.observer.providers) == ["policy", "limits", "event_loop"]


@pytest.mark.parametrize(("mode", "shown"), [(ONE_PROCESS, True), (worker_mode(1), False)])
def test_the_node_s_resolv_conf_is_shown_only_by_a_process_that_watches_it(mode: Any, shown: bool) -> None:
    sections: list[str] = []
    host: Any = SimpleNamespace(
        mode=mode, forwarder=None, forward_cache=None, config_watcher=None, policy=object(), dnstap=None,
        autopath=None, hosts_files=None, host_file=object(), limits=object(), looplag=object(), insight=None,
        add_provider=lambda section, provider: sections.append(section))
    register_sections(host)
    assert ("host_resolv_conf" in sections) == shown  # a --workers worker renders nothing from it


def test_dnstap_is_shown_without_upstreams_too() -> None:
    agent = Agent(cfgmod.build({"manifests": str(EXAMPLE), "listen": "127.0.0.1:0", "upstream": "none",
                                "host-resolv-conf": "", "dnstap": "tcp:127.0.0.1:6000", "insight": "off"},
                                environ={}))
    assert agent.dnstap is not None  # the cluster's answers are logged: /status says how the logging goes
    assert list(agent.observer.providers) == ["policy", "dnstap", "limits", "event_loop"]
