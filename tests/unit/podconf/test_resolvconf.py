"""Tests for nodedns.podconf.resolvconf: the Pod resolv.conf a kubelet would write, rule by rule of
docs/resolv-conf-rules.md (V, H, P, B, M, L, R, the §8 catalogue and §9's host check), the
examples of the seeds 001 (docs) and 004 (KEP), and upstream dns_test.go tables where they apply."""

from __future__ import annotations

import ast
import json
import string
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from nodedns.errors import ConfigError, HostResolvConfError, ManifestError, PodSpecError
from nodedns.podconf.resolvconf import (
    DNSOption,
    HostResolvConf,
    KubeletDNS,
    PodDNS,
    PodDNSConfig,
    PodDNSSpec,
    WarningKind,
    check_host,
    parse_host_resolv_conf,
    pod_dns,
    pod_dns_for,
    validate_pod_dns,
)
from nodedns.podconf.resolvhttp import handle_http

# The KEP's host file (seed 004, "Host /etc/resolv.conf").
HOST = "nameserver 10.1.1.10\nsearch foo.com\noptions ndots:1\n"
CLUSTER = KubeletDNS(cluster_dns=("10.0.0.10",), cluster_domain="cluster.local")
NO_CLUSTER_DNS = KubeletDNS(cluster_domain="cluster.local")

CLUSTER_SEARCH = "search ns1.svc.cluster.local svc.cluster.local cluster.local"
CLUSTER_FILE = f"nameserver 10.0.0.10\n{CLUSTER_SEARCH} foo.com\noptions ndots:5\n"
CLUSTER_ONLY_FILE = f"nameserver 10.0.0.10\n{CLUSTER_SEARCH}\noptions ndots:5\n"
C3 = ["ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"]
HOST_FILE = HOST

ABSENT = object()

MISSING_CLUSTER_DNS_TEXT = (
    'kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. '
    'Falling back to "Default" policy.'
)


