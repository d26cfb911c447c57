"""The UDP hit path in Python: `serve` reads a batch of datagrams, answers the byte-for-byte hits, hands back the rest.

The one Python hit path: every UDP listener without the C extension (or with NODEDNS_HIT_PATH=python,
or with the query log on) calls `serve` once per wake-up (nodedns.serve.udp). It takes what
nodedns/serve/_hitpath.c's `serve` takes, decides each datagram as that does, and returns what it
returns; the differential test (tests/unit/serve/test_hitpath_differential.py) holds the two alike.

For each datagram read (up to BATCH), in this order:

1. the rate limit (`limit`: the counts of `limits.RateLimiter` for the current second, its rate, its
   max_clients and a list): a client under its budget is counted (one dict lookup, one store); one
   at its budget, or new while the table is full, goes to the list, not counted (the caller hands it
   to `RateLimiter.take`, which counts it and decides: pass, drop or a TC=1 reply);
2. the query log (`sample`, only here, not in C): every datagram counted, the sampled one handed back
   in `sample.picked` (the caller times and logs it);
3. the allow list's memo (`allowed`, `limits.AllowList.allowed`): a client not in it is handed back
   (the resolver admits and remembers it, or refuses it), unless it is a client under a DNS policy with
   its group's memo (`policed`, `limits.AllowList.policed_hits`: key -> (True, or the stored answer
   checked; a one-item list counting the questions it answered), nodedns.policy.book): then the raw key
   below is looked up in the hot dict and in the memo, and answered only when the memo holds it (True:
   any stored answer; else only that very answer), the entry's count one more; else handed back;
4. the hot dict (`table`, the stored answers keyed so that a plain query is its own key from byte 2
   on, see `keys.KEY_HEAD`): a query without EDNS is looked up as `data[2:]`, one ending with a bare
   OPT record (EDNS 0, no DO, no options, ARCOUNT's high byte 0) as `data[2:-11]`; anything else, or
   no stored answer, is handed back (the caller's `fast_key` lookup, then the slow path). A stored
   answer larger than the client's UDP size (512 without EDNS, else its payload size capped by
   `max_udp`, never below 512) is cut to the whole records that fit, TC=1 (`truncate.truncate`, as C's
   `cut`); one that cannot be cut is handed back. A forwarded answer is a template (nodedns.dns.hot): its
   TTLs are set for `second` (the forward cache's clock) before anything else, and one whose expiry
   second has come is handed back; each template answered is added to `asked` (when given: the forward
   cache's, what it refreshes ahead);
5. insight (`tally`, `Tally.hits`): `tally.count_hit` of the stored answer (not the cut one); a new
   answer for a client whose piece is full goes to `on_full` (`Tally.hit`: the piece set aside, or
   the hit counted by its label slot) and is answered; without `on_full`, it is handed back;
6. the hit counted by its label slot (`counts[w[0]] += 1`: byte 0 of the stored answer; the counters
   hold 256 slots) and the
   reply sent: the query's ID, then the stored bytes. A reply the kernel does not take (a full send
   buffer) is counted in the third value returned; the client asks again.

What is handed back is the listener's (`udp.UDPListener.general`): the canonical-key lookup, then, for a
miss of an admitted client, the miss budget (`limits.MissBudget`, --miss-limit) before the slow path, the
same for both hit paths, so a client's misses are shed there and never here (its hits are answered here
whatever its misses).

Returns (datagrams read, None or the list of (data, addr) handed back, replies not sent). An error
reading the first datagram (an ICMP error queued on the socket) raises OSError, as recvmmsg does in C;
one after the first ends the batch (the next call raises it).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from nodedns.dns.hot import TTL_FLAG, live
from nodedns.dns.truncate import truncate
from nodedns.metrics.counters import Sampler
from nodedns.serve.tally import count_hit

BATCH = 64  # datagrams per call (BATCH in nodedns/serve/_hitpath.c)
RECV_SIZE = 65535
_OPT_HEAD = b"\x00\x00\x29"  # OPT: root owner, type 41
_OPT_PLAIN = b"\x00" * 6  # extended rcode 0, version 0, flags 0 (no DO), no options

Datagrams = list[tuple[bytes, Any]]
# admitted clients under a DNS policy -> their group's memo: key -> (True or the stored answer, its cell)
Policed = dict[str, dict[bytes, tuple[object, list[int]]]]
# the rate limit as both hit paths take it: the limiter's counts, its rate, its max_clients, the list it fills
Limit = tuple[dict[str, int], int, int, Datagrams] | None


class Sample:
    """The query log's sampling on a listener: queries seen, the number of the next one to log, the ones
    picked in the current batch."""

    __slots__ = ("n", "at", "sampler", "picked")

    def __init__(self, sampler: Sampler) -> None:
        self.n = 0
        self.sampler = sampler
        self.at = sampler.first()
        self.picked: Datagrams = []


def serve(sock: socket.socket, table: dict[bytes, bytes], allowed: set[str], counts: list[int], max_udp: int,
          tally: dict[str, dict[bytes | int | None, int]] | None = None, limit: Limit = None,
          on_full: Callable[[str, bytes], None] | None = None, policed: Policed | None = None,
          second: int = 0, asked: set[bytes] | None = None,
          sample: Sample | None = None) -> tuple[int, Datagrams | None, int]:
    """Read up to BATCH datagrams from `sock`, answer the hits, return the rest (module docstring)."""
    recvfrom = sock.recvfrom
    sendto = sock.sendto
    get = table.get
    misses: Datagrams | None = None
    errors = 0
    rl: dict[str, int] = {}
    rate = max_clients = 0
    over: Datagrams = []
    if limit is not None:
        rl, rate, max_clients, over = limit
    received = 0
    while received < BATCH:
        try:
            data, addr = recvfrom(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            if received:
                break
            raise
        received += 1
        host = addr[0]
        if limit is not None:  # the rate limit first, as for any reply (refused clients too)
            seen = rl.get(host)
            if seen is None:
                if len(rl) >= max_clients:
                    over.append((data, addr))  # a new client, the table full: the overflow budget is take()'s
                    continue
                seen = 0
            elif seen >= rate:
                over.append((data, addr))
                continue
            rl[host] = seen + 1
        if sample is not None:
            sample.n += 1
            if sample.n >= sample.at:
                sample.at = sample.sampler.next(sample.n)
                sample.picked.append((data, addr))
                continue
        w = out = None  # the stored answer (counted in the tally as it is), the reply's bytes (maybe cut)
        cell = None  # a client under a DNS policy: the memo entry's count of the questions it answered
        if host in allowed:
            n = len(data)
            if n > 16:
                if data[11] == 0:  # ARCOUNT low byte: no OPT, the key is the rest of the message
                    w = out = get(data[2:])
                    if w is not None and w[1] == TTL_FLAG:
                        out = live(w, second)
                    if out is not None and len(out) > 512:
                        out = _cut(out, n, 512)
                elif data[10] == 0 and data[n - 11: n - 8] == _OPT_HEAD and data[n - 6:] == _OPT_PLAIN:
                    w = out = get(data[2: n - 11])  # a bare OPT (EDNS 0, no DO, no options) at the end
                    if w is not None and w[1] == TTL_FLAG:
                        out = live(w, second)
                    if out is not None and len(out) > 512:
                        size = (data[n - 8] << 8) | data[n - 7]
                        size = max_udp if size > max_udp else size
                        if len(out) > size:
                            out = _cut(out, n - 11, 512 if size < 512 else size)
        elif policed is not None and (memo := policed.get(host)) is not None:
            w, cell = _policed(memo, get, data, max_udp)
            out = w
            if w is not None and w[1] == TTL_FLAG:
                out = live(w, second)
            if out is not None and len(out) > 512:
                n = len(data)
                if data[11] == 0:
                    out = _cut(out, n, 512)
                else:
                    size = (data[n - 8] << 8) | data[n - 7]
                    size = max_udp if size > max_udp else size
                    if len(out) > size:
                        out = _cut(out, n - 11, 512 if size < 512 else size)
        if out is None:
            if misses is None:
                misses = []
            misses.append((data, addr))
            continue
        if tally is not None and not count_hit(tally, host, w):  # type: ignore[arg-type]
            if on_full is None:
                if misses is None:
                    misses = []
                misses.append((data, addr))
                continue
            on_full(host, w)  # type: ignore[arg-type]  # Tally.hit: the full piece set aside, or counted by slot
        counts[out[0]] += 1
        if asked is not None and w[1] == TTL_FLAG:  # type: ignore[index]
            asked.add(w)  # type: ignore[arg-type]
        if cell is not None:
            cell[0] += 1
        try:
            sendto(data[:2] + out[2:], addr)
        except OSError:
            errors += 1  # send buffer full, or the client unreachable: it asks again
    return received, misses, errors


def _policed(memo: dict[bytes, tuple[object, list[int]]], get: Callable[[bytes], bytes | None], data: bytes,
             max_udp: int) -> tuple[bytes | None, list[int] | None]:
    """A client under a DNS policy: (the stored answer, its memo entry's cell) when the raw key's stored answer is
    one its group's memo holds (the entry True: any answer; else that very answer), else (None, None)."""
    n = len(data)
    if n <= 16:
        return None, None
    if data[11] == 0:
        key = data[2:]
    elif data[10] == 0 and data[n - 11: n - 8] == _OPT_HEAD and data[n - 6:] == _OPT_PLAIN:
        key = data[2: n - 11]
    else:
        return None, None
    w = get(key)
    if w is None:
        return None, None
    entry = memo.get(key)
    if entry is None or (entry[0] is not True and entry[0] is not w):
        return None, None
    return w, entry[1]


def _cut(w: bytes, qend: int, limit: int) -> bytes | None:
    """The stored answer `w` cut to `limit` (`truncate.truncate`); None when it cannot be walked (handed back)."""
    if len(w) < qend:
        return None
    try:
        return truncate(w, qend, limit)
    except Exception:  # noqa: BLE001 - not walkable (never for what we store): the caller's path decides
        return None
