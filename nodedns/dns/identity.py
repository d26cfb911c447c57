"""Which agent answered: the server identity a client may ask for in class CH and with NSID (pure).

Operators debugging a cluster ask a node-local agent who it is the way they ask any server:

    dig @169.254.20.10 CH TXT id.server.        RFC 4892: the node name
    dig @169.254.20.10 CH TXT hostname.bind.    the older name of the same question (BIND)
    dig @169.254.20.10 +nsid web.default.svc.cluster.local
                                                RFC 5001: the node name in the reply's OPT record
    dig @169.254.20.10 CH TXT version.bind.     (also version.server.) the --version-reply text;
                                                REFUSED when it is not set, so a scan learns nothing

The node name is `--node-name` (the DaemonSet sets NODE_NAME from the Pod's spec.nodeName), else
the host name (`socket.gethostname()`, given by the wiring: on the host network that is the node's
own). The resolver decides the rcodes (REFUSED for every other CH question); this module only says
what the texts are.
"""

from __future__ import annotations

from dataclasses import dataclass

ID_NAMES = frozenset({"id.server", "hostname.bind"})
VERSION_NAMES = frozenset({"version.bind", "version.server"})
TXT_CHUNK = 255  # a TXT character-string holds at most 255 bytes


def _chunks(text: str) -> tuple[str, ...]:
    """The text as TXT strings of at most 255 bytes each (UTF-8, never split inside a character)."""
    pieces: list[str] = []
    current, size = "", 0
    for ch in text:
        n = len(ch.encode("utf-8"))
        if size + n > TXT_CHUNK:
            pieces.append(current)
            current, size = "", 0
        current += ch
        size += n
    pieces.append(current)
    return tuple(pieces)


@dataclass(frozen=True, slots=True)
class Identity:
    """The node name (id.server., hostname.bind., NSID) and the optional version text."""

    name: str
    version: str = ""

    def txt(self, qname: str) -> tuple[str, ...] | None:
        """The TXT strings answering a CH question for `qname` (lowercase, no trailing dot), or None."""
        if qname in ID_NAMES:
            return _chunks(self.name)
        if qname in VERSION_NAMES and self.version:
            return _chunks(self.version)
        return None

    @property
    def nsid(self) -> bytes:
        """The NSID option's payload: the node name's bytes."""
        return self.name.encode("utf-8")[:0xFFFF]


def node_identity(node_name: str, hostname: str, version: str = "") -> Identity:
    """The identity of an agent: its node name when it has one, else the host name."""
    return Identity(node_name or hostname, version)
