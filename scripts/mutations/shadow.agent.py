"""Mutations of nodedns/shadow/agent.py (`nodedns shadow`'s agent: the capture read on the loop)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_shadow.py", "tests/e2e/test_shadow_e2e.py", "tests/unit/shadow/test_agent.py")

PROCESS = "tests/e2e/test_shadow.py::test_shadow_beside_a_stand_in_dns_reports_the_wrong_service_and_matches_the_rest"
AT_5000 = ("tests/e2e/test_shadow_e2e.py::test_the_shadow_reports_exactly_the_deliberate_differences_at_5000_queries_a_"
           "second")

MUTATIONS = (
    Mutation("shadowagent-polls-once-a-second", "nodedns/shadow/agent.py",
             "            await asyncio.sleep(POLL)", "            await asyncio.sleep(1.0)", (AT_5000,),
             "the capture read once a second: at 5,000 queries a second the queue overflows and packets are dropped"),
    Mutation("shadowagent-reads-one-packet-a-poll", "nodedns/shadow/agent.py",
             "        for _ in range(QUEUE):\n            try:\n                n = recv(buffer)",
             "        for _ in range(1):\n            try:\n                n = recv(buffer)", (AT_5000,),
             "one packet read every 10 ms: the socket's buffer overflows and the kernel drops the rest"),
    Mutation("shadowagent-page-without-the-last-mismatches", "nodedns/shadow/agent.py",
             "recent=list(a.shadow.recent)[:5])", "recent=[])", (PROCESS,),
             "the status page's shadow section never lists a mismatch"),
    Mutation("shadowagent-document-without-the-interface", "nodedns/shadow/agent.py",
             "doc.update(interface=self.interface, capturing=self.capture is not None, queue=len(self.queue),\n"
             "                   synced=",
             "doc.update(interface='?', capturing=self.capture is not None, queue=len(self.queue),\n"
             "                   synced=", (PROCESS,),
             "the report cannot say what the shadow watches"),
    Mutation(
        "shadow-queue-bounded-in-packets-only",
        "nodedns/shadow/agent.py",
        "            if len(queue) >= QUEUE or self.queued_bytes + n > QUEUE_BYTES:",
        "            if len(queue) >= QUEUE:",
        ("tests/e2e/test_shadow.py::test_padded_tcp_floods_hold_the_shadow_within_its_queue_and_pending_bytes",),
        "the capture queue holds 8,192 packets of any size: padded TCP queries fill hundreds of MB",
    ),
)
