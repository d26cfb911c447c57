"""Loop detection, as CoreDNS's loop plugin: a random HINFO name sent to each upstream must not come back.
"""
from __future__ import annotations

import asyncio
import random
import secrets
import socket
from collections.abc import Awaitable, Callable, Sequence

from nodedns.dns.pack import encode_name
from nodedns.dns.queries import answers_query, build_query
from nodedns.dns.wire import KF_RD, QT
from nodedns.forward.upstream import Group


def probe_name(zone: str, rng: random.Random | None = None) -> str:
    """`<random>.<random>.<zone>` like CoreDNS's loop plugin (decimal labels)."""
    r = rng or random.SystemRandom()
    labels = f"{r.getrandbits(62)}.{r.getrandbits(62)}"
    return f"{labels}.{zone}" if zone else labels


async def send_probe(host: str, port: int, qname: str, *, wait: float) -> bool:
    """Send HINFO qname to (host, port) over UDP; True when any answer came back in time."""
    loop = asyncio.get_running_loop()
    qid = secrets.randbits(16)
    question = encode_name(qname) + QT.HINFO.to_bytes(2, "big") + b"\x00\x01"
    msg = build_query(question, qid, KF_RD, 1232)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, (host, port))
        await loop.sock_sendall(sock, msg)
        async with asyncio.timeout(wait):
            while True:
                data = await loop.sock_recv(sock, 65535)
                if answers_query(data, qid, question):
                    return True
    except (TimeoutError, OSError):
        return False
    finally:
        sock.close()


async def probe_loops(
    groups: Sequence[Group], *, send: Callable[[str], Awaitable[bool]], register: Callable[[str], None],
    attempts: int = 3,
) -> list[tuple[Group, str, bool]]:
    """Send one probe per group through our own listener (retrying a probe that got no answer):
    (group, probe name, answered) for each."""
    out = []
    for group in groups:
        name = probe_name(group.zone)
        register(name)
        answered = False
        for _ in range(attempts):
            if await send(name):
                answered = True
                break
        out.append((group, name, answered))
    return out
