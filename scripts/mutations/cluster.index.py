"""Mutations of nodedns/cluster/index.py (the objects and the lookup tables the cluster zone reads)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_index.py", "tests/unit/cluster/test_records.py", "tests/unit/cluster/test_apisync.py",
         "tests/unit/serve/test_invalidation.py",
         "tests/e2e/test_unusable_names.py", "tests/unit/cluster/test_clusterset.py")

MUTATIONS = (
    Mutation("moved-cluster-ip-keeps-its-old-reverse", "nodedns/cluster/index.py",
             """        if old is not None:
            for ip in old.cluster_ips:
                _drop_ref(self._services_by_ip, ip, key)
        self.services[key] = svc""",
             """        self.services[key] = svc""",
             ("tests/unit/cluster/test_index.py::test_a_service_whose_cluster_ip_moves_answers_the_reverse_of_its_new_"
              "address_only",),
             "a Service whose ClusterIP changed still answers the PTR of its old address"),
    Mutation("shared-address-forgets-the-second-service", "nodedns/cluster/index.py",
             "    elif refs != key:\n        table[ip] = [refs, key]  # type: ignore[list-item]",
             "    elif refs != key:\n        table[ip] = key  # type: ignore[list-item]",
             ("tests/unit/cluster/test_index.py::test_two_services_on_one_address_are_found_until_each_goes",),
             "of two Services on one address only the last added is found"),
    Mutation("deleted-pod-stays-on-its-node", "nodedns/cluster/index.py",
             "        if keys is not None:\n            keys.discard(key)",
             "        if keys is not None:\n            pass",
             ("tests/unit/cluster/test_index.py::test_a_deleted_pod_leaves_its_node_and_its_address",),
             "a deleted Pod is still one of this node's (the allow list admits its address, autopath plans it)",
             found="yes"),
    Mutation("relist-deletes-nothing", "nodedns/cluster/index.py",
             "            stale = [k for k in self.services if k not in seen]", "            stale = []",
             ("tests/unit/cluster/test_index.py::test_a_relist_deletes_what_it_did_not_see",
              "tests/unit/cluster/test_apisync.py"),
             "Services deleted while the watch was down keep answering after the relist"),
    Mutation("unready-endpoints-never-published", "nodedns/cluster/index.py",
             "    return ep.ready or (svc is not None and svc.publish_not_ready)", "    return ep.ready",
             ("tests/unit/cluster/test_records.py",), "publishNotReadyAddresses is ignored"),
    Mutation(
        "unusable-name-logged-every-time",
        "nodedns/cluster/index.py",
        "        if self.unusable.get(key) != problem:",
        "        if True:",
        ("tests/e2e/test_unusable_names.py::test_the_index_logs_an_unusable_externalname_once_and_forgets_it_when_fixed",),
        "an unusable externalName is logged again on every resync of its Service",
        found="yes",
    ),
    Mutation(
        "mcs-index-keeps-a-deleted-imports-address",
        "nodedns/cluster/index.py",
        "            if gone_import is not None:\n                for ip in gone_import.ips:\n"
        "                    _drop_ref(self._imports_by_ip, ip, key)",
        "            if gone_import is not None:\n                for ip in ():\n"
        "                    _drop_ref(self._imports_by_ip, ip, key)",
        ("tests/unit/cluster/test_clusterset.py::test_the_index_finds_imports_and_imported_slices_by_address",),
        "the index still finds a deleted ServiceImport by its clusterset IP (a KeyError on the next PTR)",
    ),
    Mutation("same-addresses-update-dropped", "nodedns/cluster/index.py",
             "            self.slices[key] = sl\n"
             "            self._changed(k8s.ENDPOINTSLICE, old, sl)\n            return",
             "            return",
             ("tests/unit/cluster/test_index.py::test_an_endpoint_turning_unready_in_place_is_applied_and_announced",),
             "an EndpointSlice update that keeps its addresses (an endpoint turning unready) is never applied"),
)
