"""The agent's typed configuration: one table of options shared by the flags and the YAML `--config` file.

One module on purpose (over 800 lines): the option table is one concept, and every option's key, type,
default, choices and help text stay side by side so a new option is added in one place.

Every option has one key (`cluster-domain`), used as the flag (`--cluster-domain`) and as the YAML
key (`cluster-domain:`, `cluster_domain:` works too). Precedence: flag > config file > default.
Values are parsed and checked before start-up goes on; an error names the key
(`ttl: must be between 0s and 3600s`). Durations carry units (`500ms`, `5s`, `1m30s`, `1h`).
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from nodedns.errors import ConfigError
from nodedns.names import (
    IPNetwork,
    canonical_ip,
    is_dns1123_label,
    is_dns1123_subdomain,
    normalize_name,
    split_hostport,
)

HostPort = tuple[str, int]
TLS_PREFIX = "tls://"
DOT_PORT = 853  # DNS over TLS (RFC 7858)


class TLSUpstream(tuple[str, int]):
    """An upstream (address, port) reached over DNS over TLS, its certificate verified against `name`
    (None: --upstream-tls-servername, else the address itself, which the certificate must then name).

    A 2-tuple like any other upstream address, so routes and their comparisons stay as they are; it
    differs from the plain (address, port) it resembles (a change between them is a change of route)."""

    name: str | None

    def __new__(cls, host: str, port: int, name: str | None = None) -> TLSUpstream:
        self = super().__new__(cls, (host, port))
        self.name = name
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TLSUpstream) and tuple.__eq__(self, other) and self.name == other.name

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((TLS_PREFIX, self[0], self[1], self.name))

    def __reduce__(self) -> tuple[Any, ...]:
        return (TLSUpstream, (self[0], self[1], self.name))

    def __repr__(self) -> str:
        return f"TLSUpstream({self[0]!r}, {self[1]!r}, {self.name!r})"


def upstream_address(text: str, default_port: int = 53) -> HostPort:
    """`ADDR[:PORT]`, or `tls://ADDR[:PORT][#NAME]` (port 853 by default): a plain (address, port) or a
    TLSUpstream. Raises ValueError."""
    s = text.strip()
    if s[: len(TLS_PREFIX)].lower() != TLS_PREFIX:
        return split_hostport(s, default_port)
    addr, sep, name = s[len(TLS_PREFIX):].partition("#")
    host, port = split_hostport(addr, DOT_PORT)
    if sep:
        name = normalize_name(name)
        if not name or not (is_dns1123_subdomain(name) or canonical_ip(name) is not None):
            raise ValueError(f"{s!r}: the server name after '#' must be a DNS name")
    return TLSUpstream(host, port, name or None)


# An HTTP listener: ADDR:PORT, or a Unix socket as "unix:/absolute/path"
Endpoint = HostPort | str
UNIX_PREFIX = "unix:"
MAX_UNIX_PATH = 107  # bytes of sun_path, without its terminating NUL

# Where the root upstreams come from when nothing else names them (CoreDNS's default Corefile:
# `forward . /etc/resolv.conf`); `upstream: none` turns the default off.
DEFAULT_UPSTREAM_RESOLV_CONF = "/etc/resolv.conf"
UPSTREAM_NONE = "none"

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | int | float) -> float:
    """`1h`, `1m30s`, `500ms`, `5` (seconds) -> seconds. Raises ValueError."""
    if isinstance(text, bool):
        raise ValueError("not a duration")
    if isinstance(text, int | float):
        if not math.isfinite(text) or text < 0:
            raise ValueError("must be a non-negative duration")
        return float(text)
    s = text.strip().lower()
    if not s:
        raise ValueError("empty duration")
    try:
        value = float(s)
    except ValueError:
        pass
    else:
        if not math.isfinite(value) or value < 0:
            raise ValueError("must be a non-negative duration")
        return value
    pos = 0
    total = 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(s):
        raise ValueError(f"{text!r} is not a duration (use e.g. 500ms, 5s, 1m30s, 1h)")
    return total


def format_duration(seconds: float) -> str:
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)(b?)")
_SIZE_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(text: str | int | float) -> int:
    """`32Mi`, `32MiB`, `512Ki`, `1G` (1000**3), `65536` (bytes) -> bytes. Binary with `i` (Kubernetes'
    Ki/Mi/Gi), decimal without (k/M/G); a trailing `B` is allowed. Raises ValueError."""
    if isinstance(text, bool):
        raise ValueError("not a size")
    if isinstance(text, int | float):
        if not math.isfinite(text) or text < 0:
            raise ValueError("must be a non-negative size")
        return int(text)
    m = _SIZE.fullmatch(text.strip().lower())
    if m is None:
        raise ValueError(f"{text!r} is not a size (use e.g. 32Mi, 512Ki, 1G or a number of bytes)")
    number, unit, binary, _ = m.groups()
    if binary and not unit:
        raise ValueError(f"{text!r} is not a size (use e.g. 32Mi, 512Ki, 1G or a number of bytes)")
    value = float(number) * (1024 if binary else 1000) ** _SIZE_POWER[unit]
    if not math.isfinite(value):
        raise ValueError("must be a finite size")
    return int(value)


def format_size(n: int) -> str:
    for unit, power in (("Gi", 3), ("Mi", 2), ("Ki", 1)):
        if n >= 1024 ** power and n % 1024 ** power == 0:
            return f"{n // 1024 ** power}{unit}"
    return str(n)


def parse_percent(text: str | int | float) -> float:
    """`1%` or `0.01` -> 0.01 (a fraction in [0, 1])."""
    if isinstance(text, bool):
        raise ValueError("not a percentage")
    if isinstance(text, str):
        s = text.strip()
        value = float(s[:-1]) / 100 if s.endswith("%") else float(s)
    else:
        value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0% and 100%")
    return value


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


def endpoint_text(endpoint: Endpoint) -> str:
    """`host:port`, `[v6]:port`, or `unix:/path` as given."""
    if isinstance(endpoint, str):
        return endpoint
    host, port = endpoint
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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


Parser = Callable[[Any], Any]


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


def _as_str(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, str | int | float):
        raise ValueError("must be a string")
    return str(v)


def _path(v: Any) -> str | None:
    s = _as_str(v)
    return s or None


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "yes", "on", "1"):
        return True
    if isinstance(v, str) and v.strip().lower() in ("false", "no", "off", "0"):
        return False
    raise ValueError("must be true or false")


def _int_range(lo: int, hi: int) -> Parser:
    def parse(v: Any) -> int:
        if isinstance(v, bool):
            raise ValueError("must be a whole number")
        try:
            n = int(str(v).strip())
        except ValueError:
            raise ValueError("must be a whole number") from None
        if not lo <= n <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return n

    return parse


def _duration_range(lo: float, hi: float) -> Parser:
    def parse(v: Any) -> float:
        d = parse_duration(v)
        if not lo <= d <= hi:
            raise ValueError(f"must be between {format_duration(lo)} and {format_duration(hi)}")
        return d

    return parse


def _size_range(lo: int, hi: int) -> Parser:
    def parse(v: Any) -> int:
        n = parse_size(v)
        if not lo <= n <= hi:
            raise ValueError(f"must be between {format_size(lo)} and {format_size(hi)}")
        return n

    return parse


def _choice(*choices: str) -> Parser:
    def parse(v: Any) -> str:
        s = _as_str(v).strip()
        if s not in choices:
            raise ValueError(f"must be one of {', '.join(choices)} (got {s!r})")
        return s

    return parse


def _hostport(default_port: int) -> Parser:
    def parse(v: Any) -> HostPort:
        return split_hostport(_as_str(v), default_port)

    return parse


def _optional_hostport(default_port: int) -> Parser:
    inner = _hostport(default_port)

    def parse(v: Any) -> HostPort | None:
        s = _as_str(v).strip()
        if s in ("", "none", "off"):
            return None
        result: HostPort = inner(s)
        return result

    return parse


def _unix_path(s: str, example: str) -> str:
    """`unix:/absolute/path` checked (absolute, at most a socket address's bytes) and kept as that text."""
    path = s[len(UNIX_PREFIX):]
    if not path.startswith("/"):
        raise ValueError(f"{s!r}: a Unix socket needs an absolute path ({example})")
    if len(os.fsencode(path)) > MAX_UNIX_PATH:
        raise ValueError(f"{s!r}: a Unix socket path has at most {MAX_UNIX_PATH} bytes")
    return s


def _optional_endpoint(default_port: int) -> Parser:
    """`ADDR[:PORT]`, `unix:/absolute/path` (kept as that text), or none/off/"" (no listener)."""
    inner = _hostport(default_port)

    def parse(v: Any) -> Endpoint | None:
        s = _as_str(v).strip()
        if s in ("", "none", "off"):
            return None
        if s.startswith(UNIX_PREFIX):
            return _unix_path(s, "unix:/run/nodedns/debug.sock")
        result: HostPort = inner(s)
        return result

    return parse


def _cidr(v: Any) -> IPNetwork:
    s = _as_str(v).strip()
    try:
        return ipaddress.ip_network(s, strict=False)
    except ValueError:
        raise ValueError(f"{s!r} is not a CIDR") from None


def _ip(v: Any) -> str:
    s = _as_str(v).strip()
    ip = canonical_ip(s)
    if ip is None:
        raise ValueError(f"{s!r} is not an IP address")
    return ip


def _hosts_file(v: Any) -> str:
    """One --hosts path: a non-empty string (YAML `hosts` is a list of them)."""
    if not isinstance(v, str):
        raise ValueError(f"must be a list of file paths (got {type(v).__name__} {v!r:.40})")
    if not v.strip():
        raise ValueError("a file path is empty")
    return v


def _domain(v: Any) -> str:
    s = normalize_name(_as_str(v))
    if s and not is_dns1123_subdomain(s):
        raise ValueError(f"{s!r} is not a valid DNS domain")
    return s


def _upstream(v: Any) -> HostPort:
    return upstream_address(_as_str(v), 53)


def _stub_domain(v: Any) -> tuple[str, tuple[HostPort, ...], bool]:
    """`DOMAIN=ADDR[:PORT][,ADDR[:PORT]...][,force_tcp]`: the literal `force_tcp` makes the group TCP-only;
    an address may be `tls://ADDR[:PORT][#NAME]` (DNS over TLS)."""
    s = _as_str(v).strip()
    domain, sep, servers = s.partition("=")
    if not sep or not servers.strip():
        raise ValueError(f"{s!r}: use DOMAIN=ADDR[:PORT][,ADDR[:PORT]...][,force_tcp]")
    items = [a.strip() for a in servers.split(",") if a.strip()]
    force_tcp = "force_tcp" in items
    return (_domain(domain), tuple(upstream_address(a, 53) for a in items if a != "force_tcp"), force_tcp)


TCP_PREFIX = "tcp:"


def _dnstap_endpoint(v: Any) -> str | None:
    """`unix:/absolute/path` or `tcp:ADDR:PORT` (kept as that text, the address canonical); none/off: None."""
    s = _as_str(v).strip()
    if s in ("", "none", "off"):
        return None
    if s.startswith(UNIX_PREFIX):
        return _unix_path(s, "unix:/run/dnstap.sock")
    if s.startswith(TCP_PREFIX):
        host, port = split_hostport(s[len(TCP_PREFIX):], 0)
        ip = canonical_ip(host)
        if ip is None or not 0 < port < 65536:
            raise ValueError(f"{s!r}: use tcp:ADDR:PORT with an IP address and a port")
        return TCP_PREFIX + (f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}")
    raise ValueError(f"{s!r}: use unix:/PATH or tcp:ADDR:PORT")


def _server_name(v: Any) -> str:
    s = normalize_name(_as_str(v))
    if not s or not (is_dns1123_subdomain(s) or canonical_ip(s) is not None):
        raise ValueError(f"{s!r} is not a DNS name")
    return s


def _federation(v: Any) -> tuple[str, str]:
    s = _as_str(v).strip()
    name, sep, domain = s.partition("=")
    name = name.strip().lower()
    if not sep or not is_dns1123_label(name):
        raise ValueError(f"{s!r}: use NAME=DOMAIN with NAME a DNS label")
    d = _domain(domain)
    if not d:
        raise ValueError(f"{s!r}: the domain is empty")
    return name, d


def parse_federations(text: str, key: str = "federations") -> tuple[tuple[str, str], ...]:
    """kube-dns's federations format, `name=domain[,name2=domain2...]` (not JSON), as (name, domain) pairs.

    The kube-dns ConfigMap's `federations` key (and its deprecated `--federations` flag) use it. A
    name must be a DNS-1123 label, a domain a DNS-1123 subdomain; a name may appear once. Empty text
    means no federations. Raises ConfigError naming `key`.
    """
    out: dict[str, str] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        try:
            name, domain = _federation(item)
        except ValueError as exc:
            raise ConfigError(key, str(exc)) from None
        if name in out:
            raise ConfigError(key, f"federation {name!r} is given twice")
        out[name] = domain
    return tuple(out.items())


def _allow_from(v: Any) -> IPNetwork:
    return _cidr(v)


def _on_off(v: Any) -> str:
    """`on` or `off` (YAML's unquoted on/off/true/false are booleans: taken as the same)."""
    if isinstance(v, bool):
        return "on" if v else "off"
    s = _as_str(v).strip().lower()
    if s in ("on", "true", "yes"):
        return "on"
    if s in ("off", "false", "no"):
        return "off"
    raise ValueError(f"must be on or off (got {s!r})")


def _on_off_auto(v: Any) -> str:
    """`on`, `off` or `auto` (YAML's unquoted on/off are booleans: taken as the same)."""
    if isinstance(v, bool) or _as_str(v).strip().lower() != "auto":
        try:
            return _on_off(v)
        except ValueError:
            raise ValueError(f"must be off, on or auto (got {_as_str(v).strip()!r})") from None
    return "auto"


def _pick(key: str, choices: tuple[str, ...], help: str, default: str) -> Option:
    """An option whose value is one of `choices` (its metavar lists them)."""
    return Option(key, _choice(*choices), help, "|".join(choices), choices=choices, default=default)


# ----------------------------------------------------------------------------------------------
# Zones: per-domain forwarding settings (`zones:` of the config file)

ROOT_ZONE = "."  # how the config file names the default zone
MAX_ZONES = 256  # zones in one config at most (each is a metric label)
STALE_MODES = ("immediate", "verify", "off")
POLICIES = ("random", "round_robin", "sequential")
PROTOCOLS = ("prefer-udp", "force-tcp")


@dataclass(frozen=True, slots=True)
class ZoneSpec:
    """One zone as written in `zones:`; None is "not set here": inherited from `.` (whose unset values
    are the flags'). `name` is the domain, "" for `.`."""

    name: str
    upstreams: tuple[HostPort, ...] | None = None
    policy: str | None = None
    force_tcp: bool | None = None
    max_concurrent: int | None = None
    max_ttl: float | None = None  # cache: {max-ttl}: the positive TTL cap (--cache-success-ttl)
    min_ttl: float | None = None  # cache: {min-ttl} (--cache-min-ttl)
    denial_ttl: float | None = None  # cache: {denial-ttl} (--cache-denial-ttl)
    servfail_ttl: float | None = None  # cache: {servfail-ttl} (--cache-servfail-ttl)
    stale_mode: str | None = None  # serve-stale: {mode} (--serve-stale-mode)
    stale_for: float | None = None  # serve-stale: {for} (--serve-stale)
    stale_nxdomain: float | None = None
    filter_aaaa: bool | None = None
    query_log: float | None = None
    dnstap: float | None = None  # the share of its queries sent as dnstap frames (--dnstap-sample)

    @property
    def label(self) -> str:
        return self.name or ROOT_ZONE


def _zone_percent(v: Any) -> float:
    if v is False or (isinstance(v, str) and v.strip().lower() in ("off", "none")):
        return 0.0
    if v is True or (isinstance(v, str) and v.strip().lower() == "on"):
        return 1.0
    return parse_percent(v)


def _zone_upstreams(v: Any) -> tuple[HostPort, ...]:
    items = v if isinstance(v, list) else [v]
    if not items:
        raise ValueError("must name at least one server")
    out: list[HostPort] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"must be a list of ADDR[:PORT] or tls://ADDR[:PORT][#NAME] (got {item!r:.40})")
        addr = upstream_address(item, 53)
        if canonical_ip(addr[0]) is None:
            raise ValueError(f"{item!r} is not an IP address (host names are not supported)")
        out.append(addr)
    return tuple(out)


