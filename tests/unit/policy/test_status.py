"""The policies' status conditions as a DaemonSet of agents writes them: only what differs from what the object
shows, after a random delay, re-checked against the latest object; a refused write (403, 404, 409) said once
and not retried for that version of the object; the spec never written."""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from nodedns.cluster import objects as k8s
from nodedns.errors import ApiError
from nodedns.policy.book import FeedState, PolicyBook
from nodedns.policy.rpz import parse as parse_feed
from nodedns.policy.status import StatusWriter, conditions, differs, patch_body, status_path

KEY = (k8s.CLUSTER_DNS_POLICY, "", "threat-feed")
SPEC = {"rpz": {"configMapRef": {"namespace": "kube-system", "name": "rpz-feed", "key": "feed.rpz"}},
        "rules": [{"names": ["a..example"], "action": "deny"}]}
FEED = "$ORIGIN rpz.\n@ SOA a. b. 1 1 1 1 1\nbad.example CNAME .\n32.1.2.0.192.rpz-ip CNAME .\n"


def record(rv: str, shown: list[dict[str, Any]] | None = None, spec: dict[str, Any] = SPEC) -> k8s.Policy:
    return k8s.Policy(k8s.CLUSTER_DNS_POLICY, "", "threat-feed", json.dumps(spec, sort_keys=True), rv, 3,
                      json.dumps(shown or [], sort_keys=True))


