"""Mutations of nodedns/shadowagent.py (`nodedns shadow`'s agent: the capture read on the loop)."""

from mutate import Mutation

TESTS = ("tests/test_shadow.py", "tests/test_shadow_e2e.py")

PROCESS = "tests/test_shadow.py::test_shadow_beside_a_stand_in_dns_reports_the_wrong_service_and_matches_the_rest"
E2E = "tests/test_shadow_e2e.py::test_the_shadow_reports_exactly_the_deliberate_differences_at_5000_queries_a_second"

MUTATIONS = (
    Mutation("shadowagent-drain-stops-after-one-batch", "nodedns/shadowagent.py",
             "        if queue:\n            asyncio.get_running_loop().call_soon(self._drain)",
             "        if False:\n            asyncio.get_running_loop().call_soon(self._drain)", (E2E,),
             "under load, the packets beyond one batch wait for the next packet to be judged"),
    Mutation("shadowagent-page-without-the-last-mismatches", "nodedns/shadowagent.py",
             "recent=list(a.shadow.recent)[:5])", "recent=[])", (PROCESS,),
             "the status page's shadow section never lists a mismatch"),
    Mutation("shadowagent-document-without-the-interface", "nodedns/shadowagent.py",
             "doc.update(interface=self.interface, capturing=self.capture is not None, queue=len(self.queue),\n"
             "                   synced=",
             "doc.update(interface='?', capturing=self.capture is not None, queue=len(self.queue),\n"
             "                   synced=", (PROCESS,),
             "the report cannot say what the shadow watches"),
)