def _zone_choice(choices: tuple[str, ...]) -> Parser:
    def parse(v: Any) -> str:
        s = _as_str(v).strip().lower().replace("-", "_") if choices is POLICIES else _as_str(v).strip().lower()
        if s not in choices:
            raise ValueError(f"must be one of {', '.join(choices)} (got {v!r})")
        return s

    return parse


def _zone_stale_mode(v: Any) -> str:
    return "off" if v is False else _zone_choice(STALE_MODES)(v)


_TTL = _duration_range(0, 86400)
_STALE = _duration_range(0, 30 * 86400)
# key -> (ZoneSpec field, parser); `cache` and `serve-stale` are mappings of their own
_ZONE_KEYS: dict[str, tuple[str, Parser]] = {
    "upstreams": ("upstreams", _zone_upstreams),
    "policy": ("policy", _zone_choice(POLICIES)),
    "protocol": ("force_tcp", lambda v: _zone_choice(PROTOCOLS)(v) == "force-tcp"),
    "max-concurrent": ("max_concurrent", _int_range(1, 1_000_000)),
    "stale-nxdomain": ("stale_nxdomain", _STALE),
    "filter-aaaa": ("filter_aaaa", _bool),
    "query-log": ("query_log", _zone_percent),
    "dnstap": ("dnstap", _zone_percent),
}
_CACHE_KEYS: dict[str, tuple[str, Parser]] = {
    "max-ttl": ("max_ttl", _TTL),
    "min-ttl": ("min_ttl", _TTL),
    "denial-ttl": ("denial_ttl", _TTL),
    "servfail-ttl": ("servfail_ttl", _duration_range(0, 300)),
}
_STALE_KEYS: dict[str, tuple[str, Parser]] = {
    "mode": ("stale_mode", _zone_stale_mode),
    "for": ("stale_for", _STALE),
}
ZONE_KEYS = (*_ZONE_KEYS, "cache", "serve-stale")  # the keys a zone takes (docs/operators.md names each)


