"""Mutations of nodedns/workers/channel.py (the framed pickles between the supervisor and a worker)."""

from mutate import Mutation

TESTS = ("tests/unit/workers/test_messages.py", "tests/e2e/test_fleet.py", "tests/e2e/test_unusable_names.py")

MUTATIONS = (
    Mutation(
        "channel-drops-a-partly-read-frame",
        "nodedns/workers/channel.py",
        "        if pos:\n            del buf[:pos]",
        "        if pos:\n            buf.clear()",
        ("tests/e2e/test_fleet.py::test_the_channel_delivers_every_message_in_order_however_the_stream_is_split",),
        "the bytes of a frame read only in part are thrown away with the whole frames before it (the worker "
        "channel then reads garbage)",
        found="yes",
    ),
    Mutation(
        "channel-holds-a-whole-frame-back",
        "nodedns/workers/channel.py",
        "                if n - pos - 4 < size:",
        "                if n - pos - 4 <= size:",
        ("tests/e2e/test_fleet.py::test_the_channel_delivers_every_message_in_order_however_the_stream_is_split",),
        "a frame that ends exactly where a read ends waits for the next message (a reply the worker waits for "
        "arrives only with the next change)",
    ),
    Mutation(
        "unsendable-reply-closes-the-channel",
        "nodedns/workers/channel.py",
        "    except Exception:  # noqa: BLE001 - find the reply that cannot go, below\n        pass",
        "    except Exception:  # noqa: BLE001 - find the reply that cannot go, below\n        raise",
        ("tests/e2e/test_unusable_names.py::test_a_reply_that_cannot_be_sent_to_a_worker_is_servfail_for_that_query_"
         "only",),
        "a reply that cannot be pickled takes the whole answer message (and the worker's channel) with it",
        found="yes",
    ),
    Mutation(
        "supervisor-channel-closes-on-a-handler-error",
        "nodedns/workers/channel.py",
        "                    if not self.keep_on_error:",
        "                    if True:",
        ("tests/e2e/test_unusable_names.py::test_a_message_the_receiver_fails_on_is_counted_and_only_a_worker_closes_"
         "its_channel",),
        "one message a handler fails on closes the supervisor's channel to that worker (the worker restarts)",
        found="yes",
    ),
    Mutation(
        "channel-reads-the-next-messages-type",
        "nodedns/workers/channel.py",
        "    return CODED[code - 1](*pickle.loads(body[1:]))",
        "    return CODED[code % len(CODED)](*pickle.loads(body[1:]))",
        ("tests/unit/workers/test_messages.py::test_every_message_crosses_the_channel_as_the_same_message",),
        "a typed message is read back as the message of the next code (a Synced read as an Allow, ...)",
    ),
    Mutation(
        "channel-pickles-messages-whole",
        "nodedns/workers/channel.py",
        "    coded = _CODES.get(type(message))",
        "    coded = None",
        ("tests/unit/workers/test_messages.py::test_the_answers_frame_is_as_compact_as_the_bare_tagged_tuple",
         "tests/unit/workers/test_messages.py::test_a_frame_names_no_class_and_anything_else_goes_as_a_plain_pickle"),
        "every message goes as a whole pickle: its class's module and name in every frame, and a class looked "
        "up to read each one (a cluster miss costs some microseconds more)",
    ),
)
