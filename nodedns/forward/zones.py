"""Zones: the forwarding settings of each domain nodedns forwards, resolved (pure).

A `Zone` is what one domain's names are forwarded and cached with: its upstreams, policy, protocol,
`max-concurrent`, the cache's TTL caps and serve-stale (`CachePolicy`), `--filter-aaaa`, the query log's
and dnstap's sampling. `resolve_zones` turns the config file's `zones:` (`config.ZoneSpec`s, unset
values None) and the stub domains (`--stub-domain`, the kube-dns ConfigMap's `stubDomains`: upstreams
only) into one `Zone` per domain: `.` takes the flags' values for what it leaves unset, every other zone
takes `.`'s. `ZoneTable.zone_for(qname)` is the longest match, else `.`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from nodedns.config import HostPort, ZoneSpec


@dataclass(frozen=True, slots=True)
class CachePolicy:
    """How a zone's forwarded answers are kept: TTL caps (whole seconds) and serve-stale."""

    success_ttl: int = 30  # cap on positive TTLs (--cache-success-ttl, cache: {max-ttl})
    min_ttl: int = 0  # floor on positive TTLs, under the cap (--cache-min-ttl)
    denial_ttl: int = 5  # cap on NXDOMAIN/NODATA TTLs (--cache-denial-ttl)
    servfail_ttl: int = 5  # how long a SERVFAIL is kept, and a failed entry served stale without asking
    serve_stale: float = 3600.0  # seconds past expiry an answer may be served stale (0 with mode off)
    stale_mode: str = "verify"  # immediate | verify | off
    stale_nxdomain: float = 0.0  # last-known-good over an upstream's NXDOMAIN/NODATA this long

    @property
    def stale_window(self) -> float:
        """Seconds past expiry an answer may be served stale: 0 with mode off."""
        return 0.0 if self.stale_mode == "off" else self.serve_stale


@dataclass(frozen=True, slots=True)
class Zone:
    """One zone's settings, every value resolved. `name` "" is `.`."""

    name: str = ""
    upstreams: tuple[HostPort, ...] = ()
    policy: str = "random"
    force_tcp: bool = False
    max_concurrent: int = 1000
    cache: CachePolicy = CachePolicy()
    filter_aaaa: bool | None = None  # None: --filter-aaaa decides (off, on, auto)
    query_log: float = 0.0
    dnstap: float = 1.0

    @property
    def label(self) -> str:
        return self.name or "."


def apply(spec: ZoneSpec, base: Zone) -> Zone:
    """`base` with what `spec` sets (the zone's own name, upstreams when it names some)."""
    c = base.cache
    mode = spec.stale_mode if spec.stale_mode is not None else c.stale_mode
    stale_for = spec.stale_for if spec.stale_for is not None else c.serve_stale
    cache = CachePolicy(
        success_ttl=int(spec.max_ttl) if spec.max_ttl is not None else c.success_ttl,
        min_ttl=int(spec.min_ttl) if spec.min_ttl is not None else c.min_ttl,
        denial_ttl=int(spec.denial_ttl) if spec.denial_ttl is not None else c.denial_ttl,
        servfail_ttl=int(spec.servfail_ttl) if spec.servfail_ttl is not None else c.servfail_ttl,
        serve_stale=stale_for,
        stale_mode=mode,
        stale_nxdomain=spec.stale_nxdomain if spec.stale_nxdomain is not None else c.stale_nxdomain,
    )
    return Zone(
        name=spec.name,
        upstreams=spec.upstreams if spec.upstreams is not None else base.upstreams,
        policy=spec.policy if spec.policy is not None else base.policy,
        force_tcp=spec.force_tcp if spec.force_tcp is not None else base.force_tcp,
        max_concurrent=spec.max_concurrent if spec.max_concurrent is not None else base.max_concurrent,
        cache=cache,
        filter_aaaa=spec.filter_aaaa if spec.filter_aaaa is not None else base.filter_aaaa,
        query_log=spec.query_log if spec.query_log is not None else base.query_log,
        dnstap=spec.dnstap if spec.dnstap is not None else base.dnstap,
    )


def resolve_zones(specs: Iterable[ZoneSpec], defaults: Zone, *, root: tuple[HostPort, ...],
                  stubs: Mapping[str, tuple[tuple[HostPort, ...], bool]] = {}) -> dict[str, Zone]:
    """Every zone resolved, "" (`.`) first: `defaults` are the flags' values, `root` the root upstreams the
    other sources give (--upstream, upstreamNameservers, resolv.conf); `stubs` the stub domains (their
    servers, force_tcp), each a zone of its own unless `zones:` names it (then its upstreams unless the
    zone names its own, and TCP when the stub domain forces it and the zone says nothing)."""
    by_name = {s.name: s for s in specs}
    root_spec = by_name.pop("", None)
    base = replace(defaults, name="", upstreams=root)
    dot = apply(root_spec, base) if root_spec is not None else base
    out: dict[str, Zone] = {"": dot}
    for name, (servers, tcp) in stubs.items():
        spec = by_name.pop(name, None)
        zone = apply(ZoneSpec(name), dot) if spec is None else apply(spec, dot)
        if spec is None or spec.upstreams is None:
            zone = replace(zone, upstreams=servers)
        if tcp and (spec is None or spec.force_tcp is None):
            zone = replace(zone, force_tcp=True)
        out[name] = zone
    for name, spec in by_name.items():
        out[name] = apply(spec, dot)
    return out


class ZoneTable:
    """The zones by name; `zone_for(qname)` the longest one containing the name, else `.`."""

    __slots__ = ("zones", "root")

    def __init__(self, zones: Mapping[str, Zone]) -> None:
        self.zones = dict(zones)
        self.root = self.zones.get("") or Zone()

    def zone_for(self, qname: str) -> Zone:
        zones = self.zones
        if len(zones) > 1:
            name = qname
            while name:
                zone = zones.get(name)
                if zone is not None:
                    return zone
                name = name.partition(".")[2]
        return self.root

    def changed(self, other: ZoneTable) -> set[str]:
        """The zones whose cached answers `other` (the new table) cannot keep: added, removed, or with any
        setting but the upstreams changed (new upstreams keep the answers, as a reload of the root's do)."""
        out = set()
        for name in self.zones.keys() | other.zones.keys():
            old, new = self.zones.get(name), other.zones.get(name)
            if old is None or new is None or replace(old, upstreams=()) != replace(new, upstreams=()):
                out.add(name)
        return out