def zone_key(zone: str, key: str = "") -> str:
    """How an error names a zone's key: `zones: corp.example: cache.max-ttl` (`zones: .` for the default)."""
    return f"zones: {zone}: {key}" if key else f"zones: {zone}"


def _zone_name(domain: Any) -> str:
    """A `zones:` key: `.` (the default zone) or a domain. Raises ConfigError naming it."""
    text = "" if domain is None else str(domain)
    if text.strip() == ROOT_ZONE:
        return ""
    name = normalize_name(text)
    if not name or not is_dns1123_subdomain(name):
        raise ConfigError(zone_key(text), "is not a valid DNS domain (or `.` for the default zone)")
    return name


def _zone_fields(zone: str, prefix: str, raw: Any, table: dict[str, tuple[str, Parser]],
                 values: dict[str, Any]) -> None:
    if not isinstance(raw, dict):
        raise ConfigError(zone_key(zone, prefix[:-1]), f"must be a mapping of {', '.join(table)}")
    for key, value in raw.items():
        entry = table.get(str(key))
        if entry is None:
            takes = f"{prefix[:-1]} takes {', '.join(table)}" if prefix else f"a zone takes {', '.join(ZONE_KEYS)}"
            raise ConfigError(zone_key(zone, f"{prefix}{key}"), f"unknown key ({takes})")
        attr, parse = entry
        if value is None:
            raise ConfigError(zone_key(zone, f"{prefix}{key}"), "has no value")
        try:
            values[attr] = parse(value)
        except ValueError as exc:
            raise ConfigError(zone_key(zone, f"{prefix}{key}"), str(exc)) from None


