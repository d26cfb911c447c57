"""nodedns.app.sections: the agent's parts are shown in /status and /metrics in one order, each only when it is
configured."""

from __future__ import annotations

from pathlib import Path

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
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
