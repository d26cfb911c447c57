"""Mutations of nodedns/cli/__init__.py (the command line: commands, argument order, usage errors)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_cli_args.py", "tests/e2e/test_cli_serve.py")

MUTATIONS = (
    Mutation(
        "usage-error-is-the-whole-usage",
        "nodedns/cli/__init__.py",
        '        self.exit(2, f"{self.prog}: error: {message}{self._hint(message)} (see {self.prog} --help)\\n")',
        '        super().error(message)',
        ("tests/e2e/test_cli_args.py::test_a_stray_operand_is_still_an_error_naming_it",),
        "a mistyped flag prints argparse's whole usage instead of one line naming it",
    ),
    Mutation(
        "options-only-before-operands",
        "nodedns/cli/__init__.py",
        "    ns = command.parse_intermixed_args(args[1:])",
        "    ns = command.parse_args(args[1:])",
        ("tests/e2e/test_cli_args.py::test_options_and_operands_may_come_in_any_order",),
        "`nodedns lookup NAME --debug URL AAAA` fails: the type after an option is taken for a stray operand",
    ),
    Mutation(
        "a-command-left-out-of-the-list",
        "nodedns/cli/__init__.py",
        'COMMANDS: tuple[str, ...] = ("serve", "shadow", "guard", "resolv_conf", "lookup", "explain", "top")',
        'COMMANDS: tuple[str, ...] = ("serve", "shadow", "guard", "resolv_conf", "lookup", "explain")',
        ("tests/e2e/test_cli_args.py::test_every_command_is_listed_in_order_and_runs_its_help",),
        "`nodedns top` is not a command any more",
        found="yes",
    ),
    Mutation(
        "abbreviated-flags-accepted",
        "nodedns/cli/__init__.py",
        '        kwargs["allow_abbrev"] = False',
        '        kwargs["allow_abbrev"] = True',
        ("tests/e2e/test_cli_args.py::test_every_parser_of_every_command_refuses_abbreviations",
         "tests/e2e/test_cli_args.py::test_an_abbreviated_flag_is_refused_naming_the_flag_it_may_mean"),
        "a flag with its last letter missing quietly runs as the flag (`--manifests`)",
        found="yes",
    ),
)
