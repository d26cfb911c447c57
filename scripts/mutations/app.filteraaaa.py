"""Mutations of nodedns/app/filteraaaa.py (--filter-aaaa auto: the decision and its watch)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",)

MUTATIONS = (
    Mutation(
        "filter-aaaa-auto-ignores-the-node",
        "nodedns/app/filteraaaa.py",
        "        if node_v6:\n            return False, f\"the node has a global IPv6 address",
        "        if False:\n            return False, f\"the node has a global IPv6 address",
        ("tests/e2e/test_operators.py::test_auto_filters_only_while_the_node_has_no_global_ipv6_and_says_why",
         "tests/e2e/test_operators.py::test_auto_does_not_filter_while_a_service_has_an_ipv6_cluster_ip"),
        "--filter-aaaa auto filters on a node with a global IPv6 address",
    ),
)
