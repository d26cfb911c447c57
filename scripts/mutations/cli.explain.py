"""Mutations of nodedns/cli/explain.py (`nodedns explain`)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_cli_explain.py",)

PRINTS = "tests/e2e/test_cli_explain.py::test_the_command_prints_the_walk_the_total_and_the_advice"
AS_IS = ("tests/e2e/test_cli_explain.py::test_a_name_with_as_many_dots_as_ndots_is_said_to_go_as_is_first_for_each_"
         "type")

MUTATIONS = (
    Mutation("explain-says-fewer-dots-when-equal", "nodedns/cli/explain.py",
             '    elif dots >= data["ndots"]:', '    elif dots > data["ndots"]:',
             (AS_IS,), "a name with exactly ndots dots is said to be walked through the search list first",
             found="yes"),
    Mutation("explain-total-without-autopath-left-out", "nodedns/cli/explain.py",
             '    if "without_autopath" in data:', "    if False:", (PRINTS,),
             "`nodedns explain` hides how many queries the Pod would send without autopath"),
    Mutation("explain-unknown-pod-is-exit-1", "nodedns/cli/explain.py",
             "        return _fail(str(detail.get(\"error\")), EXIT_UNKNOWN_POD)",
             "        return _fail(str(detail.get(\"error\")), EXIT_AGENT)",
             ("tests/e2e/test_cli_explain.py::test_the_command_exit_codes",),
             "a Pod the agent does not hold exits 1 like an unreachable agent, not 3"),
    Mutation("explain-types-not-split-at-commas", "nodedns/cli/explain.py",
             '        body["types"] = [t for value in args.types for t in value.split(",") if t.strip()]',
             '        body["types"] = list(args.types)', (AS_IS,),
             "`--type A,AAAA` is sent as one type named \"A,AAAA\"", found="yes"),
)
