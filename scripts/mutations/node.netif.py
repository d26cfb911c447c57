"""Mutations of nodedns/node/netif.py (the interface, the local IPs, the reconcile loop, the probe)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_netif.py", "tests/e2e/test_guard.py")

MUTATIONS = (
    Mutation(
        "rules-put-back-without-a-probe",
        "nodedns/node/netif.py",
        "self.probe_targets and (recheck or not self.rules_installed)):",
        "self.probe_targets and (not self.rules_installed)):",
        ("tests/e2e/test_netif.py::test_rules_taken_away_with_the_local_ips_go_back_only_after_a_probe_is_answered",),
        "after the guard took the local IPs away, the agent puts its conntrack-bypass rules back without asking "
        "whether it answers there (a hung agent captures the Pods' DNS again)",
        found="yes",
    ),
    Mutation(
        "ipv6-address-waits-for-duplicate-address-detection",
        "nodedns/node/netif.py",
        "                extra = {\"flags\": IFA_F_NODAD} if plen == 128 else {}",
        "                extra = {}",
        ("tests/e2e/test_netif.py::test_ensure_creates_the_link_up_with_host_addresses_of_both_families",),
        "the IPv6 local IP is tentative for a second after it is added: binding to it fails at start",
    ),
    Mutation(
        "a-predecessors-other-local-ip-kept",
        "nodedns/node/netif.py",
        "        for ip, plen in sorted(have - want):\n            try:\n                ipr.addr(\"del\"",
        "        for ip, plen in sorted(have & set()):\n            try:\n                ipr.addr(\"del\"",
        ("tests/e2e/test_netif.py::test_ensure_is_idempotent_and_repairs_what_was_changed",),
        "an address a predecessor left on our link (another local IP) stays and keeps capturing its traffic",
    ),
    Mutation(
        "the-guard-removes-addresses-from-a-link-not-ours",
        "nodedns/node/netif.py",
        """        if not owned:
            return None, [NetifError("interface_check", f"{self.name} is {kind}; not {doing} it")]
        return msg, []""",
        """        return msg, []""",
        ("tests/e2e/test_netif.py::test_a_foreign_link_with_that_name_is_refused_and_left_alone",),
        "`nodedns guard` takes the addresses off a link of that name that someone else made",
        found="yes",
    ),
    Mutation(
        "lost-addresses-seen-only-at-the-sync-interval",
        "nodedns/node/netif.py",
        "            await asyncio.sleep(min(self.watch_period, self.sync_interval))",
        "            await asyncio.sleep(self.sync_interval)",
        ("tests/e2e/test_netif.py::test_local_ips_taken_away_are_put_back_within_the_watch_period_not_the_sync_interval",),
        "local IPs the guard took away come back only at the next sync (60 s) instead of within a second",
    ),
    Mutation(
        "put-back-ignores-the-hold",
        "nodedns/node/netif.py",
        "held = self.hold() if lost or not self.rules_installed else None",
        "held = None",
        ("tests/e2e/test_netif.py::test_local_ips_taken_away_are_not_put_back_while_a_worker_is_silent",),
        "the local IPs and rules go back once any worker answers the probe, while another one is silent",
        found="yes",
    ),
    Mutation(
        "node-setup-refused-not-fatal",
        "nodedns/node/netif.py",
        "            if refused:\n",
        "            if False:\n",
        ("tests/e2e/test_netif.py::test_a_node_setup_refused_for_lack_of_net_admin_stops_the_start",),
        "without NET_ADMIN the agent starts, never ready, instead of exiting with the reason",
    ),
)
