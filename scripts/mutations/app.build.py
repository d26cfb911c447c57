"""Mutations of nodedns/app/build.py (the Config read into each part's settings)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_handover.py", "tests/unit/cluster/test_cluster_zone.py", "tests/unit/forward/test_forward.py")

MUTATIONS = (
    Mutation(
        "host-sysctl-changed-without-an-interface",
        "nodedns/app/build.py",
        "                             set_sysctl=config.setup_interface is not None,",
        "                             set_sysctl=True,",
        ("tests/e2e/test_handover.py::test_only_an_agent_managing_a_node_interface_changes_a_host_sysctl",),
        "an agent that manages no node interface (--firewall alone) sets net.ipv4.tcp_migrate_req",
        found="yes",
    ),
    Mutation(
        "ttl-flag-not-given-to-the-zone",
        "nodedns/app/build.py",
        "        ttl=int(config.ttl),",
        "        ttl=int(config.ttl) + 1,",
        ("tests/unit/cluster/test_cluster_zone.py::test_ttl_flag_sets_record_and_negative_ttls",),
        "--ttl is not the TTL of the cluster answers",
    ),
    Mutation(
        "upstream-force-tcp-not-given-to-the-routes",
        "nodedns/app/build.py",
        "        force_tcp=config.upstream_force_tcp,\n        max_concurrent=config.max_concurrent,",
        "        force_tcp=False,\n        max_concurrent=config.max_concurrent,",
        ("tests/unit/forward/test_forward.py::test_force_tcp_groups_never_use_udp",),
        "--upstream-force-tcp is ignored: the upstreams are asked over UDP",
    ),
)
