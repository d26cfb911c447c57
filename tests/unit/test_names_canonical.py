"""nodedns.names: canonical IPs (the fast path agrees with ipaddress), pod labels, addresses and ports, names."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodedns.names import (
    canonical_ip,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_wire_name,
    name_problem,
    pod_label_to_ip,
    split_hostport,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.0.0.1", "10.0.0.1"),
        ("0.0.0.0", "0.0.0.0"),
        ("255.255.255.255", "255.255.255.255"),
        ("010.0.0.1", None),
        ("256.1.1.1", None),
        ("1.2.3", None),
        ("1.2.3.4.5", None),
        ("\u0661.2.3.4", None),
        ("::ffff:1.2.3.4", "1.2.3.4"),
        ("2001:DB8:0:0::1", "2001:db8::1"),
    ],
    ids=["plain", "zeros", "broadcast", "leading-zero", "octet-too-big", "three-parts", "five-parts",
         "arabic-digit", "v4-mapped", "v6-compressed"],
)
def test_canonical_ip_gives_gos_form_or_none(text: str, expected: str | None) -> None:
    assert canonical_ip(text) == expected


def test_canonical_ip_fast_path_agrees_with_ipaddress_on_every_octet() -> None:
    for octet in range(256):
        text = f"10.{octet}.{255 - octet}.{octet}"
        assert canonical_ip(text) == str(ipaddress.ip_address(text))


@pytest.mark.parametrize(("label", "ip"), [
    ("10-0-0-1", "10.0.0.1"),
    ("fd00--1", "fd00::1"),
    ("fd00--1-2", "fd00::1:2"),  # three dashes, one of them doubled: IPv6, as CoreDNS reads it
    ("2001-db8--0", "2001:db8::"),
    ("10-0-0", None),
    ("10-0-0-1-2", None),
    ("a-b-c-d", None),
], ids=["ipv4", "ipv6", "ipv6-with-three-dashes", "ipv6-trailing-zero", "three-parts", "five-parts", "letters"])
def test_a_pod_records_first_label_reads_as_coredns_reads_it(label: str, ip: str | None) -> None:
    assert pod_label_to_ip(label) == ip


@pytest.mark.parametrize(("text", "expected"), [
    ("10.0.0.1", ("10.0.0.1", 53)),
    ("10.0.0.1:65535", ("10.0.0.1", 65535)),
    ("[2001:DB8::1]:5353", ("2001:db8::1", 5353)),
    ("2001:db8::1", ("2001:db8::1", 53)),
    ("10.0.0.1:65536", ValueError),
    ("10.0.0.1:-1", ValueError),
    ("[::1]x", ValueError),
    ("dns.example:53", ValueError),
    ("", ValueError),
], ids=["no-port", "highest-port", "bracketed-v6", "bare-v6", "port-too-big", "negative-port", "garbage-after-bracket",
        "a-name", "empty"])
def test_an_address_and_port_are_read_or_refused(text: str, expected: tuple[str, int] | type[Exception]) -> None:
    if isinstance(expected, tuple):
        assert split_hostport(text, 53) == expected
    else:
        with pytest.raises(expected):
            split_hostport(text, 53)


def test_a_subdomain_of_253_characters_is_one_and_254_is_not() -> None:
    name = ".".join(["a" * 63] * 3 + ["b" * 61])
    assert len(name) == 253 and is_dns1123_subdomain(name)
    assert not is_dns1123_subdomain(name + "b")


@pytest.mark.parametrize("text", ["web\n", "web\r", "\nweb", "we b", "web.", "-web", "web-", "a" * 64, ""])
def test_a_label_with_a_newline_or_out_of_shape_is_no_dns_label(text: str) -> None:
    assert not is_dns1123_label(text) and not is_dns1035_label(text)
    assert not is_dns1123_subdomain(f"{text}.example") and not is_dns1123_subdomain(f"example.{text}")


def test_labels_of_the_allowed_shapes_are_dns_labels() -> None:
    assert is_dns1123_label("web-0") and is_dns1123_label("0web") and is_dns1123_label("a" * 63)
    assert is_dns1035_label("web-0") and not is_dns1035_label("0web")
    assert is_dns1123_subdomain("web-0.db.example")


_NAME_PARTS = ["a", "b0", "-", "_", "xn--bcher-kva", "x" * 63, "y" * 64, "", ".", "..", "é", "A", " ", "\n", "k",
               "\u212a"]


@pytest.mark.parametrize("name", ["a.example", "a" * 63 + ".b", ".".join(["a" * 63] * 4), ".".join(["a" * 62] * 4),
                                  "a..b", ".a", "a.", "", "é.example", "a b", "a\n", "_dmarc.x", "A.example"])
def test_the_one_match_check_of_a_name_agrees_with_name_problem(name: str) -> None:
    """--hosts checks each name with `is_wire_name` (one match) and asks `name_problem` only for the reason."""
    assert is_wire_name(name) == (name_problem(name) is None)


@given(st.lists(st.sampled_from(_NAME_PARTS), max_size=12).map("".join))
def test_the_one_match_check_agrees_with_name_problem_on_any_name(name: str) -> None:
    assert is_wire_name(name) == (name_problem(name) is None)
