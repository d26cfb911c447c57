"""Mutations of nodedns/cli/guard.py (`nodedns guard`: its flags and the agent's config file it reads)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_guard.py", "tests/e2e/test_daemonset.py")

FLAGS_SAY = "tests/e2e/test_guard.py::test_the_guard_takes_the_addresses_away_as_its_flags_say"

MUTATIONS = (
    Mutation(
        "guard-failures-flag-ignored",
        "nodedns/cli/guard.py",
        "local_ips=s.local_ips, probe_name=s.probe_name, interval=s.interval, failures=s.failures)",
        "local_ips=s.local_ips, probe_name=s.probe_name, interval=s.interval)",
        (FLAGS_SAY,),
        "`nodedns guard --failures N` changes nothing: the guard always waits for 3 rounds",
        found="yes",
    ),
    Mutation(
        "guard-probe-interval-flag-ignored",
        "nodedns/cli/guard.py",
        "local_ips=s.local_ips, probe_name=s.probe_name, interval=s.interval, failures=s.failures)",
        "local_ips=s.local_ips, probe_name=s.probe_name, failures=s.failures)",
        (FLAGS_SAY,),
        "`nodedns guard --probe-interval` changes nothing: probes every 0.5 s, each waiting 0.5 s at most",
        found="yes",
    ),
    Mutation(
        "guard-local-ips-not-split-at-commas",
        "nodedns/cli/guard.py",
        "for text in filter(None, (part.strip() for part in item.split(\",\"))):",
        "for text in filter(None, (item.strip(),)):",
        (FLAGS_SAY,),
        "`--local-ip 169.254.20.10,10.96.0.10` (the DaemonSet's form) is refused as one bad address",
    ),
    Mutation(
        "guard-accepts-zero-failures",
        "nodedns/cli/guard.py",
        "not 1 <= int(args.failures) <= 100",
        "not 0 <= int(args.failures) <= 100",
        ("tests/e2e/test_guard.py::test_bad_arguments_exit_2_naming_the_flag",),
        "`--failures 0` is taken (a guard that falls back on its first unanswered round, before it ever armed)",
    ),
    Mutation(
        "guard-ignores-the-configs-firewall",
        "nodedns/cli/guard.py",
        "        fw = fw or cfg.firewall\n",
        "        fw = fw or \"none\"\n",
        ("tests/e2e/test_daemonset.py::test_the_guard_container_guards_exactly_what_the_agent_sets_up",),
        "`nodedns guard --config` guards no rules of the agent's: a dead agent's NOTRACK rules stay, and kube-proxy "
        "never sees the ClusterIP's queries again",
    ),
    Mutation(
        "guard-ignores-the-configs-zone",
        "nodedns/cli/guard.py",
        "        probe = probe or f\"dns-version.{cfg.cluster_domain}\"\n",
        "",
        ("tests/e2e/test_daemonset.py::test_the_guard_follows_a_changed_configmap",),
        "`nodedns guard --config` probes dns-version.cluster.local whatever the agent's zone: on another zone it "
        "asks a name outside the zone the agent serves",
    ),
)
