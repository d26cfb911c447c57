"""Mutations of nodedns/node/handover.py (the hand-over roster, sockets leaving the group, tcp_migrate_req)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_handover.py", "tests/e2e/test_duplicates.py", "tests/e2e/test_zero_downtime.py")

ROSTER = "tests/e2e/test_handover.py::test_the_first_agent_is_alone_and_a_second_one_sees_it"

MUTATIONS = (
    Mutation("a-new-agent-takes-an-old-entrys-number", "nodedns/node/handover.py",
             "            self.seq = max([0, *self._entries()]) + 1", "            self.seq = len(others) + 1",
             ("tests/e2e/test_handover.py::test_a_newcomer_is_numbered_after_every_live_entry_even_when_an_older_one_"
              "left",),
             "an agent joining after an older one left reuses a live agent's number", found="yes"),
    Mutation("a-dead-agents-entry-counts-as-alive", "nodedns/node/handover.py",
             "        except BlockingIOError:\n            return True\n        finally:\n            os.close(fd)",
             "        except BlockingIOError:\n            return True\n        finally:\n            os.close(fd)\n"
             "        return True",
             ("tests/e2e/test_handover.py::test_a_killed_agents_entry_is_found_dead_and_removed",),
             "a killed agent's entry stays: its successor waits for a predecessor that will never serve"),
    Mutation("newer-agents-include-older-ones", "nodedns/node/handover.py",
             "            return [p for p in self._others() if p.seq > self.seq]",
             "            return self._others()", (ROSTER,),
             "an agent takes its predecessor for a successor and yields to it"),
    Mutation("tcp-migration-written-when-not-allowed", "nodedns/node/handover.py",
             "    if not write:\n        return False, (", "    if False:\n        return False, (",
             ("tests/e2e/test_handover.py::test_tcp_migration_is_switched_on_when_it_may_be",),
             "the agent sets net.ipv4.tcp_migrate_req although it does not manage the node's network"),
    Mutation("roster-key-ignores-the-network-namespace", "nodedns/node/handover.py",
             '    return f"{name}.netns-{ns}" if ns else name', "    return name",
             ("tests/e2e/test_handover.py::test_the_roster_key_names_what_is_shared_and_the_network_namespace",),
             "agents in two network namespaces (two nodes in tests, kind) share one roster"),
    Mutation(
        "successor-gone-never-noticed",
        "nodedns/node/handover.py",
        "                elif told:\n                    gone = self.superseded",
        "                elif told and not told:\n                    gone = self.superseded",
        ("tests/e2e/test_handover.py::test_an_agent_whose_successor_was_killed_takes_the_status_port_back_and_is_ready_"
         "again",),
        "an agent whose successor was SIGKILLed stays unready, without a status listener, while it serves",
        found="yes",
    ),
    Mutation(
        "warm-predecessor-never-leaves-its-cache",
        "nodedns/node/handover.py",
        "                    if on_successor_joined is not None and not newer[-1].serving:",
        "                    if False:",
        ("tests/e2e/test_handover.py::test_the_successor_answers_from_the_predecessors_forward_cache",),
        "a restart starts with an empty forward cache: every name is asked upstream again (and nothing is "
        "answered during an upstream outage)",
    ),
    Mutation("warm-file-read-whatever-its-size", "nodedns/node/handover.py",
             "        _, data = read_regular(path, limit)", "        _, data = read_regular(path, MAX_WARM_BYTES)",
             ("tests/e2e/test_handover.py::test_a_warm_file_over_the_cache_budget_or_not_a_regular_file_is_refused_"
              "unread",),
             "a hand-over file of hundreds of MB is read whole before its size is judged (the successor OOM-killed)"),
)