def parse_zones(raw: Any) -> tuple[ZoneSpec, ...]:
    """`zones:` of a config file -> ZoneSpecs, in the order written. Every error is a ConfigError whose
    key names the zone and its key (`zones: corp.example: cache.max-ttl`); a domain written twice in the
    file is refused by the loader (`load_text`), and two spellings of one domain here."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ConfigError("zones", "must be a mapping of domain (or `.`) -> settings")
    if len(raw) > MAX_ZONES:
        raise ConfigError("zones", f"at most {MAX_ZONES} zones")
    out: dict[str, ZoneSpec] = {}
    for domain, settings in raw.items():
        name = _zone_name(domain)
        label = name or ROOT_ZONE
        if name in out:
            raise ConfigError(zone_key(label), "is written twice")
        values: dict[str, Any] = {}
        if settings is None:
            settings = {}
        if not isinstance(settings, dict):
            raise ConfigError(zone_key(label), f"must be a mapping of {', '.join(ZONE_KEYS)}")
        for key, value in settings.items():
            if key == "cache":
                _zone_fields(label, "cache.", value, _CACHE_KEYS, values)
            elif key == "serve-stale":
                if isinstance(value, dict):
                    _zone_fields(label, "serve-stale.", value, _STALE_KEYS, values)
                else:  # `serve-stale: off` (or a mode alone)
                    _zone_fields(label, "", {"serve-stale": value}, {"serve-stale": _STALE_KEYS["mode"]}, values)
            else:
                _zone_fields(label, "", {key: value}, _ZONE_KEYS, values)
        out[name] = ZoneSpec(name, **values)
    return tuple(out.values())


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


def _values(opt: Option, raw: Any) -> list[Any]:
    """Flatten a repeatable option's raw value (scalar, list, comma list) into single items."""
    items: Iterable[Any] = raw if isinstance(raw, list | tuple) else [raw]
    out: list[Any] = []
    for item in items:
        if opt.split_commas and isinstance(item, str):
            out.extend(p for p in (s.strip() for s in item.split(",")) if p)
        else:
            out.append(item)
    return out


