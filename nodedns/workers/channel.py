"""The channel between the supervisor and a worker: length-prefixed pickles over one end of a socketpair.

A frame is a 4-byte big-endian length and its body. A typed message (nodedns.workers.messages.CODED)
goes as one byte, its code, and a pickle of the tuple of its values: no class name on the wire and no
class looked up to read it. Anything else goes as a plain pickle (its first byte is pickle's PROTO opcode,
0x80, never a code). The framing knows nothing of what the messages mean: each side hands what it
reads to its dispatch table. A frame that does not decode closes the channel, logged (`Channel`).
`encode_answers` frames the supervisor's replies so that one reply that cannot be pickled costs its
own query only (SERVFAIL), never the channel.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import operator
import pickle
import socket
import struct
from collections.abc import Callable
from typing import Any, cast

from nodedns.dns.keys import key_query
from nodedns.dns.wire import Query
from nodedns.runtime import logutil
from nodedns.serve.answers import Reply
from nodedns.workers.messages import CODED, Answer, Answers, Message

log = logging.getLogger("nodedns.fleet")
channel_errors = logutil.Consolidated(log, "supervisor channel error")

MAX_FRAME = (1 << 32) - 1  # the length prefix's range
HEADER = struct.Struct("!I")
PROTOCOL = pickle.HIGHEST_PROTOCOL
PLAIN = pickle.PROTO[0]  # a plain pickle's first byte (0x80): above every message code (CODED has fewer)


def _values(kind: type[object]) -> Callable[[Any], tuple[object, ...]]:
    """A typed message's values, in field order, as a tuple (what its frame pickles)."""
    names = [f.name for f in dataclasses.fields(kind)]  # type: ignore[arg-type]  # CODED holds dataclasses
    if not names:
        return lambda _message: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda message: (one(message),)
    return cast("Callable[[Any], tuple[object, ...]]", operator.attrgetter(*names))


_CODES: dict[type[object], tuple[bytes, Callable[[Any], tuple[object, ...]]]] = {
    kind: (bytes((code,)), _values(kind)) for code, kind in enumerate(CODED, 1)}


def encode_body(message: object) -> bytes:
    """A frame's body: a typed message's code and the pickle of its values, or a plain pickle."""
    coded = _CODES.get(type(message))
    if coded is None:
        return pickle.dumps(message, protocol=PROTOCOL)
    code, values = coded
    return code + pickle.dumps(values(message), protocol=PROTOCOL)


def decode(body: bytes | memoryview) -> object:
    """What `encode_body` made. Raises ValueError for an unknown code, and whatever unpickling raises."""
    code = body[0]
    if code == PLAIN:
        return pickle.loads(body)
    if not 0 < code <= len(CODED) or code >= PLAIN:
        raise ValueError(f"no message has the code {code}")
    return CODED[code - 1](*pickle.loads(body[1:]))


class Channel(asyncio.Protocol):
    """Length-prefixed pickles over one end of a socketpair: each message is handed to `deliver` as it
    is read, in stream order (every complete message of a read at once, before the next read).

    Bytes that do not unpickle close the channel (the stream is lost). A message that `deliver` fails
    on is counted and logged (consolidated); with `keep_on_error` the channel goes on with the next
    message (the supervisor: one worker's odd message must not cost that worker its state), else it
    closes (a worker: a message it could not apply may have been an invalidation, so it stops and the
    supervisor starts it again from the current state)."""

    def __init__(self, deliver: Callable[[object], None], closed: Callable[[], None] | None = None, *,
                 keep_on_error: bool = False) -> None:
        self.deliver = deliver
        self.closed = closed
        self.keep_on_error = keep_on_error
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._lost = False
        self._writable: asyncio.Future[None] | None = None
        self.delivery_errors = 0

    @classmethod
    async def open(cls, sock: socket.socket, deliver: Callable[[object], None],
                   closed: Callable[[], None] | None = None, *, keep_on_error: bool = False) -> Channel:
        channel = cls(deliver, closed, keep_on_error=keep_on_error)
        await asyncio.get_running_loop().create_unix_connection(lambda: channel, sock=sock)
        return channel

    @staticmethod
    def encode(message: object) -> bytes:
        """A message's frame. Raises whatever pickling raises (PicklingError, TypeError, RecursionError,
        ...) for a message that cannot be sent; `encode_answers` never does."""
        data = encode_body(message)
        if len(data) > MAX_FRAME:
            raise ValueError(f"a message of {len(data)} bytes is over the channel's frame size")
        return HEADER.pack(len(data)) + data

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos, n = 0, len(buf)
        view = memoryview(buf)
        try:
            while n - pos >= 4:
                (size,) = HEADER.unpack_from(buf, pos)
                if n - pos - 4 < size:
                    break
                try:
                    message = decode(view[pos + 4: pos + 4 + size])
                except Exception as exc:  # noqa: BLE001 - any decoding failure: the stream is lost
                    log.error("unreadable message on the supervisor channel (%s: %s): closing it",
                              exc.__class__.__name__, exc)
                    self.close()
                    return
                pos += 4 + size
                try:
                    self.deliver(message)
                except Exception as exc:  # noqa: BLE001 - counted; the channel's fate is keep_on_error's
                    self.delivery_errors += 1
                    channel_errors.report(exc)
                    if not self.keep_on_error:
                        self.close()
                        return
        finally:
            view.release()
        if pos:
            del buf[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._wake()
        if self.closed is not None:
            self.closed()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._wake()

    def _wake(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # the sending side

    def send(self, message: Message) -> None:
        self.send_encoded(self.encode(message))

    def send_encoded(self, frame: bytes) -> None:
        if not self.is_closing():
            assert self.transport is not None
            self.transport.write(frame)

    def is_closing(self) -> bool:
        return self._lost or self.transport is None or self.transport.is_closing()

    async def drain(self) -> None:
        """Until what was written has left (or the channel closed)."""
        while not self.is_closing() and self._writable is not None:
            await asyncio.shield(self._writable)

    def backlog(self) -> int:
        """Bytes written and not yet taken by the other side."""
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def encodable(message: object) -> bool:
    try:
        Channel.encode(message)
    except Exception:  # noqa: BLE001 - any pickling failure
        return False
    return True


def encode_answers(answers: list[Answer], servfail: Callable[[Query], Reply]) -> bytes:
    """The frame of one Answers message. A reply that cannot be encoded (pickled) is replaced
    by `servfail(query)`, used and not kept (counted and logged, consolidated): that query gets
    SERVFAIL, the others their answers, and the channel stays."""
    try:
        return Channel.encode(Answers(answers))
    except Exception:  # noqa: BLE001 - find the reply that cannot go, below
        pass
    safe: list[Answer] = []
    for key, reply, keep in answers:
        try:
            Channel.encode(reply)
        except Exception as exc:  # noqa: BLE001 - any pickling failure: SERVFAIL for this query only
            channel_errors.report(f"a reply that cannot be sent to a worker ({exc.__class__.__name__}: {exc}): "
                                  "SERVFAIL for its query")
            safe.append((key, servfail(key_query(key)), False))
        else:
            safe.append((key, reply, keep))
    return Channel.encode(Answers(safe))


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the supervisor closed the channel")
        data += chunk
    return data
