"""Mutations of nodedns/policy/model.py (a DNS policy read, its selectors, names and decision)."""

from mutate import Mutation

TESTS = ("tests/unit/policy/test_model.py", "tests/e2e/test_policy_agent.py")

_T = "tests/unit/policy/test_model.py::"

MUTATIONS = (
    Mutation("policy-wildcard-matches-its-own-name", "nodedns/policy/model.py",
             "        if qname in self.exact or qname in self.zones:",
             "        if qname in self.exact or qname in self.zones or qname in self.below:",
             (_T + "test_a_wildcard_is_below_the_name_a_zone_is_the_name_and_below",),
             "`*.a.example` denies a.example itself"),
    Mutation("policy-default-deny-ignored", "nodedns/policy/model.py",
             "        if p.default == DENY:\n            return Decision(DENY, \"NXDOMAIN\", p.ref, \"default\")",
             "        if p.default == ALLOW:\n            return Decision(DENY, \"NXDOMAIN\", p.ref, \"default\")",
             (_T + "test_the_default_decides_what_no_rule_matches_deny_wins_over_allow",),
             "a policy's default decides the opposite of what it says"),
    Mutation("policy-audit-enforces", "nodedns/policy/model.py",
             "    enforcing = [p for p in policies if p.mode == ENFORCE]",
             "    enforcing = list(policies)",
             (_T + "test_audit_reports_what_it_would_deny_without_denying",),
             "an audit policy denies instead of reporting"),
    Mutation("policy-cluster-zone-not-checked", "nodedns/policy/model.py",
             "            if p.cluster_namespaces is not None and ns not in p.cluster_namespaces:",
             "            if p.cluster_namespaces is None and ns not in ():",
             (_T + "test_the_cluster_zone_by_namespace_hides_the_others_as_absent",),
             "clusterZone.namespaces hides nothing: a tenant resolves every namespace's Services"),
    Mutation("policy-selector-notin-ignored", "nodedns/policy/model.py",
             "                if have and labels[key] in values:\n                    return False",
             "                if have and labels[key] in ():\n                    return False",
             (_T + "test_selectors_match_labels_and_expressions",),
             "a NotIn expression selects the Pods it names"),
    Mutation("policy-bad-name-drops-the-rule", "nodedns/policy/model.py",
             "                problems.append(f\"rules[{number - 1}]: the name {p}; the rule's other names apply\")\n"
             "                continue",
             "                problems.append(f\"rules[{number - 1}]: the name {p}; the rule's other names apply\")\n"
             "                break",
             (_T + "test_a_broken_part_never_turns_into_deny_or_allow_everything",),
             "one unusable name leaves the rule's other names out"),
)
