"""Mutations of nodedns/forward/routes.py (where the upstreams come from: flags, resolv.conf, kube-dns ConfigMap)."""

from mutate import Mutation

TESTS = ("tests/unit/forward/test_upstream_config.py", "tests/unit/test_config_readers.py",
         "tests/e2e/test_kube_dns_dir.py")

MUTATIONS = (
    Mutation(
        "config-file-decoded-loosely",
        "nodedns/forward/routes.py",
        '        return data.decode("utf-8")',
        '        return data.decode("utf-8", "replace")',
        ("tests/unit/test_config_readers.py::test_a_non_utf8_byte_names_the_file_the_byte_and_its_offset",
         "tests/unit/test_config_readers.py::test_the_agents_upstream_config_survives_a_non_utf8_byte_and_takes_the_"
         "next_good_file"),
        "an upstream config file that is not UTF-8 is taken (its bad bytes replaced) instead of reported",
        found="yes",
    ),
    Mutation(
        "upstream-config-task-dies-on-a-bug",
        "nodedns/forward/routes.py",
        "        except Exception as exc:  # noqa: BLE001 - the task must outlive any file and any bug reading it",
        "        except ConfigError as exc:  # noqa: BLE001 - the task must outlive any file and any bug reading it",
        ("tests/unit/test_config_readers.py::test_an_unexpected_failure_while_reading_is_counted_and_the_task_goes_on",),
        "an unexpected error while reading the upstream config ends the task: later changes are never applied",
        found="yes",
    ),
    Mutation(
        'resolv-conf-zone-id-kept',
        'nodedns/forward/routes.py',
        '            ip = canonical_ip(parts[1].split("%", 1)[0])',
        '            ip = canonical_ip(parts[1])',
        ('tests/unit/forward/test_upstream_config.py', 'tests/unit/test_config_readers.py'),
        'a resolv.conf nameserver with a zone (fe80::1%eth0) is skipped',
    ),
    Mutation(
        "missing-kube-dns-dir-unsaid",
        "nodedns/forward/routes.py",
        "        if not self.kube_dns_dir or os.path.isdir(self.kube_dns_dir):\n",
        "        if True:\n",
        ("tests/e2e/test_kube_dns_dir.py::test_a_missing_kube_dns_config_dir_is_logged_with_its_path_and_read_once_it_"
         "appears",),
        "a kube-dns-config-dir that does not exist is taken without a word (no stub domains, and nothing says why)",
    ),
)
