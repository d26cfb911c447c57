"""A list body decoded item by item as it arrives: every split of the bytes gives the same items, in order,
each handed back as soon as it is complete, at most one item's tree alive, and a body that is not a
whole list is an ApiError."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodedns.cluster import listbody
from nodedns.cluster.listbody import ListBody
from nodedns.errors import ApiError


def body(items: list[Any], *, meta: dict[str, Any] | None = None, items_first: bool = False) -> bytes:
    head = {"kind": "ServiceList", "apiVersion": "v1", "metadata": meta or {"resourceVersion": "42"}}
    members = [f'"{k}":{json.dumps(v)}' for k, v in head.items()]
    listed = '"items":[' + ",".join(json.dumps(i) for i in items) + "]"
    return ("{" + ",".join([listed, *members] if items_first else [*members, listed]) + "}").encode()


def read(data: bytes, size: int) -> tuple[list[Any], ListBody]:
    reader = ListBody()
    out: list[Any] = []
    for at in range(0, len(data), size):
        out.extend(reader.feed(data[at:at + size]))
    out.extend(reader.close())
    return out, reader


ITEMS = [{"metadata": {"name": f"svc-{i}", "namespace": "défault", "labels": {"a": "}{\"],["}},
          "spec": {"clusterIP": f"10.96.0.{i}", "ports": [{"port": 53, "protocol": "UDP"}], "weight": 1.5e3}}
         for i in range(40)]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1000, 1 << 20], ids=lambda n: f"pieces-of-{n}")
def test_every_split_of_the_body_gives_the_items_in_order_and_the_head(size: int) -> None:
    items, reader = read(body(ITEMS), size)
    assert items == ITEMS
    assert reader.head == {"kind": "ServiceList", "apiVersion": "v1", "metadata": {"resourceVersion": "42"}}
    assert reader.items_seen == 40


def test_members_after_the_items_are_read_too() -> None:
    items, reader = read(body(ITEMS[:3], meta={"resourceVersion": "7", "continue": "abc"}, items_first=True), 5)
    assert items == ITEMS[:3]
    assert reader.head["metadata"] == {"resourceVersion": "7", "continue": "abc"}


@pytest.mark.parametrize(("data", "expected"), [
    (b'{"metadata":{"resourceVersion":"1"},"items":[]}', []),
    (b' {\n "metadata" : {"resourceVersion":"1"} ,\r\n "items" : [ {"a":1} , {"b":[2]} ] } \n', [{"a": 1}, {"b": [2]}]),
    (b'{"metadata":{"resourceVersion":"1"},"items":null}', []),
    (b'{"items":[{"n":12345}],"x":67890}', [{"n": 12345}]),
], ids=["empty", "white-space-everywhere", "items-null", "numbers-split-anywhere"])
def test_json_as_servers_write_it(data: bytes, expected: list[Any]) -> None:
    for size in (1, 3, len(data)):
        assert read(data, size)[0] == expected


def test_a_number_at_the_end_of_a_piece_waits_for_the_rest() -> None:
    reader = ListBody()
    assert list(reader.feed(b'{"items":[],"count":12')) == []
    assert list(reader.feed(b"34}")) == []
    assert list(reader.close()) == []
    assert reader.head["count"] == 1234


def test_an_item_is_handed_back_once_it_is_complete_and_the_buffer_has_doubled_or_the_body_ended() -> None:
    reader = ListBody()
    assert list(reader.feed(b'{"metadata":{"resourceVersion":"1"},"items":[{"a":1},{"b"')) == [{"a": 1}]
    assert list(reader.feed(b":2}")) == []  # 4 characters were pending: tried again at 8
    assert list(reader.feed(b",{")) == [{"b": 2}]
    assert list(reader.feed(b'"c":3')) == []  # "{" was pending: tried again at 2, still incomplete; next at 12
    assert list(reader.feed(b"}")) == []
    assert list(reader.feed(b"]}")) == []
    assert list(reader.close()) == [{"c": 3}]


def test_each_item_is_decoded_only_when_the_one_before_was_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller slims each item before the next is decoded: a piece holding many items never becomes a
    list of their trees at once."""
    decoded = 0
    real = listbody._decode

    def counting(s: str, idx: int) -> Any:
        nonlocal decoded
        decoded += 1
        return real(s, idx)

    monkeypatch.setattr(listbody, "_decode", counting)
    reader = ListBody()
    taken = 0
    for _ in reader.feed(body([{"metadata": {"name": str(i)}} for i in range(200)])):  # one piece holding all 200
        taken += 1
        assert decoded <= taken + 8  # this item, and the head's names and values before the items
    assert list(reader.close()) == []
    assert taken == reader.items_seen == 200


