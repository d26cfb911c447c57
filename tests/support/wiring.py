"""The wiring's part for a resolver a test builds alone: its stored answers follow the index's changes, and
the Forwarding doubles it forwards to.

    resolver = watched(Resolver(records=..., index=index, cluster_answers=...))

The agent does this in app.Agent._wire_changes (with its other change listeners); a test that builds
a Resolver without an agent calls `watched` so index changes drop the answers they touch.
"""

from __future__ import annotations

from nodedns.cluster.changes import Changes
from nodedns.serve.resolver import Resolver


def watched(resolver: Resolver) -> Resolver:
    Changes(resolver.index).add(resolver.answers.index_changed)
    return resolver


class UpstreamDoubleBase:
    """What every in-process Forwarding double says alike: every name routable, no upstream unreachable, no
    loop. A double subclasses it and answers `query(qname, key)` (the key: the query without its ID)."""

    def routable(self, qname: str) -> bool:
        return True

    def unreachable(self, qname: str) -> bool:
        return False

    def looping(self, qname: str) -> bool:
        return False

    def zone_for(self, qname: str) -> None:
        return None  # the flags' settings
