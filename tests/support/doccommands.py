"""The shell commands README.md and docs/*.md show, and the output they show for them (pure).

Extraction rules (`extract`):

1. Only fenced code blocks (three backquotes) hold commands; text outside them never does.
2. A block with lines that start with `$ ` is a transcript: each `$ ` line is a command, and the lines
   after it, up to the next `$ ` line or the end of the block, are the output the document shows
   for it (none: the output is not shown, and not checked).
3. A block whose info string is `sh`, `bash` or `shell` and that has no `$ ` line is a script: every
   line that is neither blank nor a comment (`#` first) is a command; no output is shown.
4. Any other block (yaml, json, text, a bare block without `$ `) holds no command.
5. A line that ends with a backslash continues on the next line (joined, as the shell joins it).
6. A trailing `(exit N)` after the command (two or more spaces before it) is its expected exit
   status; without it the command must exit 0. A trailing `# comment` is left to the shell.
7. `$ echo $?` right after a command shows that command's exit status: it becomes the expected exit
   status of that command, and is not a command of its own.

Comparison (`compare`): the shown output lines must appear in the actual output, in order (lines of
the actual output between them are allowed: documents abridge), each equal once both are
normalized: whitespace runs are one space, `...` lines and blank lines are skipped, `...` inside a
line stands for any text (a line cut short), a log line's time stamp is left out, and what moves
from run to run is replaced by a placeholder (`VOLATILE`): DNS message IDs, TTLs (dig's and
`nodedns lookup`'s record lines, "ttl left"), SOA serials, index generation numbers, query times,
timestamps, process IDs, dig's WHEN and MSG SIZE lines.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import yaml

from tests.support.helpers import ROOT

SCRIPT_LANGS = frozenset({"sh", "bash", "shell"})
_FENCE = re.compile(r"^(\s*)```(.*)$")
_EXIT = re.compile(r"\s{2,}\(exit (\d+)\)\s*$")


@dataclass(frozen=True)
class DocCommand:
    path: str  # "README.md", "docs/status.md"
    line: int  # where the command starts (1-based)
    command: str
    output: tuple[str, ...] | None = None  # the output shown (None: not shown)
    exit: int = 0

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def blocks(text: str) -> Iterable[tuple[str, int, list[str]]]:
    """(info string, line of the first content line, content lines) of each fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, info = m.group(1), m.group(2).strip()
        start = i + 1
        j = start
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        yield info, start + 1, [line[len(indent):] if line.startswith(indent) else line for line in lines[start:j]]
        i = j + 1


def _join(lines: list[str], i: int) -> tuple[str, int]:
    """The logical line at i (continuations joined) and the index after it."""
    parts = [lines[i]]
    while parts[-1].endswith("\\") and i + 1 < len(lines):
        parts[-1] = parts[-1][:-1]
        i += 1
        parts.append(lines[i].lstrip())
    return " ".join(p.rstrip() for p in parts), i + 1


def _command(text: str) -> tuple[str, int]:
    m = _EXIT.search(text)
    if m:
        return text[: m.start()].rstrip(), int(m.group(1))
    return text.rstrip(), 0


def extract(path: str, text: str) -> list[DocCommand]:
    out: list[DocCommand] = []
    for info, first, lines in blocks(text):
        lang = info.split()[0].lower() if info else ""
        if any(line.startswith("$ ") for line in lines):
            i = 0
            while i < len(lines):
                if not lines[i].startswith("$ "):
                    i += 1
                    continue
                lineno = first + i
                raw, i = _join(lines, i)
                shown: list[str] = []
                while i < len(lines) and not lines[i].startswith("$ "):
                    shown.append(lines[i])
                    i += 1
                while shown and not shown[-1].strip():
                    shown.pop()
                command, status = _command(raw[2:])
                if command.strip() == "echo $?" and out and out[-1].path == path:
                    prev = out.pop()
                    code = int(shown[0].strip()) if shown and shown[0].strip().isdigit() else 0
                    out.append(DocCommand(prev.path, prev.line, prev.command, prev.output, code))
                    continue
                out.append(DocCommand(path, lineno, command, tuple(shown) if shown else None, status))
        elif lang in SCRIPT_LANGS:
            i = 0
            while i < len(lines):
                stripped = lines[i].strip()
                if not stripped or stripped.startswith("#"):
                    i += 1
                    continue
                lineno = first + i
                raw, i = _join(lines, i)
                command, status = _command(raw.strip())
                out.append(DocCommand(path, lineno, command, None, status))
    return out


