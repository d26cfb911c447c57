#!/usr/bin/env python3
"""Hand-made mutations of the code, each reintroduced in a scratch copy of the tree: do the named tests kill it?

A mutation is a bug the suite must catch: a file, a piece of its text (found exactly once), what
replaces it, and the tests that must fail with it in place. For each mutation chosen, this script
copies the tree (the files git tracks or does not ignore, plus the built C hit path) to a scratch directory, applies
the mutation (rebuilding the C hit path when the file is C), runs the named tests there with this
interpreter (`sys.executable -m pytest -x`: the first failure ends the run) and prints one line:

    killed    resolv-conf-never-reread  (4 failed) tests/e2e/test_upstream_default.py::test_...
    survived  ...                        the named tests all passed: the suite no longer protects this

First the named tests run on the tree as it is (once per module, all of its chosen mutations' tests in
one run): a test that fails there kills nothing (`error`). A mutation whose text is no longer in its
file exactly once, or whose file is gone, is reported `stale` (the code moved: update the table).

The table: one file per module of nodedns/ in scripts/mutations/ (`TESTS`: the module's own test files;
`MUTATIONS`: its mutations, each naming tests among those; docs.py: the documents'), plus the first
mutations, kept in `MUTATIONS` below. Every mutation names its file once, as a path from the repository's root: when a
module moves, rewrite that path (`--check` reports every mutation whose file or text is not found).
docs/testing.md lists every mutation with the tests that kill it (`--markdown` prints that list).

    scripts/mutate.py                       # every mutation, one at a time
    scripts/mutate.py --module cache        # the mutations of one module (nodedns/serve/cache.py; also cli/guard,
                                            # _hitpath)
    scripts/mutate.py --list                # names, files and tests, nothing run
    scripts/mutate.py python-hit-path-skips-allow-list dns-key-z-bit-as-do
    scripts/mutate.py --check               # only that every mutation applies to today's tree (no tests run)
    scripts/mutate.py --coverage            # mutations per module of nodedns/ (what the tables hold by hand)
    CI=true scripts/mutate.py               # as root: the network-namespace tests run too, as in CI

Exit status: 0 when every mutation run was killed, 1 otherwise (survived, stale or a run error).
"""

from __future__ import annotations

import argparse
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "scripts" / "mutations"  # one file per module: TESTS and MUTATIONS
PACKAGE = "nodedns"


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str  # the mutated file, from the repository's root (the one field a move of the module rewrites)
    original: str
    replacement: str
    tests: tuple[str, ...]
    what: str  # the behaviour the mutation breaks, in words
    found: str = ""  # when it survived the suite until the tests named were written: what was missing


# the tables of the DNS listeners and the hit path (serve.server, serve.udp, serve.tcp, serve.hitpath) share
# their own tests and three tests their mutations name: `from mutate import HIT_PATH_TESTS, ...`
HIT_PATH_TESTS = (
    "tests/unit/serve/test_hit_paths.py", "tests/unit/serve/test_hitpath_differential.py",
    "tests/e2e/test_hitpath_c.py", "tests/e2e/test_hostile.py", "tests/unit/serve/test_interop.py",
    "tests/unit/observe/test_insight_hitpath.py", "tests/e2e/test_lifecycle.py", "tests/unit/forward/test_forward.py",
    "tests/unit/metrics/test_metrics.py", "tests/e2e/test_tcp_bounds.py",
)
HIT_PATH_DIFFERENTIAL = ("tests/unit/serve/test_hit_paths.py::"
                         "test_the_c_and_python_hit_paths_send_the_same_bytes_and_count_the_same")
HIT_PATH_BOUNDARIES = ("tests/unit/serve/test_hit_paths.py::"
                       "test_a_cut_at_each_section_boundary_counts_the_records_kept_in_the_header")
HIT_PATH_PRODUCTION = ("tests/unit/serve/test_hitpath_differential.py::"
                       "test_the_c_and_python_hit_paths_return_send_and_count_the_same")

# the table's files (scripts/mutations/*.py) read `from mutate import Mutation`: this module, however it was loaded
sys.modules.setdefault("mutate", sys.modules[__name__])

MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "resolv-conf-never-reread",
        "nodedns/app/build.py",
        "if config.kube_dns_config_dir or config.upstream_resolv_conf or sources.config_file:",
        "if config.kube_dns_config_dir or sources.config_file:",
        ("tests/unit/forward/test_forward.py::test_a_changed_resolv_conf_is_read_again_and_its_nameservers_used",
         "tests/e2e/test_upstream_default.py::test_when_the_nodes_resolv_conf_changes_the_agent_forwards_to_its_new_"
         "nameservers"),
        "the node's resolv.conf upstreams are read once and never again when the file changes",
        found="yes",
    ),
    Mutation(
        "c-hit-path-skips-allow-list",
        "nodedns/serve/_hitpath.c",
        "        w = ok ? lookup(table, data, n, max_udp, &qend, &limit, NULL, &cell)\n"
        "               : memo ? lookup(table, data, n, max_udp, &qend, &limit, memo, &cell) : NULL;",
        "        w = lookup(table, data, n, max_udp, &qend, &limit, NULL, &cell);",
        ("tests/e2e/test_hostile.py::test_clients_outside_the_allow_list_are_refused_even_for_stored_answers",),
        "the C hit path answers stored answers to clients the allow list refuses",
    ),
    Mutation(
        "invalidation-forgets-the-old-record",
        "nodedns/cluster/records/tags.py",
        "    for record in (old, new):\n        if record is None:",
        "    for record in (new,):\n        if record is None:",
        ("tests/unit/serve/test_invalidation.py::test_answers_served_through_the_table_equal_answers_computed_fresh",
         "tests/unit/serve/test_invalidation.py::test_a_change_names_the_tags_of_its_old_and_new_record"),
        "targeted invalidation drops too little: the tags of the record before the change are not named "
        "(a deleted Service keeps answering)",
    ),
    Mutation(
        "invalidation-forgets-endpoint-addresses",
        "nodedns/cluster/records/tags.py",
        '            tags.update(f"i:{ip}" for ip in record.address_texts())\n',
        "",
        ("tests/unit/serve/test_invalidation.py::test_answers_served_through_the_table_equal_answers_computed_fresh",),
        "targeted invalidation drops too little: an EndpointSlice change keeps the PTR answers of its addresses",
    ),
    Mutation(
        "worker-keeps-invalidated-answers",
        "nodedns/workers/worker.py",
        """    def _on_invalidate(self, message: Invalidate) -> None:
        self.agent.resolver.answers.invalidate(message.tags)""",
        """    def _on_invalidate(self, message: Invalidate) -> None:
        pass""",
        ("tests/e2e/test_fleet.py::test_workers_share_one_api_watch_and_every_worker_sees_each_change",),
        "a --workers worker keeps serving a stored answer after the owner invalidated its tags",
        found="yes",
    ),
    Mutation(
        "guard-counts-failures-across-answered-rounds",
        "nodedns/node/guard.py",
        """        if not failed:
            self.unanswered = 0
            self.answered += 1""",
        """        if not failed:
            self.answered += 1""",
        ("tests/e2e/test_guard.py::test_the_guard_falls_back_only_after_seeing_the_agent_answer_and_then_fail_in_a_row",),
        "the guard acts on a live agent: scattered lost probes add up to a fallback though the agent answers",
    ),
    Mutation(
        "guard-acts-before-the-agent-ever-answered",
        "nodedns/node/guard.py",
        """        if not self.armed:
            log.debug("not armed (the agent has not answered yet): %s", why)
            return
""",
        "",
        ("tests/e2e/test_guard.py::test_the_guard_falls_back_only_after_seeing_the_agent_answer_and_then_fail_in_a_row",),
        "the guard removes the addresses of an agent that is still starting (it never answered yet)",
    ),
    Mutation(
        "truncation-keeps-a-partial-record",
        "nodedns/dns/truncate.py",
        "    return head + response[12:cut] + opt\n",
        "    return head + response[12:max(cut, budget)] + opt\n",
        ("tests/unit/dns/test_wire.py",
         "tests/unit/serve/test_interop.py::test_a_big_headless_answer_keeps_the_whole_records_that_fit_on_"
         "every_hit_path"),
        "a UDP answer cut for the client keeps the bytes of a record that did not fit whole",
    ),
    Mutation(
        "c-truncation-overruns-the-limit",
        "nodedns/serve/_hitpath.c",
        "        if (end > budget)\n            break;",
        "        if (end > budget + 16)\n            break;",
        ("tests/e2e/test_hitpath_c.py",
         "tests/unit/serve/test_interop.py::test_a_big_headless_answer_keeps_the_whole_records_that_"
         "fit_on_every_hit_path"),
        "the C hit path keeps one record more than the client's UDP size holds",
    ),
    Mutation(
        "dns-key-z-bit-as-do",
        "nodedns/dns/keys.py",
        "        if data[qend + 7] & 0x80:\n            flags |= KF_DO",
        "        if data[qend + 7] & 0x80 or data[3] & 0x40:\n            flags |= KF_DO",
        ("tests/unit/serve/test_interop.py::test_a_z_bit_query_gets_the_answer_of_its_own_do_bit_on_every_hit_path",
         "tests/unit/dns/test_wire_key.py"),
        "the header's Z bit is taken for DO (RFC 3225 section 3: it must be ignored)",
    ),
    Mutation(
        "dns-key-ignores-do",
        "nodedns/dns/keys.py",
        "        if data[qend + 7] & 0x80:\n            flags |= KF_DO",
        "        if False:\n            flags |= KF_DO",
        ("tests/unit/dns/test_wire_key.py",
         "tests/unit/forward/test_forward.py::test_dnssec_ok_queries_get_their_own_entry_and_edns_options_"
         "share_one"),
        "a DO query shares the stored answer of a query without DO",
    ),
    Mutation(
        "edns-fallback-never-expires",
        "nodedns/forward/upstream.py",
        "        if kflags & KF_EDNS and server.plain_until > self.clock():",
        "        if kflags & KF_EDNS and server.plain_until:",
        ("tests/unit/serve/test_interop.py::test_an_edns_intolerant_upstream_gets_edns_again_after_a_while",),
        "an upstream once found EDNS-intolerant is never asked with EDNS again",
    ),
    Mutation(
        "explainer-asks-as-an-empty-client",
        "nodedns/observe/explain.py",
        "else self.resolver.answer(q, query, None)",
        'else self.resolver.handle(query, "")',
        ("tests/e2e/test_explain_allowed.py",),
        "the explainer asks its questions as client \"\", which the shipped allow list refuses",
    ),
    Mutation(
        "debug-routes-on-the-status-listener",
        "nodedns/observe/status.py",
        "            if role is None or route.listener == role:",
        "            if True:",
        ("tests/unit/observe/test_status.py::test_every_route_answers_over_http_on_its_own_listener",
         "tests/unit/observe/test_status.py::test_unknown_routes_and_methods"),
        "/status and /debug/* answer on the status listener (every Pod can reach it)",
    ),
    Mutation(
        "optional-resource-403-blocks-readiness",
        "nodedns/cluster/apisync.py",
        "        if all(st.synced or (not st.required and st.forbidden) for st in states):",
        "        if all(st.synced for st in states):",
        ("tests/unit/cluster/test_sync_degraded.py::test_an_agent_without_its_node_or_pods_is_ready_and_answers_"
         "nxdomain",),
        "an API server that refuses an optional resource (403) keeps the agent unsynced and unready",
    ),
    Mutation(
        "ready-before-the-index-synced",
        "nodedns/app/agent.py",
        """        if not self.index.synced:
            reasons.append("the cluster index has not synced yet")""",
        """        if False:
            reasons.append("the cluster index has not synced yet")""",
        ("tests/e2e/test_kube_agent.py::test_unsynced_index_answers_servfail_until_the_first_sync",),
        "/readyz says ready before the cluster index has synced",
        found="yes",
    ),
    Mutation(
        "ready-before-the-roster-says-serving",
        "nodedns/app/agent.py",
        """        elif self.handover is not None and self.state == "running" and not self.handover.announced:
            reasons.append(NOT_ANNOUNCED)
""",
        "",
        ("tests/e2e/test_handover.py::test_readyz_says_ready_only_once_the_roster_says_serving",),
        "/readyz says ready before the agent's roster entry says serving (a successor started then thinks "
        "itself alone)",
        found="yes (the hand-over fixture errored 1 run in 4)",
    ),
    Mutation(
        "upstream-answer-of-another-question-accepted",
        "nodedns/dns/queries.py",
        "    return got[-4:] == question[-4:] and got[:-4].lower() == question[:-4].lower()",
        "    return True",
        ("tests/unit/forward/test_forward.py::test_a_spoofed_answer_is_ignored",),
        "an upstream reply with our ID but another question (a spoof) is accepted",
        found="yes",
    ),
    Mutation(
        "rate-limit-never-limits",
        "nodedns/serve/limits.py",
        "        if n <= self.rate:\n            return 0  # PASS",
        "        if True:\n            return 0  # PASS",
        ("tests/e2e/test_hostile.py::test_rate_limited_clients_get_every_reply_over_the_budget_truncated_while_the_agent_has_the_capacity",),
        "--rate-limit lets every reply through",
    ),
    Mutation(
        "tcp-drip-keeps-the-connection-open",
        "nodedns/serve/tcp.py",
        "        if queries:\n            self._touch()  # only whole queries",
        "        if True:\n            self._touch()  # only whole queries",
        ("tests/e2e/test_hostile.py::test_a_tcp_client_dripping_bytes_is_closed_at_the_idle_timeout",),
        "a TCP client sending a byte at a time keeps its connection open forever",
    ),
    Mutation(
        "forward-cache-ttl-uncapped",
        "nodedns/forward/store.py",
        "min(max(t.min_ttl or 0, floor), cap)",
        "max(t.min_ttl or 0, floor)",
        ("tests/unit/forward/test_forward.py::test_ttls_count_down_on_hits_and_the_entry_expires",),
        "forwarded answers are kept for their whole TTL, not capped at --cache-success-ttl (30 s)",
    ),
    Mutation(
        "loop-route-still-forwarded",
        "nodedns/forward/upstream.py",
        "        return group is not None and group.loop is not None",
        "        return False",
        ("tests/unit/forward/test_forward.py",),
        "a route whose loop probe came back is still forwarded to (queries circle until they time out)",
    ),
    Mutation(
        "duplicate-agent-not-refused",
        "nodedns/app/agent.py",
        "            await self.succession.refuse_duplicates()  # before the node is touched: its rules may be the "
        "other's",
        "            pass",
        ("tests/e2e/test_duplicates.py",),
        "a second agent starts on an address another server (not its predecessor) already serves",
    ),
)


