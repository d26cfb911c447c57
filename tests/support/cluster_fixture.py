"""A small cluster written from the spec's cases, and the table of answers it must give.

Shared by the pure tests (`test_records.py`, over `ClusterRecords`) and the socket tests
(`test_cluster_zone.py`, over a running agent), so both layers are held to one table.

The objects are raw dicts shaped like `kubectl get -o yaml` output. Every case names the
behaviour it checks: `sN` is a section of the spec (schema 1.1.0), `bN` a numbered behaviour in
docs/cluster-dns-behaviours.md.

Readings of the reference where it leaves a choice (the tests hold the implementation to these):
- SRV weight is floor(100 / number of SRV records in the answer) after de-duplication; the spec
  does not prescribe weights (s2.3.2) and the reference gives floor(100/n) (b12).
- TXT on the intermediate names (`svc.<zone>`, `<ns>.svc.<zone>`, ...) is NODATA like every other
  type there: the issue says those names answer NODATA, and an NXDOMAIN (CoreDNS's quirk, b3) would
  deny the whole subtree to an RFC 8020 resolver.
- `dns-version` with another type is NODATA (b21 names it the RFC-correct answer).
- SOA below the apex is NODATA even for names that do not exist (b18, stated without a caveat).
- An ExternalName whose in-zone target has no record of the asked type answers NOERROR without the
  CNAME (b16: "CNAME dropped entirely ..., rcode NOERROR regardless"); `x CNAME x` is skipped.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

ZONE = "cluster.local"
TTL = 5
AUTHORITATIVE_REVERSE = ("10.96.0.0/12", "10.244.0.0/16", "fd00:10:96::/64", "fd00:10:244::/48")

Obj = dict[str, Any]

# ----------------------------------------------------------------------------------------------
# Raw object builders


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def port(number: int | None, name: str | None = None, protocol: str = "TCP", target: int | None = None) -> Obj:
    p: Obj = {"protocol": protocol}
    if number is not None:
        p["port"] = number
    if name is not None:
        p["name"] = name
    if target is not None:
        p["targetPort"] = target
    return p


def service(
    ns: str,
    name: str,
    *,
    cluster_ips: Sequence[str] | None = None,
    cluster_ip: str | None = None,
    ports: Sequence[Obj] = (),
    external_name: str | None = None,
    publish_not_ready: bool = False,
) -> Obj:
    spec: Obj = {"type": "ClusterIP"}
    if external_name is not None:
        spec = {"type": "ExternalName", "externalName": external_name}
    if cluster_ips is not None:
        spec["clusterIPs"] = list(cluster_ips)
        spec["clusterIP"] = cluster_ips[0]
    if cluster_ip is not None:
        spec["clusterIP"] = cluster_ip
    if ports:
        spec["ports"] = [dict(p) for p in ports]
    if publish_not_ready:
        spec["publishNotReadyAddresses"] = True
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def headless(ns: str, name: str, **kw: Any) -> Obj:
    return service(ns, name, cluster_ips=["None"], **kw)


def endpoint(
    *addresses: str,
    hostname: str | None = None,
    ready: bool | None = True,
    pod: str | None = None,
    target_kind: str = "Pod",
) -> Obj:
    """One EndpointSlice endpoint; ready=None leaves `conditions` out entirely (absent = ready)."""
    ep: Obj = {"addresses": list(addresses)}
    if ready is not None:
        ep["conditions"] = {"ready": ready, "serving": ready, "terminating": False}
    if hostname is not None:
        ep["hostname"] = hostname
    if pod is not None:
        ep["targetRef"] = {"kind": target_kind, "name": pod, "namespace": "x"}
    return ep


def endpoint_slice(
    ns: str,
    name: str,
    service_name: str | None,
    address_type: str,
    endpoints: Sequence[Obj],
    ports: Sequence[Obj] | None = None,
) -> Obj:
    meta: Obj = {"name": name, "namespace": ns}
    if service_name is not None:
        meta["labels"] = {"kubernetes.io/service-name": service_name}
    obj: Obj = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": meta,
        "addressType": address_type,
        "endpoints": [dict(e) for e in endpoints],
    }
    if ports is not None:
        obj["ports"] = [dict(p) for p in ports]
    return obj


def pod(
    ns: str,
    name: str,
    ip: str,
    *,
    ips: Sequence[str] = (),
    deleting: bool = False,
    hostname: str | None = None,
    subdomain: str | None = None,
) -> Obj:
    meta: Obj = {"name": name, "namespace": ns}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-02T10:00:00Z"
    spec: Obj = {"nodeName": "node-a", "containers": [{"name": "c", "image": "busybox"}]}
    if hostname is not None:
        spec["hostname"] = hostname
    if subdomain is not None:
        spec["subdomain"] = subdomain
    status: Obj = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": i} for i in (ips or [ip])]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def as_list(objs: Iterable[Obj]) -> Obj:
    """The objects as one `kind: List`, the shape `kubectl get ... -o yaml` writes."""
    return {"apiVersion": "v1", "kind": "List", "items": list(objs)}


def kinds(objs: Iterable[Obj]) -> list[tuple[str, Obj]]:
    """(kind, object) pairs for `Index.load`."""
    return [(o["kind"], o) for o in objs]


def reverse_v6(ip: str) -> str:
    """The ip6.arpa name of an IPv6 address: 32 nibbles in reverse order (spec s2.3.3)."""
    nibbles = ipaddress.IPv6Address(ip).exploded.replace(":", "")
    return ".".join(reversed(nibbles)) + ".ip6.arpa"


# ----------------------------------------------------------------------------------------------
# The cluster

_WEB_PORTS = [port(80, "http", target=8080), port(443, "https", target=8443), port(53, "dns", "UDP", 5353)]
_API_PORTS = [port(9000, "grpc"), port(9100, "metrics")]


def cluster_objects() -> list[Obj]:
    return [
        namespace("default"),
        namespace("prod"),
        namespace("quiet"),  # exists, holds no services (b3)
        namespace("kube-system"),
        # --- ClusterIP services (s2.3, b6)
        service("default", "web", cluster_ips=["10.96.0.10", "fd00:10:96::a"], ports=_WEB_PORTS),
        endpoint_slice(
            "default", "web-4x7k2", "web", "IPv4",
            [
                endpoint("10.244.1.10", hostname="canary"),
                endpoint("10.244.1.11", pod="web-5d8-aaaaa"),
                endpoint("10.244.1.12", ready=False),
            ],
            [port(8080, "http"), port(8443, "https"), port(5353, "dns", "UDP")],
        ),
        service("default", "plain", cluster_ips=["10.96.0.20"], ports=[port(8080)]),  # one unnamed port
        service("default", "lonely", cluster_ips=["10.96.0.30"], ports=[port(80, "http")]),  # no endpoints
        service("default", "legacy", cluster_ip="10.96.0.40", ports=[port(80, "http")]),  # no clusterIPs
        # IPv6 written long-hand and upper case: stored canonically (b24)
        service("default", "v6only", cluster_ips=["FD00:10:96:0:0:0:0:40"], ports=[port(80, "http")]),
        service(
            "kube-system", "kube-dns", cluster_ips=["10.96.0.53"],
            ports=[port(53, "dns", "UDP"), port(53, "dns-tcp", "TCP"), port(9153, "metrics")],
        ),
        # a Service in a namespace that has no Namespace object (b3)
        service("ghost", "phantom", cluster_ips=["10.96.0.99"], ports=[port(80, "http")]),
        # --- headless (s2.4, b7-b10, b12-b14)
        headless("prod", "db", ports=[port(15432, "postgres", target=5432)]),
        endpoint_slice(
            "prod", "db-1", "db", "IPv4",
            [
                endpoint("10.244.1.5", hostname="db-0"),
                endpoint("10.244.2.6", hostname="db-1", ready=None),  # no conditions: ready
                endpoint("10.244.3.7", hostname="db-2", ready=False),
            ],
            [port(5432, "postgres")],
        ),
        # a second slice whose name says nothing about the service; it repeats db-0 (b7)
        endpoint_slice(
            "prod", "zz-overflow", "db", "IPv4",
            [endpoint("10.244.1.5", hostname="db-0"), endpoint("10.244.2.8")],
            [port(5432, "postgres")],
        ),
        # named like db's slices but labelled for another service: never part of db (b7)
        endpoint_slice(
            "prod", "db-decoy", "dbx", "IPv4", [endpoint("10.244.9.9", hostname="db-9")], [port(5432, "postgres")]
        ),
        # hostname+subdomain on the pod alone create no record (b10)
        pod("prod", "db-stray", "10.244.2.9", hostname="mypet", subdomain="db"),
        headless("prod", "api", ports=_API_PORTS),
        endpoint_slice(
            "prod", "api-v4", "api", "IPv4",
            [endpoint("10.244.1.20", hostname="api-0"), endpoint("10.244.1.21", pod="api-7f9c-abcde")],
            [port(9000, "grpc"), port(9100, "metrics")],
        ),
        endpoint_slice(
            "prod", "api-v6", "api", "IPv6",
            [endpoint("fd00:10:244:1::20", hostname="api-0"), endpoint("fd00:10:244:1::21", pod="api-7f9c-abcde")],
            [port(9000, "grpc"), port(9100, "metrics")],
        ),
        headless("prod", "queue", ports=[port(5672, "amqp")]),
        endpoint_slice(
            "prod", "queue-a", "queue", "IPv4",
            [endpoint("10.244.4.1", hostname="peer"), endpoint("10.244.4.3")],
            [port(5672, "amqp")],
        ),
        headless("prod", "queue-peers", ports=[port(4369, "epmd")], publish_not_ready=True),
        endpoint_slice(
            "prod", "queue-peers-a", "queue-peers", "IPv4",
            [endpoint("10.244.4.1", hostname="peer", ready=False),
             endpoint("10.244.4.2", hostname="peer", ready=False)],
            [port(4369, "epmd")],
        ),
        headless("prod", "lost", ports=[port(80, "http")]),
        endpoint_slice(
            "prod", "lost-1", "lost", "IPv4",
            [endpoint("10.244.5.1", ready=False), endpoint("10.244.5.2", hostname="gone", ready=False)],
            [port(80, "http")],
        ),
        headless("prod", "noslices", ports=[port(80, "http")]),
        headless("prod", "portless"),
        endpoint_slice("prod", "portless-1", "portless", "IPv4", [endpoint("10.244.5.5")]),
        headless("prod", "v6edge", ports=[port(80, "http")]),
        endpoint_slice("prod", "v6edge-1", "v6edge", "IPv6", [endpoint("2001:db8::")], [port(80, "http")]),
        headless("prod", "longpods", ports=[port(80, "http")]),
        endpoint_slice(
            "prod", "longpods-1", "longpods", "IPv4",
            [endpoint("10.244.6.6", pod="p" * 64), endpoint("10.244.6.7", pod="q" * 63),
             endpoint("10.244.6.8", pod="not-a-pod", target_kind="Node")],
            [port(80, "http")],
        ),
        # --- ExternalName (s2.5, b16, b17)
        service("prod", "search", external_name="Search.Example.COM."),
        service("prod", "alias", external_name="web.default.svc.cluster.local"),
        service("prod", "alias-v4", external_name="legacy.default.svc.cluster.local."),
        service("prod", "alias-gone", external_name="gone.default.svc.cluster.local"),
        service("prod", "chain", external_name="alias.prod.svc.cluster.local"),
        service("prod", "loop", external_name="loop.prod.svc.cluster.local"),
        service("prod", "ipext", external_name="192.0.2.10"),
        # --- Pods (b25)
        pod("default", "pod-a", "10.244.1.50"),
        pod("default", "pod-gone", "10.244.1.51", deleting=True),
        pod("default", "pod-dual", "10.244.1.52", ips=["10.244.1.52", "fd00:10:244:1::52"]),
    ]


# ----------------------------------------------------------------------------------------------
# The table of answers

NOERROR, NXDOMAIN = "NOERROR", "NXDOMAIN"


class Case(NamedTuple):
    """One question and its expected answer.

    answer/additional hold `owner TYPE rdata` texts (rdata as dnspython prints it); owner "@" is the
    question name. additional None means "not checked". A negative answer (NXDOMAIN, or NOERROR
    with no answer) must carry exactly one SOA of `soa_zone` in the authority section. `fqdn` is the
    question name in full (the table writes names relative to its zone: `Table.fqdn`).
    """

    id: str
    qname: str
    qtype: str
    rcode: str
    answer: tuple[str, ...] = ()
    additional: tuple[str, ...] | None = None
    soa_zone: str = ZONE
    fqdn: str = ""


class Table:
    """The builders of a case table whose names are relative to `zone`, except reverse names, the zone
    itself and names in the zones of `in_full` (written in full)."""

    def __init__(self, zone: str, *, in_full: Sequence[str] = ()) -> None:
        self.zone = zone
        self.in_full = tuple(in_full)

    def fqdn(self, name: str) -> str:
        written_in_full = any(name == z or name.endswith(f".{z}") for z in self.in_full)
        if name.endswith(".arpa") or name == self.zone or written_in_full:
            return name
        return f"{name}.{self.zone}"

    def _abs(self, name: str) -> str:
        return self.fqdn(name) + "."

    def _owner(self, owner: str) -> str:
        return owner if owner == "@" else self._abs(owner)

    def a(self, ip: str, owner: str = "@") -> str:
        return f"{self._owner(owner)} A {ip}"

    def aaaa(self, ip: str, owner: str = "@") -> str:
        return f"{self._owner(owner)} AAAA {ip}"

    def srv(self, weight: int, number: int, target: str) -> str:
        return f"@ SRV 0 {weight} {number} {self._abs(target)}"

    def ptr(self, target: str) -> str:
        return f"@ PTR {self._abs(target)}"

    def cname(self, target: str, owner: str = "@") -> str:
        """A CNAME to an absolute target name written without the trailing dot."""
        return f"{self._owner(owner)} CNAME {target}."

    def case(self, id: str, qname: str, qtype: str, rcode: str, *answer: str,
             additional: Sequence[str] | None = None, soa_zone: str | None = None) -> Case:
        return Case(id, qname, qtype, rcode, tuple(answer), None if additional is None else tuple(additional),
                    soa_zone or self.zone, self.fqdn(qname))

    def nodata(self, id: str, qname: str, qtype: str = "A", soa_zone: str | None = None) -> Case:
        return self.case(id, qname, qtype, NOERROR, additional=(), soa_zone=soa_zone)

    def nxdomain(self, id: str, qname: str, qtype: str = "A", soa_zone: str | None = None) -> Case:
        return self.case(id, qname, qtype, NXDOMAIN, additional=(), soa_zone=soa_zone)


TABLE = Table(ZONE)
fqdn, a, aaaa, srv, ptr, cname = TABLE.fqdn, TABLE.a, TABLE.aaaa, TABLE.srv, TABLE.ptr, TABLE.cname
_case, nodata, nxdomain = TABLE.case, TABLE.nodata, TABLE.nxdomain


WEB = "web.default.svc"
WEB_ADDRS = (a("10.96.0.10", WEB), aaaa("fd00:10:96::a", WEB))
DB = "db.prod.svc"
API = "api.prod.svc"

# Cases for the default settings: zone cluster.local, TTL 5, pods insecure, no endpoint pod names,
# authoritative reverse AUTHORITATIVE_REVERSE.
CASES: tuple[Case, ...] = (
    # --- dns-version (s2.2, b21)
    _case("dns-version-txt", "dns-version", "TXT", NOERROR, '@ TXT "1.1.0"', additional=()),
    nodata("dns-version-a-is-nodata", "dns-version"),
    # --- apex and intermediate names (b3, b18)
    nodata("apex-a-is-nodata", ZONE),
    _case("apex-ns", ZONE, "NS", NOERROR, f"@ NS ns.dns.{ZONE}."),
    nodata("svc-is-nodata", "svc"),
    nodata("pod-is-nodata", "pod"),
    nodata("namespace-is-nodata", "default.svc"),
    nodata("namespace-without-services-is-nodata", "quiet.svc"),
    nodata("namespace-aaaa-is-nodata", "default.svc", "AAAA"),
    nodata("namespace-txt-is-nodata", "default.svc", "TXT"),
    nodata("svc-txt-is-nodata", "svc", "TXT"),
    nxdomain("unknown-namespace-is-nxdomain", "nowhere.svc"),
    nxdomain("service-in-namespace-without-namespace-object-is-nxdomain", "phantom.ghost.svc"),
    nxdomain("unknown-service-is-nxdomain", "nope.default.svc"),
    nxdomain("unknown-service-aaaa-is-nxdomain", "nope.default.svc", "AAAA"),
    nxdomain("unknown-service-srv-is-nxdomain", "nope.default.svc", "SRV"),
    nxdomain("unknown-service-txt-is-nxdomain", "nope.default.svc", "TXT"),
    nxdomain("unknown-service-https-is-nxdomain", "nope.default.svc", "HTTPS"),
    nxdomain("last-label-not-svc-or-pod-is-nxdomain", "web.default.foo"),
    nxdomain("unknown-single-label-is-nxdomain", "foo"),
    nxdomain("too-many-labels-is-nxdomain", f"a._http._tcp.{WEB}"),
    nxdomain("far-too-many-labels-is-nxdomain", f"x.y.z.w.{WEB}"),
    nxdomain("wildcard-service-is-literal", "*.default.svc"),
    nxdomain("any-service-is-literal", "any.default.svc"),
    nxdomain("wildcard-namespace-is-literal", "web.*.svc"),
    nxdomain("wildcard-endpoint-is-literal", f"*.{WEB}"),
    nxdomain("wildcard-port-is-literal", f"_*._tcp.{WEB}", "SRV"),
    nodata("soa-below-apex-is-nodata", WEB, "SOA"),
    nodata("soa-below-apex-is-nodata-even-for-missing-names", "nope.default.svc", "SOA"),
    nodata("ns-below-apex-is-nodata", WEB, "NS"),
    nxdomain("ns-below-apex-of-missing-name-is-nxdomain", "nope.default.svc", "NS"),
    # --- ClusterIP A/AAAA (s2.3.1, b6)
    _case("clusterip-a", WEB, "A", NOERROR, a("10.96.0.10"), additional=()),
    _case("clusterip-aaaa-dual-stack", WEB, "AAAA", NOERROR, aaaa("fd00:10:96::a"), additional=()),
    _case("clusterip-without-endpoints-answers", "lonely.default.svc", "A", NOERROR, a("10.96.0.30")),
    _case("clusterip-from-single-clusterip-field", "legacy.default.svc", "A", NOERROR, a("10.96.0.40")),
    nodata("clusterip-other-family-is-nodata", "legacy.default.svc", "AAAA"),
    nodata("ipv6-only-service-a-is-nodata", "v6only.default.svc"),
    _case("ipv6-clusterip-is-canonical", "v6only.default.svc", "AAAA", NOERROR, aaaa("fd00:10:96::40")),
    nodata("clusterip-txt-is-nodata", WEB, "TXT"),
    nodata("clusterip-mx-is-nodata", WEB, "MX"),
    nodata("clusterip-https-is-nodata", WEB, "HTTPS"),
    nodata("clusterip-caa-is-nodata", WEB, "CAA"),
    nodata("clusterip-ptr-is-nodata", WEB, "PTR"),
    # --- ClusterIP SRV (s2.3.2, b12-b15)
    _case("clusterip-srv-named-port", f"_http._tcp.{WEB}", "SRV", NOERROR, srv(100, 80, WEB), additional=WEB_ADDRS),
    _case("clusterip-srv-without-underscores", f"http.tcp.{WEB}", "SRV", NOERROR, srv(100, 80, WEB)),
    _case("clusterip-srv-underscore-on-port-only", f"_https.tcp.{WEB}", "SRV", NOERROR, srv(100, 443, WEB)),
    _case("clusterip-srv-underscore-on-proto-only", f"https._tcp.{WEB}", "SRV", NOERROR, srv(100, 443, WEB)),
    _case("clusterip-srv-udp-port", f"_dns._udp.{WEB}", "SRV", NOERROR, srv(100, 53, WEB)),
    nxdomain("clusterip-srv-right-name-other-protocol", f"_dns._tcp.{WEB}", "SRV"),
    nxdomain("clusterip-srv-unknown-port", f"_nope._tcp.{WEB}", "SRV"),
    nxdomain("clusterip-srv-protocol-only-is-nxdomain", f"_tcp.{WEB}", "SRV"),
    _case("clusterip-bare-srv-lists-every-port", WEB, "SRV", NOERROR,
          srv(33, 80, WEB), srv(33, 443, WEB), srv(33, 53, WEB), additional=WEB_ADDRS),
    _case("clusterip-bare-srv-includes-unnamed-port", "plain.default.svc", "SRV", NOERROR,
          srv(100, 8080, "plain.default.svc"), additional=(a("10.96.0.20", "plain.default.svc"),)),
    nxdomain("unnamed-port-has-no-named-srv", "_http._tcp.plain.default.svc", "SRV"),
    _case("clusterip-srv-deduplicates-by-port", "kube-dns.kube-system.svc", "SRV", NOERROR,
          srv(50, 53, "kube-dns.kube-system.svc"), srv(50, 9153, "kube-dns.kube-system.svc")),
    _case("clusterip-srv-udp-of-shared-port-number", "_dns._udp.kube-dns.kube-system.svc", "SRV", NOERROR,
          srv(100, 53, "kube-dns.kube-system.svc")),
    _case("address-query-on-port-name-gives-addresses", f"_http._tcp.{WEB}", "A", NOERROR, a("10.96.0.10")),
    _case("aaaa-query-on-port-name-gives-addresses", f"_http._tcp.{WEB}", "AAAA", NOERROR, aaaa("fd00:10:96::a")),
    nodata("txt-on-port-name-is-nodata", f"_http._tcp.{WEB}", "TXT"),
    # --- endpoint names under a ClusterIP service (b11)
    _case("endpoint-hostname-under-clusterip", f"canary.{WEB}", "A", NOERROR, a("10.244.1.10")),
    _case("dashed-endpoint-under-clusterip", f"10-244-1-11.{WEB}", "A", NOERROR, a("10.244.1.11")),
    nodata("endpoint-other-family-is-nodata", f"canary.{WEB}", "AAAA"),
    nxdomain("unready-endpoint-under-clusterip-is-nxdomain", f"10-244-1-12.{WEB}"),
    nxdomain("unknown-endpoint-is-nxdomain", f"nobody.{WEB}"),
    # --- headless A/AAAA (s2.4.1, b7, b8)
    _case("headless-a-every-ready-endpoint-of-every-slice", DB, "A", NOERROR,
          a("10.244.1.5"), a("10.244.2.6"), a("10.244.2.8"), additional=()),
    nodata("headless-without-that-family-is-nodata", DB, "AAAA"),
    _case("headless-dual-stack-a", API, "A", NOERROR, a("10.244.1.20"), a("10.244.1.21")),
    _case("headless-dual-stack-aaaa", API, "AAAA", NOERROR, aaaa("fd00:10:244:1::20"), aaaa("fd00:10:244:1::21")),
    _case("headless-publish-not-ready-addresses", "queue-peers.prod.svc", "A", NOERROR,
          a("10.244.4.1"), a("10.244.4.2")),
    nxdomain("headless-without-ready-endpoints-a", "lost.prod.svc"),
    nxdomain("headless-without-ready-endpoints-aaaa", "lost.prod.svc", "AAAA"),
    nxdomain("headless-without-ready-endpoints-srv", "lost.prod.svc", "SRV"),
    nxdomain("headless-without-ready-endpoints-txt", "lost.prod.svc", "TXT"),
    nxdomain("headless-without-ready-endpoints-endpoint", "gone.lost.prod.svc"),
    nxdomain("headless-without-slices", "noslices.prod.svc"),
    nodata("headless-txt-is-nodata", DB, "TXT"),
    # --- headless endpoint names (s2.4.1, b9, b10)
    _case("hostname-endpoint-a", f"db-0.{DB}", "A", NOERROR, a("10.244.1.5")),
    _case("hostname-endpoint-absent-ready-condition", f"db-1.{DB}", "A", NOERROR, a("10.244.2.6")),
    nodata("hostname-endpoint-other-family", f"db-0.{DB}", "AAAA"),
    nxdomain("unready-hostname-endpoint-is-nxdomain", f"db-2.{DB}"),
    nxdomain("hostname-endpoint-has-no-dashed-name", f"10-244-1-5.{DB}"),
    _case("dashed-ipv4-endpoint-name", f"10-244-2-8.{DB}", "A", NOERROR, a("10.244.2.8")),
    nxdomain("slice-of-another-service-is-not-used", f"db-9.{DB}"),
    nxdomain("pod-hostname-and-subdomain-alone-make-no-record", f"mypet.{DB}"),
    _case("hostname-in-both-families-a", f"api-0.{API}", "A", NOERROR, a("10.244.1.20")),
    _case("hostname-in-both-families-aaaa", f"api-0.{API}", "AAAA", NOERROR, aaaa("fd00:10:244:1::20")),
    _case("dashed-ipv6-endpoint-name", f"fd00-10-244-1--21.{API}", "AAAA", NOERROR, aaaa("fd00:10:244:1::21")),
    _case("dashed-ipv6-trailing-dash-gets-zero", "2001-db8--0.v6edge.prod.svc", "AAAA", NOERROR, aaaa("2001:db8::")),
    nxdomain("dashed-ipv6-without-trailing-zero-is-nxdomain", "2001-db8--.v6edge.prod.svc", "AAAA"),
    nxdomain("pod-name-is-not-an-endpoint-name-by-default", f"api-7f9c-abcde.{API}"),
    _case("shared-hostname-answers-every-ip", "peer.queue-peers.prod.svc", "A", NOERROR,
          a("10.244.4.1"), a("10.244.4.2")),
    # --- headless SRV (s2.4.2, b12-b15)
    _case("headless-srv-uses-slice-port-and-endpoint-names", f"_postgres._tcp.{DB}", "SRV", NOERROR,
          srv(33, 5432, f"db-0.{DB}"), srv(33, 5432, f"db-1.{DB}"), srv(33, 5432, f"10-244-2-8.{DB}"),
          additional=(a("10.244.1.5", f"db-0.{DB}"), a("10.244.2.6", f"db-1.{DB}"),
                      a("10.244.2.8", f"10-244-2-8.{DB}"))),
    _case("headless-bare-srv", DB, "SRV", NOERROR,
          srv(33, 5432, f"db-0.{DB}"), srv(33, 5432, f"db-1.{DB}"), srv(33, 5432, f"10-244-2-8.{DB}")),
    nxdomain("headless-srv-other-protocol", f"_postgres._udp.{DB}", "SRV"),
    _case("headless-srv-dual-stack-dedupes-hostname-but-not-dashed-names", f"_grpc._tcp.{API}", "SRV", NOERROR,
          srv(33, 9000, f"api-0.{API}"), srv(33, 9000, f"10-244-1-21.{API}"),
          srv(33, 9000, f"fd00-10-244-1--21.{API}"),
          additional=(a("10.244.1.20", f"api-0.{API}"), aaaa("fd00:10:244:1::20", f"api-0.{API}"),
                      a("10.244.1.21", f"10-244-1-21.{API}"), aaaa("fd00:10:244:1::21", f"fd00-10-244-1--21.{API}"))),
    _case("headless-bare-srv-endpoints-times-ports", API, "SRV", NOERROR,
          *(srv(16, p, t) for p in (9000, 9100) for t in (f"api-0.{API}", f"10-244-1-21.{API}",
                                                          f"fd00-10-244-1--21.{API}"))),
    _case("headless-srv-shared-hostname-is-one-target", "_epmd._tcp.queue-peers.prod.svc", "SRV", NOERROR,
          srv(100, 4369, "peer.queue-peers.prod.svc"),
          additional=(a("10.244.4.1", "peer.queue-peers.prod.svc"), a("10.244.4.2", "peer.queue-peers.prod.svc"))),
    _case("headless-a-on-port-name-gives-addresses", f"_postgres._tcp.{DB}", "A", NOERROR,
          a("10.244.1.5"), a("10.244.2.6"), a("10.244.2.8")),
    _case("portless-headless-a-works", "portless.prod.svc", "A", NOERROR, a("10.244.5.5")),
    nodata("portless-headless-bare-srv-is-nodata", "portless.prod.svc", "SRV"),
    nxdomain("portless-headless-named-srv-is-nxdomain", "_http._tcp.portless.prod.svc", "SRV"),
    # --- ExternalName (s2.5, b16, b17)
    _case("externalname-a-is-cname", "search.prod.svc", "A", NOERROR, cname("search.example.com")),
    _case("externalname-aaaa-is-cname", "search.prod.svc", "AAAA", NOERROR, cname("search.example.com")),
    _case("externalname-cname", "search.prod.svc", "CNAME", NOERROR, cname("search.example.com")),
    nodata("externalname-txt-is-nodata-without-cname", "search.prod.svc", "TXT"),
    nodata("externalname-bare-srv-is-nodata", "search.prod.svc", "SRV"),
    nxdomain("externalname-named-srv-is-nxdomain", "_http._tcp.search.prod.svc", "SRV"),
    nxdomain("externalname-endpoint-is-nxdomain", "x.search.prod.svc"),
    nxdomain("externalname-ip-value-is-nxdomain", "ipext.prod.svc"),
    nxdomain("externalname-ip-value-cname-is-nxdomain", "ipext.prod.svc", "CNAME"),
    _case("externalname-in-zone-target-chased-a", "alias.prod.svc", "A", NOERROR,
          cname(fqdn(WEB)), a("10.96.0.10", WEB)),
    _case("externalname-in-zone-target-chased-aaaa", "alias.prod.svc", "AAAA", NOERROR,
          cname(fqdn(WEB)), aaaa("fd00:10:96::a", WEB)),
    _case("externalname-chain-of-two", "chain.prod.svc", "A", NOERROR,
          cname(fqdn("alias.prod.svc")), cname(fqdn(WEB), "alias.prod.svc"), a("10.96.0.10", WEB)),
    _case("externalname-in-zone-target-with-the-type", "alias-v4.prod.svc", "A", NOERROR,
          cname(fqdn("legacy.default.svc")), a("10.96.0.40", "legacy.default.svc")),
    nodata("externalname-in-zone-target-without-the-type-drops-cname", "alias-v4.prod.svc", "AAAA"),
    nodata("externalname-in-zone-missing-target-is-noerror-without-cname", "alias-gone.prod.svc"),
    nodata("externalname-pointing-at-itself-is-skipped", "loop.prod.svc"),
    # --- pods, insecure (b25)
    _case("pod-a-insecure", "10-244-1-50.default.pod", "A", NOERROR, a("10.244.1.50")),
    _case("pod-any-ip-insecure", "1-2-3-4.default.pod", "A", NOERROR, a("1.2.3.4")),
    _case("pod-in-namespace-without-services", "1-2-3-4.quiet.pod", "A", NOERROR, a("1.2.3.4")),
    _case("pod-ipv6", "fd00-10-244-1--52.default.pod", "AAAA", NOERROR, aaaa("fd00:10:244:1::52")),
    nodata("pod-ipv6-a-is-nodata", "fd00-10-244-1--52.default.pod"),
    nodata("pod-ipv4-aaaa-is-nodata", "10-244-1-50.default.pod", "AAAA"),
    nxdomain("pod-unknown-namespace", "1-2-3-4.nowhere.pod"),
    nxdomain("pod-not-an-ip", "not-an-ip.default.pod"),
    nxdomain("pod-octet-out-of-range", "10-0-0-256.default.pod"),
    nodata("pod-namespace-is-nodata", "default.pod"),
    nxdomain("pod-unknown-namespace-alone", "nowhere.pod"),
    # --- reverse (s2.3.3, s2.4.3, b22-b24)
    _case("ptr-clusterip-v4", "10.0.96.10.in-addr.arpa", "PTR", NOERROR, ptr(WEB)),
    _case("ptr-clusterip-v6-nibbles", reverse_v6("fd00:10:96::a"), "PTR", NOERROR, ptr(WEB)),
    _case("ptr-clusterip-v6-written-long-hand", reverse_v6("fd00:10:96::40"), "PTR", NOERROR,
          ptr("v6only.default.svc")),
    _case("ptr-single-clusterip-field", "40.0.96.10.in-addr.arpa", "PTR", NOERROR, ptr("legacy.default.svc")),
    _case("ptr-hostname-endpoint-once-across-slices", "5.1.244.10.in-addr.arpa", "PTR", NOERROR,
          ptr(f"db-0.{DB}")),
    _case("ptr-hostname-less-endpoint", "8.2.244.10.in-addr.arpa", "PTR", NOERROR, ptr(f"10-244-2-8.{DB}")),
    _case("ptr-endpoint-of-clusterip-service", "11.1.244.10.in-addr.arpa", "PTR", NOERROR,
          ptr(f"10-244-1-11.{WEB}")),
    _case("ptr-endpoint-hostname-of-clusterip-service", "10.1.244.10.in-addr.arpa", "PTR", NOERROR,
          ptr(f"canary.{WEB}")),
    _case("ptr-endpoint-v6-nibbles", reverse_v6("fd00:10:244:1::20"), "PTR", NOERROR, ptr(f"api-0.{API}")),
    _case("ptr-dashed-v6-endpoint", reverse_v6("fd00:10:244:1::21"), "PTR", NOERROR,
          ptr(f"fd00-10-244-1--21.{API}")),
    _case("ptr-one-per-selecting-service", "1.4.244.10.in-addr.arpa", "PTR", NOERROR,
          ptr("peer.queue.prod.svc"), ptr("peer.queue-peers.prod.svc")),
    _case("ptr-publish-not-ready", "2.4.244.10.in-addr.arpa", "PTR", NOERROR, ptr("peer.queue-peers.prod.svc")),
    _case("ptr-outside-authoritative-ranges-still-answers", reverse_v6("2001:db8::"), "PTR", NOERROR,
          ptr("2001-db8--0.v6edge.prod.svc")),
    nxdomain("ptr-unready-endpoint", "7.3.244.10.in-addr.arpa", "PTR", soa_zone="244.10.in-addr.arpa"),
    nxdomain("ptr-bare-pod", "50.1.244.10.in-addr.arpa", "PTR", soa_zone="244.10.in-addr.arpa"),
    nxdomain("ptr-unknown-clusterip-in-authoritative-range", "98.0.96.10.in-addr.arpa", "PTR",
             soa_zone="96.10.in-addr.arpa"),
    nxdomain("ptr-unknown-v6-in-authoritative-range", reverse_v6("fd00:10:96::ffff"), "PTR",
             soa_zone=".".join(reversed("fd00001000960000")) + ".ip6.arpa"),
    nxdomain("ptr-incomplete-name", "0.96.10.in-addr.arpa", "PTR", soa_zone="96.10.in-addr.arpa"),
    nxdomain("ptr-non-numeric-label", "x.0.96.10.in-addr.arpa", "PTR", soa_zone="96.10.in-addr.arpa"),
    nxdomain("ptr-leading-zero-octet", "010.0.96.10.in-addr.arpa", "PTR", soa_zone="96.10.in-addr.arpa"),
    nxdomain("ptr-too-many-labels", "1.10.0.96.10.in-addr.arpa", "PTR", soa_zone="96.10.in-addr.arpa"),
    nodata("ptr-name-a-is-nodata", "10.0.96.10.in-addr.arpa", "A", soa_zone="96.10.in-addr.arpa"),
    nodata("reverse-zone-apex-is-nodata", "96.10.in-addr.arpa", "PTR", soa_zone="96.10.in-addr.arpa"),
)

# Cases answered differently with `endpoint_pod_names` (b9).
POD_NAME_CASES: tuple[Case, ...] = (
    _case("pod-name-endpoint-a", f"api-7f9c-abcde.{API}", "A", NOERROR, a("10.244.1.21")),
    _case("pod-name-endpoint-aaaa", f"api-7f9c-abcde.{API}", "AAAA", NOERROR, aaaa("fd00:10:244:1::21")),
    nxdomain("dashed-name-is-gone-with-pod-names", f"10-244-1-21.{API}"),
    _case("hostname-wins-over-pod-name", f"api-0.{API}", "A", NOERROR, a("10.244.1.20")),
    _case("pod-name-srv-dual-stack-is-one-target", f"_grpc._tcp.{API}", "SRV", NOERROR,
          srv(50, 9000, f"api-0.{API}"), srv(50, 9000, f"api-7f9c-abcde.{API}"),
          additional=(a("10.244.1.20", f"api-0.{API}"), aaaa("fd00:10:244:1::20", f"api-0.{API}"),
                      a("10.244.1.21", f"api-7f9c-abcde.{API}"), aaaa("fd00:10:244:1::21", f"api-7f9c-abcde.{API}"))),
    _case("pod-name-of-63-characters-is-used", f"{'q' * 63}.longpods.prod.svc", "A", NOERROR, a("10.244.6.7")),
    _case("pod-name-of-64-characters-falls-back-to-dashed-ip", "10-244-6-6.longpods.prod.svc", "A", NOERROR,
          a("10.244.6.6")),
    _case("target-that-is-not-a-pod-gives-dashed-ip", "10-244-6-8.longpods.prod.svc", "A", NOERROR,
          a("10.244.6.8")),
    nxdomain("non-pod-target-name-is-not-used", "not-a-pod.longpods.prod.svc"),
    _case("ptr-uses-pod-name", "21.1.244.10.in-addr.arpa", "PTR", NOERROR, ptr(f"api-7f9c-abcde.{API}")),
    _case("pod-name-under-clusterip-service", f"web-5d8-aaaaa.{WEB}", "A", NOERROR, a("10.244.1.11")),
)

# Cases answered differently with `pods verified` (b25).
POD_VERIFIED_CASES: tuple[Case, ...] = (
    _case("verified-running-pod", "10-244-1-50.default.pod", "A", NOERROR, a("10.244.1.50")),
    _case("verified-dual-stack-pod-primary-ip", "10-244-1-52.default.pod", "A", NOERROR, a("10.244.1.52")),
    nxdomain("verified-podips-extra-is-not-indexed", "fd00-10-244-1--52.default.pod", "AAAA"),
    nxdomain("verified-terminating-pod", "10-244-1-51.default.pod"),
    nxdomain("verified-pod-of-another-namespace", "10-244-1-50.prod.pod"),
    nxdomain("verified-unknown-ip", "1-2-3-4.default.pod"),
    nodata("verified-namespace-is-nodata", "default.pod"),
    _case("verified-pod-with-hostname", "10-244-2-9.prod.pod", "A", NOERROR, a("10.244.2.9")),
)

# Cases answered differently with `pods disabled` (b25).
POD_DISABLED_CASES: tuple[Case, ...] = (
    nxdomain("disabled-pod-record", "10-244-1-50.default.pod"),
    nxdomain("disabled-namespace-under-pod", "default.pod"),
    nodata("disabled-pod-zone-is-still-nodata", "pod"),
    _case("disabled-leaves-services-alone", WEB, "A", NOERROR, a("10.96.0.10")),
)


def case_ids(cases: Iterable[Case]) -> list[str]:
    return [c.id for c in cases]
