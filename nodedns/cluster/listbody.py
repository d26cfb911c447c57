"""Decode a Kubernetes list response body item by item, as its bytes arrive.

A list from the API server's watch cache comes as one body however large the cluster (`limit` is
ignored there), so a large cluster's EndpointSlices are one large body. Decoding that body whole
holds the bytes, then a tree of every object beside the slim records made from it, and leaves the
heap fragmented at several times the index's size. `ListBody` is fed the body in pieces and hands
back each item of its `items` array as soon as the item is complete, so at most one piece and one
item are held beyond what the caller keeps; the other top-level members (`metadata`, `kind`, ...)
are kept in `head`. Items are decoded by the standard library's JSON scanner (`raw_decode`), which
reports where a value ends: an item is complete when it decodes.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import Any

from nodedns.errors import ApiError

# one object of a list is at most etcd's request limit (1.5 MiB) as stored; as JSON, with its managed
# fields, a few times that at worst. A body whose item grows past this is not a list of objects.
MAX_ITEM = 16 << 20

_WS = re.compile(r"[ \t\n\r]*")
_decode = json.JSONDecoder().raw_decode

# where the reader is in `{"k": v, "items": [item, item], ...}`
_OPEN, _KEY, _COLON, _VALUE, _AFTER_VALUE, _ITEM, _AFTER_ITEM, _DONE = range(8)


class ListBody:
    """Feed a list body's bytes in pieces; each feed yields the items it completed, in order (a generator:
    take them all before the next feed).

    After `close()` (the end of the body, which yields the last items) `head` holds every top-level member
    but `items`. A body that
    is not a JSON object, ends early, carries trailing bytes, or holds an item over `max_item`
    characters raises ApiError.
    """

    __slots__ = ("_buf", "_pos", "_state", "_key", "_utf8", "_wait", "head", "items_seen", "max_item")

    def __init__(self, *, max_item: int = MAX_ITEM) -> None:
        self._buf = ""
        self._pos = 0
        self._state = _OPEN
        self._key = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._wait = 0  # after a value that did not decode: the characters to have buffered before trying again
        self.head: dict[str, Any] = {}
        self.items_seen = 0
        self.max_item = max_item

    def feed(self, data: bytes) -> Iterator[Any]:
        """The items that `data` completed (possibly none), each decoded as it is taken: take each before the
        next is decoded, so that one item's tree at most is alive."""
        try:
            text = self._utf8.decode(data)
        except UnicodeDecodeError as exc:
            raise ApiError(f"list body is not UTF-8: {exc}") from None
        if self._pos:
            self._buf = self._buf[self._pos:] + text
            self._pos = 0
        else:
            self._buf += text
        return self._run(final=False)

    def close(self) -> Iterator[Any]:
        """The body ended: the items still to hand back (held while more of the body was awaited); it must
        have been a whole list."""
        try:
            tail = self._utf8.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise ApiError(f"list body is not UTF-8: {exc}") from None
        self._buf = self._buf[self._pos:] + tail
        self._pos = 0
        self._wait = 0
        yield from self._run(final=True)
        if self._state != _DONE:
            raise ApiError(f"list body ended early ({self.items_seen} items read)")
        if self._buf[self._pos:].strip():
            raise ApiError("list body: bytes after its end")

    def _value(self, final: bool) -> Any:
        """Decode the value at the position; `_MORE` when it has not all arrived yet."""
        buf, pos = self._buf, self._pos
        if not final and len(buf) - pos < self._wait:
            return _MORE
        try:
            value, end = _decode(buf, pos)
        except json.JSONDecodeError as exc:
            if final:
                raise ApiError(f"list body: {exc.msg} at character {exc.pos}") from None
            pending = len(buf) - pos
            if pending > self.max_item:
                raise ApiError(f"list body: an item of over {self.max_item} characters, or not JSON "
                               f"({exc.msg})") from None
            self._wait = 2 * pending  # try again when twice as much is buffered: linear work, not quadratic
            return _MORE
        if end == len(buf) and not final and not isinstance(value, dict | list | str):
            return _MORE  # a number (or literal) at the very end may go on in the next piece
        self._wait = 0
        self._pos = end
        return value

    def _skip(self) -> str:
        """Skip white space; the next character, or "" when the buffer is used up."""
        m = _WS.match(self._buf, self._pos)
        assert m is not None  # the pattern matches the empty string
        self._pos = m.end()
        return self._buf[self._pos] if self._pos < len(self._buf) else ""

    def _run(self, *, final: bool) -> Iterator[Any]:
        while True:
            c = self._skip()
            if not c:
                return
            state = self._state
            if state == _OPEN:
                if c != "{":
                    raise ApiError(f"list body is not a JSON object (starts with {c!r})")
                self._pos += 1
                self._state = _KEY
            elif state == _KEY:
                if c == "}":
                    self._pos += 1
                    self._state = _DONE
                    continue
                if c != '"':
                    raise ApiError(f"list body: a member name expected, found {c!r}")
                key = self._value(final)
                if key is _MORE:
                    return
                self._key = key
                self._state = _COLON
            elif state == _COLON:
                if c != ":":
                    raise ApiError(f"list body: ':' expected after {self._key!r}, found {c!r}")
                self._pos += 1
                self._state = _VALUE
            elif state == _VALUE:
                if self._key == "items" and c == "[":
                    self._pos += 1
                    self._state = _ITEM
                    self.head.pop("items", None)
                    continue
                value = self._value(final)
                if value is _MORE:
                    return
                self.head[self._key] = value
                self._state = _AFTER_VALUE
            elif state == _AFTER_VALUE:
                if c not in ",}":
                    raise ApiError(f"list body: ',' or '}}' expected after {self._key!r}, found {c!r}")
                self._pos += 1
                self._state = _KEY if c == "," else _DONE
            elif state == _ITEM:
                if c == "]":
                    if self.items_seen:
                        raise ApiError(f"list body: ']' after a ',' following item {self.items_seen}")
                    self._pos += 1
                    self._state = _AFTER_VALUE
                    continue
                item = self._value(final)
                if item is _MORE:
                    return
                self.items_seen += 1
                self._state = _AFTER_ITEM
                yield item
                del item
            elif state == _AFTER_ITEM:
                if c not in ",]":
                    raise ApiError(f"list body: ',' or ']' expected after item {self.items_seen}, found {c!r}")
                self._pos += 1
                self._state = _ITEM if c == "," else _AFTER_VALUE
            else:  # _DONE: only white space may follow (close() checks)
                return


class _More:
    __slots__ = ()


_MORE: Any = _More()
