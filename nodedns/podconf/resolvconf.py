"""Form the /etc/resolv.conf a kubelet gives a Pod, or say why the API server would reject the Pod.

Pure: stdlib only, no I/O. It follows docs/resolv-conf-rules.md (Kubernetes >= 1.34 on Linux)
step by step, and the step letters of that page name the code below:

    V  defaulting + API validation   `validate_pod_dns`            errors, fatal (PodSpecError)
    H  parse the host resolv.conf    `parse_host_resolv_conf`      HostResolvConfError if unusable
    P  effective DNS type            `_dns_type`
    B  base configuration            `_base`                       MissingClusterDNS warning
    M  merge spec.dnsConfig          `_merge`
    L  limits                        `_fit_nameservers`, `_fit_searches`   warnings, never fatal
    R  render                        `PodDNS.render`

Entry points (stable; the CLI, the status route (nodedns.podconf.resolvhttp), node-local autopath and
`nodedns explain` call these):

    pod_dns(pod, settings, host_resolv_conf) -> PodDNS       a Pod as parsed from JSON/YAML
    pod_dns_for(spec, settings, host_resolv_conf) -> PodDNS  the same for an already shrunk PodDNSSpec
    PodDNSSpec.from_pod(pod) -> PodDNSSpec                    shrink a Pod to the fields DNS needs
    validate_pod_dns(spec) -> list[(field path, message)]    the API server's checks only
    parse_host_resolv_conf(text) -> HostResolvConf            the kubelet's parser
    check_host(text, path, cluster_domain_set) -> list[HostProblem]   the kubelet's start-up check

`host_resolv_conf` is the text of the kubelet's `--resolv-conf` file, or None for `--resolv-conf=""`.

Where upstream is random (Go map order of options) nodedns uses one canonical order: the first appearance
of each option name, its value replaced in place by later tokens, new names appended in Pod order.
"""

from __future__ import annotations

import enum
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nodedns.errors import ConfigError, HostResolvConfError, ManifestError, PodSpecError

__all__ = [
    "CLUSTER_FIRST",
    "CLUSTER_FIRST_WITH_HOST_NET",
    "DEFAULT",
    "DNS_POLICIES",
    "MAX_HTTP_BODY_BYTES",
    "MAX_NAMESERVERS",
    "MAX_RESOLV_CONF_BYTES",
    "MAX_SEARCH_LINE_CHARS",
    "MAX_SEARCH_PATHS",
    "MAX_SEARCH_PATH_CHARS",
    "NONE",
    "DNSOption",
    "DNSWarning",
    "HostProblem",
    "HostResolvConf",
    "KubeletDNS",
    "PodDNS",
    "PodDNSConfig",
    "PodDNSSpec",
    "WarningKind",
    "check_host",
    "parse_host_resolv_conf",
    "pod_dns",
    "pod_dns_for",
    "validate_pod_dns",
]

# --- constants (pkg/apis/core/validation MaxDNS*, kubelet dns.go) -------------------------------------

CLUSTER_FIRST_WITH_HOST_NET = "ClusterFirstWithHostNet"
CLUSTER_FIRST = "ClusterFirst"
DEFAULT = "Default"
NONE = "None"
# In the order the API server lists them in "supported values".
DNS_POLICIES: tuple[str, ...] = (CLUSTER_FIRST_WITH_HOST_NET, CLUSTER_FIRST, DEFAULT, NONE)

MAX_NAMESERVERS = 3
MAX_SEARCH_PATHS = 32
MAX_SEARCH_LINE_CHARS = 2048
MAX_SEARCH_PATH_CHARS = 253  # DNS1123SubdomainMaxLength; longer entries abort glibc 2.28
MAX_RESOLV_CONF_BYTES = 10 << 20  # kubelet reads at most 10 MiB of the host file
MAX_HTTP_BODY_BYTES = 3 << 20  # the API server's request body limit
DEFAULT_OPTIONS: tuple[str, ...] = ("ndots:5",)

