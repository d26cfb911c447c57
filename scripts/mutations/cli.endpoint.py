"""Mutations of nodedns/cli/endpoint.py (where lookup, explain and top reach the debug listener)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_cli_lookup.py", "tests/e2e/test_cli_explain.py", "tests/e2e/test_insight_agent.py")

WHERE = "tests/e2e/test_cli_lookup.py::test_where_the_commands_look_for_the_debug_listener"

MUTATIONS = (
    Mutation("the-environment-overrides-the-flag", "nodedns/cli/endpoint.py",
             "    if explicit:\n        return [explicit]\n    environ = os.environ if environ is None else environ\n"
             "    if environ.get(ENV):\n        return [environ[ENV]]",
             "    environ = os.environ if environ is None else environ\n"
             "    if environ.get(ENV):\n        return [environ[ENV]]\n    if explicit:\n        return [explicit]",
             (WHERE,), "$NODEDNS_DEBUG wins over --debug", found="yes"),
    Mutation("the-unix-socket-never-tried", "nodedns/cli/endpoint.py",
             "        if stat.S_ISSOCK(os.stat(DEFAULT_SOCKET).st_mode):", "        if False:", (WHERE,),
             "inside the DaemonSet's pod the commands never find the agent's Unix socket"),
    Mutation("the-url-path-prefix-dropped", "nodedns/cli/endpoint.py",
             "        conn.request(method, prefix + path, body=body, headers=dict(headers or {}))",
             "        conn.request(method, path, body=body, headers=dict(headers or {}))",
             ("tests/e2e/test_cli_lookup.py::test_a_debug_listener_behind_a_path_is_asked_under_that_path",),
             "a debug listener behind a path (http://host:port/nodedns) is missed", found="yes"),
    Mutation("only-the-first-candidate-tried", "nodedns/cli/endpoint.py",
             "        except OSError as exc:\n            error = exc",
             "        except OSError as exc:\n            raise",
             ("tests/e2e/test_cli_lookup.py::test_a_socket_path_nobody_listens_on_is_passed_over_for_the_next_candidate",),
             "a stale Unix socket path hides the TCP listener behind it", found="yes"),
    Mutation(
        'lookup-rejected-question-exits-1',
        'nodedns/cli/endpoint.py',
        '        raise Failed(f"the agent rejected the {asked}: {text.strip().removeprefix(\'bad request: \')}", 2)',
        '        raise Failed(f"the agent rejected the {asked}: {text.strip().removeprefix(\'bad request: \')}", 1)',
        ('tests/e2e/test_cli_lookup.py::test_lookup_reports_rejected_questions',),
        'a question the agent rejects (a bad type) exits 1 like an unreachable agent, not 2',
    ),
)