@dataclass(frozen=True)
class Module:
    """One file of the table (scripts/mutations/NAME.py): one module's own tests and its mutations."""

    path: Path
    tests: tuple[str, ...]  # the module's own test files: each of its mutations names tests in these
    mutations: tuple[Mutation, ...] = field(default=())


def load_modules(folder: Path = TABLE) -> list[Module]:
    out = []
    for path in sorted(folder.glob("*.py")):
        ns = runpy.run_path(str(path))
        out.append(Module(path, tuple(ns["TESTS"]), tuple(ns["MUTATIONS"])))
    return out


def table(modules: Iterable[Module] | None = None) -> tuple[Mutation, ...]:
    """Every mutation: the first ones (MUTATIONS above), then each module's file of the table."""
    mods = load_modules() if modules is None else modules
    out = (*MUTATIONS, *(m for mod in mods for m in mod.mutations))
    seen: set[str] = set()
    for m in out:
        if m.name in seen:
            raise SystemExit(f"mutate.py: two mutations are named {m.name}")
        seen.add(m.name)
    return out


def module_key(path: str) -> str:
    """A module as --module names it: nodedns/cli/guard.py, nodedns.cli.guard, cli/guard -> cli/guard."""
    key = path.strip()
    if "/" not in key and not key.endswith((".py", ".c")):
        key = key.replace(".", "/")  # a dotted module name
    key = key.removeprefix("./").removeprefix(PACKAGE + "/")
    for ext in (".py", ".c"):
        key = key.removesuffix(ext)
    return key.removesuffix("/__init__") if key != "__init__" else key


