"""Mutations of nodedns/observe/charts.py (the status page's numbers in words and its SVG charts)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_page.py", "tests/e2e/test_status_page_browser.py")

MUTATIONS = (
    Mutation("round-ratios-with-a-decimal", "nodedns/observe/charts.py",
             '    return f"{pct:.0f}%" if pct >= 99.5 or pct < 0.05 or pct == round(pct) else f"{pct:.1f}%"',
             '    return f"{pct:.0f}%" if pct >= 99.5 or pct < 0.05 else f"{pct:.1f}%"',
             ("tests/unit/observe/test_page.py::test_ratios_in_words",), "90% reads 90.0%"),
)
