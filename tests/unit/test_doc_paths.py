"""Every file, test and flag README.md and docs/*.md name exists: a path of the repository, a link, a test
function, a `--flag` of `nodedns` or of a script.

The commands themselves run in tests/e2e/test_doc_commands.py; this checks what a reader looks up instead:
`scripts/bench-sync` is in scripts/, `[the node](node.md)` opens a page, a figure credited to
`test_x` has a test of that name, `--max-pending` is an option of `nodedns serve`.
"""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DOC_IDS = [str(p.relative_to(ROOT)) for p in DOCS]

# a path of this repository: under one of its top-level directories, or a file at its top
_DIRS = "|".join(re.escape(p.name) for p in sorted(ROOT.iterdir())
                 if p.is_dir() and not p.name.startswith(".") and p.name not in {"build", "nodedns.egg-info"})
PATH = re.compile(r"(?<![\w/.:@~$=-])((?:" + _DIRS + r"|\.ci)/(?:[\w.*+-]+/?)*)(?![\w/])")
# a file named alone (`Containerfile`, `pyproject.toml`): it must be somewhere in the repository
BARE = re.compile(r"`([\w-]+\.(?:md|toml|py|txt|yaml|sh|c)|Containerfile)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
TEST = re.compile(r"(?<![\w/])(test_\w+)(?![\w.])")
FLAG = re.compile(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)")
# the subcommands `nodedns --help` lists (its "{serve,guard,...}" line or the indented table under COMMAND)
_TOP_HELP = subprocess.run([sys.executable, "-m", "nodedns", "--help"], cwd=ROOT, capture_output=True, text=True,
                           timeout=60).stdout
SUBCOMMANDS = tuple(re.findall(r"^    ([a-z][a-z-]+)\b", _TOP_HELP, re.M))
CODE = re.compile(r"`([^`\n]+)`")

# (document, path): why that text is no path of this repository
NOT_OURS = {
    ("docs/cluster-dns-behaviours.md", "docs/specification.md"): "kubernetes/dns's specification, quoted by name",
    ("docs/peers.md", "docs/specification.md"): "kubernetes/dns's specification, quoted by name",
    ("docs/multicluster.md", "specification.md"): "the multicluster DNS specification of kubernetes-sigs/mcs-api",
    ("docs/peers.md", "nodelocaldns.yaml"): "kubernetes/kubernetes's NodeLocal DNSCache manifest",
    ("docs/peers.md", "federation.md"): "a document of kubernetes/dns, quoted by name",
    ("docs/peers.md", "federated-services.md"): "a design document of kubernetes/community, quoted by name",
    ("docs/peers.md", "kube-dns-coredns-perfcomp.md"): "a document of coredns/deployment, quoted by name",
    ("README.md", "nodedns/app.py"): "a stack in a recorded benchmark output, from the tree it was measured on",
    ("README.md", "daemonset/nodedns"): "kubernetes-validate's name of the DaemonSet object it checked (kind/name)",
}

# flags of other programs shown in docs, with the program (never a nodedns or scripts/ option)
OTHER_PROGRAMS = {
    "--cache-size": "dnsmasq", "--no-negcache": "dnsmasq", "--no-resolv": "dnsmasq", "--server": "dnsmasq",
    "--dns-loop-detect": "dnsmasq", "--listen-address": "dnsmasq", "--bind-interfaces": "dnsmasq",
    "--no-hosts": "dnsmasq", "--local": "dnsmasq", "--host-record": "dnsmasq", "--pid-file": "dnsmasq",
    "--config-dir": "kube-dns", "--config-map": "kube-dns",
    "--config-period": "kube-dns", "--dns-port": "kube-dns", "--domain": "kube-dns", "--federations": "kube-dns",
    "--healthz-port": "kube-dns", "--initial-sync-timeout": "kube-dns", "--nameservers": "kube-dns",
    "--nodecache-ip": "node-local-dns", "--dport": "iptables", "--sport": "iptables", "--comment": "iptables",
    "--bounding-set": "setpriv", "--no-new-privs": "setpriv", "--system": "sysctl",
    "--unix-socket": "curl", "--overwrite": "kubectl label", "--all": "kubectl", "--as": "kubectl",
    "--field-selector": "kubectl", "--for": "kubectl wait", "--image": "kubectl run", "--overrides": "kubectl run",
    "--restart": "kubectl run", "--rm": "kubectl run", "--generate-hashes": "pip-compile",
    "--require-hashes": "pip", "--no-deps": "pip", "--no-index": "pip", "--only-binary": "pip",
    "--no-build-isolation": "pip", "--isolation": "buildah", "--strip-debug": "strip (binutils)",
    "--include": "pip download (its --help)",
    "--key": "docs/architecture.md's pattern for any option (`--key` and `key:`)",
    "--collect-only": "pytest", "--dist": "pytest (pytest-xdist)", "--strict": "kubernetes-validate",
}


def lines(doc: Path) -> list[tuple[int, str]]:
    return list(enumerate(doc.read_text(encoding="utf-8").splitlines(), 1))


@functools.cache
def tracked() -> frozenset[str]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True).stdout
    return frozenset(out.split())


