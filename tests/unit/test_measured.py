"""Each measured figure lives in one place: the README's "Measured" section, checked against the record
of the benchmark outputs it quotes (docs/measured.json), and stated nowhere else.

- Every benchmark output and table of the record is in the README's section of the same name, line
  for line, and the section quotes nothing the record does not hold.
- Every figure the prose states is there, and each of its numbers is one of the output lines it comes
  from (rounded as the prose rounds it), or the arithmetic the record gives on numbers of the section.
- No other document (the README outside "Measured", docs/, the DaemonSet's and the examples' YAML)
  repeats a quoted output line or a figure, or states a figure of the kinds the record lists
  (`elsewhere`: memory per process or worker, CPU against a peer, queries lost, the size of the test
  suite, the soak's growth): they link to the README instead. Two homes for one figure is how the docs
  came to contradict each other.
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
RECORD = json.loads((ROOT / "docs" / "measured.json").read_text())
# the lines a benchmark prints on every run (its header), which say nothing of what it measured
HEADERS = ("server ", "workload ", "mode ", "cached answers", "(qps: median")
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


def measured_section(text: str) -> str:
    start, end = text.index("\n## Measured\n"), text.index("\n## ", text.index("\n## Measured\n") + 1)
    return text[start:end]


def subsections(text: str) -> dict[str, str]:
    parts = re.split(r"\n### ", measured_section(text))
    return {p.split("\n", 1)[0]: p for p in parts[1:]}


SECTIONS = subsections(README.read_text())


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
def test_the_readme_quotes_each_recorded_benchmark_output_as_it_was_printed(bench: dict[str, Any]) -> None:
    assert bench["section"] in SECTIONS, f"no section {bench['section']!r} under Measured"
    assert bench["date"] and bench["machine"]  # when, and whether the machine was quiet
    lines = code_lines(SECTIONS[bench["section"]])
    quoted = ([f"$ {bench['command']}"] if bench["command"] else []) + bench["output"]
    at = 0
    for line in quoted:  # in order, as printed
        assert line in lines[at:], f"{bench['section']}: not quoted (or out of order): {line!r}"
        at = lines.index(line, at) + 1


def test_the_readme_quotes_nothing_the_record_does_not_hold() -> None:
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
    assert figure["text"] in section, f"{figure['section']}: the README does not say {figure['text']!r}"
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


def other_documents() -> list[tuple[str, str]]:
    readme = README.read_text()
    section = measured_section(readme)
    docs = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "docs").glob("*.md"))]
    yaml = [(str(p.relative_to(ROOT)), p.read_text()) for pattern in ("daemonset*/**/*.yaml", "examples/**/*.yaml")
            for p in sorted(ROOT.glob(pattern))]
    return [("README.md outside Measured", readme.replace(section, "")), *docs, *yaml]


@pytest.mark.parametrize(("name", "text"), other_documents(), ids=[n for n, _ in other_documents()])
def test_no_other_document_repeats_a_measured_figure(name: str, text: str) -> None:
    if name == "docs/peers.md":
        text = re.sub(r"(?s)^.*?(?=\n## )", "", text)  # its figures are the peers' own (CoreDNS, node-cache)
    for bench in RECORD["benchmarks"]:
        for line in bench["output"]:
            if len(line.strip()) > 24 and not line.strip().startswith(HEADERS):
                assert line not in text, f"{name} repeats an output the README quotes: {line!r}"
    for figure in RECORD["figures"]:
        assert figure["text"] not in text, f"{name} repeats {figure['text']!r}: link to the README's Measured"
    for kind in RECORD["elsewhere"]:
        found = re.search(kind["pattern"], text)
        assert found is None, (f"{name} states {kind['what']} ({found.group(0)!r}): that figure lives in the README's "
                               "\"Measured\" section; link to it")


def test_the_record_is_where_the_readme_says_it_is() -> None:
    assert (ROOT / "docs" / "measured.json").is_file()
    assert "docs/measured.json" in measured_section(README.read_text())


def test_a_document_that_restates_a_figure_is_caught() -> None:
    """The check itself: the contradictions that were found are each caught by a kind of the record."""
    for restated in ("each further worker adds ~32 MB RSS (~20 MB PSS: the interpreter's pages are shared)",
                     "161 MB RSS summed (108 MB PSS)", "~115 MiB per process", "88.8 MB RSS", "about 2,600 tests",
                     "each worker ~32 MB RSS (~21 MB PSS) whatever the cluster's size",
                     "nodedns costs 0.87x dnsmasq per cached answer", "0 of 899,998 queries lost"):
        assert any(re.search(k["pattern"], restated) for k in RECORD["elsewhere"]), restated
