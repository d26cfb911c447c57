"""Mutations of nodedns/serve/limits.py (the allow list, the rate limiter, the pace)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_hostile.py", "tests/unit/observe/test_status_limits.py", "tests/unit/policy/test_book.py",
         "tests/e2e/test_policy_agent.py")

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
