"""Mutations of nodedns/policy/book.py (which policies apply to which client, the counts, the answers' names)."""

from mutate import Mutation

TESTS = ("tests/unit/policy/test_book.py", "tests/e2e/test_policy_agent.py")

_T = "tests/unit/policy/test_book.py::"

MUTATIONS = (
    Mutation("policy-host-network-pod-policed", "nodedns/policy/book.py",
             "                if pod.host_network or pod.done or not pod.ips:",
             "                if pod.done or not pod.ips:",
             (_T + "test_a_policy_applies_to_the_pods_of_this_node_its_selector_picks",),
             "a Pod in the host network puts the node's own address under its policy"),
    Mutation("policy-other-nodes-pods-policed", "nodedns/policy/book.py",
             "                if self.node_name and pod.node_name != self.node_name:",
             "                if not self.node_name and pod.node_name != self.node_name:",
             (_T + "test_a_policy_applies_to_the_pods_of_this_node_its_selector_picks",),
             "the Pods of other nodes (with --pods verified) count as this node's clients"),
    Mutation("policy-answer-targets-not-read", "nodedns/policy/book.py",
             "        if rtype in _TARGETS:", "        if rtype in ():",
             (_T + "test_the_namespaces_an_answer_names_its_owners_and_targets",),
             "a PTR or CNAME target in a hidden namespace reaches the Pod"),
    Mutation("policy-namespace-labels-ignored", "nodedns/policy/book.py",
             "        labels = k8s.namespace_labels(pod.namespace, index.namespace_labels.get(pod.namespace, ()))",
             "        labels = k8s.namespace_labels(pod.namespace, ())",
             (_T + "test_a_cluster_policy_selects_namespaces_by_label_and_by_name",),
             "a ClusterDNSPolicy's namespaceSelector sees no label but the namespace's name"),
    Mutation("policy-denials-logged-every-time", "nodedns/policy/book.py",
             "        if seen is None or last is None or now - last >= LOG_INTERVAL:",
             "        if True:",
             (_T + "test_decisions_are_counted_by_action_and_policy_denials_by_pod_and_rule",),
             "every denial writes a log line (a denied Pod floods the log)"),
)
