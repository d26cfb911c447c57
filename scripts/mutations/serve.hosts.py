"""Mutations of nodedns/serve/hosts.py (the --hosts table: hosts(5) lines parsed, A/AAAA/PTR looked up)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_hosts.py", "tests/unit/serve/test_hosts.py")

MUTATIONS = (
    Mutation(
        "hosts-names-kept-in-their-case",
        "nodedns/serve/hosts.py",
        "                name = f.lower()\n",
        "                name = f\n",
        ("tests/e2e/test_hosts.py::test_names_match_whatever_their_case",),
        "a hosts name written in capitals is never matched (queries are matched lowercase)",
    ),
    Mutation(
        "hosts-cluster-zone-not-excluded",
        "nodedns/serve/hosts.py",
        "                if excluded(name):\n",
        "                if False and excluded(name):\n",
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
    Mutation(
        "hosts-ptr-answers-every-name",
        "nodedns/serve/hosts.py",
        "min(self._addr_ptr[a + 1], self._addr_ptr[a] + MAX_ANSWER_RECORDS))",
        "self._addr_ptr[a + 1])",
        ("tests/unit/serve/test_hosts.py::test_an_answer_holds_at_most_the_first_records_in_file_order",),
        "a PTR for a blocklist's 0.0.0.0 renders every one of its hundreds of thousands of names, per query",
    ),
    Mutation(
        "hosts-entry-cap-ignored",
        "nodedns/serve/hosts.py",
        "            if entries + len(names) > self.max_entries:",
        "            if False:",
        ("tests/unit/serve/test_hosts.py::test_lines_over_the_entry_cap_are_skipped_and_counted",),
        "a hosts file of millions of lines is taken whole: the table outgrows the memory budget",
    ),
    Mutation(
        "hosts-ptr-names-in-name-order",
        "nodedns/serve/hosts.py",
        "        by_addr = sorted(itertools.compress(range(count), keep), key=new_addr.__getitem__)",
        "        by_addr = sorted(kept_by_name, key=new_addr.__getitem__)",
        ("tests/unit/serve/test_hosts.py::test_an_answer_holds_at_most_the_first_records_in_file_order",),
        "a PTR answer lists an address's names in hash order, not file order (the canonical name not first)",
    ),
    Mutation(
        "hosts-every-problem-kept",
        "nodedns/serve/hosts.py",
        "        if len(self.sample) < SAMPLE:",
        "        if True:",
        ("tests/unit/serve/test_hosts.py::test_junk_is_counted_and_only_a_sample_kept",),
        "16 MiB of junk keeps a Problem object per line (hundreds of thousands, logged each)",
    ),
    Mutation(
        "hosts-repeated-pair-kept-twice",
        "nodedns/serve/hosts.py",
        "                    if p_addr[k] not in seen:",
        "                    if True:",
        ("tests/unit/serve/test_hosts.py::test_the_table_answers_as_the_hosts_plugin_in_file_order",),
        "a name and address given on two lines are answered twice (and counted twice in the entries)",
    ),
)
