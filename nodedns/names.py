"""DNS name and address helpers shared by the index, the records and the resolver (pure, stdlib only).

Names inside nodedns are lowercase, absolute and written without the trailing dot
(`web.default.svc.cluster.local`); the root is the empty string. IP addresses are kept in the
canonical text form Go's `net.IP.String` prints (what CoreDNS compares against), which is
`ipaddress`'s compressed form except that an IPv4-mapped IPv6 address prints as IPv4.
"""

from __future__ import annotations

import ipaddress
import re

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# An IPv4 address already in canonical form (no leading zeros): the common case, checked fast.
_V4_CANONICAL = re.compile(r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
                           r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])")
# RFC 1123 label (Kubernetes namespace / service-name shape, lowercased by the caller). Matched whole
# (fullmatch): `$` would let a trailing newline through ("web\n"), which no DNS name may hold.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# RFC 1035 label: starts with a letter (Kubernetes Service names).
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def is_dns1123_label(s: str) -> bool:
    return _DNS1123_LABEL.fullmatch(s) is not None


def is_dns1035_label(s: str) -> bool:
    return _DNS1035_LABEL.fullmatch(s) is not None


def is_dns1123_subdomain(s: str) -> bool:
    if not s or len(s) > 253:
        return False
    return all(_DNS1123_LABEL.fullmatch(label) for label in s.split("."))


MAX_NAME_TEXT = 253  # a name in text, without the trailing dot: 255 octets on the wire
MAX_LABEL = 63
# What a label of a host name we put on the wire may hold (RFC 1123, and the underscore of service
# labels such as `_dmarc`): the characters the hand-written packer in nodedns.dns.wire writes as they are.
_WIRE_LABEL = re.compile(r"[a-z0-9_-]+")
# A whole name `name_problem` finds nothing wrong with, in one match (length checked apart)
_WIRE_NAME = re.compile(r"[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*")


def is_wire_name(name: str) -> bool:
    """`name_problem(name) is None`, in one regular expression match: for the many names of a file."""
    return len(name) <= MAX_NAME_TEXT and _WIRE_NAME.fullmatch(name) is not None


def name_problem(name: str) -> str | None:
    """Why `name` (lowercase, no trailing dot) cannot be put on the wire as a host name, or None when it can.

    The rules the wire format and the zone need: at most 253 characters as text (255 octets on the
    wire), labels of 1 to 63 octets (no empty label: `a..b.com`), ASCII letters, digits, `-` and `_`
    only (a name in another script is written in its IDNA form, `xn--...`). The reason names what
    broke, for a log line.
    """
    if not name:
        return "the name is empty"
    if not name.isascii():
        return "not ASCII (a name in another script must be given in its IDNA form, xn--...)"
    if len(name) > MAX_NAME_TEXT:
        return f"{len(name)} characters, more than {MAX_NAME_TEXT}"
    for label in name.split("."):
        if not label:
            return "an empty label (two dots in a row, or a leading dot)"
        if len(label) > MAX_LABEL:
            return f"a label of {len(label)} characters, more than {MAX_LABEL} ({label[:16]}...)"
        if _WIRE_LABEL.fullmatch(label) is None:
            return f"the label {label!r} holds characters other than a-z, 0-9, '-' and '_'"
    return None


def normalize_name(name: str) -> str:
    """Lowercase a presentation-format name and drop the trailing dot (`Foo.Bar.` -> `foo.bar`)."""
    name = name.strip().lower()
    if name.endswith("."):
        name = name[:-1]
    return name


def is_subdomain(name: str, zone: str) -> bool:
    """True when `name` equals `zone` or lies below it (both normalized)."""
    if not zone:
        return True
    return name == zone or name.endswith("." + zone)


def relative_labels(name: str, zone: str) -> list[str]:
    """The labels of `name` left of `zone`, in order (`a.b.zone` -> ['a', 'b'])."""
    if name == zone:
        return []
    if not zone:
        return name.split(".") if name else []
    return name[: -(len(zone) + 1)].split(".")


