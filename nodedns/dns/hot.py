"""The hot table: the one dict the hit paths read, written only through `HotTable` (pure).

Key: a cache key (`keys.KEY_HEAD`); value: a response template (ID 0, the question lowercased, its
first byte the label slot) that the hit paths patch and send as is. Two writers share it: the cluster
answers (`nodedns.serve.cache.ClusterAnswers`) and the forward cache (`nodedns.forward.store.ForwardCache`).
Each writes through `put`, `pop` and `put_many`; the hit paths (`nodedns.serve.hitpath`, the C one in
nodedns/serve/_hitpath.c) take `view`, the plain dict itself, so a lookup costs what a dict lookup costs;
the other readers take `get`, the answer as it is sent this second.

A forwarded answer is stored once for its whole life as a template with its TTLs set at sending
(`with_ttls`): byte 1 (the ID's low byte, never sent) is TTL_FLAG, and after the message a trailer says
where its records' TTLs sit and the clock second it expires at. Whoever sends it writes `expires - now` into
every TTL (`live`; the C hit path likewise, from the second its caller gives), and a template whose second
has come is no answer (None: the slow path decides). So the table is not rewritten every second to count
TTLs down, and a stored answer is the same object from one second to the next.
"""

from __future__ import annotations

import struct
import time
from array import array
from collections.abc import Callable, Iterable, Mapping

TTL_FLAG = 1  # byte 1 of a template whose TTLs are set at sending
TRAILER = struct.Struct("!iH")  # after the TTL offsets (two bytes each): the expiry second, how many offsets
_TTL = struct.Struct("!I")


def with_ttls(wire: bytes, offsets: array[int], expires: int) -> bytes:
    """`wire` (a stored answer, ID bytes unsent) as a template whose every TTL at `offsets` is set at sending
    to `expires` minus the second (`live`)."""
    tail = array("H", offsets)
    if tail.itemsize == 2 and struct.pack("=H", 1) != struct.pack("!H", 1):
        tail.byteswap()  # big-endian on the wire, as the C side reads it
    return b"".join((wire[:1], bytes((TTL_FLAG,)), wire[2:], tail.tobytes(), TRAILER.pack(expires, len(offsets))))


def is_template(w: bytes) -> bool:
    return len(w) > 1 and w[1] == TTL_FLAG


def split(w: bytes) -> tuple[int, int, int]:
    """(where the message ends, the expiry second, how many TTL offsets) of a template."""
    expires, n = TRAILER.unpack_from(w, len(w) - TRAILER.size)
    return len(w) - TRAILER.size - 2 * n, expires, n


def rendered(w: bytes, ttl: int) -> bytes:
    """The message of a template (`with_ttls`) with every TTL set to `ttl`, as new bytes; any other stored
    answer as it is."""
    if not is_template(w):
        return w
    end, _, n = split(w)
    buf = bytearray(w[:end])
    buf[1] = 0
    packed = _TTL.pack(max(ttl, 0))
    for i in range(end, end + 2 * n, 2):
        off = (w[i] << 8) | w[i + 1]
        buf[off:off + 4] = packed
    return bytes(buf)


def live(w: bytes, second: int) -> bytes | None:
    """A stored answer as it is sent in `second`: a template with its TTLs counted down to that second, None
    once its expiry second has come; any other as it is."""
    if not is_template(w):
        return w
    expires = TRAILER.unpack_from(w, len(w) - TRAILER.size)[0]
    if expires <= second:
        return None
    return rendered(w, expires - second)


class HotTable:
    """key -> response template: `view` is read (a plain dict), never written but through the methods."""

    __slots__ = ("view", "clock")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.view: dict[bytes, bytes] = {}
        self.clock = clock  # the forward cache's: the second a template's TTLs are counted down to (`get`)

    def second(self) -> int:
        return int(self.clock())

    def put(self, key: bytes, wire: bytes) -> None:
        """Serve `wire` for `key` from now on (replacing what was there)."""
        self.view[key] = wire

    def put_many(self, answers: Mapping[bytes, bytes]) -> None:
        """Serve each of `answers` from now on."""
        self.view.update(answers)

    def pop(self, key: bytes) -> bytes | None:
        """Stop serving `key`: what was served for it, or None."""
        return self.view.pop(key, None)

    def pop_many(self, keys: Iterable[bytes]) -> int:
        """Stop serving each of `keys`; how many were served."""
        pop = self.view.pop
        dropped = 0
        for key in keys:
            if pop(key, None) is not None:
                dropped += 1
        return dropped

    def get(self, key: bytes) -> bytes | None:
        """The answer stored for `key` as it is sent now (`live`: a template's TTLs counted down), or None."""
        w = self.view.get(key)
        if w is None or not is_template(w):
            return w
        return live(w, int(self.clock()))

    def __contains__(self, key: object) -> bool:
        return key in self.view

    def __len__(self) -> int:
        return len(self.view)
