"""The option table (`OPTIONS`: each key's parser, help, metavar and default; `GROUPS`: the headings of
`serve --help` and examples/config.yaml), the typed result (`Config`), and `near`, the names a mistyped
key or flag may mean.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from nodedns.config.values import (
    DEFAULT_UPSTREAM_RESOLV_CONF,
    Endpoint,
    HostPort,
    Parser,
    _allow_from,
    _as_str,
    _bool,
    _choice,
    _cidr,
    _dnstap_endpoint,
    _domain,
    _duration_range,
    _federation,
    _hostport,
    _hosts_file,
    _int_range,
    _ip,
    _on_off,
    _on_off_auto,
    _optional_endpoint,
    _optional_hostport,
    _path,
    _server_name,
    _size_range,
    _stub_domain,
    _upstream,
    parse_percent,
)
from nodedns.config.zones import STALE_MODES, ZoneSpec
from nodedns.names import (
    IPNetwork,
)

# ----------------------------------------------------------------------------------------------
# The typed result


@dataclass(frozen=True, slots=True)
class Config:
    # sources of cluster objects
    config: str | None = None
    manifests: str | None = None
    kubeconfig: str | None = None
    kube_relist_spread: float = 30.0
    node_name: str = ""
    # DNS service
    listen: tuple[HostPort, ...] = ()
    cluster_domain: str = "cluster.local"
    pods: str = "insecure"
    endpoint_pod_names: bool = False
    ttl: float = 5.0
    authoritative_reverse: tuple[IPNetwork, ...] = ()
    max_udp_size: int = 1232
    tcp_idle_timeout: float = 10.0
    tcp_max_connections: int = 1000
    tcp_max_connections_per_client: int = 100
    fallback_upstream: HostPort | None = None
    # forwarding and cache
    upstream: tuple[HostPort, ...] = ()
    upstream_tls_servername: str | None = None  # tls:// upstreams without #NAME: their certificate's name
    upstream_tls_ca: str | None = None  # PEM file of the CAs tls:// upstreams are verified against
    upstream_resolv_conf: str | None = None  # build() makes it DEFAULT_UPSTREAM_RESOLV_CONF unless upstream is given
    stub_domain: tuple[tuple[str, tuple[HostPort, ...], bool], ...] = ()  # (domain, servers, force_tcp)
    kube_dns_config_dir: str | None = None
    kube_dns_config_period: float = 10.0
    upstream_policy: str = "random"
    upstream_force_tcp: bool = False
    upstream_timeout: float = 2.0
    max_concurrent: int = 1000
    health_check: float = 0.5
    cache_success: int = 9984
    cache_success_ttl: float = 30.0
    cache_denial: int = 9984
    cache_denial_ttl: float = 5.0
    cache_servfail_ttl: float = 5.0
    cache_max_bytes: int = 32 << 20  # the whole agent's forward cache, split over the answering processes
    prefetch: bool = True
    serve_stale: float = 3600.0
    cache_min_ttl: float = 0.0  # floor on the TTL of stored positive forwarded answers (at most cache_success_ttl)
    stale_nxdomain: float = 0.0  # last-known-good over an upstream NXDOMAIN/NODATA this long; 0 = off
    filter_aaaa: str = "off"  # forwarded AAAA questions answered NODATA: off | on | auto
    hosts: tuple[str, ...] = ()  # hosts(5) files answered before forwarding (nodedns.serve.hosts), re-read as they
    # change
    workers: int = 1  # 1: one process, no supervisor; 0: one per CPU this process may run on
    # resolv.conf tooling served over HTTP
    cluster_dns: tuple[str, ...] = ()
    host_resolv_conf: str = "/etc/resolv.conf"
    # node integration
    setup_interface: str | None = None
    local_ip: tuple[str, ...] = ()
    sync_interval: float = 60.0
    skip_teardown: bool = False
    firewall: str = "none"
    lameduck: float = 5.0
    lock_dir: str | None = None  # hand-over roster; None: /run/nodedns when managing the node, else off
    ready_file: str | None = None  # touched every second while ready (exec readiness probe)
    # status, logs
    status_listen: HostPort | None = ("127.0.0.1", 9253)
    debug_listen: Endpoint | None = ("127.0.0.1", 9254)
    no_debug: bool = False
    log_format: str = "text"
    log_level: str = "info"
    query_log: float = 0.0
    # beyond the peers
    autopath: bool = False
    federation: tuple[tuple[str, str], ...] = ()
    multicluster_zone: str = ""  # the clusterset zone of Multi-Cluster Services; "" = off
    insight: str = "on"  # per-Pod DNS insight (nodedns.observe.insight): on | off
    # hardening
    allow_from: tuple[IPNetwork, ...] | None = None
    rate_limit: int = 0
    miss_limit: int = 0  # UDP misses (answers the slow path builds) per second per client; 0 = off
    miss_limit_namespace: int = 0  # ... per namespace of this node's Pods (its Pods together); 0 = off
    max_pending: int = 10_000
    # server identity (CH TXT version.bind./version.server.; "" answers REFUSED)
    version_reply: str = ""
    # per-zone forwarding settings (`zones:` of the config file only; ZoneSpec), in the order written
    zones: tuple[ZoneSpec, ...] = ()
    serve_stale_mode: str = "verify"  # immediate | verify | off: `.`'s serve-stale mode
    dnstap: str | None = None  # unix:/PATH or tcp:ADDR:PORT: where dnstap frames go; None: off
    dnstap_sample: float = 1.0  # share of queries sent as dnstap frames (`.`'s value)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def listen_addresses(self) -> tuple[HostPort, ...]:
        """Where the DNS listeners bind: `listen`, else every local IP on port 53, else 127.0.0.1:53."""
        if self.listen:
            return self.listen
        if self.local_ip:
            return tuple((ip, 53) for ip in self.local_ip)
        return (("127.0.0.1", 53),)

    def public_dict(self) -> dict[str, Any]:
        """The effective configuration as plain JSON-able values (no secrets are ever configured here)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "extra":
                continue
            out[f.name.replace("_", "-")] = _jsonable(getattr(self, f.name))
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple | list):
        if len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int):
            host, port = value
            return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        return [_jsonable(v) for v in value]
    if isinstance(value, ipaddress.IPv4Network | ipaddress.IPv6Network):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