# Go's unicode.IsSpace set, which strings.TrimSpace and strings.Fields use. Python's str.split() would
# also split on \x1c-\x1f, which the kubelet keeps inside a field.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" + (
    "\u2028\u2029\u202f\u205f\u3000"
)
_FIELD = re.compile("[^" + re.escape(_GO_SPACE) + "]+")

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_RELAXED_LABEL_FMT = "_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
_RELAXED_SUBDOMAIN_FMT = _RELAXED_LABEL_FMT + r"(\." + _RELAXED_LABEL_FMT + ")*"
_LABEL_RE = re.compile(_LABEL_FMT)
_SUBDOMAIN_RE = re.compile(_SUBDOMAIN_FMT)
_RELAXED_SUBDOMAIN_RE = re.compile(_RELAXED_SUBDOMAIN_FMT)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    f"and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    f"'{_LABEL_FMT}')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    f"start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_SUBDOMAIN_FMT}')"
)
_RELAXED_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-', '_' or '.', and "
    f"must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_RELAXED_SUBDOMAIN_FMT}')"
)
_IP_MSG = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"

FieldError = tuple[str, str]  # (field path, message), as PodSpecError carries them


# --- the records --------------------------------------------------------------------------------------


class WarningKind(enum.StrEnum):
    """What a warning is about; the value is the name the CLI and the HTTP route print."""

    MISSING_CLUSTER_DNS = "MissingClusterDNS"
    NAMESERVER_LIMIT = "NameserverLimit"
    SEARCH_LIMIT = "SearchLimit"

    @property
    def event_reason(self) -> str:
        """The `reason` of the Warning event the kubelet records for it."""
        return "MissingClusterDNS" if self is WarningKind.MISSING_CLUSTER_DNS else "DNSConfigForming"


@dataclass(frozen=True, slots=True)
class DNSWarning:
    """A non-fatal finding; `message` is the kubelet's event text, word for word."""

    kind: WarningKind
    message: str

    def line(self) -> str:
        """`<Kind>: <text>`, the form the CLI prints after `warning: ` and the HTTP route quotes."""
        return f"{self.kind}: {self.message}"


@dataclass(frozen=True, slots=True)
class DNSOption:
    """One `spec.dnsConfig.options[]` entry; `value` None means no value (also for "")."""

    name: str
    value: str | None = None


@dataclass(frozen=True, slots=True)
class PodDNSConfig:
    """`spec.dnsConfig`, present. Lists are kept raw: duplicates and trailing dots as the user wrote them."""

    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[DNSOption, ...] = ()


@dataclass(frozen=True, slots=True)
class PodDNSSpec:
    """The fields of a Pod that decide its DNS, after v1 defaulting (V1).

    `dns_config` None means `spec.dnsConfig` is absent (or null), which is not the same as an empty
    `PodDNSConfig()` (`dnsConfig: {}`): only a present one is merged (§5 M4).
    """

    namespace: str = "default"
    dns_policy: str = CLUSTER_FIRST
    host_network: bool = False
    dns_config: PodDNSConfig | None = None

    def __post_init__(self) -> None:
        # V1 and §1: "" behaves as absent.
        if not self.dns_policy:
            object.__setattr__(self, "dns_policy", CLUSTER_FIRST)
        if not self.namespace:
            object.__setattr__(self, "namespace", "default")

    @classmethod
    def from_pod(cls, pod: object) -> PodDNSSpec:
        """Shrink a Pod (a dict as parsed from JSON or YAML) to its DNS fields.

        Raises ManifestError if it is not a Pod at all, PodSpecError if a field has the wrong JSON type.
        """
        spec, errors = _extract(pod)
        if errors:
            raise PodSpecError(errors)
        return spec


@dataclass(frozen=True, slots=True)
class KubeletDNS:
    """The kubelet's DNS settings: `clusterDNS`, `clusterDomain` and the node's IPs.

    IPs are stored in canonical form (`FD00:0:0:0:0:0:0:A` becomes `fd00::a`, an IPv4-mapped IPv6
    address becomes IPv4), as the kubelet prints them. An invalid IP raises ConfigError naming the key.
    The host resolv.conf is not part of this record: callers pass its text (or None) separately.
    """

    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = ""
    node_ips: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "cluster_dns", _canonical_ips(self.cluster_dns, "clusterDNS"))
        object.__setattr__(self, "node_ips", _canonical_ips(self.node_ips, "nodeIPs"))

    @classmethod
    def from_flags(cls, *, cluster_dns: str, cluster_domain: str, node_ips: str = "") -> KubeletDNS:
        """Build from comma-separated flag values; `""` means none configured."""
        return cls(
            cluster_dns=_canonical_ips(_split_flag(cluster_dns), "--cluster-dns"),
            cluster_domain=cluster_domain,
            node_ips=_canonical_ips(_split_flag(node_ips), "--node-ips"),
        )


