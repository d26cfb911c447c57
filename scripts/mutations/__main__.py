"""Mutations of nodedns/__main__.py (`python -m nodedns`)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_cli_args.py", "tests/e2e/test_cli_serve.py", "tests/e2e/test_cli_resolv_conf.py")

EXITS = "tests/e2e/test_cli_args.py::test_python_m_nodedns_exits_with_the_commands_status_and_one_line"

MUTATIONS = (
    Mutation("main-exit-status-dropped", "nodedns/__main__.py", "raise SystemExit(main())", "main()", (EXITS,),
             "`python -m nodedns` exits 0 whatever the command returned (the image's entry point hides failures)"),
    Mutation("main-exit-status-inverted", "nodedns/__main__.py", "raise SystemExit(main())",
             "raise SystemExit(not main())", (EXITS,), "a failing command exits 0 and a working one 1"),
    Mutation("main-runs-no-command", "nodedns/__main__.py", "raise SystemExit(main())", "raise SystemExit(0)",
             (EXITS, "tests/e2e/test_cli_serve.py::test_serve_answers_the_example_cluster_on_the_listen_address"),
             "`python -m nodedns` does nothing"),
)