@pytest.mark.parametrize(("data", "message"), [
    (b"<html>proxy error</html>", "not a JSON object"),
    (b'{"metadata":{"resourceVersion":"1"},"items":[{"a":1}', "ended early"),
    (b'{"metadata":{"resourceVersion":"1"},"items":[{"a":1},]}', "']' after a ','"),
    (b'{"metadata":{"resourceVersion":"1"},"items":[{"a":1} {"b":2}]}', "',' or ']' expected"),
    (b'{"metadata":{"resourceVersion":"1"} "items":[]}', "',' or '}' expected"),
    (b'{"metadata" {"resourceVersion":"1"}}', "':' expected"),
    (b'{metadata:1}', "member name expected"),
    (b'{"items":[]} trailing', "bytes after its end"),
    (b"{}x", "bytes after its end"),
    (b'{"items":[{"a":tru}]}', "Expecting value"),
    (b'{"items":["\xff"]}', "not UTF-8"),
], ids=["html", "cut-short", "trailing-comma", "missing-comma", "missing-member-comma", "missing-colon",
        "bare-name", "trailing-bytes", "a-byte-after-an-empty-object", "bad-literal", "not-utf8"])
def test_a_body_that_is_not_a_whole_list_is_an_error(data: bytes, message: str) -> None:
    with pytest.raises(ApiError, match=message):
        read(data, 4)


def test_an_item_larger_than_the_bound_is_an_error_before_it_is_all_read() -> None:
    reader = ListBody(max_item=1000)
    list(reader.feed(b'{"items":[{"pad":"'))
    with pytest.raises(ApiError, match="over 1000 characters"):
        for _ in range(10):
            list(reader.feed(b"x" * 300))


def test_a_large_item_is_decoded_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """An item arriving in many small pieces is tried again only when what is buffered has doubled: the work
    stays linear in its size."""
    attempts = 0
    real = listbody._decode

    def counting(s: str, idx: int) -> Any:
        nonlocal attempts
        attempts += 1
        return real(s, idx)

    monkeypatch.setattr(listbody, "_decode", counting)
    items, _ = read(body([{"pad": "y" * 200_000}]), 100)
    assert items == [{"pad": "y" * 200_000}]
    assert attempts < 40  # 2,000 pieces: about log2(2,000) tries, not one per piece


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(items=st.lists(st.dictionaries(st.text(max_size=6), json_values, max_size=4), max_size=8),
       cuts=st.lists(st.integers(1, 50), min_size=1, max_size=30))
def test_any_list_split_anywhere_reads_back_whole(items: list[dict[str, Any]], cuts: list[int]) -> None:
    data = body(items)
    reader = ListBody()
    out: list[Any] = []
    at = 0
    for n in cuts * (len(data) // max(1, sum(cuts)) + 1):
        if at >= len(data):
            break
        out.extend(reader.feed(data[at:at + n]))
        at += n
    out.extend(reader.close())
    assert out == items
    assert reader.head["metadata"] == {"resourceVersion": "42"}


def test_an_empty_object_is_a_list_of_nothing() -> None:
    for size in (1, 2):
        items, reader = read(b" { } ", size)
        assert items == [] and reader.head == {} and reader.items_seen == 0


def test_an_item_whose_last_byte_ends_a_piece_is_handed_back_with_that_piece() -> None:
    reader = ListBody()
    assert list(reader.feed(b'{"kind":"ServiceList","items":[{"a":1}')) == [{"a": 1}]
    assert list(reader.feed(b',"x",{"b":[2]}')) == ["x", {"b": [2]}]
    assert list(reader.feed(b"]}")) == []
    assert list(reader.close()) == []
    assert reader.head == {"kind": "ServiceList"}


def test_a_body_cut_inside_a_character_is_not_utf8_even_after_its_last_brace() -> None:
    reader = ListBody()
    assert list(reader.feed(b'{"items":[]}\xc3')) == []
    with pytest.raises(ApiError, match="not UTF-8"):
        list(reader.close())
