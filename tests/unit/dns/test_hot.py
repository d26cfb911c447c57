"""The hot table: the dict the hit paths read (`view`), written only through its methods; what each
returns is what it did (the log lines and counts of dropped answers are made of it)."""

from __future__ import annotations

from nodedns.dns.hot import HotTable


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