@dataclass(frozen=True, slots=True)
class HostResolvConf:
    """What the kubelet takes from the host file (H): the nameservers, the last `search`, the options."""

    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodDNS:
    """The Pod's DNS: what goes into its /etc/resolv.conf, plus the warnings the kubelet would record."""

    nameservers: tuple[str, ...]
    searches: tuple[str, ...]
    options: tuple[str, ...]
    warnings: tuple[DNSWarning, ...] = ()

    def render(self) -> str:
        """The file text (R): nameserver lines, then `search`, then `options`; "" if all are empty."""
        lines = [f"nameserver {ns}\n" for ns in self.nameservers]
        if self.searches:
            lines.append("search " + " ".join(self.searches) + "\n")
        if self.options:
            lines.append("options " + " ".join(self.options) + "\n")
        return "".join(lines)


@dataclass(frozen=True, slots=True)
class HostProblem:
    """One finding of `check_host`; `line` is 1-based, or None for a finding about the whole file."""

    message: str
    line: int | None = None


# --- entry points -------------------------------------------------------------------------------------


def pod_dns(
    pod: object,
    settings: KubeletDNS,
    host_resolv_conf: str | None,
    *,
    relaxed_search_validation: bool = True,
) -> PodDNS:
    """The DNS the kubelet gives this Pod: a dict as parsed from a JSON or YAML manifest.

    `pod` is typed `object` because it is checked here: any parsed JSON value may come in.
    Raises ManifestError if it is not a Pod (not an object, another kind), PodSpecError with every
    (field path, message) the API server would report, HostResolvConfError if the host file breaks
    pod DNS on the node.
    `relaxed_search_validation=False` applies the pre-1.32 search syntax (V9.3).
    """
    spec, type_errors = _extract(pod)
    if type_errors:
        # Validating fields we could not read would only add confusing follow-up errors; the policy
        # check does not depend on them, so it is still reported.
        raise PodSpecError(type_errors + _validate_policy(spec.dns_policy))
    return pod_dns_for(spec, settings, host_resolv_conf, relaxed_search_validation=relaxed_search_validation)


def pod_dns_for(
    spec: PodDNSSpec,
    settings: KubeletDNS,
    host_resolv_conf: str | None,
    *,
    relaxed_search_validation: bool = True,
) -> PodDNS:
    """`pod_dns` for a Pod already shrunk to a PodDNSSpec: V, H, P, B, M, L in that order."""
    errors = validate_pod_dns(spec, relaxed_search_validation=relaxed_search_validation)
    if errors:
        raise PodSpecError(errors)
    # H before P: the kubelet parses the host file before it looks at the policy, so a broken host file
    # fails `None` pods too (§8.12).
    host = parse_host_resolv_conf(host_resolv_conf) if host_resolv_conf is not None else None
    warnings: list[DNSWarning] = []
    nameservers, searches, options = _base(spec, settings, host, warnings)
    if spec.dns_config is not None:
        nameservers, searches, options = _merge(nameservers, searches, options, spec.dns_config)
    nameservers = _fit_nameservers(nameservers, warnings)
    searches = _fit_searches(searches, warnings)
    return PodDNS(tuple(nameservers), tuple(searches), tuple(options), tuple(warnings))


# --- V: validation ------------------------------------------------------------------------------------