def _is_none(opt: Option, raw: Any) -> bool:
    """`upstream: none` (alone): no root upstream at all, not even the default resolv.conf.
    Raises ValueError when `none` is mixed with addresses."""
    items = [v.strip().lower() if isinstance(v, str) else v for v in _values(opt, raw)]
    if UPSTREAM_NONE not in items:
        return False
    if len(items) > 1:
        raise ValueError("'none' cannot be combined with upstream addresses")
    return True


def build(raw: Mapping[str, Any], *, environ: Mapping[str, str] | None = None) -> Config:
    """A typed Config from raw values keyed by option key (`cluster-domain` or `cluster_domain`)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    upstream_none = False
    for key, value in raw.items():
        norm = str(key).replace("_", "-")
        if norm == "zones":  # a config file's mapping, no flag: its own parser names the zone and key
            values["zones"] = parse_zones(value)
            continue
        opt = OPTIONS_BY_KEY.get(norm)
        if opt is None:
            meant = near(norm, (o.key for o in OPTIONS if o.key != "config"))
            raise ConfigError(str(key), "unknown key" + (f" (did you mean {' or '.join(meant)}?)" if meant else ""))
        if value is None:
            continue
        try:
            if norm == "upstream" and _is_none(opt, value):
                upstream_none = True
                values["upstream"] = ()
                continue
            if opt.repeat:
                parsed: Any = tuple(opt.parse(v) for v in _values(opt, value))
            else:
                if isinstance(value, list | dict):
                    raise ValueError("must be a single value")
                parsed = opt.parse(value)
        except ValueError as exc:
            raise ConfigError(opt.key, str(exc)) from None
        values[opt.attr] = parsed

    if "node_name" not in values:
        values["node_name"] = environ.get("NODE_NAME", "")
    if upstream_none and values.get("upstream_resolv_conf"):
        raise ConfigError("upstream", "'none' turns off every root upstream: drop upstream-resolv-conf too")
    root_upstreams = any(not z.name and z.upstreams for z in values.get("zones", ()))
    if not upstream_none and not values.get("upstream") and not values.get("upstream_resolv_conf") \
            and not root_upstreams:
        values["upstream_resolv_conf"] = DEFAULT_UPSTREAM_RESOLV_CONF
    if "allow_from" in values and not values["allow_from"]:
        values["allow_from"] = None
    cfg = Config(**values)
    _check(cfg)
    return cfg


def _check(cfg: Config) -> None:
    if cfg.manifests and cfg.kubeconfig:
        raise ConfigError("manifests", "give either manifests or kubeconfig, not both")
    if not cfg.cluster_domain:
        raise ConfigError("cluster-domain", "must not be empty")
    if len({(h, p) for h, p in cfg.listen}) != len(cfg.listen):
        raise ConfigError("listen", "an address is listed twice")
    if cfg.setup_interface is not None and not cfg.local_ip:
        raise ConfigError("local-ip", "setup-interface needs at least one local-ip")
    if cfg.firewall != "none" and not cfg.local_ip:
        raise ConfigError("firewall", "conntrack-bypass rules are per local-ip: give at least one local-ip")
    if cfg.setup_interface is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,15}", cfg.setup_interface):
        raise ConfigError("setup-interface", "must be a Linux interface name (1-15 characters)")
    for domain, servers, _force_tcp in cfg.stub_domain:
        if not servers:
            raise ConfigError("stub-domain", f"{domain}: no servers")
    if len({domain for domain, _, _ in cfg.stub_domain}) != len(cfg.stub_domain):
        raise ConfigError("stub-domain", "a domain is given twice")
    if len({name for name, _ in cfg.federation}) != len(cfg.federation):
        raise ConfigError("federation", "a federation name is given twice")
    if cfg.status_listen is not None and cfg.debug_listen == cfg.status_listen and cfg.status_listen[1] != 0:
        raise ConfigError("debug-listen", "must differ from status-listen: the status port is reachable by "
                                          "Prometheus and the kubelet, the debug routes are not for them")
    _check_tls(cfg)
    _check_multicluster(cfg)
    _check_zones(cfg)


def _check_zones(cfg: Config) -> None:
    check_zones(cfg.zones, (cfg.cluster_domain, cfg.multicluster_zone), bool(cfg.upstream))


def check_zones(zones: Iterable[ZoneSpec], own_domains: Iterable[str], upstream: bool) -> None:
    """A zone is forwarded: never the cluster or clusterset zone (answered here) nor inside them; `.`'s
    upstreams are `upstream`'s, given in one place. Raises ConfigError naming the zone and key."""
    own = [d for d in own_domains if d]
    for zone in zones:
        for domain in own:
            if zone.name and (zone.name == domain or zone.name.endswith("." + domain)):
                raise ConfigError(zone_key(zone.label), f"is inside {domain}, which this agent answers itself: "
                                                         "its names are never forwarded")
        if not zone.name and zone.upstreams is not None and upstream:
            raise ConfigError(zone_key(ROOT_ZONE, "upstreams"), "the default zone's upstreams are given twice: "
                                                                "as upstream and here; keep one")


