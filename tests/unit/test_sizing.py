"""The DaemonSet's memory request and limit hold the measured worst case at 5,000 nodes, with the headroom
docs/node.md says ("The request and the limit, from the measured worst case").

The parts come from where they are measured or bounded, never from a copy: the 5,000-node table of the
measured figures (the ConfigMap's number of workers, the worst list path), the tenant bound the attack
script holds (scripts/lib/attack.py's GROWTH_LIMIT_MB) and the caches' byte budget (forwarded and stored
cluster answers) as the ConfigMap sets it (or the flag's default). A re-measured table, a larger bound
or budget, or a smaller request or limit that no longer leaves the headroom fails here.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import yaml

from nodedns.config import Config
from tests.support.helpers import ROOT
from tests.support.shipped import configmap_config

HEADROOM = 1.5  # the limit over the worst case: the heap's slack between a burst and its trim, fragmentation
MB = 1_000_000
MIB = 1 << 20
SECTION = "A 5,000-node cluster from the API"


def quantity(text: str) -> int:
    """A Kubernetes memory quantity in bytes (the forms the DaemonSet uses)."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|K|M|G)?", text)
    assert m, f"a memory quantity this test does not read: {text}"
    scale = {"Ki": 1 << 10, "Mi": MIB, "Gi": 1 << 30, "K": 1000, "M": MB, "G": 10**9, None: 1}[m.group(2)]
    return int(m.group(1)) * scale


def agent_resources() -> dict[str, int]:
    docs = [d for d in yaml.safe_load_all((ROOT / "daemonset" / "daemonset.yaml").read_text()) if d]
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    agent = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "nodedns")
    res = agent["resources"]
    return {"request": quantity(res["requests"]["memory"]), "limit": quantity(res["limits"]["memory"])}


def measured_table() -> list[dict[str, str]]:
    """The 5,000-node table's rows (a dict per row, by header), from the document that holds the section."""
    for doc in (ROOT / "docs" / "measured.md", ROOT / "README.md"):
        if not doc.exists():
            continue
        text = doc.read_text()
        m = re.search(rf"^#+ {re.escape(SECTION)}\n(.*?)(?=^#+ )", text, re.M | re.S)
        if m:
            lines = [ln for ln in m.group(1).split("\n") if ln.startswith("|") and not re.fullmatch(r"\|[-| ]+\|", ln)]
            cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
            return [dict(zip(cells[0], row, strict=True)) for row in cells[1:]]
    raise AssertionError(f"no document holds the section {SECTION!r}")


def mb(cell: str) -> float:
    m = re.match(r"([\d.]+) MB", cell)
    assert m, cell
    return float(m.group(1)) * MB


def worst_case() -> dict[str, float]:
    cfg = configmap_config()
    workers = str(cfg.get("workers", 1))
    rows = [r for r in measured_table() if r["`--workers`"] == workers]
    assert {r["list path"] for r in rows} >= {"watchlist", "one-body", "paged"}, "every list path measured"
    attack = (ROOT / "scripts" / "lib" / "attack.py").read_text()
    growth = re.search(r"^GROWTH_LIMIT_MB = ([\d.]+)", attack, re.M)
    assert growth
    default = next(f.default for f in dataclasses.fields(Config) if f.name == "cache_max_bytes")
    cache = cfg.get("cache-max-bytes", default)
    assert isinstance(cache, int), "the ConfigMap's cache-max-bytes in bytes, as this test reads it"
    return {
        "steady_pss": max(mb(r["steady PSS (summed)"]) for r in rows),
        "peak": max(max(mb(r["peak RSS (VmHWM)"]), mb(r["peak after a forced full relist"])) for r in rows),
        "tenant": float(growth.group(1)) * MB,
        "caches": float(cache),
    }


def test_the_limit_holds_the_measured_worst_case_with_its_headroom() -> None:
    """The highest peak at 5,000 nodes (start or a forced relist, any list path, RSS summed: shared pages
    counted in every process, more than the cgroup is charged), plus the worst a tenant may add, plus the
    caches full: the limit holds 1.5x that."""
    parts = worst_case()
    worst = parts["peak"] + parts["tenant"] + parts["caches"]
    limit = agent_resources()["limit"]
    assert limit >= HEADROOM * worst, (
        f"limit {limit / MIB:.0f} MiB < {HEADROOM}x the worst case {worst / MB:.1f} MB ({parts})")


def test_the_request_holds_the_steady_charge_with_full_caches() -> None:
    """Steady at 5,000 nodes as the cgroup charges it (PSS: shared pages once), with the caches full
    (forwarded and cluster answers)."""
    parts = worst_case()
    steady = parts["steady_pss"] + parts["caches"]
    request = agent_resources()["request"]
    assert request >= steady, f"request {request / MIB:.0f} MiB < steady {steady / MB:.1f} MB ({parts})"


def test_the_sizing_is_where_the_node_doc_says(tmp_path: Path) -> None:
    """docs/node.md states the rule this file holds (its headroom), and names this test."""
    text = (ROOT / "docs" / "node.md").read_text()
    assert f"{HEADROOM}x" in text and "tests/unit/test_sizing.py" in text