# ----------------------------------------------------------------------------------------------
# The option table

@dataclass(frozen=True, slots=True)
class Option:
    key: str
    parse: Parser
    help: str
    metavar: str | None = None
    flag: bool = False  # a switch: `--key` sets True
    repeat: bool = False  # may be given several times; values accumulate
    split_commas: bool = True  # with repeat: `a,b` counts as two values
    choices: tuple[str, ...] = ()  # the only values it takes
    default: str = ""  # the default, as `serve --help` shows it

    @property
    def attr(self) -> str:
        return self.key.replace("-", "_")


def _pick(key: str, choices: tuple[str, ...], help: str, default: str) -> Option:
    """An option whose value is one of `choices` (its metavar lists them)."""
    return Option(key, _choice(*choices), help, "|".join(choices), choices=choices, default=default)


# Every option: key, parser, help, metavar, and the default as `serve --help` and examples/config.yaml show it.
OPTIONS: tuple[Option, ...] = (
    Option("config", _path, "YAML file with any of these keys (flags win)", "FILE", default="none"),
    Option("manifests", _path, "serve the cluster zone from this manifest dump (no API server)", "FILE",
           default="none: watch the API server (in a Pod, or --kubeconfig)"),
    Option("kubeconfig", _path, "watch the API server named in this kubeconfig", "FILE",
           default="none: in a Pod, its service account"),
    Option("kube-relist-spread", _duration_range(0, 600), "spread relists after a 410, reconnects in an outage and "
           "retries after a 429 over a random share of this window, scaled to the cluster (the whole window from "
           "20,000 Services + EndpointSlices + Namespaces, about 5,000 nodes)", "DURATION", default="30s"),
    Option("node-name", _as_str, "this node's name (its Pods, zone, addresses and pod CIDRs)", "NAME",
           default="$NODE_NAME"),
    Option("listen", _hostport(53), "DNS listen address, UDP and TCP (repeatable)", "ADDR:PORT", repeat=True,
           default="every --local-ip on port 53, else 127.0.0.1:53"),
    Option("cluster-domain", _domain, "the cluster zone", "DOMAIN", default="cluster.local"),
    _pick("pods", ("disabled", "insecure", "verified"), "pod A records: any IP (insecure), only a running pod's "
          "IP (verified), none (disabled)", "insecure"),
    Option("endpoint-pod-names", _bool, "name hostname-less endpoints after their pod", flag=True, default="off"),
    Option("ttl", _duration_range(0, 3600), "TTL of cluster-zone records", "DURATION", default="5s"),
    Option("authoritative-reverse", _cidr, "answer NXDOMAIN for unknown PTRs inside these CIDRs (repeatable)",
           "CIDR,...", repeat=True, default="none"),
    Option("max-udp-size", _int_range(512, 65535), "cap on the EDNS UDP payload we send", "BYTES", default="1232"),
    Option("tcp-idle-timeout", _duration_range(0.1, 3600), "close idle TCP clients after", "DURATION",
           default="10s"),
    Option("tcp-max-connections", _int_range(1, 1_000_000), "open TCP client connections at most", "N",
           default="1000"),
    Option("tcp-max-connections-per-client", _int_range(1, 1_000_000), "open TCP connections from one client "
           "address at most", "N", default="100"),
    Option("fallback-upstream", _optional_hostport(53), "before the first sync, forward cluster names here",
           "ADDR[:PORT]", default="none: SERVFAIL until synced"),
    Option("upstream", _upstream, "upstream resolver for names outside the cluster (repeatable); tls://ADDR: DNS "
           "over TLS (port 853, the certificate verified); 'none': no upstream, such names are REFUSED",
           "ADDR[:PORT]|tls://ADDR[:PORT][#NAME]|none", repeat=True,
           default="the nameservers of --upstream-resolv-conf"),
    Option("upstream-tls-servername", _server_name, "the name a tls:// upstream's certificate must carry when "
           "its address has no #NAME", "NAME", default="none: the upstream's IP address"),
    Option("upstream-tls-ca", _path, "verify tls:// upstreams against the CA certificates in this PEM file only",
           "FILE", default="none: the system CAs"),
    Option("upstream-resolv-conf", _path, "take the upstreams from this resolv.conf's nameserver lines, re-read as it "
           "changes", "FILE", default=f"{DEFAULT_UPSTREAM_RESOLV_CONF} unless --upstream is given"),
    Option("stub-domain", _stub_domain, "forward DOMAIN to these servers (repeatable; a trailing ,force_tcp "
           "makes the group TCP-only)", "DOMAIN=ADDR[,ADDR][,force_tcp]", repeat=True, split_commas=False,
           default="none"),
    Option("kube-dns-config-dir", _path, "mounted kube-dns ConfigMap (stubDomains, upstreamNameservers, "
           "federations)", "DIR", default="none"),
    Option("kube-dns-config-period", _duration_range(0.05, 3600),
           "re-read the kube-dns ConfigMap, upstream resolv.conf and --hosts files every", "DURATION", default="10s"),
    _pick("upstream-policy", ("random", "round_robin", "sequential"), "which server of a group is tried first",
          "random"),
    Option("upstream-force-tcp", _bool, "always use TCP to the upstreams", flag=True, default="off"),
    Option("upstream-timeout", _duration_range(0.01, 60), "per-try upstream timeout", "DURATION", default="2s"),
    Option("max-concurrent", _int_range(1, 1_000_000), "in-flight upstream queries at most; beyond it REFUSED",
           "N", default="1000"),
    Option("health-check", _duration_range(0, 3600), "upstream health-check interval, 0s = off", "DURATION",
           default="500ms"),
    Option("cache-success", _int_range(0, 10_000_000), "positive cache entries", "N", default="9984"),
    Option("cache-success-ttl", _duration_range(0, 86400), "positive cache TTL cap", "DURATION", default="30s"),
    Option("cache-denial", _int_range(0, 10_000_000), "negative cache entries", "N", default="9984"),
    Option("cache-denial-ttl", _duration_range(0, 86400), "negative cache TTL cap", "DURATION", default="5s"),
    Option("cache-servfail-ttl", _duration_range(0, 300), "how long SERVFAIL is cached", "DURATION",
           default="5s"),
    Option("cache-max-bytes", _size_range(4 << 20, 1 << 40), "memory the forward cache may hold, stale answers "
           "included (the whole agent: split over --workers); answers over 16 KiB are served, not kept", "SIZE",
           default="32Mi"),
    Option("prefetch", _bool, "refresh hot entries before they expire", "true|false", default="true"),
    Option("serve-stale", _duration_range(0, 30 * 86400), "serve expired answers this long when upstreams fail, "
           "0s = off", "DURATION", default="1h"),
    _pick("serve-stale-mode", STALE_MODES, "immediate: an expired answer at once, asked again in the background; "
          "verify: ask first, the expired answer when the upstream is late (RFC 8767's client-response timer) "
          "or fails; off: never", "verify"),
    Option("cache-min-ttl", _duration_range(0, 86400), "floor on the TTL of stored positive forwarded answers "
           "(never above --cache-success-ttl; never the cluster zone), 0s = off", "DURATION", default="0s"),
    Option("stale-nxdomain", _duration_range(0, 30 * 86400), "when an upstream answers NXDOMAIN or NODATA for a "
           "name whose positive answer is cached, keep serving that answer (TTL 30) this long while asking "
           "again, 0s = off", "DURATION", default="0s"),
    Option("filter-aaaa", _on_off_auto, "answer forwarded AAAA questions NODATA without asking upstream (never the "
           "cluster zone); auto: only while the node has no global IPv6 address and no Service an IPv6 ClusterIP",
           "off|on|auto", choices=("off", "on", "auto"), default="off"),
    Option("hosts", _hosts_file, "answer the names and addresses of this hosts(5) file (A, AAAA, PTR; AA, TTL --ttl) "
           "before forwarding; the cluster zone wins; re-read as it changes (repeatable)", "FILE", repeat=True,
           split_commas=False, default="none"),
    Option("workers", _int_range(0, 256), "answering processes sharing the sockets (SO_REUSEPORT); 1: one "
           "process; 0: one per CPU", "N", default="1"),
    Option("cluster-dns", _ip, "kubelet --cluster-dns for POST /v1/resolv-conf", "IP[,IP]", repeat=True,
           default="the listen addresses"),
    Option("host-resolv-conf", _as_str, "the node's resolv.conf for POST /v1/resolv-conf ('' = none)", "FILE",
           default="/etc/resolv.conf"),
    Option("setup-interface", _path, "create and keep this link with the local IPs", "NAME",
           default="none: leave the interfaces alone"),
    Option("local-ip", _ip, "address to own on the interface (repeatable)", "IP", repeat=True, default="none"),
    Option("sync-interval", _duration_range(1, 86400), "reconcile interface and rules every", "DURATION",
           default="1m"),
    Option("skip-teardown", _bool, "leave interface and rules in place on exit", flag=True, default="off"),
    _pick("firewall", ("iptables", "nftables", "none"), "conntrack-bypass rules (NOTRACK + ACCEPT) for the local "
          "IPs", "none"),
    Option("lameduck", _duration_range(0, 600), "keep answering this long after SIGTERM", "DURATION",
           default="5s"),
    Option("lock-dir", _path, "hand-over roster shared with a successor on this node", "DIR",
           default="/run/nodedns with --setup-interface or --firewall, else none"),
    Option("ready-file", _path, "keep this file freshly touched while ready, gone otherwise (exec readiness "
           "probe)", "FILE", default="none"),
    Option("status-listen", _optional_hostport(9253), "HTTP address of /healthz, /readyz and /metrics ('none' = off)",
           "ADDR:PORT", default="127.0.0.1:9253"),
    Option("debug-listen", _optional_endpoint(9254), "HTTP address of /, /status, /debug/* and /v1/resolv-conf "
           "(unix:/PATH: a Unix socket; 'none' = off)", "ADDR:PORT|unix:PATH", default="127.0.0.1:9254"),
    Option("no-debug", _bool, "turn off the /debug/* routes (the debug listener keeps /, /status, /v1/resolv-conf)",
           flag=True, default="off"),
    _pick("log-format", ("text", "json"), "log format", "text"),
    _pick("log-level", ("debug", "info", "warning", "error"), "log level", "info"),
    Option("query-log", parse_percent, "log this share of queries (e.g. 1%)", "PERCENT", default="0%"),
    Option("dnstap", _dnstap_endpoint, "send dnstap frames (client and forwarder queries and responses, Frame "
           "Streams) to this collector; a slow or absent one costs dropped frames, never a delayed answer",
           "unix:PATH|tcp:ADDR:PORT", default="none: off"),
    Option("dnstap-sample", parse_percent, "the share of queries sent as dnstap frames (a zone's `dnstap:` "
           "overrides it)", "PERCENT", default="100%"),
    Option("autopath", _bool, "server-side search-list walk for pods on this node", flag=True, default="off"),
    Option("federation", _federation, "kube-dns federation NAME=DOMAIN (repeatable)", "NAME=DOMAIN",
           repeat=True, default="none"),
    Option("insight", _on_off, "per-Pod DNS insight: count every answer by client Pod (GET /debug/top, nodedns "
           "top, nodedns_namespace_* metrics); off: nothing is counted per client", "on|off", choices=("on", "off"),
           default="on"),
    Option("multicluster-zone", _domain, "serve this Multi-Cluster Services zone (usually clusterset.local) from "
           "ServiceImports and their imported EndpointSlices", "DOMAIN", default="none: off"),
    Option("allow-from", _allow_from, "answer only clients in these CIDRs; others get REFUSED (repeatable)",
           "CIDR,...", repeat=True,
           default="loopback, the local IPs, the node's addresses and pod CIDRs"),
    Option("rate-limit", _int_range(0, 10_000_000), "UDP responses per second per client, 0 = off; over it "
           "TC=1 while the process has the capacity, dropped beyond it", "QPS", default="0"),
    Option("miss-limit", _int_range(0, 10_000_000), "UDP misses (answers not stored, built by the slow path) per "
           "second per client, apart from its hits, 0 = off; over it TC=1 while the process has the capacity, "
           "dropped beyond it", "QPS", default="0"),
    Option("miss-limit-namespace", _int_range(0, 10_000_000), "UDP misses per second of all the Pods of one "
           "namespace on this node together, 0 = off; over it as --miss-limit", "QPS", default="0"),
    Option("max-pending", _int_range(1, 10_000_000), "client queries waiting on upstreams at most; beyond it "
           "REFUSED", "N", default="10000"),
    Option("version-reply", _as_str, "answer CH TXT version.bind./version.server. with this text", "TEXT",
           default="none: REFUSED"),
)

