"""The hot table: the dict the hit paths read (`view`), written only through its methods; what each
returns is what it did (the log lines and counts of dropped answers are made of it)."""

from __future__ import annotations

from array import array

import dns.message
import dns.rrset

from nodedns.dns.hot import TTL_FLAG, HotTable, is_template, live, rendered, with_ttls


def test_the_writes_are_seen_in_the_view_the_hit_paths_read_and_pops_say_what_they_dropped() -> None:
    hot = HotTable()
    view = hot.view  # read by the hit paths once, kept: every write must land in this very dict
    hot.put(b"a", b"1")
    hot.put_many({b"b": b"2", b"c": b"3"})
    assert view == {b"a": b"1", b"b": b"2", b"c": b"3"} and hot.view is view
    assert len(hot) == 3 and b"b" in hot and hot.get(b"c") == b"3" and hot.get(b"x") is None
    assert hot.pop(b"a") == b"1" and hot.pop(b"a") is None  # what was served, then nothing
    assert hot.pop_many([b"b", b"absent", b"b"]) == 1  # only the keys that were served count
    assert hot.pop_many([]) == 0
    assert view == {b"c": b"3"}
    hot.put(b"c", b"4")  # replaced, not added
    assert view == {b"c": b"4"} and len(hot) == 1


def _answer(ttls: list[int]) -> tuple[bytes, array[int]]:
    """A stored answer (ID 0, byte 0 a label slot) of www.example.com with one A record per TTL."""
    msg = dns.message.make_response(dns.message.make_query("www.example.com.", "A"))
    msg.id = 0
    for i, ttl in enumerate(ttls):
        msg.answer.append(dns.rrset.from_text("www.example.com.", ttl, "IN", "A", f"192.0.2.{i + 1}"))
    wire = bytearray(msg.to_wire())
    wire[0] = 7  # the label slot
    offsets = array("H")
    pos = len(dns.message.make_query("www.example.com.", "A").to_wire())
    for _ in ttls:  # each record: a compression pointer (2), type, class (4), then the TTL
        offsets.append(pos + 6)
        pos += 16
    return bytes(wire), offsets


def test_a_template_is_sent_with_the_seconds_it_has_left_and_never_at_its_expiry() -> None:
    wire, offsets = _answer([300, 60])
    t = with_ttls(wire, offsets, 1030)
    assert is_template(t) and t[0] == 7 and t[1] == TTL_FLAG and not is_template(wire)
    for second, left in ((1000, 30), (1029, 1)):
        out = live(t, second)
        assert out is not None and len(out) == len(wire) and out[0] == 7 and out[1] == 0
        msg = dns.message.from_wire(out)
        assert [rrset.ttl for rrset in msg.answer] == [left]  # both records: the seconds left, one rrset
        assert out[:2] + out[2:] == rendered(t, left)
    assert live(t, 1030) is None and live(t, 1031) is None  # its expiry second: no answer (the slow path's)
    assert live(wire, 5000) is wire and rendered(wire, 5) is wire  # any other stored answer as it is
    empty = with_ttls(wire, array("H"), 1001)  # no TTL to set (an answer without records): still expires
    assert live(empty, 1000) == wire[:1] + b"\0" + wire[2:] and live(empty, 1001) is None


def test_get_gives_a_template_as_it_is_sent_by_the_table_s_clock() -> None:
    now = [1000.9]
    hot = HotTable(clock=lambda: now[0])
    wire, offsets = _answer([300])
    t = with_ttls(wire, offsets, 1010)
    hot.put(b"k", t)
    assert hot.view[b"k"] is t  # the hit paths read the template itself
    got = hot.get(b"k")
    assert got is not None and dns.message.from_wire(got).answer[0].ttl == 10  # whole seconds: 1010 - 1000
    now[0] = 1009.5
    assert dns.message.from_wire(hot.get(b"k") or b"").answer[0].ttl == 1
    now[0] = 1010.0
    assert hot.get(b"k") is None and b"k" in hot  # expired: no answer, though still stored until its look
    hot.put(b"plain", wire)
    assert hot.get(b"plain") is wire