def of_module(name: str, mutations: Iterable[Mutation]) -> list[Mutation]:
    """The mutations of module `name`: its exact path first; else the modules whose path ends with it
    (`cache` still finds nodedns/dns/cache.py once modules move into subpackages)."""
    want = module_key(name)
    listed = list(mutations)
    exact = [m for m in listed if module_key(m.file) == want]
    ending = [m for m in listed if module_key(m.file).endswith("/" + want)]
    if "/" not in want:  # a bare name is a module of a subpackage; a command's module is named cli/NAME
        ending = [m for m in ending if not module_key(m.file).startswith("cli/")] or ending
    return exact or ending


def package_modules() -> list[str]:
    """Every module of the package: its .py files and the C hit path (a subpackage's __init__.py that
    holds only its docstring is no module: there is nothing in it to mutate)."""
    base = ROOT / PACKAGE
    return sorted(str(p.relative_to(ROOT)) for p in (*base.rglob("*.py"), *base.rglob("*.c"))
                  if "__pycache__" not in p.parts and not _docstring_only(p))


def _docstring_only(path: Path) -> bool:
    if path.name != "__init__.py" or path.parent == ROOT / PACKAGE:
        return False
    import ast
    body = ast.parse(path.read_text()).body
    return len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)


def own_tests(modules: Iterable[Module]) -> dict[str, set[str]]:
    """file -> the test files its table file names as the module's own."""
    out: dict[str, set[str]] = {}
    for mod in modules:
        for m in mod.mutations:
            out.setdefault(m.file, set()).update(mod.tests)
    return out


