"""Mutations of nodedns/cli/serve.py (`nodedns serve`: its flags)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_cli_serve.py", "tests/e2e/test_cli_args.py")

MUTATIONS = (
    Mutation("flag-defaults-fill-in-over-the-config-file", "nodedns/cli/serve.py",
             "        argument_default=argparse.SUPPRESS,\n", "",
             ("tests/e2e/test_cli_serve.py::test_config_file_with_the_same_keys_works_and_flags_override_it",),
             "every flag left out counts as given (None), so the config file's keys are never used"),
    Mutation("repeatable-flags-keep-the-last", "nodedns/cli/serve.py",
             '        parser.add_argument(flag, action="append", metavar=opt.metavar, help=text)',
             '        parser.add_argument(flag, metavar=opt.metavar, help=text)',
             ("tests/e2e/test_cli_serve.py::test_serve_listens_on_every_listen_address",),
             "`--listen A --listen B` listens on B only"),
    Mutation("a-config-error-exits-1", "nodedns/cli/serve.py",
             '        print(f"nodedns: config error: {exc}", file=sys.stderr)\n        return 2',
             '        print(f"nodedns: config error: {exc}", file=sys.stderr)\n        return 1',
             ("tests/e2e/test_cli_serve.py::test_bad_flags_exit_non_zero_with_one_line_naming_the_key",
              "tests/e2e/test_cli_args.py"),
             "a config error exits 1 (a start-up failure) instead of 2 (a usage error)", found="yes"),
    Mutation("help-without-defaults", "nodedns/cli/serve.py",
             '    return f"{opt.help} (default: {opt.default})"', "    return opt.help",
             ("tests/e2e/test_cli_args.py::test_serve_help_lists_every_flag_with_its_choices_and_default",),
             "`nodedns serve --help` does not say any flag's default"),
    Mutation("serve-help-in-one-list", "nodedns/cli/serve.py",
             "        group = parser.add_argument_group(title)\n",
             "        group = parser\n",
             ("tests/e2e/test_cli_args.py::test_serve_help_groups_the_flags_as_the_config_example_groups_its_keys",),
             "`serve --help` is one list of every flag, not grouped as examples/config.yaml groups the keys"),
)
