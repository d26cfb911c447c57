"""names.canonical_ip: the fast path for canonical dotted quads agrees with the ipaddress path."""

from __future__ import annotations

import ipaddress

import pytest

from nodedns.names import canonical_ip


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
