"""Mutations of nodedns/cluster/objects.py (Kubernetes objects slimmed to what DNS needs)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_objects.py", "tests/unit/cluster/test_records.py",
         "tests/unit/observe/test_insight.py", "tests/e2e/test_cli_serve.py",
         "tests/e2e/test_unusable_names.py", "tests/unit/serve/test_invalidation.py")

MUTATIONS = (
    Mutation("endpoint-without-condition-not-ready", "nodedns/cluster/objects.py",
             "        add_ready(ready is None or bool(ready))", "        add_ready(bool(ready))",
             ("tests/unit/cluster/test_objects.py",),
             "an endpoint without a ready condition (absent means ready) is left out"),
    Mutation("port-protocol-defaults-to-udp", "nodedns/cluster/objects.py",
             '        proto = p.get("protocol") or "TCP"',
             '        proto = p.get("protocol") or "UDP"',
             ("tests/unit/cluster/test_objects.py::test_a_service_port_without_protocol_is_tcp",),
             "a port without protocol is read as UDP (`_http._tcp` SRV names vanish)", found="yes"),
    Mutation("headless-service-read-as-cluster-ip", "nodedns/cluster/objects.py",
             '    if raw_ips and raw_ips[0] == "None":', '    if raw_ips and raw_ips[0] == "none":',
             ("tests/unit/cluster/test_records.py",),
             "a headless Service (clusterIP None) is refused as a bad address"),
    Mutation("deployment-not-named-after-its-replicaset", "nodedns/cluster/objects.py",
             '        kind, name = "Deployment", name[: -len(template_hash) - 1]', "        pass",
             ("tests/unit/observe/test_insight.py", "tests/unit/cluster/test_objects.py"),
             "a Deployment's Pods are shown under their ReplicaSet (`web-7d9f8`), not the Deployment"),
    Mutation("finished-pod-not-terminating", "nodedns/cluster/objects.py",
             '        terminating=meta.get("deletionTimestamp") is not None or phase in ("Succeeded", "Failed"),',
             '        terminating=meta.get("deletionTimestamp") is not None,',
             ("tests/unit/cluster/test_objects.py::test_a_pod_is_terminating_when_deleted_or_finished",),
             "a Pod that finished (Succeeded, Failed) still holds its address", found="yes"),
    Mutation(
        "externalname-not-validated",
        "nodedns/cluster/objects.py",
        "        problem = name_problem(normalized)",
        "        problem = None",
        ("tests/e2e/test_unusable_names.py::test_a_service_with_no_usable_target_answers_nxdomain_for_every_type",
         "tests/e2e/test_unusable_names.py::test_the_shipped_agent_answers_nxdomain_for_unusable_externalnames_and_no_"
         "worker_restarts"),
        "an ExternalName with a 64-octet or empty label is kept as a target: every query for it fails to encode",
        found="yes",
    ),
    Mutation("inet-ntop-for-ipv4-mapped-addresses", "nodedns/cluster/objects.py",
             "    if packed[:10] != _ZERO_80:", "    if True:",
             ("tests/unit/cluster/test_objects.py::test_endpoint_addresses_are_stored_in_the_canonical_text_ipaddress_"
              "gives",),
             "an IPv4-compatible IPv6 endpoint is kept as inet_ntop prints it (::a.b.c.d), not as Go and the "
             "reverse zone name it"),
    Mutation("ipv4-shorthand-taken-as-an-address", "nodedns/cluster/objects.py",
             "    return packed if socket.inet_ntoa(packed) == text else None", "    return packed",
             ("tests/unit/cluster/test_objects.py::test_endpoint_addresses_are_stored_in_the_canonical_text_ipaddress_"
              "gives",),
             "an endpoint address `10.1` or `010.1.2.3` is taken as some other address instead of refused"),
    Mutation("slice-readiness-change-touches-no-address", "nodedns/cluster/objects.py",
             "        if self._ready != old._ready:\n", "        if False:\n",
             ("tests/unit/serve/test_invalidation.py",),
             "an endpoint turning unready keeps its address's stored reverse answer (PTR) for the rest of the second"),
    Mutation("slice-regrouped-addresses-taken-for-the-same-endpoints", "nodedns/cluster/objects.py",
             "        if size != old.size or self._counts != old._counts:\n", "        if size != old.size:\n",
             ("tests/unit/serve/test_invalidation.py",),
             "addresses moved between endpoints (same bytes, other counts) are compared endpoint by endpoint: "
             "reverse answers of moved addresses are kept"),
    Mutation("slice-changed-endpoint-taken-for-its-first-address", "nodedns/cluster/objects.py",
             "            positions = [at for at, i in enumerate(owner) if i in changed]\n", "            pass\n",
             ("tests/unit/serve/test_invalidation.py",),
             "in a slice whose endpoints have several addresses, the changed endpoint's number is taken for an "
             "address position: another address's reverse answer is dropped, the changed one's kept"),
)
