"""The C endpoint columns (nodedns/cluster/_slim.c) against the Python loop of objects.endpointslice._slice: the
same slice, or the same error, for every slice — common shapes, which C takes, and odd ones, which it hands back."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodedns.cluster import objects
from nodedns.cluster.objects import endpointslice
from nodedns.errors import ObjectError
from tests.support.helpers import require_c_extension

_slim = require_c_extension("nodedns.cluster._slim")


def slice_of(address_type: str, endpoints: list[Any]) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": address_type,
            "metadata": {"name": "web-abc", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "endpoints": endpoints, "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}


def both(obj: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(what _slice makes with the C columns, what it makes without them): a slice, or the error's text."""
    def run() -> Any:
        try:
            return objects.slim(objects.ENDPOINTSLICE, obj)
        except ObjectError as exc:
            return f"ObjectError: {exc}"

    with_c = run()
    monkeypatch.setattr(endpointslice, "common_columns", None)
    without = run()
    monkeypatch.setattr(endpointslice, "common_columns", _slim.common_columns)
    return with_c, without


ODD = [
    {"addresses": ["10.0.0.1"], "hostname": "Web-0"},  # upper case: lowered
    {"addresses": ["10.0.0.1"], "hostname": "web_0"},  # not a label: Python's message
    {"addresses": ["10.0.0.1"], "hostname": "a" * 64},
    {"addresses": ["10.0.0.1"], "hostname": "-web"},
    {"addresses": ["10.0.0.1"], "hostname": "web-"},
    {"addresses": ["10.0.0.1"], "hostname": "w"},
    {"addresses": ["10.0.0.1"], "hostname": "a" * 63},
    {"addresses": ["10.0.0.1"], "hostname": "web\n"},
    {"addresses": ["10.0.0.1"], "hostname": 7},
    {"addresses": ["10.0.0.1"], "hostname": ""},
    {"addresses": ["010.0.0.1"]},
    {"addresses": ["10.0.0.1\x00"]},
    {"addresses": ["1.2"]},
    {"addresses": ["10.0.0.1", "10.0.0.2"]},
    {"addresses": []},
    {"addresses": "10.0.0.1"},
    {"addresses": [10]},
    {"addresses": ["fd00::1"]},
    {"addresses": ["10.0.0.1"], "conditions": {"ready": False}},
    {"addresses": ["10.0.0.1"], "conditions": {"ready": None}},
    {"addresses": ["10.0.0.1"], "conditions": {"ready": 0}},
    {"addresses": ["10.0.0.1"], "conditions": {"ready": "no"}},
    {"addresses": ["10.0.0.1"], "conditions": None},
    {"addresses": ["10.0.0.1"], "conditions": []},
    {"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "name": "Web-ABC"}},
    {"addresses": ["10.0.0.1"], "targetRef": {"name": "web-abc"}},
    {"addresses": ["10.0.0.1"], "targetRef": {"kind": "Node", "name": "n1"}},
    {"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "name": 5}},
    {"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "name": "WÉB"}},
    {"addresses": ["10.0.0.1"], "targetRef": "web"},
    {"addresses": ["10.0.0.1"], "nodeName": 12, "zone": ["a"]},
    {"addresses": ["10.0.0.1"], "nodeName": 0, "zone": False},
    {"addresses": ["10.0.0.1"], "nodeName": "node-a", "zone": "zone-1"},
    {"addresses": ["10.0.0.1"], "hints": {"forZones": [{"name": "zone-1"}]}},
    {"addresses": ["10.0.0.1"], "hints": {}},
    {"addresses": ["10.0.0.1"], "deprecatedTopology": {"x": "y"}},
    "not an endpoint",
    None,
]
ODD_V6 = [
    {"addresses": ["fd00::1"]},
    {"addresses": ["FD00::1"]},
    {"addresses": ["fd00:0::1"]},
    {"addresses": ["::ffff:10.0.0.1"]},
    {"addresses": ["::10.0.0.1"]},
    {"addresses": ["::1"]},
    {"addresses": ["fe80::1%eth0"]},
    {"addresses": ["10.0.0.1"]},
]


@pytest.mark.parametrize("endpoint", ODD, ids=[f"v4-{i}" for i in range(len(ODD))])
def test_each_odd_ipv4_endpoint_gives_what_the_python_loop_gives(endpoint: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    common = {"addresses": ["10.0.0.9"], "conditions": {"ready": True}, "nodeName": "node-a"}
    with_c, without = both(slice_of("IPv4", [common, endpoint, common]), monkeypatch)
    assert with_c == without


@pytest.mark.parametrize("endpoint", ODD_V6, ids=[f"v6-{i}" for i in range(len(ODD_V6))])
def test_each_odd_ipv6_endpoint_gives_what_the_python_loop_gives(endpoint: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with_c, without = both(slice_of("IPv6", [endpoint, {"addresses": ["fd00::9"]}]), monkeypatch)
    assert with_c == without


def test_the_common_shape_is_taken_in_c_and_an_odd_one_handed_back() -> None:
    common = [{"addresses": ["10.0.0.1"], "conditions": {"ready": False}, "hostname": "Web-0", "nodeName": "n1",
               "zone": "z", "targetRef": {"kind": "Pod", "name": "Web-0"}}]
    addrs, ready, hosts, pods, nodes, zones = _slim.common_columns(common, False)
    assert (addrs, ready, hosts, pods, nodes, zones) == (bytes([10, 0, 0, 1]), [False], ["web-0"], ["web-0"], ["n1"],
                                                         ["z"])
    assert _slim.common_columns([*common, {"addresses": ["10.0.0.1"], "hints": {}}], False) == (
        bytes([10, 0, 0, 1]) * 2, [False, True], ["web-0", ""], ["web-0", ""], ["n1", ""], ["z", ""])  # empty hints
    assert _slim.common_columns([*common, {"addresses": ["010.0.0.1"]}], False) is None
    assert _slim.common_columns([{"addresses": ["fd00::1"]}], True) == (bytes.fromhex("fd00" + "00" * 13 + "01"),
                                                                         [True], [""], [""], [""], [""])
    assert _slim.common_columns([], True) == (b"", [], [], [], [], [])


ADDRESS_V4 = st.one_of(st.sampled_from(["10.0.0.1", "10.0.0.2", "192.168.1.10", "010.0.0.1", "1.2", "", "x"]),
                       st.ip_addresses(v=4).map(str), st.text(max_size=6))
ADDRESS_V6 = st.one_of(st.sampled_from(["fd00::1", "FD00::1", "::ffff:1.2.3.4", "::1", "fe80::1%eth0"]),
                       st.ip_addresses(v=6).map(str), st.text(max_size=6))
NAME = st.one_of(st.none(), st.sampled_from(["", "web-0", "Web-0", "web_0", "-a", "a-", "a" * 64, "é"]),
                 st.integers(-1, 2), st.text(max_size=5))
ANY = st.one_of(st.none(), st.booleans(), st.integers(-1, 2), st.text(max_size=3), st.lists(st.none(), max_size=1),
                st.dictionaries(st.sampled_from(["name", "forZones"]), st.text(max_size=3), max_size=1))


def endpoint(address: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    fields = st.fixed_dictionaries({}, optional={
        "addresses": st.one_of(st.lists(address, min_size=0, max_size=2), ANY),
        "conditions": st.one_of(st.fixed_dictionaries({}, optional={"ready": ANY}), ANY),
        "hostname": NAME,
        "targetRef": st.one_of(st.fixed_dictionaries({}, optional={"kind": st.sampled_from(["Pod", "Node", 3]),
                                                                    "name": NAME}), ANY),
        "nodeName": NAME,
        "zone": NAME,
        "hints": ANY,
    })
    common = st.fixed_dictionaries({"addresses": st.lists(address, min_size=1, max_size=1)},
                                   optional={"nodeName": st.sampled_from(["node-a", "node-b"]),
                                             "conditions": st.fixed_dictionaries({"ready": st.booleans()})})
    return st.one_of(common, common, fields, ANY)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(v6=st.booleans(), data=st.data())
def test_any_slice_gives_what_the_python_loop_gives(v6: bool, data: st.DataObject,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    eps = data.draw(st.lists(endpoint(ADDRESS_V6 if v6 else ADDRESS_V4), max_size=6))
    with_c, without = both(slice_of("IPv6" if v6 else "IPv4", eps), monkeypatch)
    assert with_c == without
