"""Each measured figure lives in one place: docs/measured.md, checked against the record of the
benchmark outputs it quotes (docs/measured.json), and stated nowhere else but the README's table of
headline figures, which quotes a few of them from there.

- Every benchmark output and table of the record is in the docs/measured.md section of the same name,
  line for line, and a section quotes nothing the record does not hold.
- Every figure the prose states is there, and each of its numbers is one of the output lines it comes
  from (rounded as the prose rounds it), or the arithmetic the record gives on numbers of the section.
- Each headline figure of the README links to a section of docs/measured.md, and each of its numbers
  is in an output or a table that section quotes from the record (rounded as the table rounds it).
- No other document (the README outside its headline table, docs/, the DaemonSet's and the examples'
  YAML) repeats a quoted output line or a figure, or states a figure of the kinds the record lists
  (`elsewhere`: memory per process or worker, CPU against a peer, queries lost, the size of the test
  suite, the soak's growth): they link to docs/measured.md instead. Two homes for one figure is how
  the docs came to contradict each other.
"""

from __future__ import annotations

import json
import re
import statistics
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest

from tests.support.helpers import ROOT

README = ROOT / "README.md"
MEASURED = ROOT / "docs" / "measured.md"
RECORD = json.loads((ROOT / "docs" / "measured.json").read_text())
# the lines a benchmark prints on every run (its header), which say nothing of what it measured
HEADERS = ("server ", "workload ", "mode ", "cached answers", "(qps: median")
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


def sections(text: str) -> dict[str, str]:
    """docs/measured.md's sections by heading (its `## ` headings)."""
    parts = re.split(r"\n## ", text)
    return {p.split("\n", 1)[0]: p for p in parts[1:]}


SECTIONS = sections(MEASURED.read_text())


def headline_table(readme: str) -> str:
    """The README's "Headline figures" section: the one place outside docs/measured.md a figure is stated."""
    start = readme.index("\n## Headline figures\n")
    return readme[start:readme.index("\n## ", start + 1)]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def code_lines(section: str) -> list[str]:
    return [line for block in re.findall(r"```\n(.*?)```", section, flags=re.S) for line in block.splitlines()]


def table_rows(section: str) -> list[list[str]]:
    rows = [line for line in section.split("\n") if line.startswith("|") and not re.fullmatch(r"\|[-| ]+\|", line)]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def numbers(text: str) -> list[Decimal]:
    return [Decimal(n.replace(",", "")) for n in NUMBER.findall(text)]


def rounded(value: Decimal, like: Decimal) -> Decimal:
    """`value` rounded to as many decimals as `like` shows (half up, as the prose rounds)."""
    exponent = like.as_tuple().exponent
    assert isinstance(exponent, int)
    return value.quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_UP)


@pytest.mark.parametrize("bench", RECORD["benchmarks"], ids=[f"{b['section']}: {b['command'] or 'table'}"[:90]
                                                            for b in RECORD["benchmarks"]])
def test_measured_md_quotes_each_recorded_benchmark_output_as_it_was_printed(bench: dict[str, Any]) -> None:
    assert bench["section"] in SECTIONS, f"no section {bench['section']!r} in docs/measured.md"
    assert bench["date"] and bench["machine"]  # when, and whether the machine was quiet
    lines = code_lines(SECTIONS[bench["section"]])
    quoted = ([f"$ {bench['command']}"] if bench["command"] else []) + bench["output"]
    at = 0
    for line in quoted:  # in order, as printed
        assert line in lines[at:], f"{bench['section']}: not quoted (or out of order): {line!r}"
        at = lines.index(line, at) + 1


def test_measured_md_quotes_nothing_the_record_does_not_hold() -> None:
    recorded = {line for b in RECORD["benchmarks"] for line in
                ([f"$ {b['command']}"] if b["command"] else []) + b["output"]}
    for title, section in SECTIONS.items():
        for line in code_lines(section):
            assert line in recorded, f"{title}: quoted but not in docs/measured.json: {line!r}"
        rows = table_rows(section)
        if rows:
            table = next((t for t in RECORD["tables"] if t["section"] == title), None)
            assert table is not None and table["rows"] == rows, f"{title}: its table differs from the record"
            assert table["date"] and table["machine"]


@pytest.mark.parametrize("figure", RECORD["figures"], ids=[f["text"][:60] for f in RECORD["figures"]])
def test_each_figure_the_prose_states_comes_from_the_output_it_quotes(figure: dict[str, Any]) -> None:
    section = SECTIONS[figure["section"]]
    assert figure["text"] in section, f"{figure['section']}: docs/measured.md does not say {figure['text']!r}"
    outputs = {line for b in RECORD["benchmarks"] for line in b["output"]}
    if "from" in figure:
        sources = [n for line in figure["from"] for n in numbers(line)]
        for line in figure["from"]:
            assert line in outputs, f"not a recorded output line: {line!r}"
        for n in numbers(figure["text"].replace("--workers 1", "")):
            assert any(rounded(s, n) == n for s in sources), f"{figure['text']!r}: {n} is in none of {figure['from']}"
    else:
        formula = figure["formula"]
        operands = numbers(formula)
        for n in operands:  # the arithmetic is on figures the section shows
            assert str(n) in section, f"{formula}: {n} is not a figure of the section"
        if formula.startswith("median("):
            value = Decimal(str(statistics.median(operands)))
        else:
            value = Decimal(str(eval(formula, {"__builtins__": {}})))  # noqa: S307 - a formula of our own record
        stated = numbers(figure["text"])
        assert any(rounded(value, n.copy_abs()) == n.copy_abs() for n in stated), (figure, value)


