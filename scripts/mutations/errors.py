"""Mutations of nodedns/errors.py (the exception tree and its messages)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_cli_serve.py", "tests/unit/cluster/test_apisync.py")

MUTATIONS = (
    Mutation("config-error-forgets-the-key", "nodedns/errors.py", '        super().__init__(f"{key}: {reason}")',
             "        super().__init__(reason)",
             ("tests/e2e/test_cli_serve.py::test_bad_flags_exit_non_zero_with_one_line_naming_the_key",),
             "a bad flag's error no longer names the flag"),
    Mutation("object-error-forgets-the-object", "nodedns/errors.py", '        super().__init__(f"{ref}: {reason}")',
             "        super().__init__(reason)",
             ("tests/e2e/test_cli_serve.py::test_a_manifest_with_invalid_objects_still_serves_and_names_them",),
             "a skipped object's warning does not say which object it was"),
    Mutation("api-gone-is-no-api-error", "nodedns/errors.py", "class ApiGone(ApiError):",
             "class ApiGone(NodednsError):", ("tests/unit/cluster/test_apisync.py",),
             "a 410 Gone from the API server is not handled as an API error (the watch dies instead of relisting)"),
    Mutation(
        "privileged-bind-message-names-nothing",
        "nodedns/errors.py",
        "    if exc.errno == errno.EACCES and port is not None:",
        "    if False:",
        ("tests/e2e/test_cli_serve.py::test_a_privileged_port_refused_names_the_address_and_what_is_missing",),
        "a bind refused below port 1024 says only 'permission denied', not NET_BIND_SERVICE or a port >= 1024",
        found="yes",
    ),
)
