"""The insight feed: what the DNS listeners counted by client address handed to the `Insight`.

The listeners count every answer in a `nodedns.serve.tally.Tally`; once a second (`run`), and whenever this
node's Pods change the address -> Pod map (`pods_changed`), the counts go to the `Insight`, in slices so the
event loop answers between them. `document` is GET /debug/top: the figures as of now, with the DNS policies'
denials. A --workers supervisor keeps the Insight, its workers the tallies (nodedns.workers.modes);
docs/insight.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any

from nodedns.cluster import objects as k8s
from nodedns.cluster.changes import Change
from nodedns.metrics.slots import Slots
from nodedns.runtime.tasks import in_turns
from nodedns.serve.tally import Row, Tally

if TYPE_CHECKING:  # a --workers process holds no Insight
    from nodedns.observe.insight import Insight

INSIGHT_PERIOD = 1.0  # seconds between two hand-overs of the tally to the Insight
INSIGHT_SLICE = 8  # rows (tally entries) handled between two looks at the clock in that hand-over, done in
# loop turns of nodedns.runtime.tasks.TURN_BUDGET


def with_denials(doc: Mapping[str, Any], policy: Mapping[str, Any] | None, namespace: str | None) -> dict[str, Any]:
    """The insight document with the DNS policies' denials (the `policy` section of /status: by Pod, policy and
    rule, bounded by the policies' names and rules, never the names asked): each Pod's own under its entry
    (`denied`, `denied_total`), every row of the node (of `namespace`) as `policy_denied`."""
    rows = [dict(r) for r in (policy or {}).get("denied") or () if isinstance(r, Mapping)
            and (namespace is None or str(r.get("pod", "")).split("/", 1)[0] == namespace)]
    by_pod: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_pod.setdefault(str(r.get("pod")), []).append({"policy": r.get("policy"), "rule": r.get("rule"),
                                                          "count": r.get("count", 0)})
    pods = [{**p, "denied": by_pod.get(str(p.get("pod")), []),
             "denied_total": sum(int(d["count"] or 0) for d in by_pod.get(str(p.get("pod")), [])
                                 if not str(d["rule"]).endswith("(audit)"))}
            for p in doc.get("pods", [])]
    return {**doc, "pods": pods, "policy_denied": rows}


class InsightFeed:
    """The tally (None: not counted in this process) to the Insight (None: kept elsewhere, or --insight off).
    `about` says which agent this is, `policy` is the `policy` section of /status (its denials)."""

    def __init__(self, insight: Insight | None, tally: Tally | None, slots: Slots, *,
                 about: Callable[[], Mapping[str, Any]], policy: Callable[[], Mapping[str, Any] | None]) -> None:
        self.insight = insight
        self.tally = tally
        self.slots = slots
        self.about = about
        self.policy = policy
        self._due = False

    def pods_changed(self, change: Change) -> None:
        """A Pod or this node's Node changed: the address -> Pod map is formed again (once per loop turn)."""
        if change.kind not in (k8s.POD, k8s.NODE, "") or self._due:
            return
        self._due = True
        try:
            asyncio.get_running_loop().call_soon(self.reattribute)
        except RuntimeError:  # no loop yet (built, not started): start() forms it
            self._due = False

    def reattribute(self) -> None:
        self._due = False
        if self.insight is not None and self.insight.refresh():
            self._attribute()

    def _attribute(self) -> None:
        """The address -> Pod map changed: what was counted so far goes under the old one, then the new
        one is used (the --workers supervisor pushes it to its workers instead)."""
        if self.tally is not None and self.insight is not None:
            self.insight.take(self.tally.retag(self.insight.gens, self.slots.labels))

    def rows(self) -> list[Row]:
        """What the listeners counted since the last call (the tally, under the current map)."""
        return self.tally.flush(self.slots.labels) if self.tally is not None else []

    async def rows_sliced(self) -> list[Row]:
        """`rows`, formed in loop turns of TURN_BUDGET (nodedns.runtime.tasks.in_turns), the event loop
        running between them: a second of a busy node's counts is a thousand rows and more."""
        if self.tally is None:
            return []
        return list(await in_turns(self.tally.flusher(self.slots.labels, INSIGHT_SLICE)))

    async def take_sliced(self, rows: list[Row]) -> None:
        """Hand rows to the Insight INSIGHT_SLICE at a time, in loop turns of TURN_BUDGET."""
        assert self.insight is not None
        insight = self.insight

        def steps() -> Generator[None, None, None]:
            for start in range(0, len(rows), INSIGHT_SLICE):
                insight.take(rows[start:start + INSIGHT_SLICE])
                yield

        await in_turns(steps())

    async def run(self) -> None:
        """Hand the tally to the Insight once a second, in slices (the loop answers between them)."""
        assert self.insight is not None
        while True:
            await asyncio.sleep(INSIGHT_PERIOD)
            await self.take_sliced(await self.rows_sliced())

    def document(self, sort: str, namespace: str | None, limit: int) -> Mapping[str, Any]:
        """GET /debug/top: the figures as of now (what the listeners counted so far included), and which
        agent this is."""
        if self.insight is None:
            from nodedns.observe.insight import OFF

            return {**OFF, "agent": self.about()}
        self.insight.take(self.rows())
        doc = self.insight.document(sort=sort, namespace=namespace, limit=limit)
        return {**with_denials(doc, self.policy(), namespace), "agent": self.about()}
