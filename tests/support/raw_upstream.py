"""An upstream that answers with whatever bytes a test function builds: for replies no real server
library would send (an OPT record in the middle, FORMERR to EDNS, ...). UDP and TCP on 127.0.0.1,
the same port, in a thread.

    def reply(query: bytes, transport: str) -> bytes | None: ...   # None: no answer; a list of replies
                                                                   # is sent in order (as datagrams, or
                                                                   # framed on the one TCP connection);
                                                                   # each gets the query's ID unless Verbatim
    with RawUpstream(reply) as up:
        ...  up.address, up.queries  (every (query bytes, transport) seen)
"""

from __future__ import annotations

import select
import socket
import struct
import threading
from collections.abc import Callable

Reply = Callable[[bytes, str], bytes | list[bytes] | None]


class Verbatim(bytes):
    """A reply sent as it is: with its own ID, not the query's."""


class RawUpstream:
    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.queries: list[tuple[bytes, str]] = []
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        for _ in range(50):  # a UDP port whose TCP twin is free too
            self.udp.bind(("127.0.0.1", 0))
            self.port = self.udp.getsockname()[1]
            try:
                self.tcp.bind(("127.0.0.1", self.port))
                break
            except OSError:
                self.udp.close()
                self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.tcp.listen(16)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="raw-upstream", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> RawUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.udp.close()
        self.tcp.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.udp, self.tcp], [], [], 0.05)
            if self.udp in ready:
                data, addr = self.udp.recvfrom(65535)
                self.queries.append((data, "udp"))
                out = self.reply(data, "udp")
                for one in [out] if isinstance(out, bytes) else out or ():  # several datagrams: in order
                    self.udp.sendto(one if isinstance(one, Verbatim) else data[:2] + one[2:], addr)
            if self.tcp in ready:
                conn, _ = self.tcp.accept()
                with conn:
                    conn.settimeout(2)
                    try:
                        head = conn.recv(2)
                        (n,) = struct.unpack("!H", head)
                        data = b""
                        while len(data) < n:
                            data += conn.recv(n - len(data))
                    except (OSError, struct.error):
                        continue
                    self.queries.append((data, "tcp"))
                    out = self.reply(data, "tcp")
                    for one in [out] if isinstance(out, bytes) else out or ():  # several: framed, in order
                        one = one if isinstance(one, Verbatim) else data[:2] + one[2:]
                        conn.sendall(struct.pack("!H", len(one)) + one)


def has_opt(query: bytes) -> bool:
    """The query (one question, nothing else but maybe an OPT) carries an OPT record."""
    return query[10:12] != b"\x00\x00"
