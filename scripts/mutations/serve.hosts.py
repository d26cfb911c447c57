"""Mutations of nodedns/serve/hosts.py (the --hosts table: hosts(5) lines parsed, A/AAAA/PTR looked up)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_hosts.py",)

MUTATIONS = (
    Mutation(
        "hosts-names-kept-in-their-case",
        "nodedns/serve/hosts.py",
        "names = [normalize_name(f) for f in fields[1:]]",
        'names = [f.rstrip(".") for f in fields[1:]]',
        ("tests/e2e/test_hosts.py::test_names_match_whatever_their_case",),
        "a hosts name written in capitals is never matched (queries are matched lowercase)",
    ),
    Mutation(
        "hosts-cluster-zone-not-excluded",
        "nodedns/serve/hosts.py",
        "        if excluded(name):\n",
        "        if False and excluded(name):\n",
        ("tests/e2e/test_hosts.py::test_malformed_and_clashing_lines_are_logged_with_their_line_and_skipped",
         "tests/e2e/test_hosts.py::test_status_and_metrics_count_the_entries_and_the_answers"),
        "a hosts name in the cluster zone is taken silently (not logged, not shown as ignored)",
    ),
    Mutation(
        "hosts-aaaa-answers-ipv4",
        "nodedns/serve/hosts.py",
        "want = 6 if qtype == QT.AAAA else 4 if qtype == QT.A else 0",
        "want = 4 if qtype in (QT.A, QT.AAAA) else 0",
        ("tests/e2e/test_hosts.py::test_a_hosts_name_answers_its_ipv6_address_to_aaaa",),
        "AAAA for a hosts name gets its IPv4 addresses' family",
    ),
)