@functools.cache
def help_flags(program: str) -> frozenset[str]:
    """The --flags a program's --help shows: `nodedns SUB` or a script of scripts/ (run with this interpreter)."""
    if program.startswith("nodedns"):
        argv = [sys.executable, "-m", "nodedns", *program.split()[1:], "--help"]
    else:
        path = ROOT / program
        text = path.read_text()
        if text.startswith("#!/usr/bin/env bash"):  # a shell script parses its options in a case statement: read it
            return frozenset(FLAG.findall(text))
        argv = [sys.executable, str(path), "--help"]
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"`{program} --help` failed: {r.stderr[-500:]}"
    return frozenset(FLAG.findall(r.stdout))


def program_of(words: list[str]) -> str | None:
    """`nodedns serve ...` -> "nodedns serve"; `python3 scripts/fuzz ...` -> "scripts/fuzz"."""
    words = [w for w in words if not re.fullmatch(r"[A-Z_]+=\S*", w)]  # environment assignments first
    if words[:1] in (["sudo"],):
        words = words[1:]
    if words and re.fullmatch(r"(\S*/)?python3?", words[0]) and len(words) > 1:
        words = words[1:]
    if not words:
        return None
    if words[0] == "nodedns":
        sub = next((w for w in words[1:] if not w.startswith("-")), "")
        return f"nodedns {sub}" if sub in SUBCOMMANDS else "nodedns" if not sub else None
    if words[0].startswith("scripts/") and (ROOT / words[0]).is_file():
        return words[0]
    return None


def commands(doc: Path) -> list[tuple[int, str]]:
    """Command lines: `$ ` lines and lines of sh blocks, and inline code that starts with a program."""
    out = []
    fenced = False
    for n, line in lines(doc):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            out.append((n, line.strip().removeprefix("$ ")))
        else:
            out += [(n, code) for code in CODE.findall(line)]
    return out


@pytest.mark.parametrize("doc", DOCS, ids=DOC_IDS)
def test_every_repository_path_a_document_names_exists(doc: Path) -> None:
    rel = str(doc.relative_to(ROOT))
    missing = []
    for n, line in lines(doc):
        for m in PATH.finditer(line):
            path = m[1].rstrip("/.")
            if (rel, path) in NOT_OURS or not path:
                continue
            if not list(ROOT.glob(path)) and not (ROOT / path).exists():
                missing.append(f"{rel}:{n}: {path}")
        for name in BARE.findall(line):
            if (rel, name) in NOT_OURS:
                continue
            if not any(Path(t).name == name for t in tracked()) and not (ROOT / name).exists():
                missing.append(f"{rel}:{n}: {name} (no file of that name in the repository)")
    assert not missing, "named but not in the repository:\n" + "\n".join(missing)


