"""Mutations of nodedns/config.py (options, their values and bounds, the sources of the config)."""

from mutate import Mutation

TESTS = ("tests/unit/test_config.py", "tests/e2e/test_cli_serve.py", "tests/e2e/test_cli_args.py",
         "tests/unit/forward/test_upstream_config.py",
         "tests/e2e/test_dot.py")

MUTATIONS = (
    Mutation("node-name-from-the-environment-ignored", "nodedns/config.py",
             '        values["node_name"] = environ.get("NODE_NAME", "")', '        values["node_name"] = ""',
             ("tests/unit/test_config.py::test_the_node_name_comes_from_the_flag_else_from_node_name_in_the_environment",),
             "NODE_NAME (the DaemonSet's spec.nodeName) is ignored: no Node, no topology, no default allow list",
             found="yes"),
    Mutation("lowest-value-of-a-range-refused", "nodedns/config.py",
             '            raise ValueError("must be a whole number") from None\n        if not lo <= n <= hi:',
             '            raise ValueError("must be a whole number") from None\n        if not lo < n <= hi:',
             ("tests/unit/test_config.py::test_numbers_are_taken_at_their_bounds_and_refused_past_them",),
             "`--max-udp-size 512` and `--workers 0` are refused", found="yes"),
    Mutation("junk-between-duration-parts-accepted", "nodedns/config.py",
             "        if m.start() != pos:\n            break", "        if False:\n            break",
             ("tests/unit/test_config.py::test_what_is_no_duration_is_refused",),
             "`1mx2s` is read as 62 seconds", found="yes"),
    Mutation("the-config-file-wins-over-flags", "nodedns/config.py",
             '    for key, value in flags.items():\n        merged[str(key).replace("_", "-")] = value',
             '    for key, value in flags.items():\n        merged.setdefault(str(key).replace("_", "-"), value)',
             ("tests/unit/test_config.py::test_flags_win_over_the_config_file",
              "tests/e2e/test_cli_serve.py::test_config_file_with_the_same_keys_works_and_flags_override_it"),
             "a flag does not override the same key of the config file"),
    Mutation("a-listen-address-twice-taken", "nodedns/config.py",
             "    if len({(h, p) for h, p in cfg.listen}) != len(cfg.listen):",
             "    if len({(h, p) for h, p in cfg.listen}) > len(cfg.listen):",
             ("tests/unit/test_config.py::test_a_listen_address_given_twice_and_both_sources_of_the_cluster_are_refused",),
             "the same listen address given twice is taken (the second bind fails at start)"),
    Mutation(
        "config-file-paths-from-the-current-directory",
        "nodedns/config.py",
        "            merged[norm] = _from_folder(folder, value) if norm in PATH_KEYS else value",
        "            merged[norm] = value",
        ("tests/e2e/test_cli_args.py::test_a_relative_path_in_a_config_file_is_relative_to_its_folder",
         "tests/e2e/test_cli_serve.py::test_relative_paths_in_a_config_file_are_read_from_its_folder"),
        "a relative path in a --config file is read from the current directory, not from the file's folder",
        found="yes",
    ),
    Mutation(
        "tls-certificate-name-not-checked",
        "nodedns/config.py",
        "    ctx.check_hostname = True",
        "    ctx.check_hostname = False",
        ("tests/e2e/test_dot.py::test_a_certificate_for_another_name_is_refused_and_nothing_is_asked_in_plain",),
        "any certificate of a trusted CA is accepted for any tls:// upstream, whatever name it carries",
    ),
)
