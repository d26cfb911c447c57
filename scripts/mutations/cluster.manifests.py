"""Mutations of nodedns/cluster/manifests.py (reading a manifest dump)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_manifests.py", "tests/e2e/test_cli_serve.py", "tests/unit/cluster/test_clusterset.py",
         "tests/unit/cluster/test_manifest_stream.py")

DUMP = "tests/unit/cluster/test_manifests.py::test_a_dump_gives_the_kinds_dns_uses_from_typed_and_plain_lists"

MUTATIONS = (
    Mutation("typed-list-items-without-kind-skipped", "nodedns/cluster/manifests.py",
             "        return True, kind[:-4]", "        return True, None", (DUMP,),
             "the items of a ServiceList (kubectl writes them without kind) are skipped", found="yes"),
    Mutation("object-without-api-version-skipped", "nodedns/cluster/manifests.py",
             '    api = obj.get("apiVersion") or versions[0]', '    api = obj.get("apiVersion") or ""', (DUMP,),
             "an object written without apiVersion is skipped", found="yes"),
    Mutation("any-api-version-taken", "nodedns/cluster/manifests.py", "    if api not in versions:", "    if False:",
             (DUMP,), "a Service of apiVersion v2 is read as a v1 Service", found="yes"),
    Mutation("imports-read-without-multicluster", "nodedns/cluster/manifests.py",
             "        if multicluster and kind == k8s.ENDPOINTSLICE and _imported(obj):",
             "        if kind == k8s.ENDPOINTSLICE and _imported(obj):", (DUMP,
                                                                          "tests/unit/cluster/test_clusterset.py"),
             "without --multicluster-zone, labelled EndpointSlices are imported too"),
    Mutation(
        "manifest-list-built-whole",
        "nodedns/cluster/manifests.py",
        '            if key == "items" and loader.check_event(y.SequenceStartEvent) and not streamed:',
        "            if False:",
        ("tests/unit/cluster/test_manifest_stream.py::test_reading_a_big_list_holds_one_item_at_a_time_not_the_file",),
        "kubectl's one List document is built whole before its first object is shrunk (a big dump OOMs)",
        found="yes",
    ),
)
