"""Mutations of nodedns/serve/chase.py (ExternalName chases and autopath walks)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",
         "tests/unit/forward/test_forward.py", "tests/unit/dns/test_wire.py", "tests/unit/serve/test_invalidation.py",
         "tests/unit/serve/test_interop.py",
         "tests/unit/cluster/test_cluster_zone.py", "tests/e2e/test_hostile.py", "tests/unit/podconf/test_autopath.py",
         "tests/e2e/test_unusable_names.py", "tests/e2e/test_upstream_share.py", "tests/e2e/test_hosts.py",
         "tests/unit/serve/test_tail.py")

MUTATIONS = (
    Mutation(
        "filter-aaaa-filters-the-cluster-zone",
        "nodedns/serve/chase.py",
        "        target = await self.forwarding.shared(tq, stale, client=client)",
        "        from nodedns.serve.cache import filtered_template\n"
        "        target = (filtered_template(tq.key, self.forwarding.aaaa.soa, udp_size=self.max_udp_size)\n"
        "                  if self.forwarding.filtered(tq)\n"
        "                  else await self.forwarding.shared(tq, stale, client=client))",
        ("tests/e2e/test_operators.py::test_the_cluster_zone_is_never_filtered",),
        "--filter-aaaa filters the AAAA records of an ExternalName Service's outside target (a cluster-zone question)",
    ),
    Mutation(
        "failed-walk-answers-the-last-names-nxdomain",
        "nodedns/serve/chase.py",
        "        return first, (\"not_found\" if rcode == RCODE.NXDOMAIN else \"gave_up\"), i",
        "        return out, (\"not_found\" if rcode == RCODE.NXDOMAIN else \"gave_up\"), i",
        ("tests/unit/podconf/test_autopath.py::test_the_nxdomain_of_a_failed_walk_is_the_authoritative_cluster_one",),
        "a walk that finds nothing answers the NXDOMAIN of the last name it tried, not the query's own",
    ),
    Mutation(
        "walks-outlive-an-index-change",
        "nodedns/serve/chase.py",
        "        self._walked.clear()\n        self._walk_epoch += 1",
        "        self._walk_epoch += 1",
        ("tests/unit/podconf/test_autopath.py::test_an_index_change_reaches_the_next_walk_at_once",),
        "a walk answered before an index change is served again after it, for the rest of the second",
    ),
    Mutation(
        "walk-nodata-gets-a-cname",
        "nodedns/serve/chase.py",
        "            chain = [RR(q.qname, QT.CNAME, self.records.ttl, names[i])] "
        "if out[6:8] != b\"\\x00\\x00\" else []",
        "            chain = [RR(q.qname, QT.CNAME, self.records.ttl, names[i])]",
        ("tests/unit/podconf/test_autopath.py",),
        "a walk that finds NODATA answers a lone CNAME: glibc ends its search there instead of going on",
    ),
    Mutation(
        "chase-kept-though-its-service-changed-meanwhile",
        "nodedns/serve/chase.py",
        "        settled = self.cluster_answers.settled(q.key)\n",
        "        settled = self.cluster_answers.settled(q.key) or True\n",
        ("tests/unit/forward/test_forward.py::test_a_chase_whose_service_changed_while_its_target_was_asked_is_not_kept",),
        "an ExternalName Service changed while its old target was asked upstream: the old chain is kept and served "
        "for the rest of the second",
    ),
)
