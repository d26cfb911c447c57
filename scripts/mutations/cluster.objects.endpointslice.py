"""Mutations of nodedns/cluster/objects/endpointslice.py (an EndpointSlice slimmed, its endpoints by column)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_objects.py", "tests/unit/cluster/test_records.py",
         "tests/unit/observe/test_insight.py", "tests/e2e/test_cli_serve.py",
         "tests/e2e/test_unusable_names.py", "tests/unit/serve/test_invalidation.py")

MUTATIONS = (
    Mutation("endpoint-without-condition-not-ready", "nodedns/cluster/objects/endpointslice.py",
             "        add_ready(ready is None or bool(ready))", "        add_ready(bool(ready))",
             ("tests/unit/cluster/test_objects.py",),
             "an endpoint without a ready condition (absent means ready) is left out"),
    Mutation("inet-ntop-for-ipv4-mapped-addresses", "nodedns/cluster/objects/endpointslice.py",
             "    if packed[:10] != _ZERO_80:", "    if True:",
             ("tests/unit/cluster/test_objects.py::test_endpoint_addresses_are_stored_in_the_canonical_text_ipaddress_"
              "gives",),
             "an IPv4-compatible IPv6 endpoint is kept as inet_ntop prints it (::a.b.c.d), not as Go and the "
             "reverse zone name it"),
    Mutation("ipv4-shorthand-taken-as-an-address", "nodedns/cluster/objects/endpointslice.py",
             "    return packed if socket.inet_ntoa(packed) == text else None", "    return packed",
             ("tests/unit/cluster/test_objects.py::test_endpoint_addresses_are_stored_in_the_canonical_text_ipaddress_"
              "gives",),
             "an endpoint address `10.1` or `010.1.2.3` is taken as some other address instead of refused"),
    Mutation("slice-readiness-change-touches-no-address", "nodedns/cluster/objects/endpointslice.py",
             "        if self._ready != old._ready:\n", "        if False:\n",
             ("tests/unit/serve/test_invalidation.py",),
             "an endpoint turning unready keeps its address's stored reverse answer (PTR) for the rest of the second"),
    Mutation("slice-regrouped-addresses-taken-for-the-same-endpoints", "nodedns/cluster/objects/endpointslice.py",
             "        if size != old.size or self._counts != old._counts:\n", "        if size != old.size:\n",
             ("tests/unit/serve/test_invalidation.py",),
             "addresses moved between endpoints (same bytes, other counts) are compared endpoint by endpoint: "
             "reverse answers of moved addresses are kept"),
    Mutation("slice-changed-endpoint-taken-for-its-first-address", "nodedns/cluster/objects/endpointslice.py",
             "            positions = [at for at, i in enumerate(owner) if i in changed]\n", "            pass\n",
             ("tests/unit/serve/test_invalidation.py",),
             "in a slice whose endpoints have several addresses, the changed endpoint's number is taken for an "
             "address position: another address's reverse answer is dropped, the changed one's kept"),
)
