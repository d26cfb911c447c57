"""Mutations of nodedns/cluster/objects/common.py (what every kind's slimming shares)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_objects.py", "tests/unit/cluster/test_records.py",
         "tests/unit/observe/test_insight.py", "tests/e2e/test_cli_serve.py",
         "tests/e2e/test_unusable_names.py", "tests/unit/serve/test_invalidation.py")

MUTATIONS = (
    Mutation("port-protocol-defaults-to-udp", "nodedns/cluster/objects/common.py",
             '        proto = p.get("protocol") or "TCP"',
             '        proto = p.get("protocol") or "UDP"',
             ("tests/unit/cluster/test_objects.py::test_a_service_port_without_protocol_is_tcp",),
             "a port without protocol is read as UDP (`_http._tcp` SRV names vanish)", found="yes"),
)
