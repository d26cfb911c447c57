#!/usr/bin/env python3
"""Peak memory of loading a big manifest dump: this tree against a baseline revision (run by hand).

Writes the synthetic cluster of scripts/bench-sync (Namespaces, Services, EndpointSlices of 100
endpoints, each endpoint with its conditions, node, zone and targetRef, every object with its
metadata and managedFields) as one `kind: List` document, the shape `kubectl get ns,svc,endpointslices
-A -o yaml` writes, sized to `--endpoints` (default 100,000). Then starts `nodedns serve --manifests
FILE` from each tree (`--workers 1`: the one process; the supervisor of `--workers 2` holds the same
index and reads the file the same way) and prints, once it is ready, the process's peak RSS (VmHWM)
and its RSS then (VmRSS), beside a peer: a Python process that does only `yaml.load_all` with
PyYAML's C loader and keeps the documents (what any reader that parses first and looks later holds).

    python3 scripts/bench_manifest.py                       # 100,000 endpoints, baseline: main
    python3 scripts/bench_manifest.py --endpoints 20000 --baseline HEAD

The DaemonSet's memory limit is 512 MiB; the target is a peak well under it.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import yaml  # noqa: E402
from bench_cluster import export_tree, stop  # noqa: E402

from tests.support.helpers import free_port  # noqa: E402


def _bench_sync() -> Any:
    loader = importlib.machinery.SourceFileLoader("bench_sync", str(ROOT / "scripts" / "bench-sync"))
    spec = importlib.util.spec_from_loader("bench_sync", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def write_manifest(path: Path, endpoints: int) -> tuple[int, int, int]:
    """The dump for about `endpoints` endpoints; (services, slices, endpoints) written."""
    cluster = _bench_sync().Cluster(endpoints / 150_000)
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in cluster.namespaces]
    items = namespaces + cluster.services + cluster.slices
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    with path.open("w", encoding="utf-8") as fh:
        yaml.dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}, fh,
                  Dumper=dumper, default_flow_style=False, sort_keys=False)
    count = sum(len(sl["endpoints"]) for sl in cluster.slices)
    return len(cluster.services), len(cluster.slices), count


def kib(pid: int, field: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    m = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) if m else 0


def run_agent(tree: Path, manifest: Path, timeout: float) -> tuple[int, int, float]:
    """(peak RSS KiB, RSS KiB once ready, seconds to ready) of `nodedns serve --manifests` from `tree`."""
    port, status = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "nodedns", "serve", "--manifests", str(manifest), "--listen", f"127.0.0.1:{port}",
           "--status-listen", f"127.0.0.1:{status}", "--debug-listen", "none", "--upstream", "none",
           "--lameduck", "0s", "--insight", "off"]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = started + timeout
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the agent of {tree} exited {proc.returncode}: "
                                 f"{proc.stderr.read().decode(errors='replace')[-2000:] if proc.stderr else ''}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{status}/readyz", timeout=1) as resp:  # noqa: S310
                    if resp.status == 200:
                        break
            except (OSError, http.client.HTTPException):  # not listening yet, or not yet ours to answer
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the agent of {tree} was not ready within {timeout:g}s")
            time.sleep(0.05)
        ready = time.monotonic() - started
        return kib(proc.pid, "VmHWM"), kib(proc.pid, "VmRSS"), ready
    finally:
        stop(proc)


PEER = """
import resource, sys, yaml
with open(sys.argv[1], encoding="utf-8") as fh:
    docs = list(yaml.load_all(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def run_peer(manifest: Path) -> int:
    out = subprocess.run([sys.executable, "-c", PEER, str(manifest)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoints", type=int, default=100_000, help="endpoints in the dump (default 100000)")
    p.add_argument("--baseline", default="main", help="git revision to compare with (default main; 'none': skip)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds an agent may take to be ready")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-manifest-") as tmp:
        manifest = Path(tmp) / "cluster.yaml"
        services, slices, endpoints = write_manifest(manifest, args.endpoints)
        size = manifest.stat().st_size
        print(f"manifest: {services:,} Services, {slices:,} EndpointSlices, {endpoints:,} endpoints, "
              f"{size / 2**20:.1f} MiB of YAML (one kind: List document)", flush=True)
        peer = run_peer(manifest)
        print(f"\n{'reader':<34} {'peak RSS MiB':>13} {'RSS ready MiB':>14} {'ready s':>8} {'vs peer':>8}")
        print(f"{'peer: yaml.load_all (C loader)':<34} {peer / 1024:>13.1f} {'':>14} {'':>8} {1.0:>7.2f}x", flush=True)
        trees: list[tuple[str, Path]] = []
        if args.baseline != "none":
            trees.append((f"baseline ({args.baseline})", export_tree(args.baseline, Path(tmp) / "baseline")))
        trees.append(("this tree", ROOT))
        for name, tree in trees:
            peak, rss, ready = run_agent(tree, manifest, args.timeout)
            print(f"{name:<34} {peak / 1024:>13.1f} {rss / 1024:>14.1f} {ready:>8.1f} {peak / peer:>7.2f}x",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
