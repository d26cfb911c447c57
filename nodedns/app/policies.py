"""The DNS policy book kept up to date by the index owner: built again when a Pod, a Namespace or a policy
changes (once per loop turn); synced from the API, the RPZ feeds' ConfigMaps watched and the policies'
status written (nodedns.policy.feeds, nodedns.policy.status). A worker's book is what the owner pushes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from nodedns.cluster import objects as k8s
from nodedns.cluster.changes import Change
from nodedns.cluster.index import Index
from nodedns.policy.book import PolicyBook
from nodedns.runtime.tasks import Tasks

if TYPE_CHECKING:  # imported where used: a worker never watches (nor loads the API client)
    from nodedns.cluster.apisync import KubeSync
    from nodedns.policy.feeds import FeedWatches
    from nodedns.policy.status import StatusWriter

# index changes the DNS policy book is built from ("": everything may have changed)
POLICY_INPUTS = frozenset((k8s.POD, k8s.NAMESPACE, *k8s.POLICY_KINDS, ""))


class PolicyUpkeep:
    """The book of `index`'s policies; `changed` is its listener on the watch path."""

    def __init__(self, book: PolicyBook, index: Index, tasks: Tasks) -> None:
        self.book = book
        self.index = index
        self._tasks = tasks
        self._due = False
        # the index owner synced from the API: the RPZ feeds' ConfigMaps watched, the policies' status written
        self.feeds: FeedWatches | None = None
        self.status: StatusWriter | None = None

    def changed(self, change: Change) -> None:
        """A Pod, a Namespace or a DNS policy changed: the policy book is built again (once per loop turn)."""
        if change.kind not in POLICY_INPUTS or self._due:
            return
        self._due = True
        try:
            asyncio.get_running_loop().call_soon(self.rebuild)
        except RuntimeError:  # no loop yet (built, not started): built now
            self.rebuild()

    def rebuild(self) -> None:
        self._due = False
        if self.book.owner:
            self.book.rebuild(self.index)
            if self.feeds is not None:
                self.feeds.sync()  # the ConfigMaps the policies name now
            if self.status is not None:
                self.status.reconcile()

    def start(self, kube: KubeSync | None, *, manifests: bool) -> None:
        """Synced from the API as the index owner: watch the ConfigMaps of RPZ feeds, write the policies' status."""
        if manifests and self.book.owner:
            self.book.no_feeds = "RPZ feeds are read from the API server only (this agent reads --manifests)"
            self.rebuild()
        if kube is None or kube.http is None or not self.book.owner:
            return
        from nodedns.policy.feeds import FeedWatches  # the index owner's alone (a worker never watches)
        from nodedns.policy.status import StatusWriter

        http = kube.http
        self.feeds = FeedWatches(self.book, kube, lambda: self.changed(Change("", None, None)))
        self.status = StatusWriter(self.book, self.index, http.patch)
        self._tasks.spawn(self._upkeep(), "policy-upkeep")
        self.rebuild()

    async def _upkeep(self) -> None:
        """Every few seconds: a feed's ConfigMap the API server refuses, a status write due again."""
        while True:
            await asyncio.sleep(2.0)
            if self.feeds is not None:
                self.feeds.refused()
            if self.status is not None:
                self.status.reconcile()

    def stop(self) -> None:
        if self.feeds is not None:
            self.feeds.stop()
        if self.status is not None:
            self.status.stop()
