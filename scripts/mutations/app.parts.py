"""Mutations of nodedns/app/parts.py (each part's contract, and the one process's parts)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_lifecycle.py", "tests/e2e/test_handover.py", "tests/unit/app/test_parts.py")

MUTATIONS = (
    Mutation(
        "own-sockets-dead-still-live",
        "nodedns/app/parts.py",
        "    def dead(self) -> list[str]:\n        return self.problems()",
        "    def dead(self) -> list[str]:\n        return []",
        ("tests/e2e/test_lifecycle.py::test_dead_listeners_make_the_agent_not_live_and_not_ready",),
        "/healthz says alive while the agent's own DNS sockets are dead: the kubelet never restarts it",
    ),
    Mutation(
        "manifests-never-synced",
        "nodedns/app/parts.py",
        "        self._warn_missing_namespaces()\n        self.index.mark_synced()",
        "        self._warn_missing_namespaces()",
        ("tests/e2e/test_lifecycle.py::test_readiness_goes_false_at_stop_while_the_lameduck_keeps_answering",),
        "an agent that loaded --manifests never says its index synced: never ready, SERVFAIL for NXDOMAINs",
    ),
    Mutation(
        "own-sockets-bind-beside-a-serving-predecessor",
        "nodedns/app/parts.py",
        "            return self.defer\n        return any(p.serving for p in others)",
        "            return self.defer\n        return False",
        ("tests/e2e/test_handover.py::test_a_restart_beside_the_running_agent_drops_no_query",),
        "a successor answers beside its predecessor before its index synced (SERVFAIL where it would say NXDOMAIN)",
    ),
    Mutation(
        "warm-forward-cache-not-loaded",
        "nodedns/app/parts.py",
        "                    entries += self.forward_cache.load(body)",
        "                    entries += 0",
        ("tests/e2e/test_handover.py::test_the_successor_answers_from_the_predecessors_forward_cache",),
        "a restart loses the forward cache: names cached before are asked again (and fail in an upstream outage)",
    ),
    Mutation(
        "warm-part-failure-escapes",
        "nodedns/app/parts.py",
        "            except Exception as exc:  # noqa: BLE001 - whatever breaks a part, the agent starts without it",
        "            except json.JSONDecodeError as exc:",
        ("tests/unit/app/test_parts.py::test_a_part_with_an_infinite_expiry_is_skipped_with_one_line_and_the_others_"
         "load",),
        "one bad part of the running agent's forward cache raises out of the loader: the successor's workers die",
    ),
)
