"""Mutations of nodedns/cluster/existence.py (what exists, pushed to --workers processes)."""

from mutate import Mutation

TESTS = ("tests/unit/cluster/test_existence.py", "tests/unit/serve/test_invalidation.py")

SIDE_BY_SIDE = "tests/unit/cluster/test_existence.py::test_a_worker_answers_every_name_byte_for_byte_as_the_index_owner"

MUTATIONS = (
    Mutation(
        "worker-ignores-the-changed-bytes-of-the-filter",
        "nodedns/cluster/existence.py",
        "        if state.changed:\n            bits = self.bits",
        "        if False:\n            bits = self.bits",
        (SIDE_BY_SIDE,),
        "a worker applies only whole filters: the Services added since it started are NXDOMAIN there",
        found="yes",
    ),
    Mutation(
        "namespace-change-not-pushed",
        "nodedns/cluster/existence.py",
        "        elif kind == k8s.NAMESPACE:\n            self._namespaces_changed = True",
        "        elif kind == k8s.NAMESPACE:\n            pass",
        (SIDE_BY_SIDE,),
        "a Namespace created after a worker started is unknown to it: every name in it is NXDOMAIN there",
    ),
    Mutation(
        "worker-nxdomain-serial-is-stale",
        "nodedns/cluster/existence.py",
        "        state = State(serial=self.index.last_change)",
        "        state = State(serial=0.0)",
        (SIDE_BY_SIDE,),
        "the SOA serial of a worker's own NXDOMAIN is not the owner's (the answers differ by the serial)",
        found="yes",
    ),
    Mutation(
        "removed-service-bit-not-sent",
        "nodedns/cluster/existence.py",
        "                    bits[slot >> 3] &= ~(1 << (slot & 7)) & 0xFF\n"
        "                    self._dirty.add(slot >> 3)",
        "                    bits[slot >> 3] &= ~(1 << (slot & 7)) & 0xFF",
        ("tests/unit/cluster/test_existence.py::test_the_filter_never_denies_a_service_that_exists_and_updates_add_up_"
         "to_the_"
         "whole",),
        "a deleted Service's bit stays set in the workers (their filter drifts from the owner's: more asks)",
    ),
)