def make_pod(
    policy: str | None = None,
    *,
    host_network: bool | None = None,
    dns_config: Any = ABSENT,
    namespace: str | None = "ns1",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if policy is not None:
        spec["dnsPolicy"] = policy
    if host_network is not None:
        spec["hostNetwork"] = host_network
    if dns_config is not ABSENT:
        spec["dnsConfig"] = dns_config
    metadata: dict[str, Any] = {"name": "p"}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def render(pod: dict[str, Any], kubelet: KubeletDNS = CLUSTER, host: str | None = HOST) -> str:
    return pod_dns(pod, kubelet, host).render()


def kinds(result: PodDNS) -> list[str]:
    return [str(w.kind) for w in result.warnings]


def spec_errors(pod: dict[str, Any], **kw: Any) -> list[tuple[str, str]]:
    with pytest.raises(PodSpecError) as info:
        pod_dns(pod, CLUSTER, HOST, **kw)
    return info.value.errors


NONE_CONFIG = {"nameservers": ["1.2.3.4"]}

# --- P: every dnsPolicy x hostNetwork ------------------------------------------------------------------

# (policy, hostNetwork) -> file; hostNetwork None (absent) must behave as False (V1).
POLICY_TABLE = [
    (None, None, CLUSTER_FILE),
    (None, False, CLUSTER_FILE),
    (None, True, HOST_FILE),
    ("ClusterFirst", None, CLUSTER_FILE),
    ("ClusterFirst", False, CLUSTER_FILE),
    ("ClusterFirst", True, HOST_FILE),
    ("ClusterFirstWithHostNet", None, CLUSTER_FILE),
    ("ClusterFirstWithHostNet", False, CLUSTER_FILE),
    ("ClusterFirstWithHostNet", True, CLUSTER_FILE),
    ("Default", None, HOST_FILE),
    ("Default", False, HOST_FILE),
    ("Default", True, HOST_FILE),
    ("None", None, "nameserver 1.2.3.4\n"),
    ("None", False, "nameserver 1.2.3.4\n"),
    ("None", True, "nameserver 1.2.3.4\n"),
]


def _policy_id(policy: str | None, host_network: bool | None) -> str:
    return f"{policy or 'absent-policy'}-hostNetwork-{'absent' if host_network is None else host_network}"


@pytest.mark.parametrize(
    ("policy", "host_network", "expected"),
    POLICY_TABLE,
    ids=[_policy_id(p, h) for p, h, _ in POLICY_TABLE],
)
def test_each_policy_and_host_network_gives_the_kubelet_file(
    policy: str | None, host_network: bool | None, expected: str
) -> None:
    dns_config = NONE_CONFIG if policy == "None" else ABSENT
    result = pod_dns(make_pod(policy, host_network=host_network, dns_config=dns_config), CLUSTER, HOST)
    assert result.render() == expected
    assert result.warnings == ()


MISSING_CLUSTER_DNS_TABLE = [
    (None, False, True),
    ("ClusterFirst", False, True),
    ("ClusterFirst", True, False),
    ("ClusterFirstWithHostNet", False, True),
    ("ClusterFirstWithHostNet", True, True),
    ("Default", False, False),
    ("Default", True, False),
]


@pytest.mark.parametrize(
    ("policy", "host_network", "warned"),
    MISSING_CLUSTER_DNS_TABLE,
    ids=[_policy_id(p, h) for p, h, _ in MISSING_CLUSTER_DNS_TABLE],
)
def test_without_cluster_dns_cluster_policies_fall_back_to_default_with_a_warning(
    policy: str | None, host_network: bool, warned: bool
) -> None:
    result = pod_dns(make_pod(policy, host_network=host_network), NO_CLUSTER_DNS, HOST)
    assert result.render() == HOST_FILE
    if warned:
        assert [(w.kind, w.message) for w in result.warnings] == [
            (WarningKind.MISSING_CLUSTER_DNS, MISSING_CLUSTER_DNS_TEXT)
        ]
        assert result.warnings[0].kind.event_reason == "MissingClusterDNS"
    else:
        assert result.warnings == ()


def test_none_policy_ignores_cluster_dns_and_host_file() -> None:
    result = pod_dns(make_pod("None", dns_config=NONE_CONFIG), NO_CLUSTER_DNS, HOST)
    assert (result.nameservers, result.searches, result.options, result.warnings) == (
        ("1.2.3.4",),
        (),
        (),
        (),
    )


# --- B: base configuration -----------------------------------------------------------------------------

HOST_NONE_TABLE = [
    ("default-without-node-ips", "Default", (), ABSENT, CLUSTER, "nameserver 127.0.0.1\nsearch .\n"),
    ("default-ipv4-node", "Default", ("10.1.2.3",), ABSENT, CLUSTER, "nameserver 127.0.0.1\nsearch .\n"),
    ("default-ipv6-node", "Default", ("fd00::1",), ABSENT, CLUSTER, "nameserver ::1\nsearch .\n"),
    (
        "default-dual-stack-node-one-loopback-each",
        "Default",
        ("10.1.2.3", "fd00::1"),
        ABSENT,
        CLUSTER,
        "nameserver 127.0.0.1\nnameserver ::1\nsearch .\n",
    ),
    (
        "default-ipv4-mapped-node-ip-counts-as-ipv4",
        "Default",
        ("::ffff:10.1.2.3",),
        ABSENT,
        CLUSTER,
        "nameserver 127.0.0.1\nsearch .\n",
    ),
    (
        "default-two-ipv4-node-ips-are-not-deduplicated",
        "Default",
        ("10.1.2.3", "10.1.2.4"),
        ABSENT,
        CLUSTER,
        "nameserver 127.0.0.1\nnameserver 127.0.0.1\nsearch .\n",
    ),
    (
        "default-plus-pod-searches-keeps-the-dot-first",
        "Default",
        (),
        {"searches": ["my.example"]},
        CLUSTER,
        "nameserver 127.0.0.1\nsearch . my.example\n",
    ),
    (
        "cluster-first-gets-only-the-cluster-entries",
        "ClusterFirst",
        (),
        ABSENT,
        CLUSTER,
        CLUSTER_ONLY_FILE,
    ),
    (
        "cluster-first-without-cluster-dns-is-default",
        "ClusterFirst",
        (),
        ABSENT,
        NO_CLUSTER_DNS,
        "nameserver 127.0.0.1\nsearch .\n",
    ),
    ("none-gets-only-dns-config", "None", (), NONE_CONFIG, CLUSTER, "nameserver 1.2.3.4\n"),
]


@pytest.mark.parametrize(
    ("policy", "node_ips", "dns_config", "kubelet", "expected"),
    [row[1:] for row in HOST_NONE_TABLE],
    ids=[row[0] for row in HOST_NONE_TABLE],
)
def test_without_a_host_file_the_kubelet_points_at_localhost(
    policy: str, node_ips: tuple[str, ...], dns_config: Any, kubelet: KubeletDNS, expected: str
) -> None:
    settings_ = KubeletDNS(kubelet.cluster_dns, kubelet.cluster_domain, node_ips)
    assert render(make_pod(policy, dns_config=dns_config), settings_, None) == expected


CLUSTER_SEARCH_TABLE = [
    ("host-searches-follow-the-cluster-ones", "search foo.com bar.com", "cluster.local", "ns1",
     ["ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "foo.com", "bar.com"]),
    ("host-copies-of-cluster-entries-are-removed",
     "search cluster.local svc.cluster.local. foo.com ns1.svc.cluster.local",
     "cluster.local", "ns1", [*C3, "foo.com"]),
    ("another-namespace-entry-stays", "search other.svc.cluster.local", "cluster.local", "ns1",
     ["ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "other.svc.cluster.local"]),
    ("host-duplicates-are-removed-under-a-cluster-domain", "search a.com b.com a.com", "cluster.local", "ns1",
     ["ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "a.com", "b.com"]),
    ("empty-cluster-domain-keeps-host-searches-as-they-are", "search a.com b.com a.com", "", "ns1",
     ["a.com", "b.com", "a.com"]),
    ("absent-namespace-is-default", "search foo.com", "cluster.local", None,
     ["default.svc.cluster.local", "svc.cluster.local", "cluster.local", "foo.com"]),
    ("empty-namespace-is-default", "search foo.com", "cluster.local", "",
     ["default.svc.cluster.local", "svc.cluster.local", "cluster.local", "foo.com"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("host_search", "domain", "namespace", "expected"),
    [row[1:] for row in CLUSTER_SEARCH_TABLE],
    ids=[row[0] for row in CLUSTER_SEARCH_TABLE],
)
def test_cluster_search_line_prepends_the_three_cluster_entries(
    host_search: str, domain: str, namespace: str | None, expected: list[str]
) -> None:
    pod = make_pod("ClusterFirst", namespace=namespace)
    result = pod_dns(pod, KubeletDNS(("10.0.0.10",), domain), f"nameserver 9.9.9.9\n{host_search}\n")
    assert list(result.searches) == expected
    assert result.nameservers == ("10.0.0.10",)
    assert result.options == ("ndots:5",)


def test_cluster_dns_ips_are_all_used_in_order_and_printed_canonically() -> None:
    kubelet = KubeletDNS(("FD00:0:0:0:0:0:0:A", "10.0.0.10", "::ffff:10.0.0.11"), "cluster.local")
    assert pod_dns(make_pod(), kubelet, HOST).nameservers == ("fd00::a", "10.0.0.10", "10.0.0.11")


def test_cluster_dns_ips_are_not_deduplicated_without_dns_config() -> None:
    kubelet = KubeletDNS(("10.0.0.10", "10.0.0.10"), "cluster.local")
    assert pod_dns(make_pod(), kubelet, HOST).nameservers == ("10.0.0.10", "10.0.0.10")


# --- M: merging dnsConfig ------------------------------------------------------------------------------

MERGE_TABLE = [
    ("nameservers-are-appended", "ClusterFirst", HOST, {"nameservers": ["10.0.0.11"]},
     ["10.0.0.10", "10.0.0.11"], None, None),
    ("duplicate-nameservers-are-removed", "ClusterFirst", HOST,
     {"nameservers": ["10.0.0.11", "10.0.0.10", "10.0.0.11"]},
     ["10.0.0.10", "10.0.0.11"], None, None),
    ("searches-are-appended-and-deduplicated", "ClusterFirst", HOST,
     {"searches": ["my.domain", "cluster.local", "my.domain", "foo.com"]},
     None, ["ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "foo.com", "my.domain"], None),
    ("pod-searches-keep-their-trailing-dot", "ClusterFirst", HOST, {"searches": ["cluster.local."]},
     None, [*C3, "foo.com", "cluster.local."], None),
    ("a-dot-from-the-pod-is-an-entry", "Default", HOST, {"searches": ["."]}, None, ["foo.com", "."], None),
    ("options-are-overridden-by-name", "ClusterFirst", HOST, {"options": [{"name": "ndots", "value": "2"}]},
     None, None, ["ndots:2"]),
    ("a-valueless-pod-option-overrides-a-valued-one", "ClusterFirst", HOST, {"options": [{"name": "ndots"}]},
     None, None, ["ndots"]),
    ("an-empty-value-is-no-value", "ClusterFirst", HOST, {"options": [{"name": "ndots", "value": ""}]},
     None, None, ["ndots"]),
    ("a-null-value-is-no-value", "ClusterFirst", HOST, {"options": [{"name": "edns0", "value": None}]},
     None, None, ["ndots:5", "edns0"]),
    ("new-options-are-appended-in-pod-order", "ClusterFirst", HOST,
     {"options": [{"name": "single-request"}, {"name": "attempts", "value": "3"}]},
     None, None, ["ndots:5", "single-request", "attempts:3"]),
    ("the-later-of-two-pod-options-wins-in-place", "ClusterFirst", HOST,
     {"options": [{"name": "timeout", "value": "1"}, {"name": "ndots", "value": "2"},
                  {"name": "timeout", "value": "3"}]},
     None, None, ["ndots:2", "timeout:3"]),
    ("an-option-name-with-a-colon-is-not-split", "ClusterFirst", HOST, {"options": [{"name": "ndots:2"}]},
     None, None, ["ndots:5", "ndots:2"]),
    ("host-options-merge-with-pod-options-under-default", "Default",
     "nameserver 1.1.1.1\noptions ndots:1 timeout:2\n", {"options": [{"name": "ndots", "value": "3"}]},
     None, None, ["ndots:3", "timeout:2"]),
    # upstream TestMergeDNSOptions, through the Default policy (host options "ndots:5 debug")
    ("upstream-merge-empty-dns-config-options", "Default", "options ndots:5 debug\n", {},
     None, None, ["ndots:5", "debug"]),
    ("upstream-merge-no-duplicated-entries", "Default", "options ndots:5 debug\n",
     {"options": [{"name": "single-request"}, {"name": "attempts", "value": "3"}]},
     None, None, ["ndots:5", "debug", "single-request", "attempts:3"]),
    ("upstream-merge-overwrite-duplicated-entries", "Default", "options ndots:5 debug\n",
     {"options": [{"name": "ndots", "value": "3"}, {"name": "debug"}, {"name": "single-request"},
                  {"name": "attempts", "value": "3"}]},
     None, None, ["ndots:3", "debug", "single-request", "attempts:3"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "host", "dns_config", "nameservers", "searches", "options"),
    [row[1:] for row in MERGE_TABLE],
    ids=[row[0] for row in MERGE_TABLE],
)
def test_dns_config_is_merged_into_the_base(
    policy: str,
    host: str,
    dns_config: dict[str, Any],
    nameservers: list[str] | None,
    searches: list[str] | None,
    options: list[str] | None,
) -> None:
    result = pod_dns(make_pod(policy, dns_config=dns_config), CLUSTER, host)
    if nameservers is not None:
        assert list(result.nameservers) == nameservers
    if searches is not None:
        assert list(result.searches) == searches
    if options is not None:
        assert list(result.options) == options
    assert result.warnings == ()


# Upstream TestGetPodDNSCustom, with a lowercase namespace (the API server refuses "testNS").
CUSTOM_HOST = "nameserver 8.8.8.8\nsearch host.domain\n"
CUSTOM_KUBELET = KubeletDNS(("10.0.0.10",), "kubernetes.io")
CUSTOM_CONFIG = {
    "nameservers": ["10.0.0.11"],
    "searches": ["my.domain"],
    "options": [{"name": "ndots", "value": "3"}, {"name": "debug"}],
}
CUSTOM_TABLE = [
    ("none-with-dns-config-has-merged-settings", "None", False,
     {"nameservers": ["203.0.113.1"], "searches": ["my.domain", "second.domain"],
      "options": [{"name": "ndots", "value": "3"}, {"name": "debug"}]},
     "nameserver 203.0.113.1\nsearch my.domain second.domain\noptions ndots:3 debug\n"),
    ("cluster-first-with-dns-config-has-merged-settings", "ClusterFirst", False, CUSTOM_CONFIG,
     "nameserver 10.0.0.10\nnameserver 10.0.0.11\n"
     "search testns.svc.kubernetes.io svc.kubernetes.io kubernetes.io host.domain my.domain\n"
     "options ndots:3 debug\n"),
    ("cluster-first-with-host-net-with-dns-config-has-merged-settings", "ClusterFirstWithHostNet", True,
     CUSTOM_CONFIG,
     "nameserver 10.0.0.10\nnameserver 10.0.0.11\n"
     "search testns.svc.kubernetes.io svc.kubernetes.io kubernetes.io host.domain my.domain\n"
     "options ndots:3 debug\n"),
    ("default-with-dns-config-has-merged-settings", "Default", False, CUSTOM_CONFIG,
     "nameserver 8.8.8.8\nnameserver 10.0.0.11\nsearch host.domain my.domain\noptions ndots:3 debug\n"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "host_network", "dns_config", "expected"),
    [row[1:] for row in CUSTOM_TABLE],
    ids=[row[0] for row in CUSTOM_TABLE],
)
def test_upstream_custom_pod_dns_cases(
    policy: str, host_network: bool, dns_config: dict[str, Any], expected: str
) -> None:
    pod = make_pod(policy, host_network=host_network, dns_config=dns_config, namespace="testns")
    assert render(pod, CUSTOM_KUBELET, CUSTOM_HOST) == expected


DUP_HOST = "nameserver 1.1.1.1\nnameserver 1.1.1.1\nsearch a.com a.com.\noptions ndots: rotate\n"


@pytest.mark.parametrize(
    ("dns_config", "expected"),
    [
        (ABSENT, "nameserver 1.1.1.1\nnameserver 1.1.1.1\nsearch a.com a.com\noptions ndots: rotate\n"),
        (None, "nameserver 1.1.1.1\nnameserver 1.1.1.1\nsearch a.com a.com\noptions ndots: rotate\n"),
        ({}, "nameserver 1.1.1.1\nsearch a.com\noptions ndots rotate\n"),
    ],
    ids=["absent-leaves-the-host-file-as-is", "null-is-absent", "empty-dedups-and-reformats-host-entries"],
)
def test_empty_dns_config_differs_from_an_absent_one(dns_config: Any, expected: str) -> None:
    assert render(make_pod("Default", dns_config=dns_config), CLUSTER, DUP_HOST) == expected


# --- H: parsing the host file --------------------------------------------------------------------------

# Upstream TestParseResolvConf (all rows), then the cases the reference adds.
PARSE_TABLE = [
    ("empty", "", [], [], []),
    ("space", " ", [], [], []),
    ("newline", "\n", [], [], []),
    ("tabs", "\t\n\t", [], [], []),
    ("comment", "#comment\n", [], [], []),
    ("indented-comment", " #comment\n", [], [], []),
    ("two-comments", "#comment\n#comment", [], [], []),
    ("nameserver-then-empty-search", "#comment\nnameserver 1.2.3.4\nsearch", ["1.2.3.4"], [], []),
    ("nameserver", "nameserver 1.2.3.4", ["1.2.3.4"], [], []),
    ("leading-space", " nameserver 1.2.3.4", ["1.2.3.4"], [], []),
    ("leading-tab", "\tnameserver 1.2.3.4", ["1.2.3.4"], [], []),
    ("tab-separator", "nameserver\t1.2.3.4", ["1.2.3.4"], [], []),
    ("mixed-separator", "nameserver \t 1.2.3.4", ["1.2.3.4"], [], []),
    ("two-nameservers", "nameserver 1.2.3.4\nnameserver 5.6.7.8", ["1.2.3.4", "5.6.7.8"], [], []),
    ("nameserver-inline-comment-dropped", "nameserver 1.2.3.4 #comment", ["1.2.3.4"], [], []),
    ("bare-search", "search ", [], [], []),
    ("one-search", "search foo", [], ["foo"], []),
    ("two-searches", "search foo bar", [], ["foo", "bar"], []),
    ("search-trailing-dot-trimmed", "search foo. bar", [], ["foo", "bar"], []),
    ("search-three", "search foo bar bat\n", [], ["foo", "bar", "bat"], []),
    ("last-search-wins", "search foo\nsearch bar", [], ["bar"], []),
    ("nameserver-and-search", "nameserver 1.2.3.4\nsearch foo bar", ["1.2.3.4"], ["foo", "bar"], []),
    ("interleaved", "nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar",
     ["1.2.3.4", "5.6.7.8"], ["bar"], []),
    ("comments-between", "#comment\nnameserver 1.2.3.4\n#comment\nsearch foo\ncomment",
     ["1.2.3.4"], ["foo"], []),
    ("bare-options", "options ", [], [], []),
    ("options", "options ndots:5 attempts:2", [], [], ["ndots:5", "attempts:2"]),
    ("options-lines-merge", "options ndots:1\noptions ndots:5 attempts:3", [], [], ["ndots:5", "attempts:3"]),
    ("everything",
     "nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar\noptions ndots:5 attempts:4",
     ["1.2.3.4", "5.6.7.8"], ["bar"], ["ndots:5", "attempts:4"]),
    # the reference's additions
    ("search-dot-contributes-nothing", "search .", [], [], []),
    ("search-dot-among-others-is-dropped", "search . foo .", [], ["foo"], []),
    ("search-double-dot-keeps-one-dot", "search ..", [], ["."], []),
    ("bare-search-clears-earlier-ones", "search foo\nsearch", [], [], []),
    ("domain-is-ignored", "domain example.com\nsearch a", [], ["a"], []),
    ("domain-after-search-is-ignored-too", "search a\ndomain b", [], ["a"], []),
    ("domain-alone-gives-no-search", "domain b", [], [], []),
    ("crlf-line-ends", "nameserver 1.2.3.4\r\nsearch foo.\r\noptions ndots:2\r\n",
     ["1.2.3.4"], ["foo"], ["ndots:2"]),
    ("inline-hash-in-search-is-kept", "search a # b", [], ["a", "#", "b"], []),
    ("semicolon-lines-are-unknown-keywords", "; nameserver 9.9.9.9\nnameserver 1.1.1.1", ["1.1.1.1"], [], []),
    ("keywords-are-case-sensitive", "Nameserver 9.9.9.9\nSEARCH a\nOptions x", [], [], []),
    ("sortlist-is-ignored", "sortlist 10.0.0.0/8\nnameserver 1.1.1.1", ["1.1.1.1"], [], []),
    ("nameserver-values-are-not-validated", "nameserver fe80::1%eth0\nnameserver 127.0.0.53",
     ["fe80::1%eth0", "127.0.0.53"], [], []),
    ("extra-nameserver-fields-are-dropped", "nameserver 1.1.1.1 2.2.2.2", ["1.1.1.1"], [], []),
    ("option-tokens-are-kept-verbatim", "options ndots: edns0", [], [], ["ndots:", "edns0"]),
    ("option-keyed-by-text-before-first-colon", "options a:1:2\noptions a:3", [], [], ["a:3"]),
    ("options-keep-first-appearance-order", "options ndots:1 timeout:2\noptions ndots:3 rotate",
     [], [], ["ndots:3", "timeout:2", "rotate"]),
    ("options-duplicate-within-a-line", "options ndots:1 ndots:2", [], [], ["ndots:2"]),
    ("nothing-is-deduplicated", "nameserver 1.1.1.1\nnameserver 1.1.1.1\nsearch a a", ["1.1.1.1", "1.1.1.1"],
     ["a", "a"], []),
    ("no-final-newline", "search a b", [], ["a", "b"], []),
    ("go-space-nbsp-separates-fields", "search a\u00a0b", [], ["a", "b"], []),
    ("ascii-separator-1c-does-not-separate-fields", "search a\x1cb", [], ["a\x1cb"], []),
    ("vertical-tab-and-form-feed-separate-fields", "search a\vb\fc", [], ["a", "b", "c"], []),
    ("carriage-return-alone-is-not-a-line-break", "search a\rnameserver 1.1.1.1",
     [], ["a", "nameserver", "1.1.1.1"], []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "nameservers", "searches", "options"),
    [row[1:] for row in PARSE_TABLE],
    ids=[row[0] for row in PARSE_TABLE],
)
def test_host_file_is_parsed_like_the_kubelet(
    text: str, nameservers: list[str], searches: list[str], options: list[str]
) -> None:
    assert parse_host_resolv_conf(text) == HostResolvConf(tuple(nameservers), tuple(searches), tuple(options))


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("#comment\nnameserver", "line 2"),
        ("#comment\nnameserver\nsearch", "line 2"),
        ("nameserver \t ", "line 1"),
        ("nameserver\nnameserver 1.1.1.1\n  nameserver\r\n", "line 1, 3"),
    ],
    ids=[
        "bare-nameserver",
        "bare-nameserver-then-bare-search",
        "nameserver-with-only-blanks",
        "two-bare-lines",
    ],
)
def test_a_nameserver_line_without_address_makes_the_host_file_unusable(text: str, lines: str) -> None:
    with pytest.raises(HostResolvConfError, match="nameserver list is empty") as info:
        parse_host_resolv_conf(text)
    assert f"({lines})" in str(info.value)


def test_a_host_file_over_ten_mebibytes_is_unusable() -> None:
    with pytest.raises(HostResolvConfError, match="10 MiB"):
        parse_host_resolv_conf("#" * ((10 << 20) + 1))


def test_a_host_file_of_exactly_ten_mebibytes_is_read() -> None:
    text = "nameserver 1.1.1.1\n" + "#" * ((10 << 20) - 19)
    assert parse_host_resolv_conf(text).nameservers == ("1.1.1.1",)


# --- L: limits -----------------------------------------------------------------------------------------

A2048 = ["A" * 128] + ["A" * 127] * 15  # 128 + 15 * 127 + 15 spaces = 2048 (upstream's list)
NUMBERED = [str(n) for n in range(4, 34)]  # "4" .. "33"
SEARCH_LIMIT_TABLE = [
    # upstream TestFormDNSSearchFitsLimits (the expanded-limit rows), host entries under Default
    ("three-paths-are-fine", ["testNS.svc.TEST", "svc.TEST", "TEST"], None),
    ("five-paths-are-fine", ["testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"], None),
    ("a-256-character-path-is-dropped", ["testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "B" * 256, "BBB"],
     ["testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"]),
    ("exactly-2048-characters-are-fine", A2048, None),
    ("2050-characters-drop-the-last-path", [*A2048, "B"], A2048),
    ("2049-characters-drop-the-last-path", ["A" * 129, *A2048[1:]], ["A" * 129, *A2048[1:-1]]),
    ("32-paths-are-fine", ["testNS.svc.TEST", "svc.TEST", "TEST", *NUMBERED[:29]], None),
    ("33-paths-keep-the-first-32", ["testNS.svc.TEST", "svc.TEST", "TEST", *NUMBERED[:30]],
     ["testNS.svc.TEST", "svc.TEST", "TEST", *NUMBERED[:29]]),
    # the order of L2: cut to 32 first, then drop the long entries, and never refill
    ("cut-to-32-then-drop-long-ones-without-refilling", ["x" * 254, *NUMBERED[:32]], NUMBERED[:31]),
    ("long-entries-are-dropped-wherever-they-are", ["a", "b" * 254, "c", "d" * 300], ["a", "c"]),
    ("253-characters-are-fine", ["a" * 253], None),
    ("the-line-is-cut-from-the-end", ["a" * 250] * 8 + ["b" * 20, "c" * 30], ["a" * 250] * 8 + ["b" * 20]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("searches", "applied"),
    [row[1:] for row in SEARCH_LIMIT_TABLE],
    ids=[row[0] for row in SEARCH_LIMIT_TABLE],
)
def test_search_limits_cut_the_line_with_a_warning(searches: list[str], applied: list[str] | None) -> None:
    result = pod_dns(make_pod("Default"), CLUSTER, "nameserver 1.1.1.1\nsearch " + " ".join(searches) + "\n")
    if applied is None:
        assert list(result.searches) == searches
        assert result.warnings == ()
        return
    assert list(result.searches) == applied
    assert [(w.kind, w.message) for w in result.warnings] == [
        (
            WarningKind.SEARCH_LIMIT,
            "Search Line limits were exceeded, some search paths have been omitted, "
            "the applied search line is: " + " ".join(applied),
        )
    ]
    assert result.warnings[0].kind.event_reason == "DNSConfigForming"


@pytest.mark.parametrize(
    ("nameservers", "applied"),
    [
        (["127.0.0.1"], None),
        (["127.0.0.1", "10.0.0.10", "8.8.8.8"], None),
        (["127.0.0.1", "10.0.0.10", "8.8.8.8", "1.2.3.4"], ["127.0.0.1", "10.0.0.10", "8.8.8.8"]),
        (["1.1.1.1", "1.1.1.1", "2.2.2.2", "3.3.3.3"], ["1.1.1.1", "1.1.1.1", "2.2.2.2"]),
    ],
    ids=["one-is-fine", "three-are-fine", "four-keep-the-first-three", "duplicates-count-without-dns-config"],
)
def test_nameserver_limit_keeps_the_first_three_with_a_warning(
    nameservers: list[str], applied: list[str] | None
) -> None:
    host = "".join(f"nameserver {ns}\n" for ns in nameservers)
    result = pod_dns(make_pod("Default"), CLUSTER, host)
    assert list(result.nameservers) == (applied or nameservers)
    if applied is None:
        assert result.warnings == ()
    else:
        assert [(w.kind, w.message) for w in result.warnings] == [
            (
                WarningKind.NAMESERVER_LIMIT,
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver "
                "line is: " + " ".join(applied),
            )
        ]
        assert result.warnings[0].kind.event_reason == "DNSConfigForming"


def _search_line(entries: int) -> str:
    return "search " + " ".join(f"d{n}.example" for n in range(entries)) + "\n"


def test_all_three_warnings_come_in_kind_order_once_each() -> None:
    host = "".join(f"nameserver 10.0.0.{n}\n" for n in range(5)) + _search_line(33)
    result = pod_dns(make_pod("ClusterFirst"), NO_CLUSTER_DNS, host)
    assert kinds(result) == ["MissingClusterDNS", "NameserverLimit", "SearchLimit"]


def test_options_are_never_limited() -> None:
    options = [{"name": f"opt{n}"} for n in range(50)]
    result = pod_dns(make_pod("ClusterFirst", dns_config={"options": options}), CLUSTER, HOST)
    assert len(result.options) == 51
    assert result.warnings == ()


# --- V: validation -------------------------------------------------------------------------------------

RELAXED_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    r"'_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*')"
)
IP_MSG = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
SUPPORTED = 'supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"'

VALIDATION_TABLE = [
    ("v2-unknown-policy", "Custom", ABSENT,
     [("spec.dnsPolicy", f'Unsupported value: "Custom": {SUPPORTED}')]),
    ("v2-policy-is-case-sensitive", "clusterfirst", ABSENT,
     [("spec.dnsPolicy", f'Unsupported value: "clusterfirst": {SUPPORTED}')]),
    ("v3-none-needs-dns-config", "None", ABSENT,
     [("spec.dnsConfig", "Required value: must provide `dnsConfig` when `dnsPolicy` is None")]),
    ("v3-none-with-null-dns-config", "None", None,
     [("spec.dnsConfig", "Required value: must provide `dnsConfig` when `dnsPolicy` is None")]),
    ("v4-none-needs-a-nameserver", "None", {},
     [("spec.dnsConfig.nameservers",
       "Required value: must provide at least one DNS nameserver when `dnsPolicy` is None")]),
    ("v4-stops-validating-dns-config", "None",
     {"nameservers": [], "searches": ["BAD"], "options": [{"name": ""}]},
     [("spec.dnsConfig.nameservers",
       "Required value: must provide at least one DNS nameserver when `dnsPolicy` is None")]),
    ("v5-four-nameservers", "ClusterFirst", {"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"]},
     [("spec.dnsConfig.nameservers", 'Invalid value: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"}: '
       "must not have more than 3 nameservers")]),
    ("v5-four-copies-of-one-nameserver", "Default", {"nameservers": ["1.1.1.1"] * 4},
     [("spec.dnsConfig.nameservers", 'Invalid value: []string{"1.1.1.1", "1.1.1.1", "1.1.1.1", "1.1.1.1"}: '
       "must not have more than 3 nameservers")]),
    ("v6-hostname-nameserver", "ClusterFirst", {"nameservers": ["1.1.1.1", "dns.google"]},
     [("spec.dnsConfig.nameservers[1]", f'Invalid value: "dns.google": {IP_MSG}')]),
    ("v6-zone-suffix", "ClusterFirst", {"nameservers": ["fe80::1%eth0"]},
     [("spec.dnsConfig.nameservers[0]", f'Invalid value: "fe80::1%eth0": {IP_MSG}')]),
    ("v6-five-octets-and-empty", "ClusterFirst", {"nameservers": ["1.2.3.4.5", ""]},
     [("spec.dnsConfig.nameservers[0]", f'Invalid value: "1.2.3.4.5": {IP_MSG}'),
      ("spec.dnsConfig.nameservers[1]", f'Invalid value: "": {IP_MSG}')]),
    ("v7-33-searches", "ClusterFirst", {"searches": [f"s{n}" for n in range(33)]},
     [("spec.dnsConfig.searches", "Invalid value: []string{" + ", ".join(f'"s{n}"' for n in range(33))
       + "}: must not have more than 32 search paths")]),
    ("v8-2049-characters", "ClusterFirst", {"searches": ["a" * 200] * 10 + ["b" * 39]},
     [("spec.dnsConfig.searches", "Invalid value: []string{" + ", ".join(['"' + "a" * 200 + '"'] * 10)
       + ', "' + "b" * 39 + '"}: '
       "must not have more than 2048 characters (including spaces) in the search list")]),
    ("v9-uppercase", "ClusterFirst", {"searches": ["ok.com", "Example.com"]},
     [("spec.dnsConfig.searches[1]", f'Invalid value: "Example.com": {RELAXED_MSG}')]),
    ("v9-double-trailing-dot", "ClusterFirst", {"searches": ["example.com.."]},
     [("spec.dnsConfig.searches[0]", f'Invalid value: "example.com.": {RELAXED_MSG}')]),
    ("v9-254-characters", "ClusterFirst", {"searches": ["a" * 254]},
     [("spec.dnsConfig.searches[0]",
       'Invalid value: "' + "a" * 254 + '": must be no more than 253 characters')]),
    ("v10-empty-option-name", "ClusterFirst", {"options": [{"name": "ndots", "value": "2"}, {"name": ""}]},
     [("spec.dnsConfig.options[1]", "Required value: must not be empty")]),
    ("v10-missing-option-name", "ClusterFirst", {"options": [{"value": "2"}]},
     [("spec.dnsConfig.options[0]", "Required value: must not be empty")]),
    ("v1-empty-policy-defaults-to-cluster-first-so-dns-config-is-checked", "", {"nameservers": ["x"]},
     [("spec.dnsConfig.nameservers[0]", f'Invalid value: "x": {IP_MSG}')]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "dns_config", "errors"),
    [row[1:] for row in VALIDATION_TABLE],
    ids=[row[0] for row in VALIDATION_TABLE],
)
def test_the_api_server_rejects_the_pod_naming_the_field(
    policy: str, dns_config: Any, errors: list[tuple[str, str]]
) -> None:
    assert spec_errors(make_pod(policy, dns_config=dns_config)) == errors


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ("Bad_NS", "Invalid value: \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case "
         "alphanumeric characters or '-', and must start and end with an alphanumeric character "
         "(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
        ("n" * 64, 'Invalid value: "' + "n" * 64 + '": must be no more than 63 characters'),
    ],
    ids=["not-a-dns-label", "longer-than-63"],
)  # fmt: skip
def test_a_namespace_the_api_server_would_refuse_is_rejected(namespace: str, message: str) -> None:
    assert spec_errors(make_pod(namespace=namespace))[0] == ("metadata.namespace", message)


INVALID_SEARCHES = {
    "empty": "",
    "leading-dot": ".example.com",
    "double-dot-inside": "a..b",
    "double-trailing-dot": "example.com..",
    "lone-double-dot": "..",
    "uppercase": "Example.com",
    "space": "exa mple.com",
    "leading-hyphen": "-a.com",
    "trailing-hyphen-in-label": "a-.com",
    "two-leading-underscores": "__a.com",
    "trailing-underscore": "a_",
    "underscore-only": "_",
    "star": "*.example.com",
    "non-ascii": "exämple.com",
}


@pytest.mark.parametrize("search", INVALID_SEARCHES.values(), ids=INVALID_SEARCHES.keys())
def test_an_invalid_search_entry_is_rejected_at_its_index(search: str) -> None:
    errors = spec_errors(make_pod(dns_config={"searches": ["fine.example", search]}))
    assert [path for path, _ in errors] == ["spec.dnsConfig.searches[1]"]
    assert errors[0][1].startswith(
        f'Invalid value: "{search.removesuffix(".")}": a lowercase RFC 1123 subdomain'
    )


VALID_SEARCHES = {
    "lone-dot": ".",
    "one-trailing-dot": "example.com.",
    "srv-style-underscores": "_srv._tcp.example.com",
    "underscore-inside": "a_b.example.com",
    "hyphens-inside": "a--b.example.com",
    "digits": "123.456",
    "253-characters": "a" * 253,
    "253-characters-plus-a-dot": "a" * 253 + ".",
    "no-per-label-63-limit": "a" * 64 + ".com",
}


@pytest.mark.parametrize("search", VALID_SEARCHES.values(), ids=VALID_SEARCHES.keys())
def test_a_valid_search_entry_is_accepted(search: str) -> None:
    result = pod_dns(
        make_pod("None", dns_config={"nameservers": ["1.1.1.1"], "searches": [search]}), CLUSTER, HOST
    )
    assert result.searches == ((search,) if len(search) <= 253 else ())


@pytest.mark.parametrize(
    "search", [".", "_srv.example.com", "a_b.com"], ids=["lone-dot", "leading-underscore", "inner-underscore"]
)
def test_strict_search_validation_rejects_what_the_relaxed_rules_allow(search: str) -> None:
    errors = spec_errors(make_pod(dns_config={"searches": [search]}), relaxed_search_validation=False)
    assert [path for path, _ in errors] == ["spec.dnsConfig.searches[0]"]
    assert "'-' or '.', and must start" in errors[0][1]


def test_exactly_32_searches_of_2048_characters_are_valid() -> None:
    searches = [f"{n:02d}" + "a" * 60 for n in range(31)] + ["z" * 95]  # 31 * 62 + 95 + 31 spaces
    assert len(searches) == 32 and len(" ".join(searches)) == 2048
    pod = make_pod("None", dns_config={"nameservers": ["1.1.1.1"], "searches": searches})
    assert list(pod_dns(pod, CLUSTER, HOST).searches) == searches


def test_every_error_is_reported_at_once_in_api_server_order() -> None:
    pod = make_pod(
        "Custom",
        dns_config={
            "nameservers": ["1.1.1.1", "x", "2.2.2.2", "3.3.3.3"],
            "searches": ["ok", "Bad"],
            "options": [{"name": ""}],
        },
    )
    assert [path for path, _ in spec_errors(pod)] == [
        "spec.dnsPolicy",
        "spec.dnsConfig.nameservers",
        "spec.dnsConfig.nameservers[1]",
        "spec.dnsConfig.searches[1]",
        "spec.dnsConfig.options[0]",
    ]


NOT_VALIDATED = [
    (
        "cluster-first-with-host-net-without-host-network",
        make_pod("ClusterFirstWithHostNet", host_network=False),
    ),
    (
        "dns-config-with-host-network",
        make_pod("Default", host_network=True, dns_config={"searches": ["a.b"]}),
    ),
    (
        "option-names-and-values-are-free-text",
        make_pod(dns_config={"options": [{"name": "bogus", "value": " x"}]}),
    ),
    (
        "duplicate-option-names",
        make_pod(dns_config={"options": [{"name": "a"}, {"name": "a", "value": "1"}]}),
    ),
    ("empty-policy-is-cluster-first", make_pod("")),
]


@pytest.mark.parametrize("pod", [p for _, p in NOT_VALIDATED], ids=[i for i, _ in NOT_VALIDATED])
def test_what_nobody_validates_is_accepted(pod: dict[str, Any]) -> None:
    assert pod_dns(pod, CLUSTER, HOST).nameservers


def test_validation_errors_win_over_a_broken_host_file() -> None:
    with pytest.raises(PodSpecError):
        pod_dns(make_pod("Custom"), CLUSTER, "nameserver\n")


# --- reading the Pod dict ------------------------------------------------------------------------------

TYPE_TABLE = [
    ("dns-config-is-a-list", {"spec": {"dnsConfig": [{"options": [{"name": "ndots"}]}]}},
     [("spec.dnsConfig", 'Invalid value: [{"options": [{"name": "ndots"}]}]: must be an object')]),
    ("option-value-is-a-number", {"spec": {"dnsConfig": {"options": [{"name": "ndots", "value": 2}]}}},
     [("spec.dnsConfig.options[0].value", "Invalid value: 2: must be a string")]),
    ("host-network-is-a-string", {"spec": {"hostNetwork": "yes"}},
     [("spec.hostNetwork", 'Invalid value: "yes": must be a boolean')]),
    ("searches-is-a-string", {"spec": {"dnsConfig": {"searches": "a.com"}}},
     [("spec.dnsConfig.searches", 'Invalid value: "a.com": must be a list')]),
    ("a-nameserver-is-a-number", {"spec": {"dnsConfig": {"nameservers": ["1.1.1.1", 5]}}},
     [("spec.dnsConfig.nameservers[1]", "Invalid value: 5: must be a string")]),
    ("an-option-is-a-string", {"spec": {"dnsConfig": {"options": ["ndots:2"]}}},
     [("spec.dnsConfig.options[0]", 'Invalid value: "ndots:2": must be an object')]),
    ("option-name-is-a-number", {"spec": {"dnsConfig": {"options": [{"name": 1}]}}},
     [("spec.dnsConfig.options[0].name", "Invalid value: 1: must be a string")]),
    ("namespace-is-a-number", {"metadata": {"namespace": 5}},
     [("metadata.namespace", "Invalid value: 5: must be a string")]),
    ("spec-is-a-list", {"spec": []}, [("spec", "Invalid value: []: must be an object")]),
    ("policy-is-still-checked", {"spec": {"dnsPolicy": "Custom", "dnsConfig": {"nameservers": "x"}}},
     [("spec.dnsConfig.nameservers", 'Invalid value: "x": must be a list'),
      ("spec.dnsPolicy", f'Unsupported value: "Custom": {SUPPORTED}')]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "errors"), [row[1:] for row in TYPE_TABLE], ids=[row[0] for row in TYPE_TABLE]
)
def test_a_field_of_the_wrong_json_type_is_rejected_naming_the_field(
    pod: dict[str, Any], errors: list[tuple[str, str]]
) -> None:
    assert spec_errors(pod) == errors
    with pytest.raises(PodSpecError):
        PodDNSSpec.from_pod(pod)


NOT_A_POD = [
    ("a-list", [make_pod()], "expected a Pod object, got a list"),
    ("a-string", "Pod", "expected a Pod object, got a string"),
    ("a-number", 7, "expected a Pod object, got a number"),
    ("a-boolean", True, "expected a Pod object, got a boolean"),
    ("null", None, "expected a Pod object, got null"),
    ("a-service", {"apiVersion": "v1", "kind": "Service", "spec": {}}, 'expected kind Pod, got "Service"'),
    ("a-list-kind", {"apiVersion": "v1", "kind": "List", "items": []}, 'expected kind Pod, got "List"'),
    (
        "another-api-group",
        {"apiVersion": "apps/v1", "kind": "Pod"},
        'expected apiVersion v1 for a Pod, got "apps/v1"',
    ),
]


@pytest.mark.parametrize(("value", "message"), [r[1:] for r in NOT_A_POD], ids=[r[0] for r in NOT_A_POD])
def test_something_that_is_not_a_pod_is_refused_as_a_whole(value: Any, message: str) -> None:
    with pytest.raises(ManifestError, match="^" + message.replace("(", r"\(") + "$"):
        pod_dns(value, CLUSTER, HOST)


def test_a_bare_spec_without_kind_is_read_as_a_pod() -> None:
    assert render({"spec": {"dnsPolicy": "Default"}}) == HOST_FILE
    assert render({}) == CLUSTER_FILE.replace("ns1.svc", "default.svc")


def test_the_typed_helper_gives_the_same_result_as_the_dict_entry_point() -> None:
    pod = make_pod(
        "ClusterFirst", dns_config={"searches": ["a.b"], "options": [{"name": "ndots", "value": "2"}]}
    )
    spec = PodDNSSpec.from_pod(pod)
    assert spec == PodDNSSpec(
        "ns1", "ClusterFirst", False, PodDNSConfig((), ("a.b",), (DNSOption("ndots", "2"),))
    )
    assert pod_dns_for(spec, CLUSTER, HOST) == pod_dns(pod, CLUSTER, HOST)


def test_the_typed_spec_applies_v1_defaulting() -> None:
    assert PodDNSSpec(namespace="", dns_policy="") == PodDNSSpec("default", "ClusterFirst")
    assert validate_pod_dns(PodDNSSpec()) == []


# --- KubeletDNS ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("", ()),
        ("10.0.0.10", ("10.0.0.10",)),
        ("10.0.0.10,10.0.0.11", ("10.0.0.10", "10.0.0.11")),
        ("FD00:0:0:0:0:0:0:A", ("fd00::a",)),
        ("::ffff:10.0.0.10", ("10.0.0.10",)),
        ("10.0.0.10, fd00::a", ("10.0.0.10", "fd00::a")),
    ],
    ids=["empty-is-none", "one", "two-in-order", "ipv6-canonical", "ipv4-mapped-is-ipv4", "blanks-trimmed"],
)
def test_cluster_dns_flag_is_parsed_to_canonical_ips(flag: str, expected: tuple[str, ...]) -> None:
    assert KubeletDNS.from_flags(cluster_dns=flag, cluster_domain="cluster.local").cluster_dns == expected


@pytest.mark.parametrize(
    ("cluster_dns", "node_ips", "key"),
    [
        ("kube-dns", "", "--cluster-dns"),
        ("10.0.0.10,", "", "--cluster-dns"),
        ("fe80::1%eth0", "", "--cluster-dns"),
        ("10.0.0.10", "10.0.0.300", "--node-ips"),
    ],
    ids=["hostname", "empty-entry", "zone-suffix", "bad-node-ip"],
)
def test_a_bad_ip_in_the_kubelet_settings_is_a_config_error_naming_the_flag(
    cluster_dns: str, node_ips: str, key: str
) -> None:
    with pytest.raises(ConfigError) as info:
        KubeletDNS.from_flags(cluster_dns=cluster_dns, cluster_domain="cluster.local", node_ips=node_ips)
    assert info.value.key == key


def test_kubelet_settings_built_directly_are_checked_too() -> None:
    with pytest.raises(ConfigError, match="^clusterDNS: "):
        KubeletDNS(cluster_dns=("not-an-ip",))


# --- the seeds' examples -------------------------------------------------------------------------------


def test_docs_example_a_pod_in_test_gets_its_namespace_search_path() -> None:
    # seed 001, "Namespaces of Services": nameserver 10.32.0.10 / search <namespace>.svc.cluster.local ...
    kubelet = KubeletDNS(("10.32.0.10",), "cluster.local")
    assert render(make_pod(namespace="test"), kubelet, "nameserver 192.168.1.1\n") == (
        "nameserver 10.32.0.10\n"
        "search test.svc.cluster.local svc.cluster.local cluster.local\n"
        "options ndots:5\n"
    )


# seed 001 refers to service/networking/custom-dns.yaml; this is that manifest.
DOCS_CUSTOM_DNS_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  namespace: default
  name: dns-example
spec:
  containers:
    - name: test
      image: nginx
  dnsPolicy: "None"
  dnsConfig:
    nameservers:
      - 192.0.2.1 # this is an example
    searches:
      - ns1.svc.cluster-domain.example
      - my.dns.search.suffix
    options:
      - name: ndots
        value: "2"
      - name: edns0
"""


def test_docs_example_custom_dns_config() -> None:
    pod = yaml.safe_load(DOCS_CUSTOM_DNS_YAML)
    kubelet = KubeletDNS(("10.96.0.10",), "cluster-domain.example")
    assert render(pod, kubelet, HOST) == (
        "nameserver 192.0.2.1\n"
        "search ns1.svc.cluster-domain.example my.dns.search.suffix\n"
        "options ndots:2 edns0\n"
    )


def test_docs_example_ipv6_cluster() -> None:
    kubelet = KubeletDNS(("2001:db8:30::a",), "cluster-domain.example")
    assert render(make_pod(namespace="default"), kubelet, "nameserver 2001:db8::1\n") == (
        "nameserver 2001:db8:30::a\n"
        "search default.svc.cluster-domain.example svc.cluster-domain.example cluster-domain.example\n"
        "options ndots:5\n"
    )


DOCS_HOST_NET_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: busybox
  namespace: default
spec:
  containers:
  - image: busybox:1.28
    command:
      - sleep
      - "3600"
    imagePullPolicy: IfNotPresent
    name: busybox
  restartPolicy: Always
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
"""


def test_docs_example_host_network_pod_with_cluster_first_with_host_net_uses_cluster_dns() -> None:
    pod = yaml.safe_load(DOCS_HOST_NET_YAML)
    assert render(pod) == CLUSTER_FILE.replace("ns1.svc", "default.svc")


def test_docs_example_host_network_pod_with_cluster_first_falls_back_to_default() -> None:
    pod = yaml.safe_load(DOCS_HOST_NET_YAML.replace("ClusterFirstWithHostNet", "ClusterFirst"))
    assert render(pod) == HOST_FILE


def test_docs_note_default_is_not_the_default_policy() -> None:
    assert render(make_pod(None)) == CLUSTER_FILE
    assert render(make_pod(None)) != render(make_pod("Default"))


def test_docs_limits_section_32_searches_supersede_the_older_six() -> None:
    searches = [f"s{n}.example" for n in range(32)]
    pod = make_pod("None", dns_config={"nameservers": ["1.1.1.1"], "searches": searches})
    assert list(pod_dns(pod, CLUSTER, HOST).searches) == searches


KEP_POD_YAML = """\
apiVersion: v1
kind: Pod
metadata: {"namespace": "ns1", "name": "example"}
spec:
  dnsPolicy: Custom
  dnsConfig:
    nameservers: ["1.2.3.4"]
    searches:
    - ns1.svc.cluster.local
    - my.dns.search.suffix
    options:
    - name: ndots
      value: 2
    - name: edns0
"""


def test_kep_example_override_dns_server_and_search_paths_as_implemented() -> None:
    # `Custom` shipped as `None`, and option values are strings.
    pod = yaml.safe_load(KEP_POD_YAML.replace("Custom", "None").replace("value: 2", 'value: "2"'))
    assert render(pod, KubeletDNS(("10.0.0.10",), "cluster.local"), HOST) == (
        "nameserver 1.2.3.4\nsearch ns1.svc.cluster.local my.dns.search.suffix\noptions ndots:2 edns0\n"
    )


def test_kep_example_as_written_is_rejected_by_todays_api_server() -> None:
    assert spec_errors(yaml.safe_load(KEP_POD_YAML)) == [
        ("spec.dnsConfig.options[0].value", "Invalid value: 2: must be a string"),
        ("spec.dnsPolicy", f'Unsupported value: "Custom": {SUPPORTED}'),
    ]


KEP_NDOTS_YAML = """\
metadata: {"namespace": "default", "name": "example"}
spec:
  dnsPolicy: ClusterFirst
  dnsConfig:
  - options:
    - name: ndots
    - value: 1
"""


def test_kep_example_overriding_ndots_as_intended() -> None:
    pod = make_pod(
        "ClusterFirst", namespace="default", dns_config={"options": [{"name": "ndots", "value": "1"}]}
    )
    assert render(pod, KubeletDNS(("10.0.0.10",), "cluster.local"), HOST) == (
        "nameserver 10.0.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local foo.com\n"
        "options ndots:1\n"
    )


def test_kep_example_overriding_ndots_as_written_is_rejected() -> None:
    errors = spec_errors(yaml.safe_load(KEP_NDOTS_YAML))
    assert [path for path, _ in errors] == ["spec.dnsConfig"]
    assert errors[0][1].endswith("must be an object")


def test_kep_invalid_configurations_use_todays_limits_not_six_and_256() -> None:
    seven = [f"s{n}.example" for n in range(7)]
    assert list(pod_dns(make_pod(dns_config={"searches": seven}), CLUSTER, HOST).searches) == [
        *C3,
        "foo.com",
        *seven,
    ]
    too_many = [f"s{n}.example" for n in range(33)]
    assert [p for p, _ in spec_errors(make_pod(dns_config={"searches": too_many}))] == [
        "spec.dnsConfig.searches"
    ]


# --- §8: the edge-case catalogue, item by item ---------------------------------------------------------

LONG_253 = "a" * 253
EDGE_TABLE = [
    ("8.1-cluster-first-on-host-network-is-default-even-without-cluster-dns",
     NO_CLUSTER_DNS, HOST, make_pod("ClusterFirst", host_network=True), HOST_FILE, []),
    ("8.2-cluster-first-with-host-net-without-host-network-is-cluster-first",
     CLUSTER, HOST, make_pod("ClusterFirstWithHostNet", host_network=False), CLUSTER_FILE, []),
    ("8.3-missing-cluster-dns-is-default-plus-merge-plus-warning",
     NO_CLUSTER_DNS, HOST, make_pod("ClusterFirst", dns_config={"searches": ["my.example"]}),
     "nameserver 10.1.1.10\nsearch foo.com my.example\noptions ndots:1\n", ["MissingClusterDNS"]),
    ("8.4-no-host-file-and-default-gives-localhost-and-dot-then-pod-searches",
     CLUSTER, None, make_pod("Default", dns_config={"searches": ["a.example", "b.example"]}),
     "nameserver 127.0.0.1\nsearch . a.example b.example\n", []),
    ("8.5-kubespray-host-search-is-deduplicated-pod-entries-compared-as-written",
     CLUSTER,
     "nameserver 9.9.9.9\nsearch ns1.svc.cluster.local svc.cluster.local. cluster.local example.com\n",
     make_pod("ClusterFirst", dns_config={"searches": ["cluster.local.", "example.com"]}),
     f"nameserver 10.0.0.10\n{CLUSTER_SEARCH} example.com cluster.local.\noptions ndots:5\n", []),
    ("8.6-duplicate-host-nameservers-count-towards-the-limit",
     CLUSTER, "nameserver 1.1.1.1\nnameserver 1.1.1.1\nnameserver 2.2.2.2\nnameserver 3.3.3.3\n",
     make_pod("Default"), "nameserver 1.1.1.1\nnameserver 1.1.1.1\nnameserver 2.2.2.2\n",
     ["NameserverLimit"]),
    ("8.7-domain-ignored-last-search-counts-dot-contributes-nothing",
     CLUSTER, "domain corp.example\nsearch old.example\nsearch . new.example\nnameserver 1.1.1.1\n",
     make_pod("Default"), "nameserver 1.1.1.1\nsearch new.example\n", []),
    ("8.7-a-bare-search-clears-earlier-ones",
     CLUSTER, "search old.example\nsearch\nnameserver 1.1.1.1\n", make_pod("Default"),
     "nameserver 1.1.1.1\n", []),
    ("8.8-host-options-lines-merge-later-token-wins",
     CLUSTER, "nameserver 1.1.1.1\noptions ndots:1 timeout:2\noptions ndots:3 rotate\n", make_pod("Default"),
     "nameserver 1.1.1.1\noptions ndots:3 timeout:2 rotate\n", []),
    ("8.9-32-pod-searches-lose-their-last-three-after-the-cluster-ones",
     CLUSTER, "nameserver 1.1.1.1\n",
     make_pod("ClusterFirst", dns_config={"searches": [f"p{n}" for n in range(32)]}),
     f"nameserver 10.0.0.10\n{CLUSTER_SEARCH} " + " ".join(f"p{n}" for n in range(29))
     + "\noptions ndots:5\n",
     ["SearchLimit"]),
    ("8.9-three-pod-nameservers-after-a-cluster-ip-lose-the-third",
     CLUSTER, HOST, make_pod("ClusterFirst", dns_config={"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3"]}),
     "nameserver 10.0.0.10\nnameserver 1.1.1.1\nnameserver 2.2.2.2\n"
     f"{CLUSTER_SEARCH} foo.com\noptions ndots:5\n", ["NameserverLimit"]),
    ("8.10-host-entry-of-254-with-trailing-dot-is-trimmed-and-kept",
     CLUSTER, f"nameserver 1.1.1.1\nsearch {LONG_253}.\n", make_pod("Default"),
     f"nameserver 1.1.1.1\nsearch {LONG_253}\n", []),
    ("8.10-host-entry-of-254-real-characters-is-dropped",
     CLUSTER, f"nameserver 1.1.1.1\nsearch a.example {LONG_253}b\n", make_pod("Default"),
     "nameserver 1.1.1.1\nsearch a.example\n", ["SearchLimit"]),
    ("8.10-pod-entry-of-253-plus-dot-passes-validation-but-is-dropped",
     CLUSTER, "nameserver 1.1.1.1\n", make_pod("Default", dns_config={"searches": [f"{LONG_253}."]}),
     "nameserver 1.1.1.1\n", ["SearchLimit"]),
    ("8.11-host-options-are-lost-under-cluster",
     CLUSTER, "nameserver 1.1.1.1\noptions timeout:1 rotate\n", make_pod("ClusterFirst"),
     CLUSTER_ONLY_FILE, []),
    ("8.11-the-pod-brings-them-back-with-dns-config",
     CLUSTER, "nameserver 1.1.1.1\noptions timeout:1 rotate\n",
     make_pod("ClusterFirst", dns_config={"options": [{"name": "timeout", "value": "1"},
                                                      {"name": "rotate"}]}),
     f"nameserver 10.0.0.10\n{CLUSTER_SEARCH}\noptions ndots:5 timeout:1 rotate\n", []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kubelet", "host", "pod", "expected", "warning_kinds"),
    [row[1:] for row in EDGE_TABLE],
    ids=[row[0] for row in EDGE_TABLE],
)
def test_edge_case_catalogue(
    kubelet: KubeletDNS, host: str | None, pod: dict[str, Any], expected: str, warning_kinds: list[str]
) -> None:
    result = pod_dns(pod, kubelet, host)
    assert result.render() == expected
    assert kinds(result) == warning_kinds


@pytest.mark.parametrize(
    "pod",
    [
        make_pod("ClusterFirst"),
        make_pod("ClusterFirstWithHostNet"),
        make_pod("Default"),
        make_pod("None", dns_config=NONE_CONFIG),
    ],
    ids=["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
)
def test_edge_case_8_12_a_malformed_host_file_breaks_every_policy(pod: dict[str, Any]) -> None:
    with pytest.raises(HostResolvConfError, match="nameserver list is empty"):
        pod_dns(pod, CLUSTER, "nameserver 1.1.1.1\nnameserver\n")


# --- R: rendering --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "text"),
    [
        (PodDNS((), (), ()), ""),
        (PodDNS(("1.1.1.1", "::1"), (), ()), "nameserver 1.1.1.1\nnameserver ::1\n"),
        (PodDNS((), ("a", "b"), ()), "search a b\n"),
        (PodDNS((), (), ("ndots:2", "edns0")), "options ndots:2 edns0\n"),
        (PodDNS(("1.1.1.1",), ("a",), ("edns0",)), "nameserver 1.1.1.1\nsearch a\noptions edns0\n"),
    ],
    ids=[
        "all-empty-is-no-output",
        "nameservers-only",
        "search-only",
        "options-only",
        "order-ns-search-options",
    ],
)
def test_render_writes_nameservers_then_search_then_options(result: PodDNS, text: str) -> None:
    assert result.render() == text


def test_an_empty_host_file_under_default_renders_nothing() -> None:
    assert render(make_pod("Default"), CLUSTER, "") == ""


# --- §9: the kubelet's start-up check of the host file -------------------------------------------------


def _search_file(entries: list[str]) -> str:
    return "nameserver 1.1.1.1\nsearch " + " ".join(entries) + "\n"


P = "/etc/resolv.conf"
CHECK_TABLE = [
    ("clean-file", HOST, True, []),
    ("29-entries-with-a-cluster-domain-are-fine", _search_file([f"d{n}" for n in range(29)]), True, []),
    ("30-entries-with-a-cluster-domain-are-too-many", _search_file([f"d{n}" for n in range(30)]), True,
     [f"Resolv.conf file '{P}' contains search line consisting of more than 29 domains!"]),
    ("32-entries-without-a-cluster-domain-are-fine", _search_file([f"d{n}" for n in range(32)]), False, []),
    ("33-entries-without-a-cluster-domain-are-too-many", _search_file([f"d{n}" for n in range(33)]), False,
     [f"Resolv.conf file '{P}' contains search line consisting of more than 32 domains!"]),
    ("dots-do-not-count", _search_file(["."] * 40 + ["a"]), True, []),
    ("an-entry-of-254-characters", _search_file(["a" * 254]), True,
     [f'Resolv.conf file "{P}" contains a search path which length is more than allowed 253 chars!']),
    ("an-entry-of-253-plus-a-dot-is-fine", _search_file(["a" * 253 + "."]), True, []),
    ("a-line-of-2049-characters", _search_file(["a" * 200] * 10 + ["b" * 39]), True,
     [f"Resolv.conf file '{P}' contains search line which length is more than allowed 2048 chars!"]),
    ("a-line-of-2048-characters-is-fine", _search_file(["a" * 200] * 10 + ["b" * 38]), True, []),
    ("a-nameserver-without-address", "nameserver 1.1.1.1\n# x\nnameserver\n", True,
     [f"Resolv.conf file '{P}' line 3: nameserver line has no address "
      "(kubelet: nameserver list is empty; no pod on this node gets DNS)"]),
    ("every-finding-is-listed", "nameserver\n" + _search_file(["a" * 254] * 9), True,
     [f"Resolv.conf file '{P}' line 1: nameserver line has no address "
      "(kubelet: nameserver list is empty; no pod on this node gets DNS)",
      f'Resolv.conf file "{P}" contains a search path which length is more than allowed 253 chars!',
      f"Resolv.conf file '{P}' contains search line which length is more than allowed 2048 chars!"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "cluster_domain_set", "messages"),
    [row[1:] for row in CHECK_TABLE],
    ids=[row[0] for row in CHECK_TABLE],
)
def test_check_host_reports_what_the_kubelet_warns_about_at_start(
    text: str, cluster_domain_set: bool, messages: list[str]
) -> None:
    assert [p.message for p in check_host(text, P, cluster_domain_set)] == messages


def test_check_host_gives_the_line_of_a_bare_nameserver() -> None:
    assert [p.line for p in check_host("search a\n\nnameserver\n", P, True)] == [3]


def test_check_host_flags_a_file_over_ten_mebibytes() -> None:
    problems = check_host("#" * ((10 << 20) + 1), P, True)
    assert [p.message for p in problems] == [f"Resolv.conf file '{P}' is larger than 10 MiB!"]


# --- handle_http ---------------------------------------------------------------------------------------


def _body(pod: Any) -> bytes:
    return json.dumps(pod).encode()


def test_http_answers_the_rendered_file() -> None:
    reply = handle_http(_body(make_pod()), CLUSTER, HOST)
    assert reply == (200, "text/plain; charset=utf-8", CLUSTER_FILE, ())


def test_http_puts_warnings_in_warning_header_values() -> None:
    reply = handle_http(_body(make_pod()), NO_CLUSTER_DNS, HOST + _search_line(33))
    status, _, body, warnings = reply
    assert status == 200
    assert body.startswith("nameserver 10.1.1.10\n")
    assert warnings[0] == (
        '299 - "MissingClusterDNS: kubelet does not have ClusterDNS IP configured and cannot create Pod '
        'using \\"ClusterFirst\\" policy. Falling back to \\"Default\\" policy."'
    )
    assert warnings[1].startswith('299 - "SearchLimit: Search Line limits were exceeded')


def test_http_warning_headers_stay_ascii() -> None:
    host = "nameserver 1.1.1.1\nsearch éa.example " + "b" * 254 + "\n"
    (warning,) = handle_http(_body(make_pod("Default")), CLUSTER, host).warnings
    assert warning.isascii()
    assert warning.endswith('the applied search line is: \\xe9a.example"')


def test_lengths_are_counted_in_bytes_as_the_kubelet_does() -> None:
    entry = "é" + "a" * 252  # 253 characters, 254 bytes in UTF-8
    result = pod_dns(make_pod("Default"), CLUSTER, f"nameserver 1.1.1.1\nsearch {entry} ok\n")
    assert result.searches == ("ok",)
    assert kinds(result) == ["SearchLimit"]


def test_http_rejected_pod_is_422_with_every_field() -> None:
    pod = make_pod("Custom", dns_config={"searches": ["ok", "Bad"]})
    status, content_type, body, warnings = handle_http(_body(pod), CLUSTER, HOST)
    assert (status, content_type, warnings) == (422, "application/json", ())
    errors = json.loads(body)["errors"]
    assert [e["field"] for e in errors] == ["spec.dnsPolicy", "spec.dnsConfig.searches[1]"]
    assert errors[0]["message"] == f'Unsupported value: "Custom": {SUPPORTED}'


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (b"{not json", 400, "request body is not JSON"),
        (b"\xff\xfe{}", 400, "request body is not UTF-8"),
        (b"[]", 400, "request body is not a Pod: expected a Pod object, got a list"),
        (_body({"kind": "Service"}), 400, 'request body is not a Pod: expected kind Pod, got "Service"'),
        (b"[" * 100_000, 400, "request body is not JSON"),
        (b" " * ((3 << 20) + 1), 413, "larger than 3 MiB"),
    ],
    ids=["not-json", "not-utf8", "a-list", "a-service", "absurdly-nested", "too-large"],
)
def test_http_refuses_a_body_that_is_not_a_pod(body: bytes, status: int, fragment: str) -> None:
    reply = handle_http(body, CLUSTER, HOST)
    assert (reply.status, reply.content_type) == (status, "text/plain; charset=utf-8")
    assert fragment in reply.body


def test_http_broken_host_file_is_a_server_error() -> None:
    reply = handle_http(_body(make_pod()), CLUSTER, "nameserver\n")
    assert reply.status == 500
    assert "nameserver list is empty" in reply.body


def test_http_without_host_file_uses_localhost() -> None:
    assert handle_http(_body(make_pod("Default")), CLUSTER, None).body == "nameserver 127.0.0.1\nsearch .\n"


# --- properties ----------------------------------------------------------------------------------------

_label = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=70)
_host_entry = st.text(alphabet=string.ascii_letters + string.digits + "-._", min_size=1, max_size=300).filter(
    lambda s: s.strip(".") != ""
)
_ipv4 = st.ip_addresses(v=4).map(str)
_option_name = st.sampled_from(["ndots", "timeout", "attempts", "rotate", "edns0", "single-request"])


@st.composite
def _cases(draw: st.DrawFn) -> tuple[dict[str, Any], KubeletDNS, str]:
    host = "".join(f"nameserver {ip}\n" for ip in draw(st.lists(_ipv4, max_size=5)))
    host += "search " + " ".join(draw(st.lists(_host_entry, max_size=40))) + "\n"
    host_options = draw(st.lists(st.tuples(_option_name, st.integers(0, 9)), max_size=4))
    host += "options " + " ".join(f"{n}:{v}" for n, v in host_options) + "\n"
    searches = draw(st.lists(st.lists(_label, min_size=1, max_size=4).map(".".join), max_size=32))
    while len(" ".join(searches)) > 2048:
        searches.pop()
    config = {
        "nameservers": draw(st.lists(_ipv4, min_size=1, max_size=3)),
        "searches": searches,
        "options": [
            {"name": n} if v is None else {"name": n, "value": str(v)}
            for n, v in draw(st.lists(st.tuples(_option_name, st.none() | st.integers(0, 9)), max_size=5))
        ],
    }
    policy = draw(st.sampled_from(["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"]))
    pod = make_pod(
        policy, host_network=draw(st.booleans()), dns_config=draw(st.sampled_from([ABSENT, config]))
    )
    if policy == "None":
        pod["spec"]["dnsConfig"] = config
    cluster_dns = tuple(draw(st.lists(_ipv4, max_size=2)))
    return pod, KubeletDNS(cluster_dns, draw(st.sampled_from(["", "cluster.local"]))), host


@settings(max_examples=300, deadline=None)
@given(_cases())
def test_rendered_files_always_fit_the_limits_and_parse_back_to_the_same_lists(
    case: tuple[dict[str, Any], KubeletDNS, str],
) -> None:
    pod, kubelet, host = case
    result = pod_dns(pod, kubelet, host)
    text = result.render()
    assert len(result.nameservers) <= 3
    assert len(result.searches) <= 32
    assert all(len(s) <= 253 for s in result.searches)
    search_lines = [line for line in text.splitlines() if line.startswith("search ")]
    assert all(len(line) - len("search ") <= 2048 for line in search_lines)
    parsed = parse_host_resolv_conf(text)
    assert parsed.nameservers == result.nameservers
    assert parsed.searches == tuple(s.removesuffix(".") for s in result.searches if s != ".")
    assert parsed.options == result.options
    assert {str(w.kind) for w in result.warnings} <= {"MissingClusterDNS", "NameserverLimit", "SearchLimit"}
    assert len({w.kind for w in result.warnings}) == len(result.warnings)


# --- the module stays pure -----------------------------------------------------------------------------


def test_the_module_imports_only_the_standard_library_and_nodedns_errors() -> None:
    source = Path(__file__).parents[3] / "nodedns" / "podconf" / "resolvconf.py"
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    outside = {m for m in imported if m.split(".")[0] not in sys.stdlib_module_names} - {"nodedns.errors"}
    assert outside == set()
    assert textwrap.dedent(ast.get_docstring(ast.parse(source.read_text())) or "").startswith(
        "Form the /etc/"
    )
