"""The wiring's part for a resolver a test builds alone: its parts built as the agent builds them, its stored
answers following the index's changes, and the Forwarding doubles it forwards to.

    resolver = watched(resolver_of(records=..., index=index, cluster_answers=...))

The agent does this in app.Agent (its parts given to the Resolver) and app.Agent._wire_changes (with its
other change listeners); a test that builds a Resolver without an agent calls `resolver_of` with the
settings of the resolver and its parts alike, and `watched` so index changes drop the answers they touch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodedns.cluster.changes import Changes
from nodedns.cluster.index import Index
from nodedns.cluster.records import ClusterRecords
from nodedns.forward.store import ForwardCache
from nodedns.serve.answers import ClusterReplies
from nodedns.serve.cache import ClusterAnswers
from nodedns.serve.chase import Autopathing, Chaser
from nodedns.serve.forwarding import AaaaFilter, Forwarding, ForwardPath
from nodedns.serve.resolver import Resolver


def resolver_of(*, records: ClusterRecords, index: Index, cluster_answers: ClusterAnswers, max_udp_size: int = 1232,
                forward_cache: ForwardCache | None = None, forwarder: Forwarding | None = None,
                stale_recheck: float = 5.0, on_loop: Callable[[str, int], None] | None = None,
                autopath: Autopathing | None = None, client_share: int = 0, namespace_share: int = 0,
                namespace_of: Callable[[str], str | None] | None = None, aaaa_filter: AaaaFilter | None = None,
                hosts_ttl: int = 5, filter_soa: bytes | None = None, stale_mode: str = "verify",
                **kw: Any) -> Resolver:
    """A Resolver given its parts (the forward path, the chaser, the cluster replies) as the agent gives them;
    `kw`: the Resolver's own settings."""
    forwarding = ForwardPath(
        records=records, cluster_answers=cluster_answers, forward_cache=forward_cache, forwarder=forwarder,
        max_udp_size=max_udp_size, stale_recheck=stale_recheck, on_loop=on_loop, client_share=client_share,
        namespace_share=namespace_share,
        namespace_of=namespace_of if namespace_of is not None else (lambda _client: None),
        aaaa_filter=aaaa_filter, hosts_ttl=hosts_ttl, filter_soa=filter_soa, stale_mode=stale_mode)
    chaser = Chaser(records=records, cluster_answers=cluster_answers, forwarding=forwarding, autopath=autopath,
                    max_udp_size=max_udp_size)
    answers = ClusterReplies(
        records=records, index=index, cluster_answers=cluster_answers, autopath=autopath,
        before_sync=kw.get("before_sync") is not None, recursion_available=forwarding.recursion_available,
        max_udp_size=max_udp_size, can_forward=forwarding.can_forward, chaser=chaser)
    return Resolver(records=records, index=index, cluster_answers=cluster_answers, answers=answers,
                    forwarding=forwarding, chaser=chaser, max_udp_size=max_udp_size, autopath=autopath, **kw)


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
