"""Mutations of nodedns/serve/limits.py (the allow list, the rate limiter, the pace)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_hostile.py", "tests/unit/observe/test_status_limits.py", "tests/unit/serve/test_limits.py",
         "tests/unit/policy/test_book.py", "tests/e2e/test_policy_agent.py")

MUTATIONS = (
    Mutation("refused-client-never-admitted-after-a-change", "nodedns/serve/limits.py",
             "        if self._refused.get(client) == generation:", "        if client in self._refused:",
             ("tests/e2e/test_hostile.py::test_a_refused_client_is_remembered_until_the_index_changes",),
             "a client refused once stays refused after its Pod reaches the index"),
    Mutation("rate-limit-window-never-ends", "nodedns/serve/limits.py",
             "        counts = self.counts\n        if now >= self.window_end:",
             "        counts = self.counts\n        if now > self.window_end + 1.0:",
             ("tests/e2e/test_hostile.py::test_each_client_has_its_own_budget_and_a_new_second_a_new_one",),
             "a client's budget of a second carries into the next one"),
    Mutation("miss-budget-one-too-many", "nodedns/serve/limits.py",
             "        if rate and n >= rate:", "        if rate and n > rate:",
             ("tests/unit/serve/test_limits.py::test_a_client_gets_exactly_its_budget_of_misses_then_tc",),
             "a client's misses get one more than --miss-limit a second through to the slow path"),
    Mutation("namespace-miss-budget-never-binds", "nodedns/serve/limits.py",
             "            if m >= self.namespace_rate:", "            if m >= 10 * self.namespace_rate:",
             ("tests/unit/serve/test_limits.py::test_the_pods_of_a_namespace_share_its_budget_exactly",),
             "twenty Pods of one namespace each get a client's miss budget: more Pods buy more misses"),
    Mutation("shed-client-spends-its-namespace", "nodedns/serve/limits.py",
             "        if rate and n >= rate:\n            return \"client\"",
             "        if rate and n >= rate:\n            namespaces[str(self.namespace_of(client))] = 1 << 30\n"
             "            return \"client\"",
             ("tests/unit/serve/test_limits.py::test_a_client_over_its_own_budget_spends_none_of_its_namespaces",),
             "one Pod over its own miss budget uses up its namespace's: the other Pods of the namespace are shed"),
    Mutation("tcp-misses-counted-with-udp-s", "nodedns/serve/limits.py",
             "        over = self._over(client, self.tcp_counts, self.tcp_namespaces)",
             "        over = self._over(client, self.counts, self.namespaces)",
             ("tests/unit/serve/test_limits.py::test_tcp_misses_meet_the_same_budgets_counted_apart_from_udp_s_and_"
              "refused_without_capacity",
              "tests/e2e/test_hostile.py::test_a_client_s_tcp_misses_are_refused_over_its_budget_and_cost_no_one_"
              "else_their_answers"),
             "a client's TCP misses share its UDP budget: the TC=1 it got over UDP sends it to TCP, where it is "
             "refused (a spoofer spending its UDP budget costs it its answers)"),
    Mutation("miss-window-never-ends", "nodedns/serve/limits.py",
             "        if now >= self.window_end:  # a new second: every budget whole again",
             "        if now > self.window_end + 1.0:  # a new second: every budget whole again",
             ("tests/unit/serve/test_limits.py::test_a_new_second_gives_a_new_budget_and_no_more",),
             "a client's misses of a second count in the next one too"),
    Mutation("over-budget-always-dropped", "nodedns/serve/limits.py",
             "        if self.used < self.rate:\n            self.used += 1\n            return True",
             "        if False:\n            self.used += 1\n            return True",
             ("tests/unit/serve/test_limits.py::test_over_a_budget_tc_while_the_capacity_lasts_then_dropped",
              "tests/unit/serve/test_limits.py::test_the_rate_limit_with_a_capacity_truncates_every_reply_over_the_"
              "budget_until_it_is_spent",
              "tests/e2e/test_hostile.py::test_rate_limited_clients_get_every_reply_over_the_budget_truncated_while_"
              "the_agent_has_the_capacity"),
             "a spoofer spending a victim's budget costs the victim its answers (dropped, glibc waits 5 s)"),
    Mutation("capacity-unbounded", "nodedns/serve/limits.py",
             "        if self.used < self.rate:", "        if True:",
             ("tests/unit/serve/test_limits.py::test_over_a_budget_tc_while_the_capacity_lasts_then_dropped",),
             "a flood over the budgets gets a TC=1 reply for every packet: the shedding has no bound"),
    Mutation("every-client-beyond-the-table-passes", "nodedns/serve/limits.py",
             "                client = self.OVERFLOW\n                n = counts.get(client, 0)",
             "                client = self.OVERFLOW\n                n = 0",
             ("tests/e2e/test_hostile.py::test_clients_beyond_the_table_share_one_budget",),
             "clients beyond the table each get a fresh budget (a spoofing flood escapes the limit)"),
    Mutation("pace-burst-one-short", "nodedns/serve/limits.py",
             "        self.tolerance = max(burst - 1, 0) * self.interval",
             "        self.tolerance = max(burst - 2, 0) * self.interval",
             ("tests/unit/observe/test_status_limits.py::test_the_pace_lets_a_burst_through_then_one_request_per_"
              "interval",),
             "the HTTP pace lets one request fewer through at once than its burst"),
    Mutation("policed-client-remembered-for-the-hit-path", "nodedns/serve/limits.py",
             "        if client in self.policed:\n            if len(self._policed_ok)",
             "        if client in ():\n            if len(self._policed_ok)",
             ("tests/unit/policy/test_book.py::test_the_allow_list_never_remembers_a_client_under_a_policy",
              "tests/e2e/test_policy_agent.py::test_each_pod_gets_what_its_policies_allow_on_both_hit_paths"),
             "a Pod under a DNS policy is answered by the hit paths from stored answers, past its rules"),
)
