"""Mutations of nodedns/podconf/searchpath.py (a Pod's search list and ndots, glibc's expansion, autopath's plan)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_explain.py", "tests/unit/podconf/test_autopath.py",
         "tests/unit/observe/test_insight.py", "tests/unit/serve/test_invalidation.py")

MUTATIONS = (
    Mutation(
        "ndots-not-capped-at-15",
        "nodedns/podconf/searchpath.py",
        "            ndots = min(int(value), 15)",
        "            ndots = int(value)",
        ("tests/unit/observe/test_explain.py",),
        "a Pod's `ndots:40` is read as 40, not as glibc's 15: names with 15 dots are walked through the search "
        "list first",
        found="yes",
    ),
    Mutation(
        "ndots-capped-at-16",
        "nodedns/podconf/searchpath.py",
        "            ndots = min(int(value), 15)",
        "            ndots = min(int(value), 16)",
        ("tests/unit/observe/test_explain.py",),
        "the ndots cap is off by one",
        found="yes",
    ),
    Mutation(
        "autopath-walk-forgets-the-bare-name",
        "nodedns/podconf/searchpath.py",
        "        if dots < self.ndots and (dots or self.tld_query):",
        "        if dots < self.ndots and dots:",
        ("tests/unit/podconf/test_autopath.py",),
        "an autopath walk for a dotless name never ends with the bare name (glibc's last try without "
        "no-tld-query)",
    ),
)
