"""Mutations of nodedns/observe/params.py (the debug routes' parameters read and checked)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_status.py", "tests/unit/observe/test_status_limits.py",
         "tests/e2e/test_insight_agent.py", "tests/e2e/test_cli_explain.py")

MUTATIONS = (
    Mutation(
        "lookup-unknown-parameters-accepted",
        "nodedns/observe/params.py",
        "    unknown = sorted(set(query) - set(LOOKUP_PARAMS))",
        "    unknown: list[str] = []",
        ("tests/unit/observe/test_status.py::test_bad_lookup_parameters_are_a_400_with_the_reason",),
        "a misspelt /debug/lookup parameter (clinet=) is ignored: the answer is for another client than asked",
    ),
    Mutation(
        "explain-types-over-the-limit-accepted",
        "nodedns/observe/params.py",
        "    if len(types) > MAX_TYPES:",
        "    if len(types) > 2 * MAX_TYPES:",
        ("tests/unit/observe/test_status_limits.py::test_more_than_8_types_per_explain_is_a_400",),
        "one /debug/explain request asks for more record types than the explainer's budget allows",
    ),
    Mutation(
        "top-limit-zero-accepted",
        "nodedns/observe/params.py",
        "    if not text.isdigit() or not 1 <= int(text) <= MAX_TOP_LIMIT:",
        "    if not text.isdigit() or not 0 <= int(text) <= MAX_TOP_LIMIT:",
        ("tests/e2e/test_insight_agent.py::test_debug_top_says_what_is_wrong_with_a_request",),
        "GET /debug/top?limit=0 is answered with an empty list instead of a 400",
    ),
)
