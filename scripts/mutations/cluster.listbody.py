"""Mutations of nodedns/cluster/listbody.py (a list response body decoded item by item as it arrives)."""

from mutate import Mutation

TESTS = (
    "tests/unit/cluster/test_listbody.py",
    "tests/unit/cluster/test_apisync.py",
)

MUTATIONS = (
    Mutation("incomplete-item-tried-every-piece", "nodedns/cluster/listbody.py",
             "            self._wait = 2 * pending  # try again when twice as much is buffered: linear work, not "
             "quadratic",
             "            self._wait = 0",
             ("tests/unit/cluster/test_listbody.py::test_a_large_item_is_decoded_a_bounded_number_of_times",),
             "an item that arrives in many pieces is decoded again after each: quadratic work on a large object"),
    Mutation("number-cut-at-a-piece-taken-whole", "nodedns/cluster/listbody.py",
             "        if end == len(buf) and not final and not isinstance(value, dict | list | str):",
             "        if False:",
             ("tests/unit/cluster/test_listbody.py::test_a_number_at_the_end_of_a_piece_waits_for_the_rest",),
             "a number split between two pieces of the body is read as its first digits"),
    Mutation("bytes-after-the-end-accepted", "nodedns/cluster/listbody.py",
             "        if self._buf[self._pos:].strip():", "        if False:",
             ("tests/unit/cluster/test_listbody.py::test_a_body_that_is_not_a_whole_list_is_an_error",),
             "a body with something after its end (two bodies, a proxy's error page) is taken as a list"),
    Mutation("item-size-unbounded", "nodedns/cluster/listbody.py",
             "            if pending > self.max_item:", "            if False:",
             ("tests/unit/cluster/test_listbody.py::test_an_item_larger_than_the_bound_is_an_error_before_it_is_all_read",),
             "a body that is not a list of objects is buffered whole while it arrives"),
)
