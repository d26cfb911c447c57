"""Mutations of nodedns/workers/shadowagent.py (`nodedns shadow`'s agent: the capture read on the loop)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_shadow.py",)

PROCESS = "tests/e2e/test_shadow.py::test_shadow_beside_a_stand_in_dns_reports_the_wrong_service_and_matches_the_rest"

MUTATIONS = (
    Mutation("shadowagent-drain-never-rearmed", "nodedns/workers/shadowagent.py",
             "        else:\n            self._draining = False", "        else:\n            pass", (PROCESS,),
             "after the first batch no captured packet is judged again"),
    Mutation("shadowagent-page-without-the-last-mismatches", "nodedns/workers/shadowagent.py",
             "recent=list(a.shadow.recent)[:5])", "recent=[])", (PROCESS,),
             "the status page's shadow section never lists a mismatch"),
    Mutation("shadowagent-document-without-the-interface", "nodedns/workers/shadowagent.py",
             "doc.update(interface=self.interface, capturing=self.capture is not None, queue=len(self.queue),\n"
             "                   synced=",
             "doc.update(interface='?', capturing=self.capture is not None, queue=len(self.queue),\n"
             "                   synced=", (PROCESS,),
             "the report cannot say what the shadow watches"),
)
