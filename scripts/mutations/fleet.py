"""Mutations of nodedns/fleet.py (--workers: the supervisor, its channel to the workers, the workers)."""

from mutate import Mutation

TESTS = ("tests/test_fleet.py",)

MUTATIONS = (
    Mutation(
        "channel-drops-a-partly-read-frame",
        "nodedns/fleet.py",
        "        if pos:\n            del buf[:pos]",
        "        if pos:\n            buf.clear()",
        ("tests/test_fleet.py::test_the_channel_delivers_every_message_in_order_however_the_stream_is_split",),
        "the bytes of a frame read only in part are thrown away with the whole frames before it (the worker "
        "channel then reads garbage)",
        found="yes",
    ),
    Mutation(
        "channel-holds-a-whole-frame-back",
        "nodedns/fleet.py",
        "                if n - pos - 4 < size:",
        "                if n - pos - 4 <= size:",
        ("tests/test_fleet.py::test_the_channel_delivers_every_message_in_order_however_the_stream_is_split",),
        "a frame that ends exactly where a read ends waits for the next message (a reply the worker waits for "
        "arrives only with the next change)",
    ),
    Mutation(
        "fleet-invalidates-only-the-last-change-of-a-turn",
        "nodedns/fleet.py",
        "                self._tags.update(tags)",
        "                self._tags = set(tags)",
        ("tests/test_fleet.py::test_several_changes_in_one_loop_turn_drop_the_answers_of_every_one_in_every_worker",),
        "of several index changes in one event-loop turn, the workers drop only the answers of the last one",
        found="yes",
    ),
)
