"""The conditions of each DNS policy, written to its status subresource by (in practice) one agent.

`conditions(book, key, record)` is what this agent can say of a policy, the same on every node (it depends
on the policy's spec and its feed's ConfigMap only):

    Accepted     True, reason Accepted: every part of the policy applies; False, reason PartsLeftOut:
                 what the agent cannot use, named in the message (the rest applies)
    FeedLoaded   (a policy with spec.rpz) True, reason Loaded: the feed's triggers applied, what was left
                 out counted in the message; False: reason ConfigMapNotFound, KeyNotFound, Forbidden or
                 NoOrigin (the feed is not applied, the rules are)

Until the agent has read the feed (its ConfigMap not listed yet) it says nothing of that policy.

`StatusWriter.reconcile()` runs after each rebuild of the book: a policy whose object already shows these
conditions is left alone; for the others a write is due after a random delay (up to DELAY_MAX seconds) and
checked again then against the latest object, so the first agent of a DaemonSet to write ends it for the rest.
The write is a JSON merge patch of `/status` carrying the object's resourceVersion (a race loses with 409); a
403, 404 or 409 is logged once and not retried for that version of the object. The spec is never written.
docs/policy.md says what each condition means to a user.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from nodedns.cluster import objects as k8s
from nodedns.cluster.index import Index
from nodedns.errors import ApiError
from nodedns.policy.book import PolicyBook
from nodedns.policy.model import Policy

log = logging.getLogger("nodedns.policy")

DELAY_MAX = 10.0  # seconds: the largest random delay before a write
OURS = ("Accepted", "FeedLoaded")
COMPARED = ("type", "status", "reason", "message", "observedGeneration")
MESSAGE_MAX = 1024  # characters of a condition's message (the rest is cut, with "...")
Key = tuple[str, str, str]


def status_path(kind: str, namespace: str, name: str) -> str:
    """The status subresource of a policy."""
    if kind == k8s.CLUSTER_DNS_POLICY:
        return f"/apis/nodedns.io/v1alpha1/clusterdnspolicies/{name}/status"
    return f"/apis/nodedns.io/v1alpha1/namespaces/{namespace}/dnspolicies/{name}/status"


def _cut(text: str) -> str:
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 3] + "..."


def conditions(book: PolicyBook, p: Policy, generation: int) -> list[dict[str, Any]] | None:
    """This agent's conditions of a policy (module docstring), without lastTransitionTime; None while its
    feed is not read yet."""
    out: list[dict[str, Any]] = []
    feed_problems: list[str] = []
    if p.rpz_ref is not None:
        state = book.feed_state(p.rpz_ref)
        if state is None:
            return None
        feed = state.feed
        if feed is not None and not feed.problem:
            out.append({"type": "FeedLoaded", "status": "True", "reason": "Loaded",
                        "message": _cut(f"ConfigMap {p.rpz_ref[0]}/{p.rpz_ref[1]} key {p.rpz_ref[2]}: "
                                        f"{feed.summary()}")})
        else:
            reason = "NoOrigin" if feed is not None else (state.reason or "Invalid")
            out.append({"type": "FeedLoaded", "status": "False", "reason": reason,
                        "message": _cut(feed.problem if feed is not None else state.problem)})
        feed_problems = book.feed_problems(p)
    problems = list(p.problems) + feed_problems
    if problems:
        out.insert(0, {"type": "Accepted", "status": "False", "reason": "PartsLeftOut",
                       "message": _cut("left out (the rest applies): " + "; ".join(problems))})
    else:
        out.insert(0, {"type": "Accepted", "status": "True", "reason": "Accepted",
                       "message": "every part of the policy applies"})
    for c in out:
        c["observedGeneration"] = generation
    return out


def _shown(record: k8s.Policy) -> dict[str, dict[str, Any]]:
    try:
        listed = json.loads(record.conditions)
    except ValueError:
        return {}
    if not isinstance(listed, list):
        return {}
    return {str(c.get("type")): dict(c) for c in listed if isinstance(c, Mapping)}


def differs(wanted: list[dict[str, Any]], record: k8s.Policy) -> bool:
    """Whether the object does not show these conditions already."""
    shown = _shown(record)
    if any(t in shown for t in OURS if t not in {c["type"] for c in wanted}):
        return True  # one of ours that no longer applies (a feed removed from the spec)
    return any(tuple(c.get(f) for f in COMPARED) != tuple(shown.get(c["type"], {}).get(f) for f in COMPARED)
               for c in wanted)


def patch_body(wanted: list[dict[str, Any]], record: k8s.Policy, now: str) -> dict[str, Any]:
    """The merge patch: the object's other conditions kept, ours replaced (lastTransitionTime kept while the
    status stays), the resourceVersion as the precondition."""
    shown = _shown(record)
    out = [c for t, c in shown.items() if t not in OURS]
    for c in wanted:
        old = shown.get(c["type"])
        since = old.get("lastTransitionTime") if old is not None and old.get("status") == c["status"] else None
        out.append({**c, "lastTransitionTime": since or now})
    return {"metadata": {"resourceVersion": record.resource_version}, "status": {"conditions": out}}


class StatusWriter:
    """Writes the conditions that differ, after a random delay, re-checked (module docstring)."""

    def __init__(self, book: PolicyBook, index: Index, patch: Callable[[str, bytes], None], *,
                 rng: Callable[[], float] = random.random, delay_max: float = DELAY_MAX) -> None:
        self.book = book
        self.index = index
        self.patch = patch  # blocking (run in a thread): raises ApiError
        self.rng = rng
        self.delay_max = delay_max
        self._due: dict[Key, asyncio.TimerHandle] = {}
        self._given_up: dict[Key, str] = {}  # a policy's resourceVersion a write was refused at
        self._said: set[tuple[Key, int]] = set()
        self._writing: set[Key] = set()
        self.writes = 0
        self.refused = 0

    def _wanted(self, key: Key) -> tuple[k8s.Policy, list[dict[str, Any]]] | None:
        record = self.index.policies.get(key)
        p = self.book.policies.get(key)
        if record is None or p is None or not record.resource_version:
            return None
        if self._given_up.get(key) == record.resource_version:
            return None
        wanted = conditions(self.book, p, record.generation)
        if wanted is None or not differs(wanted, record):
            return None
        return record, wanted

    def reconcile(self) -> None:
        """Schedule a write for each policy whose object does not show what this agent says of it."""
        loop = asyncio.get_running_loop()
        for key in list(self._due):
            if key not in self.index.policies:
                self._due.pop(key).cancel()
        for key in self.index.policies:
            if key in self._due or key in self._writing or self._wanted(key) is None:
                continue
            self._due[key] = loop.call_later(self.rng() * self.delay_max, self._fire, key)

    def _fire(self, key: Key) -> None:
        self._due.pop(key, None)
        got = self._wanted(key)  # against the latest object: another agent may have written it meanwhile
        if got is None:
            return
        record, wanted = got
        body = json.dumps(patch_body(wanted, record, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
        self._writing.add(key)
        task = asyncio.get_running_loop().run_in_executor(
            None, self.patch, status_path(*key), body.encode())

        def done(fut: asyncio.Future[None]) -> None:
            self._writing.discard(key)
            if fut.cancelled():
                return
            exc = fut.exception()
            if exc is None:
                self.writes += 1
                log.info("%s %s: status conditions written (%s)", key[0], "/".join(k for k in key[1:] if k),
                         ", ".join(f"{c['type']}={c['status']}" for c in wanted))
                return
            self.refused += 1
            self._given_up[key] = record.resource_version
            code = exc.code if isinstance(exc, ApiError) else 0
            if (key, code) not in self._said:
                self._said.add((key, code))
                log.warning("%s %s: the status could not be written (%s); not retried for this version of the "
                            "object%s", key[0], "/".join(k for k in key[1:] if k), exc,
                            " (409: another agent wrote it first)" if code == 409 else
                            " (403: does the ClusterRole grant patch on dnspolicies/status and "
                            "clusterdnspolicies/status?)" if code == 403 else "")

        task.add_done_callback(done)

    def status(self) -> dict[str, Any]:
        return {"writes": self.writes, "refused": self.refused, "due": len(self._due)}

    def stop(self) -> None:
        for handle in self._due.values():
            handle.cancel()
        self._due.clear()
