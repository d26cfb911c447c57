"""Mutations of nodedns/cli/resolv_conf.py (`nodedns resolv-conf`)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_cli_resolv_conf.py",)

MUTATIONS = (
    Mutation("output-mode-follows-the-umask", "nodedns/cli/resolv_conf.py",
             "            os.fchmod(f.fileno(), mode)\n", "",
             ("tests/e2e/test_cli_resolv_conf.py::test_output_file_is_written_with_mode_0644_whatever_the_umask",),
             "`-o FILE` is written 0600 (mkstemp's mode): the Pod's processes cannot read their resolv.conf"),
    Mutation("temp-file-left-behind", "nodedns/cli/resolv_conf.py",
             "        with contextlib.suppress(OSError):\n            os.unlink(tmp)\n        raise",
             "        raise",
             ("tests/e2e/test_cli_resolv_conf.py::test_write_atomic_removes_its_temp_file_when_the_rename_fails",),
             "a failed write leaves its temporary file next to the resolv.conf"),
    Mutation("check-host-exits-0-on-problems", "nodedns/cli/resolv_conf.py",
             "    return EXIT_PROBLEMS if problems else EXIT_OK", "    return EXIT_OK",
             ("tests/e2e/test_cli_resolv_conf.py::test_check_host_prints_each_problem_and_exits_1_on_any",),
             "`--check-host` exits 0 on a host resolv.conf the kubelet would not use"),
    Mutation("several-pods-in-the-file-take-the-first", "nodedns/cli/resolv_conf.py",
             "    if len(documents) > 1:\n        raise Fail", "    if False:\n        raise Fail",
             ("tests/e2e/test_cli_resolv_conf.py::test_unreadable_or_unusable_input_exits_2_with_a_clear_message",),
             "a --pod file of several documents renders the first Pod's resolv.conf"),
)
