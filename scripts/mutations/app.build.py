"""Mutations of nodedns/app/build.py (the Config read into each part's settings).

The first one (resolv-conf-never-reread) is in scripts/mutate's MUTATIONS."""

from mutate import Mutation

TESTS = ("tests/e2e/test_handover.py", "tests/unit/cluster/test_cluster_zone.py", "tests/unit/forward/test_forward.py",
         "tests/e2e/test_upstream_share.py", "tests/e2e/test_upstream_default.py")

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
    Mutation(
        "client-share-never-applies",
        "nodedns/app/build.py",
        "on_loop=on_loop, client_share=client_share(config.max_concurrent),",
        "on_loop=on_loop, client_share=0,",
        ("tests/e2e/test_upstream_share.py::test_a_pods_flood_of_slow_names_leaves_another_pods_new_names_answered",),
        "one Pod's flood of slow names takes every upstream slot: another Pod's new names are REFUSED",
        found="yes",
    ),
)