def tls_context(cafile: str | None) -> ssl.SSLContext:
    """The client context for tls:// upstreams: certificates verified (against `cafile` only when given,
    else the system CAs), the server name checked, TLS 1.2 at least. Raises ConfigError."""
    try:
        ctx = ssl.create_default_context(cafile=cafile)
    except FileNotFoundError:
        raise ConfigError("upstream-tls-ca", f"{cafile} does not exist") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError("upstream-tls-ca", f"{cafile}: no CA certificate in it could be loaded "
                                             f"({getattr(exc, 'reason', None) or exc})") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _check_tls(cfg: Config) -> None:
    if cfg.upstream_tls_ca is not None:
        tls_context(cfg.upstream_tls_ca)


def _check_multicluster(cfg: Config) -> None:
    """The clusterset zone must be a zone of its own: not the cluster zone, not inside it or around it,
    not also forwarded as a stub domain."""
    mc = cfg.multicluster_zone
    if not mc:
        return
    cluster = cfg.cluster_domain
    if mc == cluster or mc.endswith("." + cluster) or cluster.endswith("." + mc):
        raise ConfigError("multicluster-zone", f"{mc} overlaps the cluster domain {cluster}; the clusterset zone "
                                               "is a zone of its own (usually clusterset.local)")
    for domain, _, _ in cfg.stub_domain:
        if domain == mc or mc.endswith("." + domain) or domain.endswith("." + mc):
            raise ConfigError("multicluster-zone", f"{mc} overlaps the stub domain {domain}: answer the clusterset "
                                                   "zone here or forward it, not both")