# ----------------------------------------------------------------------------------------------
# Comparing the output shown with the output got

VOLATILE = "<v>"
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (?=[A-Z]+ )"), ""),  # a log line's time stamp
    (re.compile(r"(opcode: \w+, status: \w+, id: )\d+"), rf"\g<1>{VOLATILE}"),  # dig's header
    (re.compile(r"^;; (Query time|WHEN|MSG SIZE\s+rcvd):.*$"), rf";; \1: {VOLATILE}"),
    (re.compile(r"^(;; SERVER: .*?)\s*\((UDP|TCP)\)$"), r"\1"),
    # a record line: NAME TTL [IN] TYPE ... (dig, nodedns lookup/explain)
    (re.compile(r"^(\S+\.) \d+ ((IN )?[A-Z][A-Z0-9]*\b)"), rf"\1 {VOLATILE} \2"),
    (re.compile(r"\b(SOA \S+ \S+ )\d+"), rf"\g<1>{VOLATILE}"),  # the serial: a time stamp
    (re.compile(r"(ttl left: )\d+s"), rf"\g<1>{VOLATILE}"),
    (re.compile(r"(index generation )\d+"), rf"\g<1>{VOLATILE}"),
    (re.compile(r"\bpid \d+"), f"pid {VOLATILE}"),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d([.,]\d+)?Z?"), VOLATILE),
    (re.compile(r"\b\d+(\.\d+)?(ms|s)\b(?= \(| ago|$)"), VOLATILE),  # durations at the end or before "(", "ago"
)


def normalize(line: str) -> str:
    text = " ".join(line.split())
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    return text


def shown_lines(shown: Sequence[str]) -> list[str]:
    return [n for n in (normalize(x) for x in shown) if n and n != "..."]


def _matcher(want: str) -> re.Pattern[str]:
    """A shown line as a pattern: `...` inside it stands for any text (a line cut short)."""
    return re.compile(".*".join(re.escape(part) for part in want.split("...")) + r"\Z")


def compare(shown: Sequence[str], actual: str) -> list[str]:
    """The shown lines not found in the actual output (in order); empty: it matches."""
    got = [normalize(x) for x in actual.splitlines()]
    missing: list[str] = []
    at = 0
    for want in shown_lines(shown):
        pattern = _matcher(want)
        found = next((i for i in range(at, len(got)) if pattern.match(got[i])), None)
        if found is None:
            missing.append(want)
        else:
            at = found + 1
    return missing


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


COMMANDS: list[DocCommand] = [c for p in DOCS for c in extract(str(p.relative_to(ROOT)), p.read_text())]