def validate_pod_dns(spec: PodDNSSpec, *, relaxed_search_validation: bool = True) -> list[FieldError]:
    """Every error the API server reports for these fields (V2-V10, plus the namespace), in its order.

    Messages follow the API server's form (`Invalid value: "x": ...`, `Required value: ...`,
    `Unsupported value: ...`); the path is the first element of each pair.
    """
    errors = _validate_namespace(spec.namespace) + _validate_policy(spec.dns_policy)
    cfg = spec.dns_config
    if spec.dns_policy == NONE:
        if cfg is None:  # V3
            errors.append(
                ("spec.dnsConfig", "Required value: must provide `dnsConfig` when `dnsPolicy` is None")
            )
            return errors
        if not cfg.nameservers:  # V4
            errors.append(
                (
                    "spec.dnsConfig.nameservers",
                    "Required value: must provide at least one DNS nameserver when `dnsPolicy` is None",
                )
            )
            return errors
    if cfg is None:
        return errors
    path = "spec.dnsConfig"
    if len(cfg.nameservers) > MAX_NAMESERVERS:  # V5: the raw list, duplicates included
        errors.append(
            (
                f"{path}.nameservers",
                f"Invalid value: {_go_strings(cfg.nameservers)}: "
                f"must not have more than {MAX_NAMESERVERS} nameservers",
            )
        )
    for i, ns in enumerate(cfg.nameservers):  # V6
        if not _is_ip_literal(ns):
            errors.append((f"{path}.nameservers[{i}]", f"Invalid value: {_go_quote(ns)}: {_IP_MSG}"))
    if len(cfg.searches) > MAX_SEARCH_PATHS:  # V7
        errors.append(
            (
                f"{path}.searches",
                f"Invalid value: {_go_strings(cfg.searches)}: "
                f"must not have more than {MAX_SEARCH_PATHS} search paths",
            )
        )
    if _blen(" ".join(cfg.searches)) > MAX_SEARCH_LINE_CHARS:  # V8
        errors.append(
            (
                f"{path}.searches",
                f"Invalid value: {_go_strings(cfg.searches)}: must not have more than "
                f"{MAX_SEARCH_LINE_CHARS} characters (including spaces) in the search list",
            )
        )
    for i, search in enumerate(cfg.searches):  # V9
        errors.extend(
            (f"{path}.searches[{i}]", msg)
            for msg in _search_errors(search, relaxed=relaxed_search_validation)
        )
    for i, option in enumerate(cfg.options):  # V10
        if not option.name:
            errors.append((f"{path}.options[{i}]", "Required value: must not be empty"))
    return errors


def _validate_policy(policy: str) -> list[FieldError]:
    if policy in DNS_POLICIES:  # V2
        return []
    supported = ", ".join(f'"{p}"' for p in DNS_POLICIES)
    return [("spec.dnsPolicy", f"Unsupported value: {_go_quote(policy)}: supported values: {supported}")]


def _validate_namespace(namespace: str) -> list[FieldError]:
    # Not a DNS rule, but the API server never stores a Pod in such a namespace, and the namespace is
    # written into the search line.
    errors = []
    if len(namespace) > 63:
        errors.append(
            (
                "metadata.namespace",
                f"Invalid value: {_go_quote(namespace)}: must be no more than 63 characters",
            )
        )
    if not _LABEL_RE.fullmatch(namespace):
        errors.append(("metadata.namespace", f"Invalid value: {_go_quote(namespace)}: {_LABEL_MSG}"))
    return errors


def _search_errors(search: str, *, relaxed: bool) -> list[str]:
    if relaxed and search == ".":  # V9.1
        return []
    name = search.removesuffix(".")  # V9.2: one trailing dot is fine
    errors = []
    if _blen(name) > MAX_SEARCH_PATH_CHARS:
        errors.append(
            f"Invalid value: {_go_quote(name)}: must be no more than {MAX_SEARCH_PATH_CHARS} characters"
        )
    regex, msg = (
        (_RELAXED_SUBDOMAIN_RE, _RELAXED_SUBDOMAIN_MSG) if relaxed else (_SUBDOMAIN_RE, _SUBDOMAIN_MSG)
    )
    if not regex.fullmatch(name):
        errors.append(f"Invalid value: {_go_quote(name)}: {msg}")
    return errors


def _is_ip_literal(text: str) -> bool:
    # V6. Python rejects IPv4 with leading zeros (as the API server's strict mode does) and accepts
    # IPv4-mapped IPv6 (as its legacy mode does); it would accept a `%zone` suffix, which Go does not.
    if "%" in text:
        return False
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


# --- reading a Pod dict -------------------------------------------------------------------------------


