"""A clusterset written from the Multi-Cluster Services DNS specification's examples, and its answers.

Shared by the pure tests (`test_clusterset.py`, over `ClusterRecords`) and the socket tests (the same
file, over a running agent), so both layers are held to one table. The objects are raw dicts shaped
like `kubectl get -o yaml` output: ServiceImports (`multicluster.x-k8s.io/v1alpha1`) and the
EndpointSlices an MCS controller imports for them (labels `multicluster.kubernetes.io/service-name`
and `multicluster.kubernetes.io/source-cluster`), beside a few cluster-local objects of the same
names that must not leak into the clusterset zone (or the other way round).

Every case names what it checks: `sN` is a section of the specification (KEP-1645
`specification.md`, schema 1.0.0), `kep` the KEP's DNS and EndpointSlice sections, `coredns` a
behaviour of CoreDNS's kubernetes plugin with `multicluster` where the specification leaves a choice.
Readings where the documents leave a choice (the tests hold the implementation to these):
- SRV priority 0 and weight floor(100 / records), as in the cluster zone (s2.3.2/s2.4.2 do not
  prescribe them; the examples' "10 100" are examples).
- Headless SRV and per-endpoint names use the slice's ports and every ready endpoint's name
  (hostname, else the dashed IP: the "system-assigned identifier" of s2.1), as CoreDNS.
- `<svc>.<ns>.svc.<zone> SRV` (no port labels) lists every port, as in the cluster zone and CoreDNS.
- ClusterSetIP imports have no `<hostname>.<clusterid>` names (the KEP exempts only headless pods
  from "no cluster-specific targeting"; CoreDNS answers them: see docs/multicluster.md).
- PTR (s2.3.3/s2.4.3) only where the cluster zone has none for the address (its Limitations: one
  PTR per address); a ClusterSetIP wins over an imported endpoint at the same address (the spec's
  2001:db8::1 is both), as a ClusterIP wins over endpoints in the cluster zone; an endpoint's PTR
  names it as its A record does (hostname, else the dashed IP: s2.1's "system-assigned identifier").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tests.support import cluster_fixture as cf

ZONE = "clusterset.local"
CLUSTER_ZONE = cf.ZONE
TTL = 5
MCS_API = "multicluster.x-k8s.io/v1alpha1"
AUTHORITATIVE_REVERSE = ("10.0.0.0/8", "2001:db8::/32")

Obj = dict[str, Any]


# ----------------------------------------------------------------------------------------------
# Raw object builders


def service_import(ns: str, name: str, *, headless: bool = False, ips: Sequence[str] = (),
                   ports: Sequence[Obj] = (), type_: str | None = None) -> Obj:
    spec: Obj = {"type": type_ if type_ is not None else ("Headless" if headless else "ClusterSetIP"),
                 "ports": [dict(p) for p in ports], "sessionAffinity": "None"}
    if ips:
        spec["ips"] = list(ips)
        spec["ipFamilies"] = ["IPv6" if ":" in ip else "IPv4" for ip in ips]
    return {"apiVersion": MCS_API, "kind": "ServiceImport", "metadata": {"name": name, "namespace": ns},
            "spec": spec, "status": {"clusters": [{"cluster": "cluster-a"}, {"cluster": "cluster-b"}]}}


def imported_slice(ns: str, name: str, service: str, cluster: str | None, address_type: str,
                   endpoints: Sequence[Obj], ports: Sequence[Obj] | None = None) -> Obj:
    """An EndpointSlice an MCS controller imported for `service` from `cluster` (None: no cluster label)."""
    obj = cf.endpoint_slice(ns, name, None, address_type, endpoints, ports)
    labels = {"multicluster.kubernetes.io/service-name": service,
              "endpointslice.kubernetes.io/managed-by": "mcs-controller.example"}
    if cluster is not None:
        labels["multicluster.kubernetes.io/source-cluster"] = cluster
    obj["metadata"]["labels"] = labels
    return obj


def ep(ip: str, hostname: str | None = None, ready: bool | None = True, pod: str | None = None) -> Obj:
    return cf.endpoint(ip, hostname=hostname, ready=ready, pod=pod)


HTTPS = cf.port(443, "https")


def clusterset_objects() -> list[Obj]:
    return [
        cf.namespace("test"),
        cf.namespace("quiet"),  # exists, imports nothing
        # --- ClusterSetIP (s2.3): dual-stack clusterset IPs, a UDP port, an unnamed port
        service_import("test", "myservice", ips=["10.42.42.42", "2001:db8::1"],
                       ports=[HTTPS, cf.port(53, "dns", "UDP"), cf.port(8080)]),
        # its imported slices exist, yet a ClusterSetIP import names no endpoint and no cluster (s2.3.4)
        imported_slice("test", "myservice-a", "myservice", "cluster-a", "IPv4",
                       [ep("10.1.0.1", hostname="web-0")], [HTTPS]),
        imported_slice("test", "myservice-b", "myservice", "cluster-b", "IPv4", [ep("10.2.0.1")], [HTTPS]),
        service_import("test", "v4only", ips=["10.42.0.2"], ports=[cf.port(80, "http")]),
        service_import("test", "noips", ports=[cf.port(80, "http")]),
        # --- Headless (s2.4): two source clusters, cluster-a dual-stack; the spec's my-pet-N
        service_import("test", "headless", headless=True, ports=[HTTPS]),
        imported_slice("test", "headless-a-v4", "headless", "cluster-a", "IPv4",
                       [ep("10.3.0.1", "my-pet-1"), ep("10.3.0.2", "my-pet-2"), ep("10.3.0.3", "my-pet-3"),
                        ep("10.3.0.4", "my-pet-4", ready=False)], [HTTPS]),
        imported_slice("test", "headless-a-v6", "headless", "cluster-a", "IPv6",
                       [ep("2001:db8::1", "my-pet-1"), ep("2001:db8::2", "my-pet-2"),
                        ep("2001:db8::3", "my-pet-3")], [HTTPS]),
        # ready left out: absent means ready
        imported_slice("test", "headless-b-v4", "headless", "cluster-b", "IPv4",
                       [ep("10.4.0.1", "my-pet-1", ready=None), ep("10.4.0.2", "my-pet-2", ready=None),
                        ep("10.4.0.3", "my-pet-3", ready=None)], [HTTPS]),
        service_import("test", "notready", headless=True, ports=[HTTPS]),
        imported_slice("test", "notready-a", "notready", "cluster-a", "IPv4",
                       [ep("10.5.0.1", "db-0", ready=False)], [HTTPS]),
        service_import("test", "noslices", headless=True, ports=[HTTPS]),
        service_import("test", "hostless", headless=True, ports=[cf.port(5432, "postgres")]),
        imported_slice("test", "hostless-a", "hostless", "cluster-a", "IPv4",
                       [ep("10.6.0.1", pod="hostless-0")], [cf.port(5432, "postgres")]),
        imported_slice("test", "hostless-a6", "hostless", "cluster-a", "IPv6",
                       [ep("2001:db8:6::", pod="hostless-1")], [cf.port(5432, "postgres")]),
        # no source-cluster label: its addresses count, no endpoint can be named
        service_import("test", "nocluster", headless=True, ports=[HTTPS]),
        imported_slice("test", "nocluster-x", "nocluster", None, "IPv4", [ep("10.7.0.1", "lost-0")], [HTTPS]),
        # a cluster id of two labels (KEP: "<cluster name>.<registry label>"), written in capitals
        service_import("test", "registered", headless=True, ports=[HTTPS]),
        imported_slice("test", "registered-1", "registered", "East.Registry-1", "IPv4",
                       [ep("10.8.0.1", "db-0")], [HTTPS]),
        # a portless headless import
        service_import("test", "portless", headless=True),
        imported_slice("test", "portless-a", "portless", "cluster-a", "IPv4", [ep("10.9.0.1", "p-0")]),
        # an import in a namespace that does not exist here: not imported (KEP-1645)
        service_import("gone", "orphan", ips=["10.42.9.9"], ports=[HTTPS]),
        # --- one port number on UDP and TCP (a DNS server): one SRV record per port number and target
        service_import("test", "resolver", ips=["10.42.53.53"],
                       ports=[cf.port(53, "dns", "UDP"), cf.port(53, "dns-tcp", "TCP")]),
        service_import("test", "resolvers", headless=True,
                       ports=[cf.port(53, "dns", "UDP"), cf.port(53, "dns-tcp", "TCP")]),
        imported_slice("test", "resolvers-a", "resolvers", "cluster-a", "IPv4",
                       [ep("10.53.0.1", "ns-0"), ep("10.53.0.2", "ns-1")],
                       [cf.port(53, "dns", "UDP"), cf.port(53, "dns-tcp", "TCP")]),
        # a ClusterSetIP import backed by a "dummy" cluster-local Service of the same IP (s2.3.3 Limitations)
        service_import("test", "mirrored", ips=["10.96.0.11"], ports=[HTTPS]),
        cf.service("test", "mirrored", cluster_ips=["10.96.0.11"], ports=[HTTPS]),
        # an imported endpoint at the address of a cluster-local endpoint (s2.4.3 Limitations)
        service_import("test", "shadowed", headless=True, ports=[HTTPS]),
        imported_slice("test", "shadowed-b", "shadowed", "cluster-b", "IPv4", [ep("10.244.0.7", "db-0")], [HTTPS]),
        # --- cluster-local objects of the same names: each zone keeps its own
        cf.service("test", "myservice", cluster_ips=["10.96.0.10"], ports=[HTTPS]),
        cf.headless("test", "headless", ports=[HTTPS]),
        cf.endpoint_slice("test", "headless-local", "headless", "IPv4", [ep("10.244.0.7", "my-pet-1")], [HTTPS]),
    ]


# ----------------------------------------------------------------------------------------------
# The table of answers

NOERROR, NXDOMAIN = "NOERROR", "NXDOMAIN"


Case = cf.Case
TABLE = cf.Table(ZONE, in_full=(CLUSTER_ZONE,))  # names relative to the clusterset zone, cluster names in full
fqdn, a, aaaa, srv, ptr = TABLE.fqdn, TABLE.a, TABLE.aaaa, TABLE.srv, TABLE.ptr
case, nodata, nxdomain = TABLE.case, TABLE.nodata, TABLE.nxdomain

V6_ONE = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa"  # 2001:db8::1


MY = "myservice.test.svc"
MY_ADDRS = (a("10.42.42.42", MY), aaaa("2001:db8::1", MY))
HL = "headless.test.svc"
PETS = [f"my-pet-{n}.cluster-{c}.{HL}" for c in "ab" for n in (1, 2, 3)]
PET_ADDRS = (
    a("10.3.0.1", PETS[0]), aaaa("2001:db8::1", PETS[0]), a("10.3.0.2", PETS[1]), aaaa("2001:db8::2", PETS[1]),
    a("10.3.0.3", PETS[2]), aaaa("2001:db8::3", PETS[2]),
    a("10.4.0.1", PETS[3]), a("10.4.0.2", PETS[4]), a("10.4.0.3", PETS[5]),
)

CASES: tuple[Case, ...] = (
    # --- schema version (s2.2)
    case("s2.2-dns-version-txt-is-1.0.0", "dns-version", "TXT", NOERROR, '@ TXT "1.0.0"', additional=()),
    nodata("s2.2-dns-version-a-is-nodata", "dns-version"),
    # --- apex and intermediate names (as the cluster zone)
    case("apex-ns", ZONE, "NS", NOERROR, f"@ NS ns.dns.{ZONE}."),
    nodata("apex-a-is-nodata", ZONE),
    nodata("svc-is-nodata", "svc"),
    nodata("namespace-is-nodata", "test.svc"),
    nodata("namespace-without-imports-is-nodata", "quiet.svc"),
    nxdomain("unknown-namespace-is-nxdomain", "nowhere.svc"),
    nxdomain("kep-import-in-a-namespace-absent-here-is-nxdomain", "orphan.gone.svc"),
    nxdomain("unknown-import-is-nxdomain", "nope.test.svc"),
    nxdomain("unknown-import-srv-is-nxdomain", "nope.test.svc", "SRV"),
    nxdomain("no-pod-records-in-the-clusterset-zone", "10-1-0-1.test.pod"),
    nxdomain("pod-subtree-is-nxdomain", "pod"),
    nxdomain("last-label-not-svc-is-nxdomain", "myservice.test.foo"),
    nodata("soa-below-apex-is-nodata", MY, "SOA"),
    # --- ClusterSetIP A/AAAA (s2.3.1): dual-stack clusterset IPs
    case("s2.3.1-clustersetip-a", MY, "A", NOERROR, a("10.42.42.42"), additional=()),
    case("s2.3.1-clustersetip-aaaa-dual-stack", MY, "AAAA", NOERROR, aaaa("2001:db8::1"), additional=()),
    nodata("s2.3.1-ipv4-only-import-aaaa-is-nodata", "v4only.test.svc", "AAAA"),
    case("s2.3.1-ipv4-only-import-a", "v4only.test.svc", "A", NOERROR, a("10.42.0.2")),
    nodata("clustersetip-without-ips-is-nodata", "noips.test.svc"),
    nodata("clustersetip-txt-is-nodata", MY, "TXT"),
    # --- ClusterSetIP SRV (s2.3.2)
    case("s2.3.2-srv-named-port", f"_https._tcp.{MY}", "SRV", NOERROR, srv(100, 443, MY), additional=MY_ADDRS),
    case("s2.3.2-srv-udp-port", f"_dns._udp.{MY}", "SRV", NOERROR, srv(100, 53, MY), additional=MY_ADDRS),
    nxdomain("s2.3.2-srv-other-protocol-is-nxdomain", f"_dns._tcp.{MY}", "SRV"),
    nxdomain("s2.3.2-srv-unknown-port-is-nxdomain", f"_http._tcp.{MY}", "SRV"),
    case("coredns-srv-underscore-on-port-only", f"_https.tcp.{MY}", "SRV", NOERROR, srv(100, 443, MY)),
    case("coredns-srv-underscore-on-proto-only", f"https._tcp.{MY}", "SRV", NOERROR, srv(100, 443, MY)),
    nxdomain("coredns-two-labels-without-underscores-are-hostname-and-cluster", f"https.tcp.{MY}", "SRV"),
    case("bare-srv-lists-every-port", MY, "SRV", NOERROR, srv(33, 443, MY), srv(33, 53, MY), srv(33, 8080, MY),
         additional=MY_ADDRS),
    case("address-query-on-port-name-gives-the-clusterset-ip", f"_https._tcp.{MY}", "A", NOERROR,
         a("10.42.42.42")),
    # --- one port number on UDP and TCP: one SRV record for it, each protocol's named SRV its own
    case("srv-port-on-udp-and-tcp-is-one-record", "resolver.test.svc", "SRV", NOERROR,
         srv(100, 53, "resolver.test.svc"), additional=(a("10.42.53.53", "resolver.test.svc"),)),
    case("srv-port-on-udp-and-tcp-udp-name", "_dns._udp.resolver.test.svc", "SRV", NOERROR,
         srv(100, 53, "resolver.test.svc")),
    case("srv-port-on-udp-and-tcp-tcp-name", "_dns-tcp._tcp.resolver.test.svc", "SRV", NOERROR,
         srv(100, 53, "resolver.test.svc")),
    nxdomain("srv-port-on-udp-and-tcp-udp-name-over-tcp", "_dns._tcp.resolver.test.svc", "SRV"),
    case("headless-srv-port-on-udp-and-tcp-one-record-per-endpoint", "resolvers.test.svc", "SRV", NOERROR,
         srv(50, 53, "ns-0.cluster-a.resolvers.test.svc"), srv(50, 53, "ns-1.cluster-a.resolvers.test.svc"),
         additional=(a("10.53.0.1", "ns-0.cluster-a.resolvers.test.svc"),
                     a("10.53.0.2", "ns-1.cluster-a.resolvers.test.svc"))),
    case("headless-srv-port-on-udp-and-tcp-tcp-name", "_dns-tcp._tcp.resolvers.test.svc", "SRV", NOERROR,
         srv(50, 53, "ns-0.cluster-a.resolvers.test.svc"), srv(50, 53, "ns-1.cluster-a.resolvers.test.svc")),
    # --- ClusterSetIP: what MUST NOT exist (s2.3.4), no per-endpoint names (kep)
    nxdomain("s2.3.4-clusterid-name-of-clustersetip-must-not-exist", f"cluster-a.{MY}"),
    nxdomain("s2.3.4-clusterid-name-of-clustersetip-must-not-exist-aaaa", f"cluster-b.{MY}", "AAAA"),
    nxdomain("kep-clustersetip-endpoint-is-not-addressable", f"web-0.cluster-a.{MY}"),
    nxdomain("kep-clustersetip-dashed-endpoint-is-not-addressable", f"10-2-0-1.cluster-b.{MY}"),
    # --- Headless A/AAAA (s2.4.1): ready endpoints of every imported slice, from every cluster
    case("s2.4.1-headless-a-union-of-clusters", HL, "A", NOERROR,
         a("10.3.0.1"), a("10.3.0.2"), a("10.3.0.3"), a("10.4.0.1"), a("10.4.0.2"), a("10.4.0.3"), additional=()),
    case("s2.4.1-headless-aaaa-dual-stack", HL, "AAAA", NOERROR,
         aaaa("2001:db8::1"), aaaa("2001:db8::2"), aaaa("2001:db8::3")),
    case("s2.4.1-hostname-clusterid-a", f"my-pet-1.cluster-a.{HL}", "A", NOERROR, a("10.3.0.1")),
    case("s2.4.1-hostname-clusterid-aaaa", f"my-pet-1.cluster-a.{HL}", "AAAA", NOERROR, aaaa("2001:db8::1")),
    case("s2.4.1-same-hostname-other-cluster", f"my-pet-1.cluster-b.{HL}", "A", NOERROR, a("10.4.0.1")),
    nodata("s2.4.1-hostname-without-that-family-is-nodata", f"my-pet-1.cluster-b.{HL}", "AAAA"),
    nxdomain("s2.4.1-not-ready-endpoint-has-no-name", f"my-pet-4.cluster-a.{HL}"),
    nxdomain("hostname-of-unknown-cluster-is-nxdomain", f"my-pet-1.cluster-c.{HL}"),
    nxdomain("hostname-without-clusterid-is-nxdomain", f"my-pet-1.{HL}"),
    nxdomain("s2.4.1-headless-without-ready-endpoints-a", "notready.test.svc"),
    nxdomain("s2.4.1-headless-without-ready-endpoints-aaaa", "notready.test.svc", "AAAA"),
    nxdomain("s2.4.1-headless-without-ready-endpoints-srv", "notready.test.svc", "SRV"),
    nxdomain("s2.4.1-headless-without-slices", "noslices.test.svc"),
    nodata("headless-txt-is-nodata", HL, "TXT"),
    case("s2.1-hostless-endpoint-named-by-dashed-ip", f"10-6-0-1.cluster-a.{'hostless.test.svc'}", "A", NOERROR,
         a("10.6.0.1")),
    case("s2.1-hostless-ipv6-endpoint-dashed-with-trailing-zero", "2001-db8-6--0.cluster-a.hostless.test.svc",
         "AAAA", NOERROR, aaaa("2001:db8:6::")),
    nxdomain("pod-name-is-not-an-endpoint-name-by-default", "hostless-0.cluster-a.hostless.test.svc"),
    case("kep-clusterid-of-two-labels", "db-0.east.registry-1.registered.test.svc", "A", NOERROR, a("10.8.0.1")),
    nxdomain("kep-first-label-of-a-two-label-clusterid-is-not-enough", "db-0.east.registered.test.svc"),
    case("slice-without-source-cluster-counts-for-the-service", "nocluster.test.svc", "A", NOERROR,
         a("10.7.0.1")),
    nodata("slice-without-source-cluster-has-no-srv-target", "nocluster.test.svc", "SRV"),
    nxdomain("slice-without-source-cluster-names-no-endpoint", "lost-0.nocluster.test.svc"),
    case("portless-headless-a", "portless.test.svc", "A", NOERROR, a("10.9.0.1")),
    case("portless-headless-endpoint", "p-0.cluster-a.portless.test.svc", "A", NOERROR, a("10.9.0.1")),
    nodata("portless-headless-bare-srv-is-nodata", "portless.test.svc", "SRV"),
    # --- Headless: what MUST NOT exist (s2.4.4)
    nxdomain("s2.4.4-clusterid-name-of-headless-must-not-exist", f"cluster-a.{HL}"),
    nxdomain("s2.4.4-clusterid-name-of-headless-must-not-exist-aaaa", f"cluster-a.{HL}", "AAAA"),
    nxdomain("s2.4.4-clusterid-name-of-headless-must-not-exist-srv", f"cluster-b.{HL}", "SRV"),
    # --- Headless SRV (s2.4.2): N ready endpoints x M named ports, targets per cluster
    case("s2.4.2-headless-srv-union-of-clusters", f"_https._tcp.{HL}", "SRV", NOERROR,
         *(srv(16, 443, t) for t in PETS), additional=PET_ADDRS),
    case("headless-bare-srv", HL, "SRV", NOERROR, *(srv(16, 443, t) for t in PETS)),
    nxdomain("s2.4.2-headless-srv-other-protocol", f"_https._udp.{HL}", "SRV"),
    case("headless-a-on-port-name-gives-addresses", f"_https._tcp.{HL}", "A", NOERROR,
         a("10.3.0.1"), a("10.3.0.2"), a("10.3.0.3"), a("10.4.0.1"), a("10.4.0.2"), a("10.4.0.3")),
    case("s2.4.2-hostless-srv-targets-dashed-names", "_postgres._tcp.hostless.test.svc", "SRV", NOERROR,
         srv(50, 5432, "10-6-0-1.cluster-a.hostless.test.svc"),
         srv(50, 5432, "2001-db8-6--0.cluster-a.hostless.test.svc")),
    # --- PTR (s2.3.3, s2.4.3): each clusterset IP and ready named endpoint of a headless import
    case("s2.3.3-ptr-of-a-clusterset-ip", "42.42.42.10.in-addr.arpa", "PTR", NOERROR, ptr(MY)),
    case("s2.3.3-ptr-of-an-ipv6-clusterset-ip-nibbles", V6_ONE, "PTR", NOERROR, ptr(MY)),
    case("s2.3.3-ptr-of-an-ipv4-only-import", "2.0.42.10.in-addr.arpa", "PTR", NOERROR, ptr("v4only.test.svc")),
    nodata("s2.3.3-ptr-name-of-a-clusterset-ip-has-no-a", "42.42.42.10.in-addr.arpa", soa_zone="10.in-addr.arpa"),
    case("s2.4.3-ptr-of-a-headless-endpoint", "1.0.3.10.in-addr.arpa", "PTR", NOERROR, ptr(PETS[0])),
    case("s2.4.3-ptr-of-the-same-hostname-in-another-cluster", "1.0.4.10.in-addr.arpa", "PTR", NOERROR,
         ptr(PETS[3])),
    case("s2.4.3-ptr-of-an-ipv6-headless-endpoint-nibbles",
         "2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa", "PTR", NOERROR, ptr(PETS[1])),
    case("s2.4.3-ptr-of-a-hostless-endpoint-names-its-dashed-ip", "1.0.6.10.in-addr.arpa", "PTR", NOERROR,
         ptr("10-6-0-1.cluster-a.hostless.test.svc")),
    case("s2.4.3-ptr-of-a-two-label-clusterid", "1.0.8.10.in-addr.arpa", "PTR", NOERROR,
         ptr("db-0.east.registry-1.registered.test.svc")),
    nxdomain("s2.4.3-no-ptr-for-a-not-ready-endpoint", "4.0.3.10.in-addr.arpa", "PTR", soa_zone="10.in-addr.arpa"),
    nxdomain("kep-no-ptr-for-an-endpoint-of-a-clustersetip-import", "1.0.1.10.in-addr.arpa", "PTR",
             soa_zone="10.in-addr.arpa"),
    nxdomain("no-ptr-for-an-endpoint-without-source-cluster", "1.0.7.10.in-addr.arpa", "PTR",
             soa_zone="10.in-addr.arpa"),
    nxdomain("kep-no-ptr-for-an-import-in-a-namespace-absent-here", "9.9.42.10.in-addr.arpa", "PTR",
             soa_zone="10.in-addr.arpa"),
    case("s2.3.3-limitations-the-cluster-local-ptr-of-a-clusterset-ip-wins", "11.0.96.10.in-addr.arpa", "PTR",
         NOERROR, ptr(f"mirrored.test.svc.{CLUSTER_ZONE}")),
    case("s2.4.1-an-endpoint-shadowed-in-reverse-keeps-its-name", "db-0.cluster-b.shadowed.test.svc", "A", NOERROR,
         a("10.244.0.7")),
    case("s2.4.3-limitations-the-cluster-local-ptr-of-an-endpoint-wins", "7.0.244.10.in-addr.arpa", "PTR",
         NOERROR, ptr(f"my-pet-1.headless.test.svc.{CLUSTER_ZONE}")),
    # --- the cluster zone keeps its own objects (kep: "no change to existing behavior of cluster.local")
    case("kep-cluster-zone-keeps-the-local-service", f"myservice.test.svc.{CLUSTER_ZONE}", "A", NOERROR,
         a("10.96.0.10"), soa_zone=CLUSTER_ZONE),
    case("kep-cluster-zone-headless-has-only-local-endpoints", f"headless.test.svc.{CLUSTER_ZONE}", "A", NOERROR,
         a("10.244.0.7"), soa_zone=CLUSTER_ZONE),
    nxdomain("kep-imports-are-no-cluster-zone-services", f"v4only.test.svc.{CLUSTER_ZONE}", soa_zone=CLUSTER_ZONE),
)

# With --endpoint-pod-names, a hostname-less endpoint is named after its pod, in both zones (s2.1 b).
POD_NAME_CASES: tuple[Case, ...] = (
    case("pod-name-endpoint", "hostless-0.cluster-a.hostless.test.svc", "A", NOERROR, a("10.6.0.1")),
    nxdomain("dashed-name-gone-with-pod-names", "10-6-0-1.cluster-a.hostless.test.svc"),
    case("pod-name-srv", "_postgres._tcp.hostless.test.svc", "SRV", NOERROR,
         srv(50, 5432, "hostless-0.cluster-a.hostless.test.svc"),
         srv(50, 5432, "hostless-1.cluster-a.hostless.test.svc")),
)

# Without the ServiceImport CRD (or with the flag off): the zone exists, no import does.
NO_IMPORT_CASES: tuple[Case, ...] = (
    case("s2.2-dns-version-without-imports", "dns-version", "TXT", NOERROR, '@ TXT "1.0.0"'),
    nodata("namespace-is-nodata-without-imports", "test.svc"),
    nxdomain("clustersetip-import-absent", MY),
    nxdomain("headless-import-absent", HL),
    nxdomain("headless-endpoint-absent", f"my-pet-1.cluster-a.{HL}"),
    case("cluster-zone-unaffected", f"myservice.test.svc.{CLUSTER_ZONE}", "A", NOERROR, a("10.96.0.10"),
         soa_zone=CLUSTER_ZONE),
)


case_ids = cf.case_ids


def kinds(objs: Iterable[Obj], *, multicluster: bool = True) -> list[tuple[str, Obj]]:
    """(kind, object) pairs for `Index.load`, as the manifest loader yields them."""
    from nodedns.cluster import manifests

    return list(manifests.objects(list(objs), multicluster=multicluster))

