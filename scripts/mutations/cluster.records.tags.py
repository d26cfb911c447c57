"""Mutations of nodedns/cluster/records/tags.py (the dependency tags an index change touches)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_records.py", "tests/unit/cluster/test_cluster_zone.py",
         "tests/unit/cluster/test_clusterset.py",
         "tests/e2e/test_clusterset_zone.py", "tests/unit/serve/test_invalidation.py",
         "tests/unit/forward/test_forward.py",
         "tests/unit/cluster/test_existence.py", "tests/e2e/test_clusterset_ptr.py", "tests/unit/cluster/test_index.py")

REVERSE = ("tests/unit/forward/test_forward.py::test_a_forwarded_reverse_answer_gives_way_to_a_service_that_claims_the_"
           "address_"
           "and_comes_back_after")

MUTATIONS = (
    Mutation(
        "service-change-forgets-its-addresses",
        "nodedns/cluster/records/tags.py",
        "            tags.update(f\"i:{ip}\" for ip in record.cluster_ips)",
        "            pass",
        (REVERSE,),
        "a Service taking an address keeps the forwarded PTR of that address (the upstream's name is served)",
        found="yes",
    ),
    Mutation(
        "mcs-ptr-kept-after-its-import-changed",
        "nodedns/cluster/records/tags.py",
        '            tags.update(f"i:{ip}" for ip in record.ips)\n',
        "",
        ("tests/unit/cluster/test_clusterset.py::test_a_multicluster_change_names_its_import_and_its_addresses",
         "tests/e2e/test_clusterset_ptr.py::test_without_an_authoritative_reverse_zone_an_import_turns_a_forwarded_ptr_"
         "into_ours"),
        "a ServiceImport's change keeps the stored reverse answers of its clusterset IPs (a removed import's PTR "
        "stays, a new one stays forwarded)",
    ),
    Mutation("changed-endpoint-addresses-keep-their-answers", "nodedns/cluster/records/tags.py",
             "    if kind == k8s.ENDPOINTSLICE and old is not None and new is not None and old.same_addresses(new):",
             "    if kind == k8s.ENDPOINTSLICE and old is not None and new is not None:",
             ("tests/unit/cluster/test_index.py::test_an_endpoint_moved_to_another_address_drops_the_answers_of_both_"
              "addresses",),
             "an EndpointSlice update that moves an endpoint to another address keeps the stored reverse answer of "
             "the old address"),
)