def problems(modules: list[Module]) -> list[str]:
    """What is wrong with the table itself: a file with mutations of several modules, a mutation whose
    tests are not its module's own, a module of the package without a table file (its own tests, which
    scripts/mutate-changed selects for the functions a change touched). No number of hand-written mutations is
    required of a module: mutmut makes the mechanical ones; the tables keep what it cannot reach (the C files,
    behaviour across processes) and the bugs found by hand."""
    out = []
    for mod in modules:
        files = {m.file for m in mod.mutations}
        if len(files) > 1:
            out.append(f"{mod.path.name}: mutations of several files ({', '.join(sorted(files))})")
    own = own_tests(modules)
    for m in table(modules):
        mine = own.get(m.file, set())
        out.extend(f"{m.name}: {t} is not among the own tests of {m.file} ({', '.join(sorted(mine))})"
                   for t in m.tests if t.split("::")[0] not in mine)
    tabled = {table_module(mod.path) for mod in modules} | set(own)
    out.extend(f"{path}: no table file in scripts/mutations/ naming its own tests" for path in package_modules()
               if path not in tabled)
    return out


def table_module(path: Path) -> str:
    """The module a table file is of: scripts/mutations/serve.cache.py is nodedns/serve/cache.py (serve._hitpath
    the C file nodedns/serve/_hitpath.c)."""
    base = PACKAGE + "/" + path.stem.replace(".", "/")
    for candidate in (base + ".py", base + ".c", base + "/__init__.py"):
        if (ROOT / candidate).is_file():
            return candidate
    return base + ".py"


def coverage(mutations: Iterable[Mutation]) -> dict[str, int]:
    """Mutations per module of the package (a module of the table that is not in the package counts too;
    mutations of files outside the package, the documents', are listed apart from them)."""
    counts = dict.fromkeys(package_modules(), 0)
    for m in mutations:
        if m.file.startswith(PACKAGE + "/"):
            counts[m.file] = counts.get(m.file, 0) + 1
    return counts


def markdown(mutations: Iterable[Mutation]) -> str:
    """docs/testing.md's list: one row per mutation, by module."""
    rows = ["| mutation | file | what breaks | killed by | survived before |", "|---|---|---|---|---|"]
    for m in sorted(mutations, key=lambda m: (m.file, m.name)):
        killers = ", ".join(_test_text(t) for t in m.tests)
        what = m.what.replace("|", "\\|")
        rows.append(f"| `{m.name}` | {m.file} | {what} | {killers} | {m.found.replace('|', '/') or 'no'} |")
    return "\n".join(rows) + "\n"


def _test_text(test: str) -> str:
    file, _, name = test.partition("::")
    return f"`{name}` ({Path(file).name})" if name else file


@dataclass
class Outcome:
    verdict: str  # killed, survived, stale, error
    detail: str
    seconds: float


def copy_tree(dest: Path) -> None:
    """The files git tracks, and new ones it does not ignore (as they are in the work tree), and the built C
    extensions (the hit path, the slice columns)."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the work tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    for built in (ROOT / PACKAGE).rglob("_*.so"):  # each beside its source, in its subpackage
        shutil.copy2(built, dest / built.relative_to(ROOT))


def apply(tree: Path, m: Mutation) -> bool:
    """Apply the mutation in `tree`; False when its file is gone or its text is not there exactly once (stale)."""
    path = tree / m.file
    if not path.is_file():
        return False
    text = path.read_text(encoding="utf-8")
    if text.count(m.original) != 1:
        return False
    path.write_text(text.replace(m.original, m.replacement), encoding="utf-8")
    return True


def applies(m: Mutation) -> bool:
    path = ROOT / m.file
    return path.is_file() and path.read_text(encoding="utf-8").count(m.original) == 1


# setup.py's extension, built in place with the flags it gives, without reading pyproject.toml (the
# setuptools of a venv may be older than the one pip builds with, and refuse its license field)
BUILD = """
import runpy, setuptools, sys
from setuptools.dist import Distribution
given = {}
setuptools.setup = lambda **kw: given.update(kw)
runpy.run_path("setup.py")
dist = Distribution({"ext_modules": given["ext_modules"], "script_args": ["build_ext", "--inplace", "--force"]})
dist.parse_command_line()
for ext in dist.ext_modules:
    ext.optional = False  # a mutant that does not compile is an error, not the Python hit path
