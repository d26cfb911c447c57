"""Where the upstreams come from: --upstream, resolv.conf, --stub-domain, a kube-dns ConfigMap, re-read.

`RouteSources` reads the config sources into `Routes`: `--upstream`, `--upstream-resolv-conf`
(nameserver lines), `--stub-domain`, a mounted kube-dns ConfigMap (`stubDomains`,
`upstreamNameservers` JSON files; `federations` in kube-dns's `name=domain[,...]` format, handed to
the cluster records through the watcher's `on_federations` hook), and the `--config` file's `zones:`
(each zone's settings, nodedns.forward.zones, put in the `Routes`). `ConfigWatcher` re-reads them every
`kube-dns-config-period`; an invalid new config (any key, a wrong zone) is logged and the old one kept
whole, as kube-dns does; the zones whose settings changed are handed to `on_zones` (their cache goes).
`describe_routes` is their one-line summary for logs and /status.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from nodedns.config import TLS_PREFIX, TLSUpstream, ZoneSpec, check_zones, load_text, parse_federations, parse_zones
from nodedns.errors import ConfigError
from nodedns.forward.upstream import Forwarder, HostPort, Routes, _addr_text
from nodedns.forward.zones import Zone, ZoneTable, resolve_zones
from nodedns.names import canonical_ip, is_dns1123_subdomain, normalize_name, split_hostport

log = logging.getLogger("nodedns.upstream")


KUBE_DNS_MAX_UPSTREAMS = 3  # kube-dns: upstreamNameservers holds at most 3 entries


def parse_server(text: str, key: str) -> HostPort:
    """`ip[:port]` (IPv6 in brackets with a port) -> canonical (ip, port). Raises ConfigError."""
    try:
        host, port = split_hostport(text.strip(), 53)
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None
    ip = canonical_ip(host)
    if ip is None:
        raise ConfigError(key, f"{text!r} is not an IP address (host names are not supported)")
    return ip, port


def resolv_conf_nameservers(text: str) -> tuple[HostPort, ...]:
    """The `nameserver` addresses of a resolv.conf (port 53), skipping ones that are not IPs."""
    out: list[HostPort] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            ip = canonical_ip(parts[1].split("%", 1)[0])
            if ip is not None:
                out.append((ip, 53))
    return tuple(out)


def parse_kube_dns(stub_text: str | None, upstream_text: str | None) -> tuple[dict[str, tuple[HostPort, ...]],
                                                                                tuple[HostPort, ...]]:
    """The kube-dns ConfigMap's `stubDomains` and `upstreamNameservers` (JSON). Raises ConfigError.

    stubDomains: {"domain": ["ip[:port]", ...]}, the domain a DNS-1123 subdomain.
    upstreamNameservers: ["ip[:port]", ...], at most 3.
    """
    stubs: dict[str, tuple[HostPort, ...]] = {}
    if stub_text is not None and stub_text.strip():
        try:
            raw = json.loads(stub_text)
        except (ValueError, RecursionError) as exc:
            raise ConfigError("stubDomains", f"not JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise ConfigError("stubDomains", "must be a JSON object of domain -> list of servers")
        for domain, servers in raw.items():
            name = normalize_name(str(domain))
            if not name or not is_dns1123_subdomain(name):
                raise ConfigError("stubDomains", f"{domain!r} is not a valid DNS subdomain")
            if not isinstance(servers, list) or not servers or not all(isinstance(s, str) for s in servers):
                raise ConfigError("stubDomains", f"{domain}: must be a non-empty list of servers")
            stubs[name] = tuple(parse_server(s, f"stubDomains.{domain}") for s in servers)
    upstreams: tuple[HostPort, ...] = ()
    if upstream_text is not None and upstream_text.strip():
        try:
            raw_up = json.loads(upstream_text)
        except (ValueError, RecursionError) as exc:
            raise ConfigError("upstreamNameservers", f"not JSON: {exc}") from None
        if not isinstance(raw_up, list) or not all(isinstance(s, str) for s in raw_up):
            raise ConfigError("upstreamNameservers", "must be a JSON list of servers")
        if len(raw_up) > KUBE_DNS_MAX_UPSTREAMS:
            raise ConfigError("upstreamNameservers", f"at most {KUBE_DNS_MAX_UPSTREAMS} servers")
        upstreams = tuple(parse_server(s, "upstreamNameservers") for s in raw_up)
    return stubs, upstreams


MAX_CONFIG_FILE = 1 << 20  # bytes of one upstream config file (resolv.conf, a ConfigMap key) read at most


def read_config_text(path: str, key: str) -> str | None:
    """A config file that may change under us, as text; None when it does not exist. Raises ConfigError
    naming `key` for one that cannot be used whole: not UTF-8 (the byte and where), over
    MAX_CONFIG_FILE, unreadable (a directory, no permission)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_FILE + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(key, f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_FILE:
        raise ConfigError(key, f"{path} is over {MAX_CONFIG_FILE} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(key, f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") \
            from None


@dataclass(frozen=True)
class RouteSources:
    """The static route settings (flags) and the files that may change under us."""

    upstream: tuple[HostPort, ...] = ()
    force_tcp: bool = False
    resolv_conf: str | None = None
    stub_domains: tuple[tuple[str, tuple[HostPort, ...], bool], ...] = ()
    kube_dns_dir: str | None = None
    federation: tuple[tuple[str, str], ...] = ()  # --federation NAME=DOMAIN
    defaults: Zone | None = None  # the flags' settings: what `.` leaves unset (None: the forwarder's own)
    zones: tuple[ZoneSpec, ...] = ()  # the config file's `zones:` as it was read at start
    config_file: str | None = None  # --config: its `zones:` re-read with the other sources
    own_domains: tuple[str, ...] = ()  # the zones this agent answers itself (never a forwarded zone)

    def any(self) -> bool:
        return bool(self.upstream or self.resolv_conf or self.stub_domains or self.kube_dns_dir
                    or any(z.upstreams for z in self.zones))

    def missing_dir(self) -> str | None:
        """What to say when --kube-dns-config-dir names no directory (None: it does, or none is configured).
        Not an error: the ConfigMap is mounted optionally (a cluster without one has no stub domains), and
        a directory that appears later is read then."""
        if not self.kube_dns_dir or os.path.isdir(self.kube_dns_dir):
            return None
        return (f"kube-dns-config-dir {self.kube_dns_dir} does not exist: no stub domains, upstream nameservers or "
                "federations from the kube-dns ConfigMap until it does (is the ConfigMap mounted there?)")

    def snapshot(self) -> tuple[str | None, ...]:
        """The current text of every file source (blocking: call from a thread):
        (stubDomains, upstreamNameservers, resolv.conf, federations)."""
        if self.kube_dns_dir:
            stub = read_config_text(os.path.join(self.kube_dns_dir, "stubDomains"), "stubDomains")
            up = read_config_text(os.path.join(self.kube_dns_dir, "upstreamNameservers"), "upstreamNameservers")
            fed = read_config_text(os.path.join(self.kube_dns_dir, "federations"), "federations")
        else:
            stub = up = fed = None
        resolv = read_config_text(self.resolv_conf, "upstream-resolv-conf") if self.resolv_conf else None
        if self.resolv_conf and resolv is None:
            raise ConfigError("upstream-resolv-conf", f"{self.resolv_conf} does not exist")
        conf = read_config_text(self.config_file, "config") if self.config_file else None
        if self.config_file and conf is None:
            raise ConfigError("config", f"{self.config_file} does not exist")
        return stub, up, resolv, fed, conf

    def zone_specs(self, snapshot: tuple[str | None, ...]) -> tuple[ZoneSpec, ...]:
        """The `zones:` of the config file's text in `snapshot` (the ones read at start when there is no
        file). Raises ConfigError naming the zone and key."""
        text = snapshot[4] if len(snapshot) > 4 else None
        if text is None:
            return self.zones
        try:
            data = load_text(text)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - yaml.YAMLError, RecursionError: the file cannot be read
            raise ConfigError("config", f"{self.config_file} is not valid YAML: {' '.join(str(exc).split())}") \
                from None
        raw = data.get("zones") if isinstance(data, dict) else None
        specs = parse_zones(raw)
        check_zones(specs, self.own_domains, bool(self.upstream))
        return specs

    def federations(self, snapshot: tuple[str | None, ...]) -> tuple[tuple[str, str], ...]:
        """The federations: the ConfigMap's `federations`, with --federation winning for the same name.
        Raises ConfigError (key `federations`)."""
        fed_text = snapshot[3]
        cm = dict(parse_federations(fed_text)) if fed_text else {}
        for name, domain in self.federation:
            if cm.get(name, domain) != domain:
                log.warning("federation %s: --federation wins over the kube-dns ConfigMap", name)
            cm[name] = domain
        return tuple(cm.items())

    def build(self, snapshot: tuple[str | None, ...]) -> Routes:
        """The routes from the flags and the files' text. Raises ConfigError.

        Root: kube-dns upstreamNameservers when non-empty, else --upstream, else the resolv.conf
        nameservers. Stub domains: the ConfigMap's, with --stub-domain winning for the same domain.
        The ConfigMap's `federations` is checked too: like kube-dns, one invalid key rejects the
        whole update.
        """
        stub_text, up_text, resolv_text = snapshot[:3]
        self.federations(snapshot)
        cm_stubs, cm_upstreams = parse_kube_dns(stub_text, up_text)
        root = cm_upstreams or self.upstream
        if not root and resolv_text is not None:
            root = resolv_conf_nameservers(resolv_text)
            if not root:
                raise ConfigError("upstream-resolv-conf", f"{self.resolv_conf} names no nameserver")
        stubs: dict[str, tuple[tuple[HostPort, ...], bool]] = {z: (s, False) for z, s in cm_stubs.items()}
        for zone, servers, tcp in self.stub_domains:
            if zone in stubs:
                log.warning("stub domain %s: --stub-domain wins over the kube-dns ConfigMap", zone)
            stubs[zone] = (servers, tcp)
        specs = self.zone_specs(snapshot)
        if not specs and self.defaults is None:
            return Routes(root=tuple(root), root_force_tcp=self.force_tcp, stubs=stubs)
        if cm_upstreams:  # upstreamNameservers wins over every other root source, `.`'s upstreams too
            specs = tuple(replace(z, upstreams=None) if not z.name else z for z in specs)
        defaults = self.defaults or Zone(force_tcp=self.force_tcp)
        zones = resolve_zones(specs, defaults, root=tuple(root), stubs=stubs)
        dot = zones[""]
        return Routes(root=dot.upstreams, root_force_tcp=dot.force_tcp,
                      stubs={name: (z.upstreams, z.force_tcp) for name, z in zones.items() if name},
                      zones=zones)


class ConfigWatcher:
    """Re-reads the file sources every `period` and applies a changed, valid config.

    A file that cannot be used (not UTF-8, not JSON, no nameserver, an unreadable path, any other
    failure) is logged once per new content with the reason and the previous config kept whole; the
    task never ends on it (an unexpected error is counted and logged like an invalid file). Shown as
    the "upstream_config" section of /status and /metrics: reloads, errors, and a condition while
    the files on disk are not the config in use (`status`)."""

    def __init__(self, sources: RouteSources, forwarder: Forwarder, *, period: float = 10.0,
                 snapshot: tuple[str | None, ...] | None = None,
                 on_reload: Callable[[], None] | None = None,
                 on_federations: Callable[[tuple[tuple[str, str], ...]], None] | None = None,
                 on_zones: Callable[[ZoneTable, set[str]], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.sources = sources
        self.forwarder = forwarder
        self.period = period
        self.on_reload = on_reload  # new routes: e.g. probe them for loops
        self.on_federations = on_federations  # every applied config: the federations it names
        self.on_zones = on_zones  # zones whose settings changed: (the new table, their names): their cache goes
        self.clock = clock
        self.last = snapshot
        self.reloads = 0
        self.errors = 0
        self.last_error = ""
        self.invalid_since: float | None = None  # wall time the files on disk stopped being usable
        self._bad: tuple[tuple[str | None, ...] | None, str] | None = None  # (snapshot, reason) reported last
        self.missing_dir: str | None = sources.missing_dir()  # said at start (Agent), again when it changes

    async def poll_once(self) -> bool:
        """Read the sources; True when a new config was applied. Never raises (but CancelledError)."""
        try:
            return await self._poll()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the task must outlive any file and any bug reading it
            return self._invalid(ConfigError("upstream", f"{exc.__class__.__name__}: {exc}"), None)

    async def _poll(self) -> bool:
        missing = await asyncio.to_thread(self.sources.missing_dir)
        if missing != self.missing_dir:
            if missing is not None:
                log.warning("%s", missing)
            else:
                log.info("kube-dns-config-dir %s exists now: reading it", self.sources.kube_dns_dir)
            self.missing_dir = missing
        try:
            snap = await asyncio.to_thread(self.sources.snapshot)
        except (ConfigError, OSError) as exc:
            return self._invalid(exc, None)
        if snap == self.last:
            self._usable()
            return False
        try:
            routes = self.sources.build(snap)
            federations = self.sources.federations(snap)
            old = self.forwarder.routes()
            self.forwarder.configure(routes)
        except ConfigError as exc:
            return self._invalid(exc, snap)
        self.last = snap
        self.reloads += 1
        self._usable()
        if self.on_federations is not None:
            self.on_federations(federations)
        changed = ZoneTable(old.zones).changed(ZoneTable(routes.zones)) if old.zones or routes.zones else set()
        if changed and self.on_zones is not None:
            self.on_zones(ZoneTable(routes.zones), changed)
        if routes != old:
            log.info("upstream config reloaded: %s", describe_routes(routes))
            if self.on_reload is not None:
                self.on_reload()
        return True

    def _usable(self) -> None:
        if self.invalid_since is not None:
            log.info("upstream config files usable again")
        self.invalid_since = None
        self._bad = None

    def _invalid(self, exc: Exception, snap: tuple[str | None, ...] | None) -> bool:
        """Keep the config in use; count and log a bad content once (the same file, or the same reason
        for a file that cannot be read, re-read every period is not a new error)."""
        reason = str(exc)
        marker = (snap, reason)
        if marker != self._bad:
            self.errors += 1
            self.last_error = reason
            log.error("invalid upstream config, keeping the previous one: %s", reason)
        if self.invalid_since is None:
            self.invalid_since = self.clock()
        self._bad = marker
        return False

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            await self.poll_once()

    def status(self) -> dict[str, Any]:
        """The "upstream_config" section of /status and /metrics (provider contract in nodedns.metrics.registry)."""
        out: dict[str, Any] = {"reloads": self.reloads, "errors": self.errors, "last_error": self.last_error,
                               "invalid": self.invalid_since is not None, "conditions": []}
        if self.sources.kube_dns_dir:
            out["kube_dns_config_dir"] = {"path": self.sources.kube_dns_dir, "exists": self.missing_dir is None}
        if self.invalid_since is not None:
            out["conditions"] = [{
                "type": "UpstreamConfigInvalid",
                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.invalid_since)),
                "message": f"the upstream config files cannot be used ({self.last_error}); the previous config "
                           "is in use until they are fixed",
            }]
        return out


def route_text(addr: HostPort) -> str:
    """`ADDR:PORT`, or `tls://ADDR:PORT#NAME` for a DNS-over-TLS upstream (with its name when it has one)."""
    text = _addr_text(*addr)
    if isinstance(addr, TLSUpstream):
        return TLS_PREFIX + text + (f"#{addr.name}" if addr.name else "")
    return text


def describe_routes(routes: Routes) -> str:
    parts = []
    if routes.root:
        tcp = " (tcp)" if routes.root_force_tcp else ""
        parts.append(". -> " + ", ".join(route_text(a) for a in routes.root) + tcp)
    if not routes.root and "" in routes.zones:
        parts.append(". -> none")
    for zone, (servers, tcp_only) in sorted(routes.stubs.items()):
        tcp = " (tcp)" if tcp_only else ""
        parts.append(f"{zone} -> " + ", ".join(route_text(a) for a in servers) + tcp)
    return "; ".join(parts) or "no upstreams"