HEADLINE_ROW = re.compile(r"^\| (?P<what>[^|]+) \| (?P<figure>[^|]+) \| "
                          r"\[(?P<title>[^]]+)\]\(docs/measured\.md#(?P<anchor>[\w-]+)\) \|$", re.M)


def headline_rows() -> list[re.Match[str]]:
    return list(HEADLINE_ROW.finditer(headline_table(README.read_text())))


def test_the_readme_states_headline_figures_only_in_its_table_each_linking_to_its_section() -> None:
    table = headline_table(README.read_text())
    body = [line for line in table.split("\n") if line.startswith("|")][2:]  # below the header and the rule
    rows = headline_rows()
    assert len(rows) >= 5 and len(rows) == len(body), "each row: | what | figure | [section](docs/measured.md#anchor) |"
    for row in rows:
        assert row["title"] in SECTIONS, f"no section {row['title']!r} in docs/measured.md"
        assert row["anchor"] == slug(row["title"]), f"{row['title']!r}: its anchor is #{slug(row['title'])}"
    assert "docs/measured.md" in table.split("|", 1)[0]  # the prose above the table says where the rest is


@pytest.mark.parametrize("row", headline_rows(), ids=[r["what"][:60] for r in headline_rows()])
def test_each_headline_figure_is_one_its_section_quotes_from_the_record(row: re.Match[str]) -> None:
    title = row["title"]
    quoted = [line for b in RECORD["benchmarks"] if b["section"] == title for line in b["output"]]
    quoted += [cell for t in RECORD["tables"] if t["section"] == title for r in t["rows"] for cell in r]
    sources = [n for line in quoted for n in numbers(line)]
    stated = numbers(row["figure"])
    assert stated, f"{row['what']!r}: no figure"
    for n in stated:
        assert any(rounded(s, n) == n for s in sources), f"{row['figure']!r}: {n} is in no output or table of {title!r}"


def other_documents() -> list[tuple[str, str]]:
    readme = README.read_text()
    docs = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "docs").glob("*.md")) if p != MEASURED]
    yaml = [(str(p.relative_to(ROOT)), p.read_text()) for pattern in ("daemonset*/**/*.yaml", "examples/**/*.yaml")
            for p in sorted(ROOT.glob(pattern))]
    changelog = ROOT / "CHANGELOG.md"
    history = [("CHANGELOG.md", changelog.read_text())] if changelog.exists() else []
    return [("README.md outside its headline table", readme.replace(headline_table(readme), "")), *docs, *yaml,
            *history]


@pytest.mark.parametrize(("name", "text"), other_documents(), ids=[n for n, _ in other_documents()])
def test_no_other_document_repeats_a_measured_figure(name: str, text: str) -> None:
    if name == "docs/peers.md":
        text = re.sub(r"(?s)^.*?(?=\n## )", "", text)  # its figures are the peers' own (CoreDNS, node-cache)
    for bench in RECORD["benchmarks"]:
        for line in bench["output"]:
            if len(line.strip()) > 24 and not line.strip().startswith(HEADERS):
                assert line not in text, f"{name} repeats an output docs/measured.md quotes: {line!r}"
    for figure in RECORD["figures"]:
        assert figure["text"] not in text, f"{name} repeats {figure['text']!r}: link to docs/measured.md"
    for kind in RECORD["elsewhere"]:
        found = re.search(kind["pattern"], text)
        assert found is None, (f"{name} states {kind['what']} ({found.group(0)!r}): that figure lives in "
                               "docs/measured.md; link to it")


def test_the_record_is_where_measured_md_says_it_is() -> None:
    assert (ROOT / "docs" / "measured.json").is_file()
    intro = MEASURED.read_text().split("\n## ", 1)[0]
    assert "[measured.json](measured.json)" in intro


def test_a_document_that_restates_a_figure_is_caught() -> None:
    """The check itself: the contradictions that were found are each caught by a kind of the record."""
    for restated in ("each further worker adds ~32 MB RSS (~20 MB PSS: the interpreter's pages are shared)",
                     "161 MB RSS summed (108 MB PSS)", "~115 MiB per process", "88.8 MB RSS", "about 2,600 tests",
                     "each worker ~32 MB RSS (~21 MB PSS) whatever the cluster's size",
                     "nodedns costs 0.87x dnsmasq per cached answer", "0 of 899,998 queries lost"):
        assert any(re.search(k["pattern"], restated) for k in RECORD["elsewhere"]), restated
