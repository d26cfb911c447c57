"""Mutations of nodedns/observe/insight.py (per-Pod DNS insight: attribution, expiry, budgets)."""

from mutate import Mutation

TESTS = ("tests/unit/observe/test_insight.py", "tests/e2e/test_insight_agent.py",
         "tests/unit/observe/test_insight_hitpath.py")

SHARING = ("tests/e2e/test_insight_agent.py::test_a_running_and_a_terminating_pod_sharing_an_address_the_running_one_"
           "gets_"
           "its_queries")

MUTATIONS = (
    Mutation("host-check-not-loopback", "nodedns/observe/insight.py",
             "        return ipaddress.ip_address(address.partition(\"%\")[0]).is_loopback",
             "        return ipaddress.ip_address(address.partition(\"%\")[0]).is_private",
             ("tests/unit/observe/test_insight.py",),
             "any private address counts as the host's own (its Pods' queries go to the host group)"),
    Mutation(
        "insight-the-newer-pod-takes-a-shared-address",
        "nodedns/observe/insight.py",
        "if other is None or (not info.pod.terminating, info.gen) > (not other.pod.terminating, other.gen):",
        "if other is None or info.gen > other.gen:",
        (SHARING,),
        "of a running and a terminating Pod on one address, the newer one gets the queries even when it is the "
        "one being deleted",
        found="yes",
    ),
    Mutation(
        "insight-the-terminating-pod-takes-a-shared-address",
        "nodedns/observe/insight.py",
        "if other is None or (not info.pod.terminating, info.gen) > (not other.pod.terminating, other.gen):",
        "if other is None or (info.pod.terminating, info.gen) > (other.pod.terminating, other.gen):",
        (SHARING,),
        "the Pod being deleted keeps the queries of the running Pod that took its address",
        found="yes",
    ),
    Mutation(
        "insight-a-recreated-pod-continues-the-old-ones-figures",
        "nodedns/observe/insight.py",
        "if pod is None or (pod.uid and held.pod.uid and pod.uid != held.pod.uid):",
        "if pod is None:",
        ("tests/unit/observe/test_insight.py::test_a_new_pod_on_an_old_address_has_figures_of_its_own",),
        "a Pod deleted and created again under the same name (a StatefulSet's) inherits the old one's figures",
    ),
    Mutation(
        "insight-gone-pods-dropped-at-once",
        "nodedns/observe/insight.py",
        "            if now - (info.gone_at or now) > RETAIN or len(self.pods) > MAX_PODS:",
        "            if now - (info.gone_at or now) >= 0 or len(self.pods) > MAX_PODS:",
        ("tests/unit/observe/test_insight.py::test_a_pod_that_goes_away_is_kept_for_a_while_then_dropped",),
        "a Pod that went away loses its figures at once (no 10 minutes to look at what it did)",
    ),
)
