"""Mutations of nodedns/config/files.py (the --config file, merged with the flags)."""

from mutate import Mutation

TESTS = ("tests/unit/test_config.py", "tests/e2e/test_cli_serve.py", "tests/e2e/test_cli_args.py",
         "tests/unit/forward/test_upstream_config.py",
         "tests/e2e/test_dot.py")

MUTATIONS = (
    Mutation("the-config-file-wins-over-flags", "nodedns/config/files.py",
             '    for key, value in flags.items():\n        merged[str(key).replace("_", "-")] = value',
             '    for key, value in flags.items():\n        merged.setdefault(str(key).replace("_", "-"), value)',
             ("tests/unit/test_config.py::test_flags_win_over_the_config_file",
              "tests/e2e/test_cli_serve.py::test_config_file_with_the_same_keys_works_and_flags_override_it"),
             "a flag does not override the same key of the config file"),
    Mutation(
        "config-file-paths-from-the-current-directory",
        "nodedns/config/files.py",
        "            merged[norm] = _from_folder(folder, value) if norm in PATH_KEYS else value",
        "            merged[norm] = value",
        ("tests/e2e/test_cli_args.py::test_a_relative_path_in_a_config_file_is_relative_to_its_folder",
         "tests/e2e/test_cli_serve.py::test_relative_paths_in_a_config_file_are_read_from_its_folder"),
        "a relative path in a --config file is read from the current directory, not from the file's folder",
        found="yes",
    ),
)