# (regular expression searched in the command, why it is not run here)
SKIPS: tuple[tuple[str, str], ...] = (
    (r"^\.ci/run\b", "CI itself: installs Debian packages and kubectl, then runs the whole suite, this test with it"),
    (r"^scripts/install-venv\b",
     "the README's first set-up command: tests/e2e/test_quickstart.py runs it in a fresh copy of the repository"),
    (r"(^|\s)(\S*/)?python3? -m pytest\b|^(\w+=\S*\s+)*(pytest|scripts/run-tests)\b",
     "runs the tests, which run this one"),
    # `kubectl kustomize DIR` runs as shown; `kubectl apply -k DIR` renders DIR (DEPLOY, below)
    (r"\bkubectl\b(?!\s+kustomize\b)", "needs a Kubernetes cluster (kubectl)"),
    (r"^(buildah|podman|docker) push\b", "pushes the image to a container registry"),
    (r"^scripts/build-image\b",
     "builds the container image (buildah as root, minutes): tests/e2e/test_image.py builds it and runs it in CI"),
    (r"\bscripts/bench-node\b",
     "measures the node's interface and rules (root on a node, minutes): tests/e2e/test_node_e2e.py checks them"),
    (r"\bscripts/(bench-\S+|soak|restart-under-load)\b",
     "a benchmark of minutes; tests/test_bench_*.py, test_soak.py and test_restart_under_load.py run it in small"),
    (r"\bscripts/(lib/)?attack\b",
     "floods the agent for minutes (one agent per flood): tests/e2e/test_scripts_smoke.py runs it with --quick"),
    (r"\bscripts/(lib/)?failover\b",
     "kills and stops the agent under dnsperf load on a fake node (root, minutes): tests/e2e/test_failover.py runs it"),
    (r"\bscripts/mutate\b(?!-)(?!.*--(list|check|coverage)\b)",
     "runs tests of the suite once per mutation (minutes): tests/e2e/test_scripts_smoke.py runs two and checks the "
     "table"),
    (r"\bscripts/mutate-changed\b(?!.*--list\b)",
     "runs mutmut on a change's functions (minutes): tests/e2e/test_scripts_smoke.py runs it on one function"),
    (r"#\s*on the fake node of tests/e2e/test_insight_e2e\.py",
     "runs on a fake node (network namespaces: two \"pods\" resolving with glibc through the agent as the DaemonSet "
     "runs it): tests/e2e/test_insight_e2e.py builds it and checks this output"),
    (r"\b169\.254\.20\.10:\d+/|@169\.254\.20\.10\b",
     "asks the agent of a node at its link-local address (169.254.20.10): a node of a real cluster"),
    (r"--unix-socket /run/nodedns/",
     "on a node whose agent serves the debug listener on a Unix socket (--debug-listen unix:/run/nodedns/debug.sock; "
     "root): tests/unit/observe/test_status.py serves it on a Unix socket"),
    (r"^(ip addr show nodelocaldns|iptables -t raw -S|nft list table inet nodedns)\b",
     "shows what an agent managing a real node installed (--setup-interface, --firewall: root on the node); "
     "tests/e2e/test_node_e2e.py checks the same in network namespaces"),
    (r"^nodedns serve\b(?!.*--manifests)(?!.*--config)",
     "needs a Kubernetes API server (a Pod's service account, or a kubeconfig); tests/e2e/test_kube_agent.py runs the "
     "agent against the API server double"),
)


# A deploy command: what it applies is rendered with `kubectl kustomize DIR` (no cluster needed) instead.
DEPLOY = re.compile(r"^kubectl\s+(?:apply|create|delete|diff)\s+-k\s+(\S+)")


def deploy_dir(cmd: DocCommand) -> str | None:
    found = DEPLOY.search(cmd.command)
    return found.group(1) if found else None


def skip_reason(cmd: DocCommand) -> str | None:
    if deploy_dir(cmd) is not None:
        return None
    for pattern, reason in SKIPS:
        if re.search(pattern, cmd.command):
            return reason
    return None


def readme_serve() -> str:
    """The serve part of the README's first set-up command (the quick-start agent)."""
    section = (ROOT / "README.md").read_text().split("## Two commands", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.S)
    assert block
    lines = block.group(1).splitlines()
    first = next(lines[i + 1] for i, line in enumerate(lines) if line.startswith("# 1. "))
    return first.split(" && ", 1)[1].strip()


def status_address(command: str) -> str | None:
    """Where the agent's /readyz is: --status-listen, else the --config file's status-listen, else the
    default; None with `none`."""
    words = shlex.split(command, comments=True)
    value: str | None = None
    for i, w in enumerate(words):
        if w == "--status-listen" and i + 1 < len(words):
            value = words[i + 1]
        elif w.startswith("--status-listen="):
            value = w.split("=", 1)[1]
        elif w == "--config" and i + 1 < len(words) and value is None:
            raw = yaml.safe_load((ROOT / words[i + 1]).read_text()) or {}
            value = raw.get("status-listen")
    value = value or "127.0.0.1:9253"
    return None if value == "none" else value
