"""Mutations of nodedns/shadow/sniff.py (the capture's BPF filter and the packet parser)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_shadow.py",)

CAPTURE = "tests/e2e/test_shadow.py::test_the_filter_keeps_the_port_both_ways_over_udp_and_tcp_and_loopback_once"

MUTATIONS = (
    Mutation("sniff-loopback-outgoing-copy-kept", "nodedns/shadow/sniff.py",
             '(_JEQ_K, "drop", "proto", ARPHRD_LOOPBACK),', '(_JEQ_K, "proto", "proto", ARPHRD_LOOPBACK),',
             (CAPTURE,), "every loopback packet reaches the shadow twice (its outgoing copy too)"),
    Mutation("sniff-ipv6-destination-port-offset", "nodedns/shadow/sniff.py",
             "(_LD_H_ABS, 0, 0, 42),", "(_LD_H_ABS, 0, 0, 44),", (CAPTURE,),
             "IPv6 queries to the port are filtered out (the filter reads the length, not the destination port)"),
    Mutation("sniff-udp-ports-swapped", "nodedns/shadow/sniff.py",
             "        return Segment(src, sport, dst, dport, False, data[pos + 8:pos + length])",
             "        return Segment(src, dport, dst, sport, False, data[pos + 8:pos + length])",
             ("tests/e2e/test_shadow.py::test_a_wrong_address_is_a_mismatch_with_both_answers_and_the_client_pod",),
             "a UDP query reads as a response and the other way round: nothing is paired"),
)
