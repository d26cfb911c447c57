"""The parts a mode chooses: the one process's warm state (`LocalWarm`) across a hand-over."""

from __future__ import annotations

import json
import logging
import struct

import dns.message
import dns.rrset
import pytest

from nodedns.app.parts import WARM_CACHE, WARM_EDNS, LocalWarm
from nodedns.dns.hot import HotTable
from nodedns.dns.keys import fast_key
from nodedns.forward.store import _WARM_ENTRY, WARM_MAGIC, ForwardCache


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def exported(clock: Clock, names: list[str]) -> bytes:
    cache = ForwardCache(hot=HotTable(), clock=clock)
    for name in names:
        q = dns.message.make_query(name, "A")
        r = dns.message.make_response(q)
        r.answer.append(dns.rrset.from_text(name + ".", 300, "IN", "A", "192.0.2.1"))
        fk = fast_key(q.to_wire())
        assert fk is not None
        cache.admit(fk[0], r.to_wire())
    return cache.export()


def test_a_part_with_an_infinite_expiry_is_skipped_with_one_line_and_the_others_load(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    bad = bytearray(exported(clock, ["a.example.com", "b.example.com"]))
    fields = list(_WARM_ENTRY.unpack_from(bad, len(WARM_MAGIC)))
    fields[3] = float("inf")  # the expiry: OverflowError in math.floor if it got that far
    _WARM_ENTRY.pack_into(bad, len(WARM_MAGIC), *fields)
    good = exported(clock, ["c.example.com"])
    cache = ForwardCache(hot=HotTable(), clock=clock)
    warm = LocalWarm(forward_cache=cache, forwarder=None)
    with caplog.at_level(logging.WARNING):
        entries, edns = warm.load([WARM_CACHE + bytes(bad), WARM_CACHE + good, WARM_EDNS + b"{not json",
                                   WARM_CACHE + b"\xff" * 40])
    assert (entries, edns) == (1, 0)  # the intact part only
    lines = [r.getMessage() for r in caplog.records if "cannot be used" in r.getMessage()]
    assert len(lines) == 2 and "out of range" in lines[0] and "skipped" in lines[0]  # the EDNS part has no forwarder
    assert cache.bytes_used() > 0 and len(cache.success) == 1  # type: ignore[arg-type]


def test_every_failure_of_a_part_is_caught(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    data = bytearray(exported(clock, ["a.example.com"]))
    struct.pack_into("=I", data, len(data) - 4, 7)  # the count at the end says 7
    cache = ForwardCache(hot=HotTable(), clock=clock)
    with caplog.at_level(logging.WARNING):
        assert LocalWarm(forward_cache=cache, forwarder=None).load([WARM_CACHE + bytes(data)]) == (0, 0)
    assert cache.bytes_used() == 0
    assert json.dumps([r.getMessage() for r in caplog.records]).count("cannot be used") == 1
