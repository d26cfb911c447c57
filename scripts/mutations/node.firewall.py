"""Mutations of nodedns/node/firewall.py (the conntrack-bypass rules, iptables and nftables)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_firewall.py", "tests/e2e/test_netif.py", "tests/e2e/test_node_e2e.py")

OWN = "tests/e2e/test_firewall.py"

MUTATIONS = (
    Mutation("a-failed-check-taken-for-a-missing-rule", "nodedns/node/firewall.py",
             "            if r.returncode != 1:  # 1 = no such rule; anything else is a failed check",
             "            if r.returncode > 1:  # 1 = no such rule; anything else is a failed check",
             ("tests/e2e/test_firewall.py::test_a_check_that_fails_otherwise_than_missing_is_an_error_not_an_insert",),
             "an iptables check that failed (a negative status) inserts the rule again and again", found="yes"),
    Mutation("rules-appended-not-inserted", "nodedns/node/firewall.py",
             '            r = self._iptables(rule.family, "-t", rule.table, "-I", rule.chain, *rule.args)',
             '            r = self._iptables(rule.family, "-t", rule.table, "-A", rule.chain, *rule.args)', (OWN,),
             "the rules go at the end of their chains, after a REJECT or DROP of the node's own rules"),
    Mutation("lock-contention-never-retried", "nodedns/node/firewall.py",
             "            if not is_lock_error(r):\n                break",
             "            if True:\n                break",
             ("tests/e2e/test_firewall.py::test_lock_contention_is_retried_with_backoff_then_succeeds",),
             "a busy xtables lock (kube-proxy's) fails the setup instead of waiting its turn"),
    Mutation("the-health-port-not-bypassed", "nodedns/node/firewall.py",
             '            rule("raw", "OUTPUT", _spec("tcp", "to", ip, health_port, "NOTRACK", SKIP_COMMENT))\n',
             "", (OWN,), "the kubelet's health checks to the local IP go through conntrack"),
    Mutation("removal-leaves-the-allow-rules", "nodedns/node/firewall.py",
             """                if f'"{SKIP_COMMENT}"' not in line and f'"{ALLOW_COMMENT}"' not in line:""",
             """                if f'"{SKIP_COMMENT}"' not in line:""",
             ("tests/e2e/test_firewall.py::test_remove_deletes_every_rule_with_our_comment_and_nothing_else",),
             "the ACCEPT rules stay behind after a stop", found="yes"),
    Mutation(
        "iptables-permission-taken-for-a-lock",
        "nodedns/node/firewall.py",
        "    if is_permission_error(r):\n        return False\n    return r.returncode == LOCK_EXIT_STATUS",
        "    return r.returncode == LOCK_EXIT_STATUS",
        ("tests/e2e/test_firewall.py::test_permission_denied_is_no_lock_it_is_not_retried_and_it_names_net_admin",),
        "iptables refused for lack of NET_ADMIN is reported as a busy xtables lock and retried",
        found="yes",
    ),
)
