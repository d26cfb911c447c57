"""explain.py: the glibc search-list walk and the built-in search list (no sockets); ndots as the explainer reads it
over HTTP."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from nodedns.cluster.objects import Pod
from nodedns.dns.keys import fast_key
from nodedns.dns.message import parse_query
from nodedns.dns.queries import make_query
from nodedns.dns.wire import question_of
from nodedns.errors import PodSpecError
from nodedns.observe.explain import expansion, renderer_search_list
from nodedns.podconf.resolvconf import KubeletDNS
from tests.support import manifests as m
from tests.support.helpers import running_agent

SEARCH = ("default.svc.cluster.local", "svc.cluster.local", "cluster.local")

EXPANSIONS = [
    ("short name: search first, as is last", "web", 5,
     ["web.default.svc.cluster.local", "web.svc.cluster.local", "web.cluster.local", "web"]),
    ("enough dots: as is first", "www.example.com", 2,
     ["www.example.com", "www.example.com.default.svc.cluster.local", "www.example.com.svc.cluster.local",
      "www.example.com.cluster.local"]),
    ("trailing dot: only the name", "www.example.com.", 5, ["www.example.com"]),
    ("ndots 0: as is first", "web", 0,
     ["web", "web.default.svc.cluster.local", "web.svc.cluster.local", "web.cluster.local"]),
    ("case is folded", "Web.Default", 5,
     ["web.default.default.svc.cluster.local", "web.default.svc.cluster.local", "web.default.cluster.local",
      "web.default"]),
]


@pytest.mark.parametrize(("name", "ndots", "expected"), [e[1:] for e in EXPANSIONS], ids=[e[0] for e in EXPANSIONS])
def test_expansion_follows_glibc_res_nsearch(name: str, ndots: int, expected: list[str]) -> None:
    assert expansion(name, SEARCH, ndots) == expected


def _pod(**kw: Any) -> Pod:
    base: dict[str, Any] = dict(namespace="prod", name="p", ip="10.0.0.1", ips=("10.0.0.1",), node_name="n",
                                host_network=False, terminating=False, hostname="", subdomain="",
                                dns_policy="ClusterFirst", dns_config=None)
    base.update(kw)
    return Pod(**base)


HOST = "nameserver 192.0.2.53\nsearch corp\n"
SEARCH_LISTS = [
    ("ClusterFirst", _pod(), ["prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp"], 5),
    ("ClusterFirst on the host network is Default", _pod(host_network=True), ["corp"], 1),
    ("ClusterFirstWithHostNet", _pod(host_network=True, dns_policy="ClusterFirstWithHostNet"),
     ["prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp"], 5),
    ("Default", _pod(dns_policy="Default"), ["corp"], 1),
    ("None with dnsConfig", _pod(dns_policy="None", dns_config={
        "nameservers": ["192.0.2.1"], "searches": ["a.example"], "options": [{"name": "ndots", "value": "3"}]}),
     ["a.example"], 3),
    ("dnsConfig appends searches and overrides ndots",
     _pod(dns_config={"searches": ["cluster.local", "x.example"], "options": [{"name": "ndots", "value": "1"}]}),
     ["prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp", "x.example"], 1),
    ("a search entry with a trailing dot is the same domain",  # the walk, autopath and insight alike
     _pod(dns_config={"searches": ["x.example."]}),
     ["prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp", "x.example"], 5),
    ("ndots over 15 is 15 (glibc caps it)", _pod(dns_config={"options": [{"name": "ndots", "value": "20"}]}),
     ["prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp"], 15),
    ("ndots 15 is 15", _pod(dns_config={"options": [{"name": "ndots", "value": "15"}]}),
     ["prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp"], 15),
    ("the last ndots wins, then the cap", _pod(dns_policy="None", dns_config={
        "nameservers": ["192.0.2.1"], "searches": ["a.example"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "ndots", "value": "99"}]}), ["a.example"], 15),
]


@pytest.mark.parametrize(("pod", "searches", "ndots"), [s[1:] for s in SEARCH_LISTS], ids=[s[0] for s in SEARCH_LISTS])
def test_search_list_comes_from_the_resolv_conf_renderer(pod: Pod, searches: list[str], ndots: int) -> None:
    settings = KubeletDNS(cluster_dns=("169.254.20.10",), cluster_domain="cluster.local")
    sl = renderer_search_list(settings, HOST)(pod)
    assert list(sl.searches) == searches
    assert sl.ndots == ndots
    assert "pod_dns_for" in sl.source


def test_the_renderers_errors_reach_the_caller() -> None:
    settings = KubeletDNS(cluster_dns=("169.254.20.10",), cluster_domain="cluster.local")
    with pytest.raises(PodSpecError):
        renderer_search_list(settings, HOST)(_pod(dns_policy="None"))  # None needs dnsConfig nameservers


def test_make_query_builds_a_plain_query_the_fast_path_reads() -> None:
    q = make_query("Web.Default.svc.cluster.local.", 28)
    assert fast_key(q) is not None
    parsed = parse_query(q)
    assert (parsed.qname, parsed.qtype, parsed.edns, parsed.rd) == ("web.default.svc.cluster.local", 28, True, True)
    assert question_of(q) == ("web.default.svc.cluster.local.", 28)


@pytest.mark.parametrize("name", ["a..b", "x" * 64, "é.example", ("a" * 60 + ".") * 5],
                         ids=["empty label", "long label", "not ASCII", "too long"])
def test_make_query_rejects_bad_names(name: str) -> None:
    with pytest.raises(ValueError):
        make_query(name, 1)


def test_a_pods_ndots_over_15_is_read_as_15_by_the_explainer_over_http(tmp_path: Path) -> None:
    """/debug/lookup for a client whose Pod says ndots:40: ndots 15, and a name with 15 dots is asked as
    it is first (glibc: as many dots as ndots), one with 14 after the search list."""
    objects = [m.namespace("default"), m.namespace("prod"), m.node("node-a"),
               m.pod("deep", "prod", ip="10.244.0.99", node_name="node-a",
                     dns_config={"options": [{"name": "ndots", "value": "40"}]})]
    path = m.write(tmp_path / "cluster.yaml", objects)
    fifteen = ".".join(f"l{i}" for i in range(16))  # 15 dots
    with running_agent({"manifests": str(path), "node-name": "node-a", "debug-listen": "127.0.0.1:0",
                        "host-resolv-conf": ""}) as agent:
        def client(name: str) -> dict[str, Any]:
            query = urllib.parse.urlencode({"name": name, "type": "A", "client": "10.244.0.99"})
            with urllib.request.urlopen(f"{agent.debug_url}/debug/lookup?{query}", timeout=10) as resp:  # noqa: S310
                doc: dict[str, Any] = json.loads(resp.read())["client"]
            return doc

        c = client(fifteen)
        assert c["ndots"] == 15
        assert c["queries"][0]["question"]["name"] == fifteen + "."
        fourteen = fifteen.rsplit(".", 1)[0]
        assert client(fourteen)["queries"][0]["question"]["name"] == fourteen + ".prod.svc.cluster.local."


def test_the_explained_walk_goes_on_after_nodata_as_glibc_does(tmp_path: Path) -> None:
    """`prod` from a Pod in default: prod.default.svc (NXDOMAIN), prod.svc (NODATA: the namespace exists), then
    prod.cluster.local and on; glibc stops only at an answer or an rcode other than NXDOMAIN/SERVFAIL/NODATA."""
    objects = [m.namespace("default"), m.namespace("prod"), m.node("node-a"),
               m.pod("client", "default", ip="10.244.0.98", node_name="node-a")]
    path = m.write(tmp_path / "cluster.yaml", objects)
    with running_agent({"manifests": str(path), "node-name": "node-a", "debug-listen": "127.0.0.1:0",
                        "host-resolv-conf": ""}) as agent:
        query = urllib.parse.urlencode({"name": "prod", "type": "A", "client": "10.244.0.98"})
        with urllib.request.urlopen(f"{agent.debug_url}/debug/lookup?{query}", timeout=10) as resp:  # noqa: S310
            walked = json.loads(resp.read())["client"]["queries"]
    asked = [(q["question"]["name"], q["rcode"], len(q["answer"])) for q in walked]
    assert asked[:3] == [("prod.default.svc.cluster.local.", "NXDOMAIN", 0), ("prod.svc.cluster.local.", "NOERROR", 0),
                         ("prod.cluster.local.", "NXDOMAIN", 0)], asked
