"""Mutations of nodedns/cluster/records.py (the cluster zone, the clusterset zone, reverse names, change tags)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_records.py", "tests/unit/cluster/test_cluster_zone.py",
         "tests/unit/cluster/test_clusterset.py",
         "tests/e2e/test_clusterset_zone.py", "tests/unit/serve/test_invalidation.py",
         "tests/unit/forward/test_forward.py",
         "tests/unit/cluster/test_existence.py", "tests/e2e/test_clusterset_ptr.py", "tests/unit/cluster/test_index.py")

CLUSTERSET = "tests/unit/cluster/test_clusterset.py"
REVERSE = ("tests/unit/forward/test_forward.py::test_a_forwarded_reverse_answer_gives_way_to_a_service_that_claims_the_"
           "address_"
           "and_comes_back_after")

MUTATIONS = (
    Mutation(
        "clusterset-srv-one-record-per-port-and-protocol",
        "nodedns/cluster/records.py",
        """        target = self._import_fqdn(imported)
        uniq = list(dict.fromkeys(p.port for p in ports))""",
        """        target = self._import_fqdn(imported)
        uniq = [p.port for p in ports]""",
        (CLUSTERSET,),
        "a ServiceImport exposing one port number on UDP and TCP gets two identical SRV records (weight 50 each)",
        found="yes",
    ),
    Mutation(
        "clusterset-named-srv-ignores-the-protocol",
        "nodedns/cluster/records.py",
        "            ports = [p for p in imported.ports if p.name == pname and p.protocol == proto]",
        "            ports = [p for p in imported.ports if p.name == pname]",
        (CLUSTERSET,),
        "`_dns._tcp.<import>` answers with the UDP port named dns",
    ),
    Mutation(
        "clusterset-srv-targets-a-slice-without-a-source-cluster",
        "nodedns/cluster/records.py",
        "            if not im.cluster:\n                continue  # no source cluster: no name to point at",
        "            if False:\n                continue  # no source cluster: no name to point at",
        (CLUSTERSET,),
        "a headless import's SRV names a target for an imported slice without a source-cluster label "
        "(`<host>.None.<svc>...`, a name that does not exist)",
    ),
    Mutation(
        "cluster-srv-one-record-per-port-and-protocol",
        "nodedns/cluster/records.py",
        """        target = self._service_fqdn(svc)
        uniq = list(dict.fromkeys(p.port for p in ports))""",
        """        target = self._service_fqdn(svc)
        uniq = [p.port for p in ports]""",
        ("tests/unit/cluster/test_records.py", "tests/unit/cluster/test_cluster_zone.py"),
        "a Service exposing one port number on UDP and TCP (kube-dns) gets two identical SRV records",
    ),
    Mutation(
        "service-change-forgets-its-addresses",
        "nodedns/cluster/records.py",
        "            tags.update(f\"i:{ip}\" for ip in record.cluster_ips)",
        "            pass",
        (REVERSE,),
        "a Service taking an address keeps the forwarded PTR of that address (the upstream's name is served)",
        found="yes",
    ),
    Mutation(
        "mcs-ptr-missing",
        "nodedns/cluster/records.py",
        "            targets = self.clusterset_ptr_targets(ip)  # the cluster-local PTR wins (spec: Limitations)",
        "            targets = []",
        ("tests/unit/cluster/test_clusterset.py::test_clusterset_records_answer_as_the_mcs_spec_says",
         "tests/e2e/test_clusterset_ptr.py::test_clusterset_ptrs_follow_imports_and_yield_to_the_cluster_zone"),
        "a clusterset IP or an imported headless endpoint has no PTR (MCS DNS spec 2.3.3, 2.4.3)",
        found="yes (the spec's PTRs were missing)",
    ),
    Mutation(
        "mcs-ptr-wins-over-the-cluster-local-one",
        "nodedns/cluster/records.py",
        "        if not targets and ip is not None:\n            targets = self.clusterset_ptr_targets(ip)",
        "        if ip is not None:\n            targets = self.clusterset_ptr_targets(ip) or targets",
        ("tests/unit/cluster/test_clusterset.py::test_clusterset_records_answer_as_the_mcs_spec_says",),
        "an address with a cluster-local PTR answers the clusterset one instead (the spec's Limitations)",
    ),
    Mutation(
        "mcs-ptr-for-an-endpoint-not-ready",
        "nodedns/cluster/records.py",
        "                if ep.ready:\n                    for name, addr in self._endpoint_names(ep):\n"
        "                        if addr == ip:\n                            targets[f\"{name}.{base}\"] = None",
        "                if True:\n                    for name, addr in self._endpoint_names(ep):\n"
        "                        if addr == ip:\n                            targets[f\"{name}.{base}\"] = None",
        ("tests/unit/cluster/test_clusterset.py::test_clusterset_records_answer_as_the_mcs_spec_says",),
        "an imported endpoint that is not ready keeps a PTR",
    ),
    Mutation(
        "mcs-ptr-kept-after-its-import-changed",
        "nodedns/cluster/records.py",
        '            tags.update(f"i:{ip}" for ip in record.ips)\n',
        "",
        ("tests/unit/cluster/test_clusterset.py::test_a_multicluster_change_names_its_import_and_its_addresses",
         "tests/e2e/test_clusterset_ptr.py::test_without_an_authoritative_reverse_zone_an_import_turns_a_forwarded_ptr_"
         "into_ours"),
        "a ServiceImport's change keeps the stored reverse answers of its clusterset IPs (a removed import's PTR "
        "stays, a new one stays forwarded)",
    ),
    Mutation("changed-endpoint-addresses-keep-their-answers", "nodedns/cluster/records.py",
             "    if kind == k8s.ENDPOINTSLICE and old is not None and new is not None and old.same_addresses(new):",
             "    if kind == k8s.ENDPOINTSLICE and old is not None and new is not None:",
             ("tests/unit/cluster/test_index.py::test_an_endpoint_moved_to_another_address_drops_the_answers_of_both_"
              "addresses",),
             "an EndpointSlice update that moves an endpoint to another address keeps the stored reverse answer of "
             "the old address"),
)
