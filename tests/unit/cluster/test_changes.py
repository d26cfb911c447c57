"""The watch path in one place: each index change reaches every listener the wiring added, in order, and
its dependency tags are named once however many listeners read them (one process, and a supervisor
whose resolver and whose flush to the workers both need them)."""

from __future__ import annotations

from typing import Any

import pytest

from nodedns import config as cfgmod
from nodedns.app.agent import Agent
from nodedns.cluster import changes as changes_mod
from nodedns.cluster import objects as k8s
from nodedns.cluster.changes import Change, Changes
from nodedns.cluster.index import Index
from nodedns.cluster.records import change_tags
from nodedns.workers import modes
from nodedns.workers.supervisor import Fleet
from tests.support.helpers import EXAMPLE

WEB = k8s.Service("default", "web", k8s.CLUSTER_IP, ("10.96.0.10",), (), "", False, "")
WEB_MOVED = k8s.Service("default", "web", k8s.CLUSTER_IP, ("10.96.0.11",), (), "", False, "")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any, Any]]:
    """Every call of records.change_tags the feed makes."""
    calls: list[tuple[str, Any, Any]] = []

    def counting(kind: str, old: Any, new: Any) -> frozenset[str] | None:
        calls.append((kind, old, new))
        return change_tags(kind, old, new)

    monkeypatch.setattr(changes_mod, "change_tags", counting)
    return calls


def test_a_change_names_its_tags_once_however_many_listeners_read_them(counted: list[Any]) -> None:
    index = Index()
    feed = Changes(index)
    heard: list[frozenset[str] | None] = []
    for _ in range(3):
        feed.add(lambda change: heard.append(change.tags))
    index.upsert(WEB)
    index.upsert(WEB_MOVED)
    assert len(counted) == 2  # one per change, not one per listener
    assert heard[:3] == [change_tags(k8s.SERVICE, None, WEB)] * 3
    assert heard[3:] == [change_tags(k8s.SERVICE, WEB, WEB_MOVED)] * 3
    assert heard[3] is not None and "s:default/web" in heard[3]


def test_a_change_no_listener_reads_the_tags_of_names_none(counted: list[Any]) -> None:
    index = Index()
    feed = Changes(index)
    kinds: list[str] = []
    feed.add(lambda change: kinds.append(change.kind))
    index.upsert(WEB)
    index.mark_synced()
    assert kinds == [k8s.SERVICE, ""] and counted == []


def test_listeners_hear_each_change_in_the_order_they_were_added_with_its_old_and_new_form() -> None:
    index = Index()
    feed = Changes(index)
    order: list[tuple[int, Change]] = []
    for i in range(3):
        feed.add(lambda change, i=i: order.append((i, change)))
    index.upsert(WEB)
    index.upsert(WEB_MOVED)
    index.delete(k8s.SERVICE, "default", "web")
    assert [i for i, _ in order] == [0, 1, 2] * 3
    assert [(c.old, c.new) for _, c in order[::3]] == [(None, WEB), (WEB, WEB_MOVED), (WEB_MOVED, None)]
    assert order[-1][1].tags is not None and "s:default/web" in order[-1][1].tags


def _config(**extra: Any) -> cfgmod.Config:
    return cfgmod.build({"manifests": str(EXAMPLE), "upstream": "none", "node-name": "node-a", **extra}, environ={})


def test_the_agent_registers_every_index_listener_in_one_place() -> None:
    agent = Agent(_config())
    # nothing registers on the index but the feed, and the feed's listeners are the wiring's
    assert agent.index._record_listeners == [agent.changes._changed]
    listeners = agent.changes.listeners
    assert listeners[0] == agent.resolver.answers.index_changed
    assert agent.insight_feed.pods_changed in listeners  # insight on (the default)
    assert listeners[-1] == agent.policies.changed  # the DNS policy book, always
    assert len(listeners) == 4  # + the default allow list's refresh
    explicit = Agent(_config(**{"allow-from": ["10.0.0.0/8"], "insight": "off"}))
    assert explicit.changes.listeners == (explicit.resolver.answers.index_changed, explicit.policies.changed)


def test_a_supervisor_names_the_tags_of_a_change_once_for_its_answers_and_its_workers(counted: list[Any]) -> None:
    agent = modes.supervisor(_config(), count=2)
    fleet = agent.listeners
    assert isinstance(fleet, Fleet)
    assert fleet.index_changed in agent.changes.listeners
    assert agent.index._record_listeners == [agent.changes._changed]
    agent.index.mark_synced()
    agent.cluster_answers.put(b"key", b"wire", frozenset({"s:default/web"}))  # something stored: its listener reads
    counted.clear()
    fleet._tags = set()
    agent.index.upsert(WEB)
    assert len(counted) == 1  # the resolver's invalidation and the workers' flush share one naming
    assert fleet._tags == set(change_tags(k8s.SERVICE, None, WEB) or ())
    assert agent.cluster_answers.get(b"key") is None  # and the stored answer built from it went