MAX_CONFIG_BYTES = 1 << 20  # a --config file larger than this is refused


def load_file(path: str) -> dict[str, Any]:
    """The mapping in a YAML config file; errors name the `config` key (a file with any byte in it gives
    one: not UTF-8, not YAML, nested too deep, too large, not a mapping)."""
    import yaml  # noqa: PLC0415 - YAML is only needed when a config file is used

    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError("config", f"{path} is over {MAX_CONFIG_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("config", f"{path} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                                    f"{exc.start})") from None
    try:
        data = load_text(text)
    except yaml.YAMLError as exc:
        raise ConfigError("config", f"{path} is not valid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError("config", f"{path} is nested too deeply to be a config file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("config", f"{path} must hold a mapping of option keys")
    return data


def load_text(text: str) -> Any:
    """YAML text -> data, as yaml.safe_load, but a key written twice in one mapping is a ConfigError naming
    it (and, under `zones:`, its zone) and both lines: YAML loaders keep the last one silently. Raises
    yaml.YAMLError for text that is not YAML."""
    import yaml  # noqa: PLC0415 - YAML is only needed when a config file is used

    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is None:
        return None
    _refuse_duplicates(node, ())
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _refuse_duplicates(node: Any, path: tuple[str, ...]) -> None:
    import yaml  # noqa: PLC0415

    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_duplicates(item, path)
        return
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, int] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
        line = key_node.start_mark.line + 1
        if key in seen and key != "<<":
            first = f"lines {seen[key]} and {line}"
            if path[:1] == ("zones",):
                zone = path[1] if len(path) > 1 else key
                inner = ".".join((*path[2:], key)) if len(path) > 1 else ""
                raise ConfigError(zone_key(zone, inner), f"is written twice ({first}); write each once")
            raise ConfigError(".".join((*path, key)), f"is written twice ({first}); write each once")
        seen[key] = line
        _refuse_duplicates(value_node, (*path, key))


