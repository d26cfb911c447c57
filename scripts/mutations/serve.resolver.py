"""Mutations of nodedns/serve/resolver.py (the dispatcher: rcode decisions, --hosts and --filter-aaaa switches)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",
         "tests/unit/forward/test_forward.py", "tests/unit/dns/test_wire.py", "tests/unit/serve/test_invalidation.py",
         "tests/unit/serve/test_interop.py",
         "tests/unit/cluster/test_cluster_zone.py", "tests/e2e/test_hostile.py", "tests/unit/podconf/test_autopath.py",
         "tests/e2e/test_unusable_names.py", "tests/e2e/test_upstream_share.py", "tests/e2e/test_hosts.py",
         "tests/unit/serve/test_tail.py", "tests/e2e/test_policy_agent.py")

MUTATIONS = (
    Mutation("hosts-forwarded-answers-kept", "nodedns/serve/resolver.py",
             "            self.forward_cache.drop(lambda key: table.names_wire(key[KEY_HEAD:-4]))",
             "            pass",
             ("tests/e2e/test_hosts.py::test_a_changed_file_is_answered_without_a_restart_and_forwarded_answers_go",),
             "a name newly in a hosts file is still served as forwarded from the cache (the hit path first)"),
    Mutation("zone-transfers-answered", "nodedns/serve/resolver.py",
             "        if q.qtype in (QT.AXFR, QT.IXFR):\n"
             "            return self._reply(q, data, RCODE.REFUSED, aa=False)",
             "        if False:\n            return self._reply(q, data, RCODE.REFUSED, aa=False)",
             ("tests/unit/cluster/test_cluster_zone.py", "tests/unit/serve/test_interop.py",
              "tests/e2e/test_hostile.py"),
             "AXFR of the cluster zone is not refused"),
    Mutation(
        "filter-aaaa-auto-keeps-the-old-answers",
        "nodedns/serve/resolver.py",
        """        if changed:
            self.cluster_answers.invalidate(FILTER_TAGS)""",
        """        if False:
            self.cluster_answers.invalidate(FILTER_TAGS)""",
        ("tests/e2e/test_operators.py::test_auto_filters_only_while_the_node_has_no_global_ipv6_and_says_why",),
        "when auto flips, the NODATAs (or the forwarded AAAA answers) stored before keep being served",
    ),

    Mutation("policy-not-asked-on-the-slow-path", "nodedns/serve/resolver.py",
             "        if policy is not None and client in policy.clients:",
             "        if policy is not None and client in ():",
             ("tests/e2e/test_policy_agent.py::test_each_pod_gets_what_its_policies_allow_on_both_hit_paths",),
             "no DNS policy is ever applied: every Pod resolves every name"),
    Mutation("policy-hidden-answer-sent", "nodedns/serve/resolver.py",
             "        if hidden is None:\n            return out", "        if True:\n            return out",
             ("tests/e2e/test_policy_agent.py::test_each_pod_gets_what_its_policies_allow_on_both_hit_paths",),
             "a PTR of another tenant's Service reaches a Pod whose clusterZone hides it"),
)