dist.run_commands()
"""


def rebuild(tree: Path) -> str | None:
    """Build the C extensions in the scratch tree; the error output, or None."""
    r = subprocess.run([sys.executable, "-c", BUILD], cwd=tree, capture_output=True, text=True, timeout=600)
    return None if r.returncode == 0 else r.stdout + r.stderr


def pytest_run(tree: Path, tests: Iterable[str], timeout: float, verbose: bool, *,
               first_failure: bool = True) -> tuple[int, str, str]:
    """Run `tests` in `tree` with this interpreter: (exit status, pytest's last line, its output); -1 on a
    timeout. With `first_failure` (-x) the run ends at the first failing test."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)  # the scratch tree's nodedns, not the installed one
    env.setdefault("HYPOTHESIS_PROFILE", "mutation")  # that a test fails, not its smallest example (tests/conftest.py)
    env.pop("PYTEST_ADDOPTS", None)
    argv = [sys.executable, "-m", "pytest", "-q", *(["-x"] if first_failure else []), "-rfE", "-p", "no:cacheprovider",
            *tests]
    try:
        r = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"the tests ran over {timeout:g}s", ""
    out = r.stdout + r.stderr
    if verbose:
        print(out)
    lines = [line.strip("= ") for line in out.splitlines() if line.strip()]
    summary = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed|error|skipped)", line)),
                   lines[-1] if lines else "")
    return r.returncode, summary, out


def failing(output: str) -> set[str]:
    """The test ids pytest's -rfE summary says failed or errored."""
    return {m.group(1) for m in re.finditer(r"^(?:FAILED|ERROR) (\S+)", output, re.M)}


def names_any(tests: Iterable[str], ids: set[str]) -> bool:
    """One of these test ids is one of `tests` (a file, a test, or a parametrized case of one)."""
    for t in tests:
        for i in ids:
            if i == t or i.startswith(t + "[") or ("::" not in t and i.startswith(t + "::")):
                return True
    return False


def baseline(tests: Iterable[str], timeout: float, verbose: bool) -> tuple[str, set[str]]:
    """Run these tests on the tree as it is (a scratch copy), to the end: ("", ids that fail) when the run
    finished, else (why, set())."""
    scratch = Path(tempfile.mkdtemp(prefix="nodedns-mutant-baseline-"))
    try:
        copy_tree(scratch)
        code, summary, out = pytest_run(scratch, sorted(set(tests)), timeout, verbose, first_failure=False)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if code in (0, 1) and re.search(r"\d+ passed", summary):
        return "", failing(out)
    return f"exit {code}: {summary}", set()