def parse_ip(text: str) -> IPAddress | None:
    """An IP address from text, or None. Accepts no zone suffix and no surrounding brackets."""
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def canonical_ip(text: str) -> str | None:
    """The canonical text form of an IP (Go's net.IP.String), or None when it is not an IP."""
    if _V4_CANONICAL.fullmatch(text) is not None:
        return text  # 150,000 endpoints at start-up: skip ipaddress for what is canonical already
    ip = parse_ip(text)
    if ip is None:
        return None
    return canonical(ip)


def canonical_cidr(text: str) -> str | None:
    """`10.244.0.0/24` in canonical text (host bits cleared), or None when it is not a CIDR."""
    try:
        return str(ipaddress.ip_network(text.strip(), strict=False))
    except ValueError:
        return None


def canonical(ip: IPAddress) -> str:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def is_ipv6(canonical_text: str) -> bool:
    return ":" in canonical_text


def dashed_ip(ip: str) -> str:
    """The endpoint name CoreDNS gives an address without hostname: `10-0-0-1`, `2001-db8--0`."""
    if "." in ip:
        return ip.replace(".", "-")
    dashed = ip.replace(":", "-")
    if dashed.endswith("-"):
        dashed += "0"
    return dashed


def pod_label_to_ip(label: str) -> str | None:
    """The pod IP in a pod record's first label (`10-0-0-1`, `fd00--1`), canonical, or None.

    Like CoreDNS: exactly three dashes and no `--` means IPv4 (dashes become dots), anything else
    is read as IPv6 with dashes becoming colons.
    """
    if label.count("-") == 3 and "--" not in label:
        text = label.replace("-", ".")
    else:
        text = label.replace("-", ":")
    ip = parse_ip(text)
    if ip is None:
        return None
    return canonical(ip)


V4_REVERSE = "in-addr.arpa"
V6_REVERSE = "ip6.arpa"


def reverse_name(ip: str) -> str:
    """The PTR owner name of an IP: `1.0.0.10.in-addr.arpa` or the 32 nibbles under ip6.arpa."""
    addr = ipaddress.ip_address(ip)
    return normalize_name(addr.reverse_pointer)


def reverse_to_ip(name: str) -> str | None:
    """The canonical IP a complete reverse name stands for, or None for anything else.

    Incomplete names (fewer than 4 octets or 32 nibbles), labels that are not decimal octets or
    single hex nibbles, and leading zeros in octets all give None.
    """
    if name.endswith("." + V4_REVERSE):
        parts = name[: -len(V4_REVERSE) - 1].split(".")
        if len(parts) != 4:
            return None
        octets = []
        for p in reversed(parts):
            if not p.isdigit() or len(p) > 3 or (len(p) > 1 and p[0] == "0") or int(p) > 255:
                return None
            octets.append(p)
        return ".".join(octets)
    if name.endswith("." + V6_REVERSE):
        nibbles = name[: -len(V6_REVERSE) - 1].split(".")
        if len(nibbles) != 32 or any(len(n) != 1 or n not in "0123456789abcdef" for n in nibbles):
            return None
        hexstr = "".join(reversed(nibbles))
        packed = bytes.fromhex(hexstr)
        return canonical(ipaddress.IPv6Address(packed))
    return None


def split_hostport(text: str, default_port: int) -> tuple[str, int]:
    """`ADDR[:PORT]`, `[v6]:PORT` or a bare IPv6 address -> (address, port). Raises ValueError."""
    text = text.strip()
    if not text:
        raise ValueError("empty address")
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"unclosed '[' in {text!r}")
        host = text[1:end]
        rest = text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"garbage after ']' in {text!r}")
        port_text = rest[1:] if rest else ""
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, ""
    if parse_ip(host) is None:
        raise ValueError(f"{host!r} is not an IP address")
    if port_text:
        if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
            raise ValueError(f"bad port {port_text!r}")
        port = int(port_text)
    else:
        port = default_port
    return canonical_ip(host) or host, port
