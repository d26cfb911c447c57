"""Mutations of nodedns/server.py (the UDP and TCP listeners, the Python hit path)."""

from mutate import Mutation

TESTS = ("tests/test_hit_paths.py", "tests/test_hitpath_c.py", "tests/test_hostile.py", "tests/test_interop.py",
         "tests/test_insight_hitpath.py", "tests/test_lifecycle.py", "tests/test_forward.py", "tests/test_metrics.py")

DIFFERENTIAL = "tests/test_hit_paths.py::test_the_c_and_python_hit_paths_send_the_same_bytes_and_count_the_same"
BOUNDARIES = "tests/test_hit_paths.py::test_a_cut_at_each_section_boundary_counts_the_records_kept_in_the_header"

MUTATIONS = (
    Mutation(
        "python-hit-path-limit-takes-the-larger-payload",
        "nodedns/server.py",
        """                    if w is not None and len(w) > 512 and len(w) > min((data[n - 8] << 8) | data[n - 7],
                                                                       self.max_udp):""",
        """                    if w is not None and len(w) > 512 and len(w) > max((data[n - 8] << 8) | data[n - 7],
                                                                       self.max_udp):""",
        (BOUNDARIES, DIFFERENTIAL),
        "the Python hit path sends a stored answer whole up to our --max-udp-size to a client that offered less",
        found="yes",
    ),
    Mutation(
        "general-ignores-our-max-udp-size",
        "nodedns/server.py",
        "                if limit > self.max_udp:\n                    limit = self.max_udp\n",
        "",
        (BOUNDARIES, DIFFERENTIAL),
        "an answer found by the canonical key is cut to the client's payload size (4096) rather than ours (1232)",
        found="yes",
    ),
    Mutation(
        "general-sends-the-stored-case",
        "nodedns/server.py",
        "                self.sendto(data[:2] + w[2:12] + data[12:qend] + w[qend:], addr)",
        "                self.sendto(data[:2] + w[2:], addr)",
        (DIFFERENTIAL,),
        "a query in odd case (0x20) gets the question back lowercase (clients that check the case drop it)",
    ),
    Mutation(
        "c-misses-skip-the-allow-list",
        "nodedns/server.py",
        """                    if addr[0] not in allowed:
                        self.slow(data, addr)  # the resolver admits (and remembers) the client, or refuses it
                    else:
                        self.general(data, addr)""",
        """                    self.general(data, addr)""",
        (DIFFERENTIAL,),
        "what the C hit path hands back goes to the canonical lookup first: a refused client gets stored "
        "answers in odd case",
        found="yes",
    ),
    Mutation(
        "python-tally-forgets-the-answer-bound",
        "nodedns/server.py",
        "                elif len(cd) < MAX_ANSWERS:\n                    cd[w] = 1",
        "                elif True:\n                    cd[w] = 1",
        (DIFFERENTIAL,),
        "the Python hit path counts any number of distinct answers per client (a client spraying names grows "
        "the tally without bound)",
        found="yes",
    ),
    Mutation(
        "general-forgets-the-tally",
        "nodedns/server.py",
        "            if w is not None:\n                if self.tally is not None:\n"
        "                    self.tally.hit(addr[0], w)\n                if limit > self.max_udp:",
        "            if w is not None:\n                if limit > self.max_udp:",
        (DIFFERENTIAL,),
        "answers the canonical lookup finds (odd case, EDNS options, cut ones) are not counted for insight",
    ),
)