def run(m: Mutation, *, keep: bool, timeout: float, verbose: bool, baseline: dict[tuple[str, ...], str]) -> Outcome:
    """Copy the tree, check the named tests pass on it (once per set of tests, unless `baseline` knows),
    apply the mutation, run them."""
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix=f"nodedns-mutant-{m.name}-"))
    try:
        copy_tree(scratch)
        if m.tests not in baseline:
            code, summary, _ = pytest_run(scratch, m.tests, timeout, verbose)
            baseline[m.tests] = "" if code == 0 and "passed" in summary else f"exit {code}: {summary}"
        if baseline[m.tests]:
            return Outcome("error", f"the named tests fail without the mutation ({baseline[m.tests]})",
                           time.monotonic() - started)
        if not apply(scratch, m):
            return Outcome("stale", f"{m.file} is gone or the original text is not in it exactly once",
                           time.monotonic() - started)
        if m.file.endswith(".c"):
            failed = rebuild(scratch)
            if failed is not None:
                return Outcome("error", f"the mutant does not build: {failed[-500:]}", time.monotonic() - started)
        code, summary, _ = pytest_run(scratch, m.tests, timeout, verbose)
        verdict = {0: "survived", 1: "killed"}.get(code, "error")
        if verdict == "survived" and "passed" not in summary:
            verdict = "error"  # every named test skipped here: nothing was checked
        return Outcome(verdict, summary if verdict != "error" else f"pytest exit {code}: {summary}",
                       time.monotonic() - started)
    finally:
        if keep:
            print(f"  (scratch tree kept: {scratch})")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="mutations to run (default: every one)")
    ap.add_argument("--module", action="append", default=[], metavar="NAME",
                    help="only the mutations of this module (nodedns/serve/cache.py, cache, cli/guard, _hitpath); "
                         "repeatable")
    ap.add_argument("--list", action="store_true", help="list the mutations and their tests; run nothing")
    ap.add_argument("--check", action="store_true",
                    help="only check that every mutation applies to this tree and the table is whole; run nothing")
    ap.add_argument("--coverage", action="store_true", help="mutations per module of nodedns/; run nothing")
    ap.add_argument("--markdown", action="store_true", help="print docs/testing.md's list of mutations; run nothing")
    ap.add_argument("--keep", action="store_true", help="keep each scratch tree (its path is printed)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutation's test run (default 900)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each test run's output")
    args = ap.parse_args(argv)

    modules = load_modules()
    everything = table(modules)
    by_name = {m.name: m for m in everything}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        ap.error(f"unknown mutation(s): {', '.join(unknown)} (see --list)")
    chosen = [by_name[n] for n in args.names] if args.names or args.module else list(everything)
    if args.module:  # the mutations named and those of these modules
        missing = [name for name in args.module if not of_module(name, everything)]
        if missing:
            ap.error(f"no mutations of module(s) {', '.join(missing)} (see --coverage)")
        picked = {m.name for name in args.module for m in of_module(name, everything)} | set(args.names)
        chosen = [m for m in everything if m.name in picked]

    if args.list:
        for m in chosen:
            print(f"{m.name}\n  {m.what}\n  in {m.file}; killed by: {' '.join(m.tests)}")
        return 0
    if args.markdown:
        print(markdown(chosen), end="")
        return 0
    if args.coverage:
        counts = coverage(everything)
        for path, n in counts.items():
            print(f"{n:3} {path}")
        print(f"total: {sum(counts.values())} mutations of {len(counts)} modules")
        return 0
    if args.check:
        stale = [m for m in chosen if not applies(m)]
        for m in chosen:
            print(f"{'stale' if m in stale else 'applies':9} {m.name}  ({m.file})")
        wrong = problems(modules) if not args.names and not args.module else []
        for line in wrong:
            print(f"table     {line}")
        return 1 if stale or wrong else 0

    width = max(len(m.name) for m in chosen)
    results: dict[str, int] = {}
    per_module: dict[str, dict[str, int]] = {}
    known: dict[tuple[str, ...], str] = {}  # named tests -> why they fail on the tree as it is ("": they pass)
    groups: dict[str, list[Mutation]] = {}
    for m in chosen:
        groups.setdefault(m.file, []).append(m)
    for file, group in groups.items():
        if len(group) > 1:  # one run of all the module's named tests on the tree as it is, not one per mutation
            why, bad = baseline([t for m in group for t in m.tests], args.timeout * 3, args.verbose)
            for m in group:
                if why:
                    known[m.tests] = why
                elif names_any(m.tests, bad):
                    fails = sorted(i for i in bad if names_any(m.tests, {i}))
                    known[m.tests] = "a named test fails: " + ", ".join(fails)
                else:
                    known[m.tests] = ""
        for m in group:
            o = run(m, keep=args.keep, timeout=args.timeout, verbose=args.verbose, baseline=known)
            results[o.verdict] = results.get(o.verdict, 0) + 1
            tally = per_module.setdefault(file, {})
            tally[o.verdict] = tally.get(o.verdict, 0) + 1
            print(f"{o.verdict:9} {m.name:{width}}  {o.seconds:5.0f}s  {o.detail}", flush=True)
    if len(per_module) > 1:
        for file, tally in per_module.items():
            print(f"module {file}: " + ", ".join(f"{n} {v}" for v, n in sorted(tally.items()))
                  + f" of {sum(tally.values())}")
    print("total: " + ", ".join(f"{n} {v}" for v, n in sorted(results.items())) + f" of {len(chosen)}")
    return 0 if results.get("killed", 0) == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