class Api:
    """The status subresource as the writer meets it: patches apply to the index's record (a new
    resourceVersion, as the watch would bring), or are refused with `code`."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.code = 0

    def patch(self, path: str, body: bytes) -> None:
        doc = json.loads(body)
        self.patches.append((path, doc))
        if self.code:
            raise ApiError(f"{self.code} refused", code=self.code)
        old = self.index.policies[KEY]
        assert doc["metadata"]["resourceVersion"] == old.resource_version
        self.index.policies[KEY] = record(str(int(old.resource_version) + 1), doc["status"]["conditions"])


def setup(rv: str = "10") -> tuple[PolicyBook, Any, Api, StatusWriter]:
    index = SimpleNamespace(policies={KEY: record(rv)}, namespace_labels={}, pods={}, pods_on_node=lambda _: [])
    book = PolicyBook()
    book.rebuild(index)  # type: ignore[arg-type]
    ref = book.policies[KEY].rpz_ref
    assert ref is not None
    book.set_feed(ref, FeedState(feed=parse_feed(FEED)))
    book.rebuild(index)  # type: ignore[arg-type]
    api = Api(index)
    writer = StatusWriter(book, index, api.patch, rng=lambda: 1.0, delay_max=0.05)  # type: ignore[arg-type]
    return book, index, api, writer


async def settle(seconds: float = 0.2) -> None:
    await asyncio.sleep(seconds)


def test_the_conditions_name_what_was_left_out_and_the_feed_counts() -> None:
    book, index, _, _ = setup()
    got = conditions(book, book.policies[KEY], 3)
    assert got is not None
    accepted, loaded = got
    assert (accepted["type"], accepted["status"], accepted["reason"]) == ("Accepted", "False", "PartsLeftOut")
    assert accepted["message"].startswith("left out (the rest applies): ")
    policy = book.policies[KEY]
    problems = [*policy.problems, *book.feed_problems(policy)]  # the rules' and the feed's, each said once
    assert len(problems) == 3 and "'a..example' cannot be used" in problems[0] and "rpz-ip triggers" in problems[2]
    assert accepted["message"] == "left out (the rest applies): " + "; ".join(problems)
    assert (loaded["type"], loaded["status"], loaded["reason"]) == ("FeedLoaded", "True", "Loaded")
    assert loaded["message"] == ("ConfigMap kube-system/rpz-feed key feed.rpz: 1 triggers applied; left out: 1 "
                                 "rpz-ip triggers (not supported)")
    assert {c["observedGeneration"] for c in got} == {3}
    assert status_path(*KEY) == "/apis/nodedns.io/v1alpha1/clusterdnspolicies/threat-feed/status"
    assert status_path(k8s.DNS_POLICY, "team-a", "p") == \
        "/apis/nodedns.io/v1alpha1/namespaces/team-a/dnspolicies/p/status"


def test_a_policy_whose_every_part_applies_is_accepted_with_only_that_condition() -> None:
    spec = {"rules": [{"names": ["ads.example"], "action": "deny"}]}
    index = SimpleNamespace(policies={KEY: record("10", spec=spec)}, namespace_labels={}, pods={},
                            pods_on_node=lambda _: [])
    book = PolicyBook()
    book.rebuild(index)  # type: ignore[arg-type]
    assert conditions(book, book.policies[KEY], 4) == [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "every part of the policy applies",
         "observedGeneration": 4}]


@pytest.mark.parametrize(("state", "reason", "message"), [
    (FeedState(problem="ConfigMap kube-system/rpz-feed not found", reason="ConfigMapNotFound"), "ConfigMapNotFound",
     "ConfigMap kube-system/rpz-feed not found"),
    (FeedState(problem="cannot be read", reason=""), "Invalid", "cannot be read"),
    (FeedState(feed=parse_feed("bad.example CNAME .\n")), "NoOrigin", None),
])
def test_a_feed_that_cannot_be_used_is_not_loaded_saying_why_and_the_rules_still_apply(
        state: FeedState, reason: str, message: str | None) -> None:
    """docs/policy.md: `FeedLoaded` False with ConfigMapNotFound, KeyNotFound, Forbidden or NoOrigin (the file
    has no SOA and no $ORIGIN), why nothing of the feed applies; the rules do."""
    book, index, _, _ = setup()
    ref = book.policies[KEY].rpz_ref
    assert ref is not None
    book.set_feed(ref, state)
    book.rebuild(index)  # type: ignore[arg-type]
    got = conditions(book, book.policies[KEY], 3)
    assert got is not None
    accepted, loaded = got
    assert (accepted["type"], accepted["reason"]) == ("Accepted", "PartsLeftOut")  # the rule's bad name still said
    assert (loaded["type"], loaded["status"], loaded["reason"]) == ("FeedLoaded", "False", reason)
    assert loaded["message"] == (message if message is not None else state.feed.problem)  # type: ignore[union-attr]
    assert loaded["message"]


def test_a_feed_not_read_yet_is_not_written_about() -> None:
    book, index, _, _ = setup()
    book.feeds.clear()
    book.rebuild(index)
    assert conditions(book, book.policies[KEY], 3) is None


async def test_written_once_then_left_alone_and_other_conditions_kept() -> None:
    book, index, api, writer = setup()
    other = {"type": "Reviewed", "status": "True", "reason": "ByHand", "message": "kept"}
    index.policies[KEY] = record("10", [other])
    writer.reconcile()
    await settle()
    assert len(api.patches) == 1
    path, body = api.patches[0]
    assert set(body) == {"metadata", "status"}  # never the spec
    assert [c["type"] for c in body["status"]["conditions"]] == ["Reviewed", "Accepted", "FeedLoaded"]
    for _ in range(3):  # the object shows them now: nothing more to write
        writer.reconcile()
        await settle()
    assert len(api.patches) == 1 and not differs(conditions(book, book.policies[KEY], 3) or [], index.policies[KEY])


async def test_a_write_is_checked_again_against_the_latest_object_when_its_delay_ends() -> None:
    book, index, api, writer = setup()
    writer.reconcile()  # due after the delay
    wanted = conditions(book, book.policies[KEY], 3)
    assert wanted is not None
    index.policies[KEY] = record("11", patch_body(wanted, index.policies[KEY], "2026-01-01T00:00:00Z")["status"]
                                 ["conditions"])  # another agent wrote it meanwhile
    await settle()
    assert api.patches == []


@pytest.mark.parametrize("code", [403, 404, 409])
async def test_a_refused_write_is_said_once_and_not_retried_for_that_version(
        code: int, caplog: pytest.LogCaptureFixture) -> None:
    book, index, api, writer = setup()
    api.code = code
    caplog.set_level(logging.WARNING, "nodedns.policy")
    for _ in range(4):
        writer.reconcile()
        await settle()
    assert len(api.patches) == 1
    said = [r.getMessage() for r in caplog.records if "could not be written" in r.getMessage()]
    assert len(said) == 1 and str(code) in said[0]
    index.policies[KEY] = record("12")  # a new version of the object: looked at again
    api.code = 0
    writer.reconcile()
    await settle()
    assert len(api.patches) == 2 and index.policies[KEY].resource_version == "13"


async def test_the_transition_time_is_kept_while_the_status_stays() -> None:
    book, index, api, writer = setup()
    writer.reconcile()
    await settle()
    first = {c["type"]: c for c in api.patches[0][1]["status"]["conditions"]}
    ref = book.policies[KEY].rpz_ref
    assert ref is not None
    book.set_feed(ref, FeedState(feed=parse_feed(FEED + "more.example CNAME .\n")))  # the message changes
    book.rebuild(index)
    writer.reconcile()
    await settle()
    second = {c["type"]: c for c in api.patches[1][1]["status"]["conditions"]}
    assert second["FeedLoaded"]["message"] != first["FeedLoaded"]["message"]
    assert second["FeedLoaded"]["lastTransitionTime"] == first["FeedLoaded"]["lastTransitionTime"]


def test_the_transition_time_is_now_when_a_condition_flips() -> None:
    """lastTransitionTime is when the status last changed (kubectl wait, alerts read it): kept while the
    status stays, set anew when it flips between True and False."""
    shown = [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "all of it applies",
              "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    flipped = [{"type": "Accepted", "status": "False", "reason": "PartlyApplied", "message": "a pattern left out"}]
    same = [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "all of it applies, again"}]
    now = "2026-12-07T17:00:00Z"
    got = {c["type"]: c for c in patch_body(flipped, record("5", shown), now)["status"]["conditions"]}
    assert got["Accepted"]["lastTransitionTime"] == now
    got = {c["type"]: c for c in patch_body(same, record("5", shown), now)["status"]["conditions"]}
    assert got["Accepted"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
