"""The agent's typed configuration: one table of options shared by the flags and the YAML `--config` file.

Every option has one key (`cluster-domain`), used as the flag (`--cluster-domain`) and as the YAML
key (`cluster-domain:`, `cluster_domain:` works too). Precedence: flag > config file > default.
Values are parsed and checked before start-up goes on; an error names the key
(`ttl: must be between 0s and 3600s`). Durations carry units (`500ms`, `5s`, `1m30s`, `1h`).

`values` (the values an option takes and their parsers) > `zones` (`zones:` of the config file) >
`options` (the option table, `Config`) > `build` (raw values to a checked `Config`) > `files` (the
--config file, merged with the flags). Every name is imported from here.
"""

from nodedns.config.build import build, tls_context
from nodedns.config.files import MAX_CONFIG_BYTES, PATH_KEYS, from_sources, load_file, load_text
from nodedns.config.options import GROUPS, OPTIONS, OPTIONS_BY_KEY, Config, Option, near
from nodedns.config.values import (
    DEFAULT_UPSTREAM_RESOLV_CONF,
    DOT_PORT,
    TCP_PREFIX,
    TLS_PREFIX,
    UNIX_PREFIX,
    UPSTREAM_NONE,
    Endpoint,
    HostPort,
    Parser,
    TLSUpstream,
    endpoint_text,
    format_duration,
    format_size,
    parse_duration,
    parse_federations,
    parse_percent,
    parse_size,
    upstream_address,
)
from nodedns.config.zones import (
    MAX_ZONES,
    POLICIES,
    PROTOCOLS,
    ROOT_ZONE,
    STALE_MODES,
    ZONE_KEYS,
    ZoneSpec,
    check_zones,
    parse_zones,
    zone_key,
)
from nodedns.errors import ConfigError

__all__ = [
    "DEFAULT_UPSTREAM_RESOLV_CONF", "DOT_PORT", "GROUPS", "MAX_CONFIG_BYTES", "MAX_ZONES", "OPTIONS", "OPTIONS_BY_KEY",
    "PATH_KEYS", "POLICIES", "PROTOCOLS", "ROOT_ZONE", "STALE_MODES", "TCP_PREFIX", "TLS_PREFIX", "UNIX_PREFIX",
    "UPSTREAM_NONE", "ZONE_KEYS", "Config", "ConfigError", "Endpoint", "HostPort", "Option", "Parser", "TLSUpstream",
    "ZoneSpec", "build", "check_zones", "endpoint_text", "format_duration", "format_size", "from_sources", "load_file",
    "load_text", "near", "parse_duration", "parse_federations", "parse_percent", "parse_size", "parse_zones",
    "tls_context", "upstream_address", "zone_key",
]
