"""Mutations of nodedns/cluster/objects/service.py (a Service slimmed)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_objects.py", "tests/unit/cluster/test_records.py",
         "tests/unit/observe/test_insight.py", "tests/e2e/test_cli_serve.py",
         "tests/e2e/test_unusable_names.py", "tests/unit/serve/test_invalidation.py")

MUTATIONS = (
    Mutation("headless-service-read-as-cluster-ip", "nodedns/cluster/objects/service.py",
             '    if raw_ips and raw_ips[0] == "None":', '    if raw_ips and raw_ips[0] == "none":',
             ("tests/unit/cluster/test_records.py",),
             "a headless Service (clusterIP None) is refused as a bad address"),
    Mutation(
        "externalname-not-validated",
        "nodedns/cluster/objects/service.py",
        "        problem = name_problem(normalized)",
        "        problem = None",
        ("tests/e2e/test_unusable_names.py::test_a_service_with_no_usable_target_answers_nxdomain_for_every_type",
         "tests/e2e/test_unusable_names.py::test_the_shipped_agent_answers_nxdomain_for_unusable_externalnames_and_no_"
         "worker_restarts"),
        "an ExternalName with a 64-octet or empty label is kept as a target: every query for it fails to encode",
        found="yes",
    ),
)