@pytest.mark.parametrize("doc", DOCS, ids=DOC_IDS)
def test_every_link_of_a_document_opens_a_file(doc: Path) -> None:
    rel = str(doc.relative_to(ROOT))
    broken = []
    for n, line in lines(doc):
        for target in LINK.findall(CODE.sub("", line)):
            target = target.split("#")[0]
            if not target or re.match(r"[a-z]+:", target) or re.search(r"[][*]", target):
                continue  # an anchor in the page itself, or a URL
            if not (doc.parent / target).exists():
                broken.append(f"{rel}:{n}: ({target})")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


@pytest.mark.parametrize("doc", DOCS, ids=DOC_IDS)
def test_every_test_a_document_credits_is_a_test_of_the_suite(doc: Path) -> None:
    defined = set()
    for path in (ROOT / "tests").rglob("*.py"):
        defined |= set(re.findall(r"^\s*(?:async )?def (test_\w+)", path.read_text(), re.M))
    rel = str(doc.relative_to(ROOT))
    unknown = [f"{rel}:{n}: {name}" for n, line in lines(doc) for name in TEST.findall(line)
               if name not in defined and not any((ROOT / "tests").rglob(f"{name}.py"))]
    assert not unknown, "credited to tests the suite does not have:\n" + "\n".join(unknown)


@pytest.mark.parametrize("doc", DOCS, ids=DOC_IDS)
def test_every_flag_of_a_command_a_document_shows_is_in_its_help(doc: Path) -> None:
    rel = str(doc.relative_to(ROOT))
    unknown = []
    for n, command in commands(doc):
        for part in re.split(r"\s*(?:&&|\|\||[|;])\s*", command.split("  #")[0].split(" # ")[0]):
            try:
                words = shlex.split(part)
            except ValueError:
                words = part.split()
            program = program_of(words)
            if program is None:
                continue
            flags = help_flags(program)
            for w in words[1:]:
                flag = FLAG.fullmatch(w.split("=")[0])
                if flag and flag[1] not in flags and flag[1] != "--help":
                    unknown.append(f"{rel}:{n}: `{program}` has no {flag[1]}")
    assert not unknown, "flags the program does not take:\n" + "\n".join(unknown)


@pytest.mark.parametrize("doc", DOCS, ids=DOC_IDS)
def test_every_flag_a_document_names_is_an_option_of_nodedns_or_a_script(doc: Path) -> None:
    """A flag named in the text (`--max-pending N`, "with --workers") is an option of some `nodedns` command or
    script, or one of the other programs' flags listed in OTHER_PROGRAMS."""
    ours: set[str] = set()
    for sub in SUBCOMMANDS:
        ours |= help_flags(f"nodedns {sub}")
    commands = [p for p in (ROOT / "scripts").iterdir() if p.is_file()]  # not scripts/mutations/
    parts = [p for p in (ROOT / "scripts" / "lib").glob("*.py") if p.name != "soak_feeder.py"]  # run with their --flags
    for script in sorted(commands + parts):
        if script.read_text(errors="replace").startswith(("#!/usr/bin/env python", "#!/usr/bin/env bash")) \
                or script.suffix == ".py":
            ours |= help_flags(str(script.relative_to(ROOT)))
    ours |= set(FLAG.findall((ROOT / "scripts" / "lib" / "soak_feeder.py").read_text()))
    rel = str(doc.relative_to(ROOT))
    unknown = sorted({f"{rel}: {flag}" for _, line in lines(doc) for flag in FLAG.findall(line)
                      if flag not in ours and flag not in OTHER_PROGRAMS and flag != "--help"})
    assert not unknown, "flags no nodedns command or script takes (nor a program of OTHER_PROGRAMS):\n" + \
        "\n".join(unknown)