def from_sources(flags: Mapping[str, Any], *, environ: Mapping[str, str] | None = None) -> Config:
    """Merge defaults < config file < flags and build the Config. A relative path in the config file
    is relative to the file's folder (as the kubelet reads its configuration file); on the command
    line, to the current directory."""
    merged: dict[str, Any] = {}
    config_path = flags.get("config")
    if config_path:
        folder = os.path.dirname(os.path.abspath(str(config_path)))
        for key, value in load_file(str(config_path)).items():
            norm = str(key).replace("_", "-")
            if norm == "config":
                raise ConfigError("config", "a config file cannot name another config file")
            merged[norm] = _from_folder(folder, value) if norm in PATH_KEYS else value
    for key, value in flags.items():
        merged[str(key).replace("_", "-")] = value
    return build(merged, environ=environ)


# The options whose values are paths of files or folders (their metavar says so)
PATH_KEYS = frozenset(opt.key for opt in OPTIONS if opt.metavar in ("FILE", "DIR"))


def _from_folder(folder: str, value: Any) -> Any:
    """A relative path from a config file, made absolute from the file's folder; anything else as it is
    (an absolute path, "" or "none" where the key takes them, a value of the wrong type: `build` says)."""
    if isinstance(value, list):  # a repeatable path key (`hosts`): each item
        return [_from_folder(folder, v) for v in value]
    if isinstance(value, str) and value and value != "none" and not os.path.isabs(value):
        return os.path.join(folder, value)
    return value
