#!/usr/bin/env python3
"""Hand-made mutations of the code, each reintroduced in a scratch copy of the tree: do the named tests kill it?

A mutation is a bug the suite must catch: a file, a piece of its text (found exactly once), what
replaces it, and the tests that must fail with it in place. For each mutation chosen, this script
copies the tree (the files git tracks, plus the built C hit path) to a scratch directory, applies
the mutation (rebuilding the C hit path when the file is C), runs the named tests there with this
interpreter (`sys.executable -m pytest`) and prints one line:

    killed    resolv-conf-never-reread  (4 failed) tests/test_upstream_default.py::test_...
    survived  ...                        the named tests all passed: the suite no longer protects this

A mutation whose text is no longer in the file is reported `stale` (the code moved: update the table).
docs/testing.md lists every mutation with the test that kills it; keep the two in step.

    scripts/mutate.py                       # every mutation, one at a time
    scripts/mutate.py --list                # names, files and tests, nothing run
    scripts/mutate.py python-hit-path-skips-allow-list dns-key-z-bit-as-do
    scripts/mutate.py --check               # only that every mutation applies to today's tree (no tests run)
    CI=true scripts/mutate.py               # as root: the network-namespace tests run too, as in CI

Exit status: 0 when every mutation run was killed, 1 otherwise (survived, stale or a run error).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    what: str  # the behaviour the mutation breaks, in words


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "resolv-conf-never-reread",
        "nodedns/app.py",
        "if config.kube_dns_config_dir or config.upstream_resolv_conf:",
        "if config.kube_dns_config_dir:",
        ("tests/test_forward.py::test_a_changed_resolv_conf_is_read_again_and_its_nameservers_used",
         "tests/test_upstream_default.py::test_when_the_nodes_resolv_conf_changes_the_agent_forwards_to_its_new_"
         "nameservers"),
        "the node's resolv.conf upstreams are read once and never again when the file changes",
    ),
    Mutation(
        "python-hit-path-skips-allow-list",
        "nodedns/server.py",
        """            if addr[0] not in allowed:
                self.slow(data, addr)  # the resolver admits (and remembers) the client, or refuses it
                continue
            # the same steps as datagram_received""",
        """            # the same steps as datagram_received""",
        ("tests/test_hostile.py::test_clients_outside_the_allow_list_are_refused_even_for_stored_answers",),
        "the Python hit path answers stored answers to clients the allow list refuses",
    ),
    Mutation(
        "old-agent-tears-down-successors-node",
        "nodedns/app.py",
        "await self.node.teardown(retry=retry, keep=others is None or bool(others))",
        "await self.node.teardown(retry=retry, keep=False)",
        ("tests/test_handover.py::test_a_restart_keeps_the_interface_and_the_rules_the_successor_uses",),
        "an agent that stops beside its successor removes the interface and rules the successor uses",
    ),
)


@dataclass
class Outcome:
    verdict: str  # killed, survived, stale, error
    detail: str
    seconds: float


def copy_tree(dest: Path) -> None:
    """The files git tracks (as they are in the work tree) and the built C hit path."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True, capture_output=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the work tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    for built in (ROOT / "nodedns").glob("_hitpath*.so"):
        shutil.copy2(built, dest / "nodedns" / built.name)


def apply(tree: Path, m: Mutation) -> bool:
    """Apply the mutation in `tree`; False when its text is not there exactly once (stale)."""
    path = tree / m.file
    text = path.read_text(encoding="utf-8")
    if text.count(m.original) != 1:
        return False
    path.write_text(text.replace(m.original, m.replacement), encoding="utf-8")
    return True


def applies(m: Mutation) -> bool:
    return (ROOT / m.file).read_text(encoding="utf-8").count(m.original) == 1


def rebuild(tree: Path) -> str | None:
    """Build the C hit path in the scratch tree; the error output, or None."""
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree, capture_output=True,
                       text=True, timeout=600)
    return None if r.returncode == 0 else r.stdout + r.stderr


def run(m: Mutation, *, keep: bool, timeout: float, verbose: bool) -> Outcome:
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix=f"nodedns-mutant-{m.name}-"))
    try:
        copy_tree(scratch)
        if not apply(scratch, m):
            return Outcome("stale", f"the original text is not in {m.file} exactly once", time.monotonic() - started)
        if m.file.endswith(".c"):
            failed = rebuild(scratch)
            if failed is not None:
                return Outcome("error", f"the mutant does not build: {failed[-500:]}", time.monotonic() - started)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(scratch)  # the scratch tree's nodedns, not the installed one
        env.pop("PYTEST_ADDOPTS", None)
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=--strict-markers",
                "-x", *m.tests]
        try:
            r = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Outcome("error", f"the tests ran over {timeout:g}s", time.monotonic() - started)
        out = r.stdout + r.stderr
        if verbose:
            print(out)
        tail = [line for line in out.splitlines() if line.strip()][-1:] or [""]
        summary = tail[0].strip("= ")
        if r.returncode == 1:
            return Outcome("killed", summary, time.monotonic() - started)
        if r.returncode == 0:
            skipped = re.search(r"(\d+) skipped", summary)
            passed = re.search(r"(\d+) passed", summary)
            if skipped and not passed:
                return Outcome("error", f"every named test skipped here: {summary}", time.monotonic() - started)
            return Outcome("survived", summary, time.monotonic() - started)
        return Outcome("error", f"pytest exit {r.returncode}: {summary}", time.monotonic() - started)
    finally:
        if keep:
            print(f"  (scratch tree kept: {scratch})")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="mutations to run (default: every one)")
    ap.add_argument("--list", action="store_true", help="list the mutations and their tests; run nothing")
    ap.add_argument("--check", action="store_true", help="only check that every mutation applies to this tree")
    ap.add_argument("--keep", action="store_true", help="keep each scratch tree (its path is printed)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutation's test run (default 900)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each test run's output")
    args = ap.parse_args(argv)

    by_name = {m.name: m for m in MUTATIONS}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        ap.error(f"unknown mutation(s): {', '.join(unknown)} (see --list)")
    chosen = [by_name[n] for n in args.names] if args.names else list(MUTATIONS)

    if args.list:
        for m in chosen:
            print(f"{m.name}\n  {m.what}\n  in {m.file}; killed by: {' '.join(m.tests)}")
        return 0
    if args.check:
        stale = [m for m in chosen if not applies(m)]
        for m in chosen:
            print(f"{'stale' if m in stale else 'applies':9} {m.name}  ({m.file})")
        return 1 if stale else 0

    width = max(len(m.name) for m in chosen)
    results: dict[str, int] = {}
    for m in chosen:
        o = run(m, keep=args.keep, timeout=args.timeout, verbose=args.verbose)
        results[o.verdict] = results.get(o.verdict, 0) + 1
        print(f"{o.verdict:9} {m.name:{width}}  {o.seconds:5.0f}s  {o.detail}", flush=True)
    print("total: " + ", ".join(f"{n} {v}" for v, n in sorted(results.items())) + f" of {len(chosen)}")
    return 0 if results.get("killed", 0) == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
