"""Mutations of nodedns/netif.py (the interface, the local IPs, the reconcile loop, the probe)."""

from mutate import Mutation

TESTS = ("tests/test_netif.py", "tests/test_guard.py")

MUTATIONS = (
    Mutation(
        "rules-put-back-without-a-probe",
        "nodedns/netif.py",
        "self.probe_targets and (recheck or not self.rules_installed)):",
        "self.probe_targets and (not self.rules_installed)):",
        ("tests/test_netif.py::test_rules_taken_away_with_the_local_ips_go_back_only_after_a_probe_is_answered",),
        "after the guard took the local IPs away, the agent puts its conntrack-bypass rules back without asking "
        "whether it answers there (a hung agent captures the Pods' DNS again)",
        found="yes",
    ),
)