def _extract(pod: object) -> tuple[PodDNSSpec, list[FieldError]]:
    """The Pod's DNS fields, and the fields whose JSON type is wrong (which the API server would reject)."""
    if not isinstance(pod, Mapping):
        raise ManifestError(f"expected a Pod object, got {_json_type(pod)}")
    kind = pod.get("kind")
    if kind is not None and kind != "Pod":
        raise ManifestError(f"expected kind Pod, got {_show(kind)}")
    api_version = pod.get("apiVersion")
    if api_version is not None and api_version != "v1":
        raise ManifestError(f"expected apiVersion v1 for a Pod, got {_show(api_version)}")
    errors: list[FieldError] = []
    meta = _object(pod.get("metadata"), "metadata", errors)
    spec = _object(pod.get("spec"), "spec", errors)
    namespace = _string(meta.get("namespace"), "metadata.namespace", errors)
    policy = _string(spec.get("dnsPolicy"), "spec.dnsPolicy", errors)
    host_network = spec.get("hostNetwork")
    if host_network is not None and not isinstance(host_network, bool):
        errors.append(("spec.hostNetwork", f"Invalid value: {_show(host_network)}: must be a boolean"))
        host_network = None
    raw = spec.get("dnsConfig")
    config = None
    if raw is not None:  # null is absent, as for the API server
        if isinstance(raw, Mapping):
            config = PodDNSConfig(
                nameservers=_strings(raw.get("nameservers"), "spec.dnsConfig.nameservers", errors),
                searches=_strings(raw.get("searches"), "spec.dnsConfig.searches", errors),
                options=_options(raw.get("options"), "spec.dnsConfig.options", errors),
            )
        else:
            errors.append(("spec.dnsConfig", f"Invalid value: {_show(raw)}: must be an object"))
    return PodDNSSpec(namespace, policy, bool(host_network), config), errors


def _object(value: object, path: str, errors: list[FieldError]) -> Mapping[str, object]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    errors.append((path, f"Invalid value: {_show(value)}: must be an object"))
    return {}


def _string(value: object, path: str, errors: list[FieldError]) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    errors.append((path, f"Invalid value: {_show(value)}: must be a string"))
    return ""


def _list(value: object, path: str, errors: list[FieldError]) -> Sequence[object]:
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return value
    errors.append((path, f"Invalid value: {_show(value)}: must be a list"))
    return ()


def _strings(value: object, path: str, errors: list[FieldError]) -> tuple[str, ...]:
    out = []
    for i, item in enumerate(_list(value, path, errors)):
        if isinstance(item, str):
            out.append(item)
        else:
            errors.append((f"{path}[{i}]", f"Invalid value: {_show(item)}: must be a string"))
    return tuple(out)


def _options(value: object, path: str, errors: list[FieldError]) -> tuple[DNSOption, ...]:
    out = []
    for i, item in enumerate(_list(value, path, errors)):
        if not isinstance(item, Mapping):
            errors.append((f"{path}[{i}]", f"Invalid value: {_show(item)}: must be an object"))
            continue
        name = _string(item.get("name"), f"{path}[{i}].name", errors)
        option_value = item.get("value")
        if option_value is not None and not isinstance(option_value, str):
            # e.g. the KEP's `value: 2`: the API server refuses a number where a string belongs.
            errors.append((f"{path}[{i}].value", f"Invalid value: {_show(option_value)}: must be a string"))
            continue
        out.append(DNSOption(name, option_value or None))
    return tuple(out)


# --- H: the host file ---------------------------------------------------------------------------------


def parse_host_resolv_conf(text: str) -> HostResolvConf:
    """Parse a host resolv.conf as the kubelet does (H1-H7). Raises HostResolvConfError if unusable."""
    if _blen(text) > MAX_RESOLV_CONF_BYTES:
        raise HostResolvConfError(
            f"the file is larger than the {MAX_RESOLV_CONF_BYTES >> 20} MiB the kubelet reads"
        )
    host, empty_lines = _scan(text)
    if empty_lines:
        where = ", ".join(str(n) for n in empty_lines)
        raise HostResolvConfError(
            f"nameserver list is empty: a nameserver line without an address (line {where}); "
            "the kubelet cannot form DNS for any pod on this node"
        )
    return host


