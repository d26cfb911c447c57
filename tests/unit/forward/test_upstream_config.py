"""Upstream config sources (pure parts): the kube-dns ConfigMap, resolv.conf, --stub-domain syntax, routing."""

from __future__ import annotations

import json

import pytest

from nodedns import config as cfgmod
from nodedns.errors import ConfigError
from nodedns.forward.routes import RouteSources, parse_kube_dns, resolv_conf_nameservers
from nodedns.forward.upstream import Forwarder, Routes


@pytest.mark.parametrize(
    ("stub", "upstreams", "key"),
    [
        ("{not json", None, "stubDomains"),
        ('["a"]', None, "stubDomains"),
        ('{"bad_domain!": ["1.2.3.4"]}', None, "stubDomains"),
        ('{"corp.example": []}', None, "stubDomains"),
        ('{"corp.example": ["dns.corp.example"]}', None, "stubDomains.corp.example"),
        (None, '["1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4"]', "upstreamNameservers"),
        (None, '{"a": 1}', "upstreamNameservers"),
        (None, '["1.2.3.4:99999"]', "upstreamNameservers"),
    ],
    ids=["stub-not-json", "stub-not-object", "stub-bad-domain", "stub-no-servers", "stub-hostname",
         "too-many-upstreams", "upstreams-not-list", "upstream-bad-port"],
)
def test_an_invalid_kube_dns_configmap_names_the_bad_key(stub: str | None, upstreams: str | None, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_kube_dns(stub, upstreams)
    assert err.value.key == key


def test_a_valid_kube_dns_configmap_parses() -> None:
    stubs, upstreams = parse_kube_dns(json.dumps({"Corp.Example.": ["10.0.0.1", "10.0.0.2:5353"]}),
                                      json.dumps(["[fd00::53]:53", "1.1.1.1"]))
    assert stubs == {"corp.example": (("10.0.0.1", 53), ("10.0.0.2", 5353))}
    assert upstreams == (("fd00::53", 53), ("1.1.1.1", 53))


def test_resolv_conf_nameservers_skip_what_is_not_an_ip() -> None:
    text = "# c\nnameserver 10.0.0.10\nnameserver fe80::1%eth0\nnameserver dns.example\nsearch a b\n"
    assert resolv_conf_nameservers(text) == (("10.0.0.10", 53), ("fe80::1", 53))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("corp.example=10.0.0.1", ("corp.example", (("10.0.0.1", 53),), False)),
        ("corp.example=10.0.0.1:5353,10.0.0.2,force_tcp", ("corp.example", (("10.0.0.1", 5353), ("10.0.0.2", 53)),
                                                           True)),
    ],
    ids=["udp", "force-tcp"],
)
def test_stub_domain_flags_parse(value: str, expected: tuple[object, ...]) -> None:
    assert cfgmod.build({"stub-domain": value}, environ={}).stub_domain == (expected,)


def test_the_configmap_upstreams_replace_the_flags_and_flag_stub_domains_win() -> None:
    sources = RouteSources(upstream=(("10.0.0.1", 53),), stub_domains=(("corp.example", (("10.9.9.9", 53),), True),))
    routes = sources.build((json.dumps({"corp.example": ["10.0.0.2"], "lab.example": ["10.0.0.3"]}),
                            json.dumps(["10.0.0.4"]), None, None))
    assert routes.root == (("10.0.0.4", 53),)
    assert routes.stubs == {"corp.example": ((("10.9.9.9", 53),), True), "lab.example": ((("10.0.0.3", 53),), False)}


@pytest.mark.parametrize(
    ("qname", "zone"),
    [("db.corp.example", "corp.example"), ("corp.example", "corp.example"), ("x.eu.corp.example", "eu.corp.example"),
     ("example.com", "."), ("notcorp.example", ".")],
    ids=["below-stub", "stub-apex", "longest-stub-wins", "root", "suffix-is-not-a-subdomain"],
)
def test_the_longest_stub_domain_routes_a_name(qname: str, zone: str) -> None:
    fw = Forwarder(routes=Routes(root=(("10.0.0.1", 53),), stubs={
        "corp.example": ((("10.0.0.2", 53),), False), "eu.corp.example": ((("10.0.0.3", 53),), False)}))
    group = fw.group_for(qname)
    assert group is not None and group.label == zone


def test_a_route_to_our_own_listen_address_is_refused() -> None:
    fw = Forwarder(routes=Routes(root=(("10.0.0.1", 53),)))
    fw.set_own_addresses([("0.0.0.0", 53)])
    with pytest.raises(ConfigError, match="own listen address"):
        fw.configure(Routes(root=(("127.0.0.1", 53),)))


def test_a_successor_takes_the_edns_memory_for_the_servers_it_shares() -> None:
    now = [1000.0]
    old = Forwarder(routes=Routes(root=(("10.0.0.1", 53), ("10.0.0.2", 53))), clock=lambda: now[0])
    old.root.servers[0].plain_until = 1600.0  # type: ignore[union-attr]  # EDNS-intolerant, 600 s left
    remembered = old.export_edns()
    assert remembered == [("10.0.0.1", 53, 600.0)]
    later = [7000.0]  # another process's clock: the time left travels, not the instant
    new = Forwarder(routes=Routes(root=(("10.0.0.1", 53),), stubs={"corp.example": ((("10.0.0.3", 53),), False)}),
                    clock=lambda: later[0])
    assert new.load_edns(remembered + [("10.0.0.3", 53, 1e9), ("10.0.0.9", 53, 100.0)]) == 1
    assert new.root.servers[0].plain_until == 7600.0  # type: ignore[union-attr]
    assert new.stubs["corp.example"].servers[0].plain_until == 0.0  # past EDNS_LAME_TTL: not believed
    assert new.status()["upstreams"][0]["edns"] is False
