"""Mutations of nodedns/serve/answers.py (the cluster answers: the owner's decision, kept, dropped by tag)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",
         "tests/unit/forward/test_forward.py", "tests/unit/dns/test_wire.py", "tests/unit/serve/test_invalidation.py",
         "tests/unit/serve/test_interop.py",
         "tests/unit/cluster/test_cluster_zone.py", "tests/e2e/test_hostile.py", "tests/unit/podconf/test_autopath.py",
         "tests/e2e/test_unusable_names.py", "tests/e2e/test_upstream_share.py", "tests/e2e/test_hosts.py",
         "tests/unit/serve/test_tail.py")

MUTATIONS = (
    Mutation(
        "unencodable-answer-raises",
        "nodedns/serve/answers.py",
        "        except EncodeError as exc:\n            unencodable.report(",
        "        except KeyError as exc:\n            unencodable.report(",
        ("tests/e2e/test_unusable_names.py::test_an_answer_the_wire_cannot_carry_is_servfail_counted_not_an_exception",),
        "an answer the wire cannot carry escapes the index owner as an exception (a dead channel, a panic)",
        found="yes",
    ),
    Mutation(
        "unsynced-nxdomain-stored",
        "nodedns/serve/answers.py",
        "        if found.rcode == RCODE.NXDOMAIN and not self.index.synced:",
        "        if found.rcode == RCODE.NXDOMAIN and not self.index.synced and False:",
        ("tests/unit/cluster/test_cluster_zone.py::test_unsynced_index_answers_servfail_for_would_be_nxdomain",),
        "before the first sync a name not yet listed gets a cacheable NXDOMAIN (clients keep it past the sync)",
    ),
    Mutation(
        "covered-nxdomain-stored-hot",
        "nodedns/serve/answers.py",
        "                hot = not self.autopath.covers(q.qname)",
        "                hot = True",
        ("tests/unit/podconf/test_autopath.py::test_walk_answers_and_plain_answers_never_cross_between_clients",),
        "an NXDOMAIN a walk may replace sits in the client-independent hot dict: a Pod of this node gets it, not its "
        "walk",
    ),
    Mutation(
        "index-change-drops-nothing",
        "nodedns/serve/answers.py",
        "        self.invalidate(change.tags)",
        "        self.invalidate(frozenset())",
        ("tests/unit/serve/test_invalidation.py::test_answers_served_through_the_table_equal_answers_computed_fresh",),
        "an index change leaves the stored answers it touched: the hit path serves the old answer",
    ),
    Mutation(
        "not-ours-mark-never-kept",
        "nodedns/serve/answers.py",
        "                self.cluster_answers.put(key, NOT_OURS, tags, hot=False)",
        "                pass",
        ("tests/unit/forward/test_forward.py::test_a_forwarded_reverse_answer_gives_way_to_a_service_that_claims_the_"
         "address_and_comes_back_after",),
        "a reverse name the index has no PTR for is not marked: its forwarded answer stays when a Service claims it",
    ),
)