def _scan(text: str) -> tuple[HostResolvConf, list[int]]:
    """H1-H7, plus the numbers of the `nameserver` lines that have no address."""
    nameservers: list[str] = []
    searches: list[str] = []
    options: dict[str, str] = {}  # option name -> token; dict order is the canonical order (H6)
    empty_lines = []
    for number, line in enumerate(text.split("\n"), start=1):  # H1: "\n" only, not str.splitlines()
        if line.strip(_GO_SPACE).startswith("#"):  # H2
            continue
        fields = _FIELD.findall(line)  # H3
        if not fields:
            continue
        keyword = fields[0]
        if keyword == "nameserver":  # H4
            if len(fields) >= 2:
                nameservers.append(fields[1])
            else:
                empty_lines.append(number)
        elif keyword == "search":  # H5: the last line wins; `.` dropped, one trailing dot trimmed
            searches = [s.removesuffix(".") for s in fields[1:] if s != "."]
        elif keyword == "options":  # H6
            for token in fields[1:]:
                options[token.split(":", 1)[0]] = token
    return HostResolvConf(tuple(nameservers), tuple(searches), tuple(options.values())), empty_lines


def check_host(text: str, path: str, cluster_domain_set: bool) -> list[HostProblem]:
    """Lint a node's resolv.conf like the kubelet's start-up check (CheckLimitsForResolvConf, §9).

    The limit messages are the kubelet's event texts. Unlike the kubelet, which stops at the first
    finding, every finding is listed. A `nameserver` line without an address is reported too: the
    kubelet then fails DNS for every pod on the node. `cluster_domain_set` lowers the entry limit by
    the 3 cluster entries prepended to every ClusterFirst pod's search line (32 - 3 = 29).
    """
    if _blen(text) > MAX_RESOLV_CONF_BYTES:
        return [HostProblem(f"Resolv.conf file '{path}' is larger than {MAX_RESOLV_CONF_BYTES >> 20} MiB!")]
    host, empty_lines = _scan(text)
    problems = [
        HostProblem(
            f"Resolv.conf file '{path}' line {n}: nameserver line has no address "
            "(kubelet: nameserver list is empty; no pod on this node gets DNS)",
            line=n,
        )
        for n in empty_lines
    ]
    limit = MAX_SEARCH_PATHS - 3 if cluster_domain_set else MAX_SEARCH_PATHS
    if len(host.searches) > limit:
        problems.append(
            HostProblem(
                f"Resolv.conf file '{path}' contains search line consisting of more than {limit} domains!"
            )
        )
    if any(_blen(s) > MAX_SEARCH_PATH_CHARS for s in host.searches):
        problems.append(
            HostProblem(
                f"Resolv.conf file {_go_quote(path)} contains a search path which length is more than "
                f"allowed {MAX_SEARCH_PATH_CHARS} chars!"
            )
        )
    if _blen(" ".join(host.searches)) > MAX_SEARCH_LINE_CHARS:
        problems.append(
            HostProblem(
                f"Resolv.conf file '{path}' contains search line which length is more than allowed "
                f"{MAX_SEARCH_LINE_CHARS} chars!"
            )
        )
    return problems


# --- P, B, M, L ---------------------------------------------------------------------------------------


class _DNSType(enum.Enum):
    CLUSTER = "cluster"
    HOST = "host"
    NONE = "none"


def _dns_type(spec: PodDNSSpec) -> _DNSType:
    """P1-P4. Only valid policies get here (V2)."""
    if spec.dns_policy == NONE:
        return _DNSType.NONE
    if spec.dns_policy == CLUSTER_FIRST_WITH_HOST_NET:
        return _DNSType.CLUSTER
    if spec.dns_policy == CLUSTER_FIRST and not spec.host_network:
        return _DNSType.CLUSTER
    return _DNSType.HOST  # Default, and ClusterFirst on the host network (silently)


_MISSING_CLUSTER_DNS = DNSWarning(
    WarningKind.MISSING_CLUSTER_DNS,
    'kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. '
    'Falling back to "Default" policy.',
)


