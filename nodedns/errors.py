"""The exception tree of nodedns: one root, a subclass per decision a caller makes.

    NodednsError                  root; never raised itself
    +-- ConfigError               a flag or config key is wrong: exit non-zero naming the key
    +-- ManifestError             a manifest file cannot be read or parsed as a whole
    +-- ObjectError               one Kubernetes object is invalid: skip it, log why, go on
    +-- PodSpecError              a Pod the API server would reject (field path + reason)
    +-- PodNotFound               a Pod asked for by name is not in the index (explain: 404)
    +-- HostResolvConfError       the node's resolv.conf cannot be used (kubelet would fail too)
    +-- WireError                 bytes that are not a DNS message we can answer
    |   +-- FormatError           the header is readable: answer FORMERR
    +-- EncodeError               an answer holds a name the wire cannot carry: answer SERVFAIL
    +-- UpstreamError             forwarding failed (timeout, refused, bad answer)
    |   +-- UpstreamBusy          too many upstream queries in flight: answer REFUSED
    +-- ApiError                  the Kubernetes API failed a request: count it, back off, retry
    |   +-- ApiGone               410 Gone / Expired: the resourceVersion is too old, relist
    |   +-- ApiUnauthorized       401: the credentials are stale, reload them, then retry
    +-- DuplicateAgent            another process serves our DNS address outside our roster: exit 2
    +-- ListenError               a listener cannot bind its address: exit 1 naming the flag, the
    |                             address and what is missing (the port is taken, a privilege)
    +-- NetifError                netlink or firewall setup failed (counted by cause, retried; refused
    |                             for lack of NET_ADMIN when the node is first set up: exit 1)
    +-- HandoverError             the hand-over roster cannot be used (its mutex stays held)

The docstring of each class is its message when raised without arguments.
"""

from __future__ import annotations


class NodednsError(Exception):
    """nodedns failed."""

    def __init__(self, *args: object) -> None:
        if not args:
            args = ((self.__doc__ or "").strip().splitlines()[0],)
        super().__init__(*args)


class ConfigError(NodednsError):
    """The configuration is invalid."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class ManifestError(NodednsError):
    """The manifest file cannot be loaded."""


class ObjectError(NodednsError):
    """A Kubernetes object is invalid and was skipped."""

    def __init__(self, ref: str, reason: str) -> None:
        super().__init__(f"{ref}: {reason}")
        self.ref = ref
        self.reason = reason


class PodSpecError(NodednsError):
    """The Pod would be rejected by the API server."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in errors))
        self.errors = errors


class PodNotFound(NodednsError):
    """The Pod is not in the agent's index."""


class HostResolvConfError(NodednsError):
    """The host resolv.conf cannot be used to form pod DNS."""


class WireError(NodednsError):
    """The bytes are not a DNS message."""


class FormatError(WireError):
    """The DNS message is malformed but its header is readable."""


class EncodeError(NodednsError):
    """The answer cannot be put on the wire (a name too long, an empty or oversized label)."""


class UpstreamError(NodednsError):
    """Forwarding to the upstream failed."""


class UpstreamBusy(UpstreamError):
    """Too many upstream queries are in flight."""


class ApiError(NodednsError):
    """The Kubernetes API request failed."""

    def __init__(self, reason: str, *, code: int = 0, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.retry_after = retry_after  # seconds the server asked us to wait (Retry-After on 429/503)


class ApiGone(ApiError):
    """The resourceVersion is too old (410 Gone): relist."""


class ApiUnauthorized(ApiError):
    """The API server rejected the credentials (401): reload them."""


class DuplicateAgent(NodednsError):
    """Another process already serves this agent's DNS address and is not a hand-over predecessor."""


class ListenError(NodednsError):
    """A listener cannot bind its address."""

    def __init__(self, flag: str, where: str, exc: OSError) -> None:
        super().__init__(f"{flag} {where}: {listen_reason(flag, where, exc)}")
        self.flag = flag
        self.where = where
        self.errno = exc.errno


PRIVILEGED_BELOW = 1024  # net.ipv4.ip_unprivileged_port_start's default


def listen_reason(flag: str, where: str, exc: OSError) -> str:
    """Why `where` (ADDR:PORT, [v6]:PORT or unix:/PATH) cannot be bound, and what would do, in words."""
    import errno  # noqa: PLC0415 - only on this error path

    port_text = where.rpartition(":")[2]
    port = int(port_text) if port_text.isdigit() and not where.startswith("unix:") else None
    if exc.errno == errno.EACCES and port is not None:
        return (f"permission denied: a port below {PRIVILEGED_BELOW} needs the NET_BIND_SERVICE capability "
                f"(root has it; in a container add it to securityContext.capabilities; for a binary: setcap "
                f"cap_net_bind_service=+ep), or give {flag} a port >= {PRIVILEGED_BELOW} (e.g. 127.0.0.1:5353)")
    if exc.errno == errno.EACCES:
        return "permission denied: this user cannot create the socket there"
    if exc.errno == errno.EADDRINUSE:
        how = f" (`ss -lnp 'sport = :{port}'` names it)" if port else ""
        return f"address in use: another process listens there{how}; stop it, or give {flag} another address"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"no such address on this machine (give {flag} an address of one of its interfaces)"
    return exc.strerror or str(exc)


class NetifError(NodednsError):
    """Network interface or firewall setup failed."""

    PERMISSION = "permission"  # the cause of a refusal for lack of privilege (NET_ADMIN): never transient
    NO_NET_ADMIN = "the agent lacks the NET_ADMIN capability the node setup needs"

    def __init__(self, cause: str, reason: str) -> None:
        super().__init__(f"{cause}: {reason}")
        self.cause = cause
        self.reason = reason


class HandoverError(NodednsError):
    """The hand-over roster cannot be used."""
