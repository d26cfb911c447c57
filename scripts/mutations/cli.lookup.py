"""Mutations of nodedns/cli/lookup.py (`nodedns lookup`)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_cli_lookup.py",)

MUTATIONS = (
    Mutation("lookup-client-not-sent", "nodedns/cli/lookup.py",
             '    if client:\n        params["client"] = client', '    if False:\n        params["client"] = client',
             ("tests/e2e/test_cli_lookup.py::test_lookup_with_a_client_lists_the_search_list_queries",),
             "`nodedns lookup NAME --client IP` shows no search-list expansion"),
    Mutation("lookup-answer-not-checked", "nodedns/cli/lookup.py",
             '        endpoint.check(where, code, body, "/debug/lookup")\n', "",
             ("tests/e2e/test_cli_lookup.py::test_lookup_reports_rejected_questions",),
             "a question the agent rejects (a bad type) is reported as an answer that is not JSON, exit 1"),
    Mutation("lookup-ttl-left-not-shown", "nodedns/cli/lookup.py",
             "    if a.get(\"ttl_left\") is not None:", "    if False:",
             ("tests/e2e/test_cli_lookup.py::test_lookup_prints_path_records_and_ttl",),
             "`nodedns lookup` does not say how long the answer stays stored"),
    Mutation("lookup-queries-numbered-from-0", "nodedns/cli/lookup.py",
             '            for i, q in enumerate(c.get("queries", []), 1):',
             '            for i, q in enumerate(c.get("queries", [])):',
             ("tests/e2e/test_cli_lookup.py::test_lookup_with_a_client_lists_the_search_list_queries",),
             "the client's queries are numbered from 0 while the result says `answered by query 2`"),
)
