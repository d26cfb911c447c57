"""Mutations of nodedns/workers/messages.py (the worker protocol's messages and each side's dispatch table)."""

from mutate import Mutation

TESTS = ("tests/unit/workers/test_messages.py", "tests/e2e/test_fleet.py")

SIDES = "tests/unit/workers/test_messages.py::test_each_side_has_one_handler_for_every_message_it_can_be_sent"
OWN = "tests/unit/workers/test_messages.py::test_a_message_is_handed_to_the_handler_of_its_own_type_only"
KNOWN = "tests/unit/workers/test_messages.py::test_a_known_message_is_handled_without_a_warning"

MUTATIONS = (
    Mutation("dispatch-keys-every-handler-alike", "nodedns/workers/messages.py",
             '        self.handlers[kind] = cast("Callable[[C, Any], None]", handler)',
             '        self.handlers[type(kind)] = cast("Callable[[C, Any], None]", handler)', (SIDES, OWN),
             "every handler is filed under one key: each side handles one message type, the last registered"),
    Mutation("dispatch-calls-no-handler", "nodedns/workers/messages.py",
             "        handler(context, message)\n        return True", "        return True", (OWN, KNOWN),
             "a message with a handler is taken and dropped: a worker never applies what the supervisor sends"),
)