OPTIONS_BY_KEY: dict[str, Option] = {o.key: o for o in OPTIONS}

# The option table by topic, as examples/config.yaml groups its keys (`serve --help` shows these groups;
# `config` stays with --help among the general options). Every key but `config` is in exactly one group.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Where the cluster objects come from (one of them)", ("manifests", "kubeconfig", "kube-relist-spread",
                                                           "node-name")),
    ("The DNS service", ("listen", "cluster-domain", "pods", "endpoint-pod-names", "ttl", "authoritative-reverse",
                         "max-udp-size", "tcp-idle-timeout", "tcp-max-connections", "tcp-max-connections-per-client",
                         "fallback-upstream")),
    ("Forwarding and the cache (names outside the cluster)", (
        "upstream", "upstream-tls-servername", "upstream-tls-ca", "upstream-resolv-conf", "stub-domain",
        "kube-dns-config-dir", "kube-dns-config-period", "upstream-policy", "upstream-force-tcp", "upstream-timeout",
        "max-concurrent", "health-check", "cache-success", "cache-success-ttl", "cache-denial", "cache-denial-ttl",
        "cache-servfail-ttl", "cache-max-bytes", "prefetch", "serve-stale", "serve-stale-mode", "cache-min-ttl",
        "stale-nxdomain", "filter-aaaa", "hosts")),
    ("resolv.conf tooling over HTTP (POST /v1/resolv-conf)", ("cluster-dns", "host-resolv-conf")),
    ("The node: interface, rules, restarts", ("setup-interface", "local-ip", "sync-interval", "skip-teardown",
                                              "firewall", "lameduck", "workers", "lock-dir", "ready-file")),
    ("Status, logs", ("status-listen", "debug-listen", "no-debug", "log-format", "log-level", "query-log", "dnstap",
                      "dnstap-sample")),
    ("Beyond the peers", ("autopath", "federation", "insight", "multicluster-zone")),
    ("Limits", ("allow-from", "rate-limit", "miss-limit", "miss-limit-namespace", "max-pending", "version-reply")),
)


def near(given: str, known: Iterable[str], n: int = 2) -> list[str]:
    """The names of `known` a mistyped `given` may have meant, best first (at most n): those it begins (an
    abbreviation), else those holding its words in order (`cache-ttl`: `cache-success-ttl`, then
    `cache-denial-ttl`, in the order `known` lists them), else the closest spellings (difflib). Keys and
    flags alike: `--` in front is kept as it is."""
    import difflib  # noqa: PLC0415 - only when a name is wrong

    known = list(known)
    begun = [k for k in known if k.startswith(given) and k != given]
    if begun:
        return begun[:n]
    words = given.lstrip("-").split("-")

    def holds(key: str) -> bool:
        it = iter(key.lstrip("-").split("-"))
        return all(any(w == part for part in it) for w in words)

    worded = [k for k in known if k != given and len(words) > 1 and holds(k)]
    if worded:
        return worded[:n]
    return difflib.get_close_matches(given, known, n=n)
