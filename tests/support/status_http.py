"""Shared by several test modules (carried out of tests/unit/observe/test_status.py): get, samples, value."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.support.helpers import RunningAgent

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get(url: str, *, method: str = "GET") -> tuple[int, str, str]:
    """(status, content type, body) of one request."""
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def samples(agent: RunningAgent) -> Samples:
    code, ctype, body = get(agent.status_url + "/metrics")
    assert code == 200
    out: Samples = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(s: Samples, name: str, **labels: str) -> float:
    return s.get((name, frozenset(labels.items())), 0.0)
