"""nodedns.observe.insightfeed: what the listeners counted handed to the Insight once a second and when this
node's Pods change, in slices; /debug/top's document with the DNS policies' denials (docs/insight.md,
docs/policy.md "Seeing it")."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from nodedns.cluster import objects as k8s
from nodedns.cluster.changes import Change
from nodedns.dns.queries import make_query
from nodedns.metrics.slots import PLUGIN_CACHE, SlotLabels, Slots
from nodedns.observe import insightfeed
from nodedns.observe.insight import OFF
from nodedns.observe.insightfeed import INSIGHT_SLICE, InsightFeed, with_denials
from nodedns.serve.tally import Row, Tally

AGENT = {"node": "node-1", "pid": 4242}


class FakeInsight:
    """The Insight as the feed meets it: what it was handed, in which pieces, and what /debug/top asked."""

    def __init__(self, doc: Mapping[str, Any] | None = None) -> None:
        self.taken: list[list[Row]] = []
        self.gens: dict[str, int] = {}
        self.refreshes = 0
        self.asked: tuple[str, str | None, int] | None = None
        self.doc = doc or {"pods": []}

    def refresh(self) -> bool:  # the address -> Pod map formed again: it changed
        self.refreshes += 1
        self.gens = {"10.244.0.5": self.refreshes}
        return True

    def take(self, rows: Iterable[Row]) -> None:
        self.taken.append(list(rows))

    def document(self, *, sort: str, namespace: str | None, limit: int) -> dict[str, Any]:
        self.asked = (sort, namespace, limit)
        return dict(self.doc)

    def rows(self) -> list[Row]:
        return [r for piece in self.taken for r in piece]


def _feed(insight: FakeInsight | None, policy: Mapping[str, Any] | None = None) -> tuple[InsightFeed, Tally]:
    tally = Tally()
    feed = InsightFeed(insight, tally, Slots(), about=lambda: AGENT, policy=lambda: policy)  # type: ignore[arg-type]
    return feed, tally


def _count(feed: InsightFeed, tally: Tally, names: int, host: str = "10.244.0.5") -> None:
    """`names` different cached answers sent to `host`, once each."""
    slot = feed.slots.slot(SlotLabels(".", "A", "NOERROR", PLUGIN_CACHE, False, False))
    for i in range(names):
        tally.hit(host, bytes((slot,)) + make_query(f"n{i}.example.com", 1)[1:])


POLICY = {"denied": [
    {"pod": "team-a/web-1", "policy": "team-a/no-ads", "rule": "rules[0]", "count": 3},
    {"pod": "team-a/web-1", "policy": "cluster-feeds", "rule": "rpz", "count": 2},
    {"pod": "team-a/web-1", "policy": "team-a/watch", "rule": "rules[1] (audit)", "count": 5},
    {"pod": "team-b/app-1", "policy": "team-b/strict", "rule": "rules[0]", "count": 7},
    "not a row",  # anything else in the section is passed over
]}
ROWS = [r for r in POLICY["denied"] if isinstance(r, dict)]
PODS = {"pods": [{"pod": "team-a/web-1", "queries": 10}, {"pod": "team-b/app-1", "queries": 4},
                 {"pod": "team-a/quiet", "queries": 1}], "nodes": 1}


def test_each_pod_gets_its_own_denials_and_a_total_without_the_audit_ones() -> None:
    doc = with_denials(PODS, POLICY, None)
    pods = {p["pod"]: p for p in doc["pods"]}
    assert pods["team-a/web-1"]["denied"] == [
        {"policy": "team-a/no-ads", "rule": "rules[0]", "count": 3},
        {"policy": "cluster-feeds", "rule": "rpz", "count": 2},
        {"policy": "team-a/watch", "rule": "rules[1] (audit)", "count": 5}]  # listed, marked audit
    assert pods["team-a/web-1"]["denied_total"] == 5  # the audit rule's 5 would have been allowed
    assert pods["team-b/app-1"]["denied"] == [{"policy": "team-b/strict", "rule": "rules[0]", "count": 7}]
    assert pods["team-b/app-1"]["denied_total"] == 7
    assert (pods["team-a/quiet"]["denied"], pods["team-a/quiet"]["denied_total"]) == ([], 0)
    assert pods["team-a/web-1"]["queries"] == 10 and doc["nodes"] == 1  # the rest of the document as it was
    assert doc["policy_denied"] == ROWS  # every denial of the node, by Pod, policy and rule


def test_a_namespace_s_document_has_only_that_namespace_s_denials() -> None:
    doc = with_denials({"pods": [{"pod": "team-a/web-1"}]}, POLICY, "team-a")
    assert doc["policy_denied"] == [r for r in ROWS if str(r["pod"]).startswith("team-a/")]
    assert doc["pods"][0]["denied_total"] == 5
    assert with_denials({"pods": []}, POLICY, "team-c")["policy_denied"] == []


@pytest.mark.parametrize("policy", [None, {}, {"denied": None}])
def test_without_policies_no_pod_has_denials(policy: Mapping[str, Any] | None) -> None:
    doc = with_denials(PODS, policy, None)
    assert [(p["denied"], p["denied_total"]) for p in doc["pods"]] == [([], 0)] * 3
    assert doc["policy_denied"] == []


def test_debug_top_has_what_was_counted_so_far_the_query_s_options_the_denials_and_the_agent() -> None:
    insight = FakeInsight({"pods": [{"pod": "team-a/web-1"}]})
    feed, tally = _feed(insight, POLICY)
    _count(feed, tally, 3)
    doc = feed.document("nxdomain", "team-a", 7)
    assert insight.asked == ("nxdomain", "team-a", 7)
    assert len(insight.rows()) == 3  # the counts since the last hand-over are in the figures
    assert doc["agent"] == AGENT
    assert doc["pods"][0]["denied_total"] == 5
    assert doc["policy_denied"] == [r for r in ROWS if str(r["pod"]).startswith("team-a/")]  # of its namespace


def test_debug_top_with_insight_off_says_so_and_which_agent_this_is() -> None:
    feed, _ = _feed(None, POLICY)
    assert feed.document("queries", None, 50) == {**OFF, "agent": AGENT}


def test_a_pod_or_node_change_hands_what_was_counted_over_under_the_old_map_once_a_loop_turn() -> None:
    insight = FakeInsight()
    feed, tally = _feed(insight)

    async def main() -> tuple[int, int, int, int]:
        _count(feed, tally, 2)
        for kind in (k8s.POD, k8s.NODE, k8s.POD):  # three changes in one turn: one new map
            feed.pods_changed(Change(kind, None, None))
        await asyncio.sleep(0)
        first = insight.refreshes
        handed = len(insight.rows())
        feed.pods_changed(Change(k8s.SERVICE, None, None))  # not the address -> Pod map
        await asyncio.sleep(0)
        after_service = insight.refreshes
        feed.pods_changed(Change("", None, None))  # a relist: anything may have changed
        await asyncio.sleep(0)
        return first, handed, after_service, insight.refreshes

    assert asyncio.run(main()) == (1, 2, 1, 2)
    assert tally.gens == {"10.244.0.5": 2}  # the new map counts from now on


def test_a_pod_change_before_the_loop_runs_does_not_stop_the_later_ones() -> None:
    insight = FakeInsight()
    feed, _ = _feed(insight)
    feed.pods_changed(Change(k8s.POD, None, None))  # built, not started: no loop yet

    async def main() -> int:
        feed.pods_changed(Change(k8s.POD, None, None))
        await asyncio.sleep(0)
        return insight.refreshes

    assert asyncio.run(main()) == 1


def test_the_tally_goes_to_the_insight_each_second_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    insight = FakeInsight()
    feed, tally = _feed(insight)
    slept: list[float] = []

    async def main() -> None:
        real_sleep = asyncio.sleep

        async def sleep(seconds: float) -> None:
            if seconds == 0:  # a turn given to the loop between two slices (nodedns.runtime.tasks.in_turns)
                await real_sleep(0)
                return
            slept.append(seconds)
            if len(slept) == 1:
                _count(feed, tally, 3 * INSIGHT_SLICE + 1)  # what the listeners counted in the first second
            elif len(slept) > 2:
                raise asyncio.CancelledError
            await real_sleep(0)

        monkeypatch.setattr(asyncio, "sleep", sleep)  # the clock of the seconds only
        with pytest.raises(asyncio.CancelledError):
            await feed.run()

    asyncio.run(main())
    assert slept[:3] == [insightfeed.INSIGHT_PERIOD] * 3  # a hand-over each second, again and again
    assert [len(piece) for piece in insight.taken] == [INSIGHT_SLICE] * 3 + [1]  # INSIGHT_SLICE rows at a time
    assert sorted(r.name for r in insight.rows()) == sorted(f"n{i}.example.com" for i in range(3 * INSIGHT_SLICE + 1))
