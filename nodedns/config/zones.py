"""Zones: per-domain forwarding settings (`zones:` of the config file), parsed (`parse_zones`) and checked
against the zones the agent answers itself (`check_zones`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nodedns.config.values import (
    HostPort,
    Parser,
    _as_str,
    _bool,
    _duration_range,
    _int_range,
    parse_percent,
    upstream_address,
)
from nodedns.errors import ConfigError
from nodedns.names import (
    canonical_ip,
    is_dns1123_subdomain,
    normalize_name,
)

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