def test_the_subcommands_are_read_from_the_help() -> None:
    assert {"serve", "lookup", "explain"} <= set(SUBCOMMANDS), _TOP_HELP


def test_the_other_programs_flags_are_not_ours() -> None:
    """OTHER_PROGRAMS hides no option of ours: a flag listed there that nodedns takes must be checked instead."""
    ours: set[str] = set()
    for sub in SUBCOMMANDS:
        ours |= help_flags(f"nodedns {sub}")
    assert not sorted(set(OTHER_PROGRAMS) & ours)


# -- the docstrings: the names and paths they point a reader to exist ---------------------------------------

SOURCES = sorted((ROOT / "nodedns").rglob("*.py"))
MODULES = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p for p in SOURCES}
DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?$")
# (module, text in backquotes): why that dotted text names nothing of the package
NOT_NAMES = {
    ("nodedns/cluster/objects/policy.py", "nodedns.io"): "the API group of the DNSPolicy CRDs",
    ("nodedns/metrics/slots.py", "cluster.local"): "a DNS domain",
    ("nodedns/node/netif.py", "netif.go"): "node-cache's Go source, quoted by name",
    ("nodedns/runtime/logutil.py", "nodedns.query"): "a logger's name",
}


def docstrings(path: Path) -> list[str]:
    import ast

    return [d for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and (d := ast.get_docstring(node, clean=False))]


@functools.cache
def class_sources() -> dict[str, list[str]]:
    """Each class of the package by its name: the sources of its definitions (the attributes it sets)."""
    import ast

    out: dict[str, list[str]] = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append(ast.unparse(node))
    return out


def class_has(name: str, attr: str) -> bool:
    pattern = re.compile(rf"\b(?:self|cls)\.{attr}\b|\bdef {attr}\b|^\s*{attr}\s*[:=]|['\"]{attr}['\"]", re.M)
    return any(pattern.search(src) for src in class_sources().get(name, []))


def resolves_in(module: str, rest: list[str]) -> bool:
    import importlib

    obj: object = importlib.import_module(module)
    for part in rest:
        if hasattr(obj, part):
            obj = getattr(obj, part)
        else:  # an attribute an instance sets (`ClusterAnswers.table`)
            return isinstance(obj, type) and class_has(obj.__name__, part) and part == rest[-1]
    return True


def names_something(text: str) -> bool | None:
    """True: `text` (`nodedns.serve.cache.ClusterAnswers.table`, `keys.KEY_HEAD`, `Index.apply`) names a module,
    class, function or attribute of the package; False: it would, and does not; None: it is not of ours."""
    parts = text.removesuffix("()").split(".")
    for n in range(len(parts), 0, -1):
        head = ".".join(parts[:n])
        candidates = [m for m in MODULES if m == head or m.endswith("." + head)] if parts[0] != "nodedns" else \
            [m for m in MODULES if m == head]
        if candidates:
            return any(resolves_in(m, parts[n:]) for m in candidates)
    if parts[0] == "nodedns":
        return False
    if parts[0] in class_sources() and len(parts) == 2:
        return class_has(parts[0], parts[1])
    return None


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_every_name_and_path_a_docstring_points_to_exists(path: Path) -> None:
    """A docstring that names `module.name`, `Class.attribute` or a repository path points a reader there:
    a stale name (a function renamed, a module moved) is a wrong direction."""
    where = str(path.relative_to(ROOT))
    missing = []
    for doc in docstrings(path):
        for m in CODE.finditer(doc):
            text = m.group(1).strip()
            if DOTTED.match(text) and (where, text) not in NOT_NAMES and names_something(text) is False:
                missing.append(text)
        for m in PATH.finditer(doc):
            found = m.group(1).rstrip("/.")
            if "*" not in found and not (ROOT / found).exists():
                missing.append(found)
    assert not missing, f"{where}: its docstrings name what does not exist: {sorted(set(missing))}"
