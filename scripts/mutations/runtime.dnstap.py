"""Mutations of nodedns/runtime/dnstap.py (dnstap frames: the protobuf, Frame Streams, the bounded queue)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_dnstap.py",)

MUTATIONS = (
    Mutation(
        "dnstap-queue-unbounded",
        "nodedns/runtime/dnstap.py",
        "        if len(self.queue) >= self.queue_frames:",
        "        if False:",
        ("tests/e2e/test_dnstap.py::test_a_slow_or_absent_collector_costs_counted_frames_never_a_delayed_answer",),
        "a slow or absent collector grows the queue without bound and nothing is counted as dropped",
    ),
    Mutation(
        "dnstap-wrong-content-type",
        "nodedns/runtime/dnstap.py",
        'CONTENT_TYPE = b"protobuf:dnstap.Dnstap"',
        'CONTENT_TYPE = b"protobuf:dnstap"',
        ("tests/e2e/test_dnstap.py::test_a_real_collector_and_reader_decode_the_frames_of_each_zones_share",),
        "the handshake names another content type: a real collector refuses the stream",
    ),
    Mutation(
        "dnstap-client-response-lost",
        "nodedns/runtime/dnstap.py",
        "        self.put(encode(CLIENT_RESPONSE, response_time=now, response_message=response, **common))\n",
        "",
        ("tests/e2e/test_dnstap.py::test_a_real_collector_and_reader_decode_the_frames_of_each_zones_share",),
        "CLIENT_RESPONSE frames are never sent: a reader sees the queries and none of our answers",
    ),
    Mutation(
        "dnstap-nanoseconds-as-microseconds",
        "nodedns/runtime/dnstap.py",
        "_fixed32(9, int((query_time % 1) * 1e9) % 1_000_000_000)",
        "_fixed32(9, int((query_time % 1) * 1e6))",
        ("tests/e2e/test_dnstap.py::test_the_frames_follow_the_dnstap_schema_and_frame_streams_handshake",),
        "query_time_nsec carries microseconds: every frame's time is off by up to a second",
    ),
)
