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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
