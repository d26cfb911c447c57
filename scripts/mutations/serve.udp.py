"""Mutations of nodedns/serve/udp.py (the UDP listener: what the hit path hands back)."""

from mutate import HIT_PATH_BOUNDARIES as BOUNDARIES
from mutate import HIT_PATH_DIFFERENTIAL as DIFFERENTIAL
from mutate import HIT_PATH_TESTS, Mutation

TESTS = (*HIT_PATH_TESTS, "tests/e2e/test_policy_agent.py", "tests/unit/serve/test_tail.py",
         "tests/unit/serve/test_udp_deferral.py")

MUTATIONS = (
    Mutation(
        "general-ignores-our-max-udp-size",
        "nodedns/serve/udp.py",
        "        if limit > self.max_udp:\n            limit = self.max_udp\n",
        "",
        (BOUNDARIES, DIFFERENTIAL),
        "an answer found by the canonical key is cut to the client's payload size (4096) rather than ours (1232)",
        found="yes",
    ),
    Mutation(
        "general-sends-the-stored-case",
        "nodedns/serve/udp.py",
        "        out = data[:2] + w[2:12] + data[12:qend] + w[qend:]",
        "        out = data[:2] + w[2:]",
        (DIFFERENTIAL,),
        "a query in odd case (0x20) gets the question back lowercase (clients that check the case drop it)",
    ),
    Mutation(
        "general-forgets-the-tally",
        "nodedns/serve/udp.py",
        "        if self.tally is not None:\n            self.tally.hit(addr[0], w)\n        if limit > self.max_udp:",
        "        if limit > self.max_udp:",
        (DIFFERENTIAL,
         "tests/unit/serve/test_tail.py::test_a_stored_answer_found_by_its_canonical_key_is_counted_for_insight"),
        "answers the canonical lookup finds (odd case, EDNS options, cut ones) are not counted for insight",
    ),
    Mutation(
        "c-hit-path-rate-limit-window-never-turns",
        "nodedns/serve/udp.py",
        "                limiter.tick()  # a new second: its counts cleared in place\n                limit = (",
        "                limit = (",
        ("tests/e2e/test_hostile.py::test_a_rate_limited_client_gets_its_budget_again_the_next_second_and_no_more",),
        "the C hit path counts a new second against the last one's budget until a client over it turns the window",
    ),
    Mutation(
        "c-hit-path-rate-limit-rate-and-table-size-swapped",
        "nodedns/serve/udp.py",
        "limit = (limiter.counts, limiter.rate, limiter.max_clients, over)",
        "limit = (limiter.counts, limiter.max_clients, limiter.rate, over)",
        ("tests/e2e/test_hostile.py::test_a_client_flooding_a_stored_name_gets_take_s_verdicts_query_for_query_and_its_"
         "neighbour_its_own_budget",),
        "the C hit path takes the rate limit table's size for the budget and the budget for its size",
    ),
    Mutation(
        "misses-skip-the-allow-list",
        "nodedns/serve/udp.py",
        """        if addr[0] not in self.allowed:
            memo = self.policed.get(addr[0])
            if memo is not None and not logged and self.policed_hit(data, addr, memo):
                return
            if self.misses is not None and addr[0] in self.server.resolver.allow.policed and \\
                    not self._stored(data) and not self.within_miss_budget(data, addr):
                return
            self.later(data, addr, t0)  # the resolver admits (and remembers) the client, or refuses it
            return
        fk = fast_key(data)""",
        """        fk = fast_key(data)""",
        (DIFFERENTIAL,),
        "what the hit path hands back goes to the canonical lookup first: a refused client gets stored "
        "answers in odd case",
        found="yes",
    ),
    Mutation(
        "misses-never-budgeted",
        "nodedns/serve/udp.py",
        "        if self.misses is not None and not self.within_miss_budget(data, addr):\n            return\n"
        "        self.later(data, addr, t0)\n",
        "        self.later(data, addr, t0)\n",
        ("tests/e2e/test_hostile.py::test_a_client_over_its_miss_budget_is_shed_and_keeps_its_hits_and_its_"
         "neighbour_its_misses",),
        "one Pod spraying random names takes the slow path from every other Pod's cached answers",
    ),
    Mutation(
        "shed-misses-dropped-not-truncated",
        "nodedns/serve/udp.py",
        "        if verdict == MissBudget.SLIP:\n            resolver = self.server.resolver",
        "        if False:\n            resolver = self.server.resolver",
        ("tests/e2e/test_hostile.py::test_a_client_over_its_miss_budget_is_shed_and_keeps_its_hits_and_its_"
         "neighbour_its_misses",),
        "a client over its miss budget gets no reply: glibc waits 5 s instead of asking again over TCP",
    ),
    Mutation(
        "policed-misses-not-budgeted",
        "nodedns/serve/udp.py",
        "            if self.misses is not None and addr[0] in self.server.resolver.allow.policed and \\",
        "            if self.misses is not None and addr[0] in () and \\",
        ("tests/e2e/test_policy_agent.py::test_a_pod_under_a_policy_has_its_misses_budgeted_and_its_stored_"
         "answers_are_not_misses",),
        "a Pod under a DNS policy sprays misses past --miss-limit (every query of it goes to the resolver)",
    ),
    Mutation(
        "policed-stored-answers-counted-as-misses",
        "nodedns/serve/udp.py",
        "                    not self._stored(data) and not self.within_miss_budget(data, addr):",
        "                    not self.within_miss_budget(data, addr):",
        ("tests/e2e/test_policy_agent.py::test_a_pod_under_a_policy_has_its_misses_budgeted_and_its_stored_"
         "answers_are_not_misses",),
        "a Pod under a DNS policy has its stored answers shed over its miss budget",
    ),
    Mutation(
        "udp-canonical-key-sends-the-raw-template",
        "nodedns/serve/udp.py",
        "            w = self.get(key)\n            if w is None:\n                w = self.rehit(key)",
        "            w = self.table.get(key)\n            if w is None:\n                w = self.rehit(key)",
        ("tests/unit/forward/test_forward.py::test_ttls_count_down_on_hits_and_the_entry_expires",),
        "a mixed-case or DO query for a hot forwarded name gets the stored template: bytes after the message, "
        "TTLs never counted down",
    ),
)