def _base(
    spec: PodDNSSpec, settings: KubeletDNS, host: HostResolvConf | None, warnings: list[DNSWarning]
) -> tuple[list[str], list[str], list[str]]:
    """B1-B4: the nameservers, searches and options before dnsConfig is merged."""
    dns_type = _dns_type(spec)
    if dns_type is _DNSType.NONE:  # B1
        return [], [], []
    if dns_type is _DNSType.CLUSTER:
        if settings.cluster_dns:  # B2: host nameservers and options are discarded
            searches = _cluster_searches(spec.namespace, settings, list(host.searches) if host else [])
            return list(settings.cluster_dns), searches, list(DEFAULT_OPTIONS)
        warnings.append(_MISSING_CLUSTER_DNS)  # B3, then as B4
    if host is not None:  # B4
        return list(host.nameservers), list(host.searches), list(host.options)
    loopbacks = ["::1" if ":" in ip else "127.0.0.1" for ip in settings.node_ips]
    return loopbacks or ["127.0.0.1"], ["."], []


def _cluster_searches(namespace: str, settings: KubeletDNS, host_searches: list[str]) -> list[str]:
    domain = settings.cluster_domain
    if not domain:
        return host_searches
    return _dedup([f"{namespace}.svc.{domain}", f"svc.{domain}", domain, *host_searches])


def _merge(
    nameservers: list[str], searches: list[str], options: list[str], cfg: PodDNSConfig
) -> tuple[list[str], list[str], list[str]]:
    """M1-M3: append and de-duplicate nameservers and searches; override options by name."""
    merged: dict[str, str] = {}
    for token in options:
        name, _, value = token.partition(":")
        merged[name] = value
    for option in cfg.options:
        merged[option.name] = option.value or ""  # the name verbatim: `ndots:2` is not split
    return (
        _dedup([*nameservers, *cfg.nameservers]),
        _dedup([*searches, *cfg.searches]),
        [f"{name}:{value}" if value else name for name, value in merged.items()],
    )


def _fit_nameservers(nameservers: list[str], warnings: list[DNSWarning]) -> list[str]:
    """L1: keep the first 3."""
    if len(nameservers) <= MAX_NAMESERVERS:
        return nameservers
    kept = nameservers[:MAX_NAMESERVERS]
    warnings.append(
        DNSWarning(
            WarningKind.NAMESERVER_LIMIT,
            "Nameserver limits were exceeded, some nameservers have been omitted, "
            "the applied nameserver line is: " + " ".join(kept),
        )
    )
    return kept


def _fit_searches(searches: list[str], warnings: list[DNSWarning]) -> list[str]:
    """L2: the first 32, minus entries over 253 bytes, minus the last ones while the line is over 2048."""
    kept = searches[:MAX_SEARCH_PATHS]
    kept = [s for s in kept if _blen(s) <= MAX_SEARCH_PATH_CHARS]
    while _blen(" ".join(kept)) > MAX_SEARCH_LINE_CHARS:
        kept.pop()
    if kept != searches:
        warnings.append(
            DNSWarning(
                WarningKind.SEARCH_LIMIT,
                "Search Line limits were exceeded, some search paths have been omitted, "
                "the applied search line is: " + " ".join(kept),
            )
        )
    return kept


# --- small helpers ------------------------------------------------------------------------------------


def _dedup(items: Iterable[str]) -> list[str]:
    """Keep the first occurrence of each exact string, in order."""
    return list(dict.fromkeys(items))


def _blen(text: str) -> int:
    """Length in bytes, as Go's len(): host files may hold non-ASCII (kept as surrogate escapes)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogateescape"))


def _split_flag(value: str) -> list[str]:
    return value.split(",") if value else []


def _canonical_ips(values: Iterable[str], key: str) -> tuple[str, ...]:
    out = []
    for i, value in enumerate(values):
        try:
            if "%" in value:
                raise ValueError(value)
            ip = ipaddress.ip_address(value.strip())
        except ValueError:
            raise ConfigError(key, f"entry {i + 1} {value!r} is not an IP address") from None
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        out.append(str(ip))
    return tuple(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _go_quote(text: str) -> str:
    """Go's %q, close enough for error messages: escapes quotes, backslashes and unprintables."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _go_strings(items: Sequence[str]) -> str:
    """Go's %#v of a []string, the way the API server shows an invalid list."""
    return "[]string{" + ", ".join(_go_quote(s) for s in items) + "}"


def _show(value: object) -> str:
    shown = json.dumps(value, default=str, ensure_ascii=False)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"
