"""Mutations of nodedns/cluster/topology.py (the order of headless answers: this node, this zone, the rest)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_topology.py",)

MUTATIONS = (
    Mutation("zone-hints-ignored", "nodedns/cluster/topology.py",
             "        if ep.for_zones:\n            if zone in ep.for_zones:\n                return SAME_ZONE",
             "        if False:\n            if zone in ep.for_zones:\n                return SAME_ZONE",
             ("tests/unit/cluster/test_topology.py",),
             "an endpoint hinted for our zone counts as ours only by its own zone"),
    Mutation("prefer-same-node-falls-to-everything", "nodedns/cluster/topology.py",
             "        for limit in (SAME_NODE, SAME_ZONE):", "        for limit in (SAME_NODE,):",
             ("tests/unit/cluster/test_topology.py",),
             "PreferSameNode without an endpoint on this node gives every endpoint, not this zone's"),
    Mutation("unknown-zone-prefers-the-empty-zone", "nodedns/cluster/topology.py",
             "    if svc.traffic_distribution in PREFER_SAME_ZONE and zone:",
             "    if svc.traffic_distribution in PREFER_SAME_ZONE:", ("tests/unit/cluster/test_topology.py",),
             "PreferClose on a node without a zone label keeps only this node's endpoints"),
    Mutation("this-node-not-first", "nodedns/cluster/topology.py", "    if node_name and ep.node_name == node_name:",
             "    if False:", ("tests/unit/cluster/test_topology.py",), "this node's endpoints are not listed first"),
)
