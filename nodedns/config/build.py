"""The raw values (flags and the config file, merged) read into a `Config` by the option table, and the
checks across options (`build`); the TLS context of tls:// upstreams (`tls_context`).
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Iterable, Mapping
from typing import Any

from nodedns.config.options import OPTIONS, OPTIONS_BY_KEY, Config, Option, near
from nodedns.config.values import DEFAULT_UPSTREAM_RESOLV_CONF, UPSTREAM_NONE
from nodedns.config.zones import check_zones, parse_zones
from nodedns.errors import ConfigError


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
