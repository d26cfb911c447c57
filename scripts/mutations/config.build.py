"""Mutations of nodedns/config/build.py (raw values read into a checked Config, the TLS context)."""

from mutate import Mutation

TESTS = ("tests/unit/test_config.py", "tests/e2e/test_cli_serve.py", "tests/e2e/test_cli_args.py",
         "tests/unit/forward/test_upstream_config.py",
         "tests/e2e/test_dot.py")

MUTATIONS = (
    Mutation("node-name-from-the-environment-ignored", "nodedns/config/build.py",
             '        values["node_name"] = environ.get("NODE_NAME", "")', '        values["node_name"] = ""',
             ("tests/unit/test_config.py::test_the_node_name_comes_from_the_flag_else_from_node_name_in_the_environment",),
             "NODE_NAME (the DaemonSet's spec.nodeName) is ignored: no Node, no topology, no default allow list",
             found="yes"),
    Mutation("a-listen-address-twice-taken", "nodedns/config/build.py",
             "    if len({(h, p) for h, p in cfg.listen}) != len(cfg.listen):",
             "    if len({(h, p) for h, p in cfg.listen}) > len(cfg.listen):",
             ("tests/unit/test_config.py::test_a_listen_address_given_twice_and_both_sources_of_the_cluster_are_refused",),
             "the same listen address given twice is taken (the second bind fails at start)"),
    Mutation(
        "tls-certificate-name-not-checked",
        "nodedns/config/build.py",
        "    ctx.check_hostname = True",
        "    ctx.check_hostname = False",
        ("tests/e2e/test_dot.py::test_a_certificate_for_another_name_is_refused_and_nothing_is_asked_in_plain",),
        "any certificate of a trusted CA is accepted for any tls:// upstream, whatever name it carries",
    ),
    Mutation(
        "unknown-config-key-without-a-hint",
        "nodedns/config/build.py",
        "\"unknown key\" + (f\" (did you mean {' or '.join(meant)}?)\" if meant else \"\")",
        "\"unknown key\"",
        ("tests/e2e/test_cli_args.py::test_an_unknown_config_key_is_told_the_key_it_means_as_a_flag_is",),
        "an unknown key of the config file gets no \"did you mean\", where the same flag would",
    ),
)
