"""Read-only capture of one port's DNS traffic: an AF_PACKET socket, a classic BPF filter, and the packet parser.

`open_capture(interface, port)` opens a `SOCK_DGRAM` packet socket (the kernel strips the link
header, so the filter and the parser see the IP header first on every link type: Ethernet, veth,
loopback, tunnels) with a classic BPF program (`port_filter`, attached with SO_ATTACH_FILTER) that
keeps IPv4 and IPv6 UDP and TCP packets from or to `port` (IPv4 fragments after the first are
dropped: they carry no ports), then binds it to the interface ("any": every interface). It needs
CAP_NET_RAW and nothing else; it never sends.

`parse_packet(data)` turns one packet into a `Segment` (addresses, ports, transport, payload) or
None for anything it cannot read: a truncated or inconsistent header, an IPv4 fragment, an IPv6
fragment header, another transport. It never raises on any byte string (tests fuzz it).
`dns_messages(segment)` gives the whole DNS messages a segment carries: a UDP payload is one; a TCP
payload holds 2-byte-length-prefixed messages, and only those wholly inside this one segment are
read (no stream reassembly: a message split over segments is skipped and counted by the caller).

Loopback: the kernel hands a packet socket every loopback packet twice, once leaving
(PACKET_OUTGOING) and once arriving (PACKET_HOST). The filter drops the outgoing copy on a loopback
link (ARPHRD_LOOPBACK) in the kernel, so the reader needs no address per packet (`recv`, not
`recvfrom`: Python's packet address costs an ioctl per packet); `duplicate(pkttype, hatype)` is the
same rule for a reader that has the address. On any other link a packet is seen once
per direction it crosses, so both directions are kept (a response leaving towards a Pod's veth is
PACKET_OUTGOING there and is the only copy).
"""

from __future__ import annotations

import ctypes
import socket
import struct
from typing import NamedTuple

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
SO_ATTACH_FILTER = 26
SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_OUTGOING = 4
ARPHRD_LOOPBACK = 772
IPPROTO_TCP = 6
IPPROTO_UDP = 17
SNAPLEN = 0x40000  # bytes of a packet the filter keeps (a TSO/GRO segment on loopback can reach 64 KiB)
ANY = "any"

# classic BPF opcodes (linux/filter.h)
_LD_H_ABS = 0x28
_LD_B_ABS = 0x30
_LD_H_IND = 0x48
_LDX_B_MSH = 0xB1
_JEQ_K = 0x15
_JSET_K = 0x45
_RET_K = 0x06
_LD_W_ABS = 0x20
_SKF_AD_PROTOCOL = 0xFFFFF000  # SKF_AD_OFF + SKF_AD_PROTOCOL: skb->protocol (the ethertype)
_SKF_AD_PKTTYPE = 0xFFFFF004  # SKF_AD_OFF + SKF_AD_PKTTYPE: PACKET_HOST, PACKET_OUTGOING, ...
_SKF_AD_HATYPE = 0xFFFFF01C  # SKF_AD_OFF + SKF_AD_HATYPE: the device's ARPHRD_* type

# IPv6 extension headers the parser steps over (hop-by-hop, routing, destination options)
_V6_SKIPPABLE = frozenset((0, 43, 60))
# an IPv4 header's version/IHL, total length, flags/fragment offset, protocol, source, destination
_V4_HEAD = struct.Struct("!BxH2xHxB2x4s4s")
_PORTS = struct.Struct("!HHH")  # a UDP or TCP header's ports (and UDP's length)
_ADDRESSES: dict[bytes, str] = {}  # packed address -> text: a node's DNS traffic comes from few
_ADDRESSES_MAX = 4096


class Segment(NamedTuple):
    """One captured transport segment: who sent it to whom, UDP or TCP, and its payload."""

    src: str
    sport: int
    dst: str
    dport: int
    tcp: bool
    payload: bytes


def port_filter(port: int) -> list[tuple[int, int, int, int]]:
    """The BPF program (code, jt, jf, k) keeping IPv4/IPv6 UDP and TCP packets from or to `port`.

    Offsets are from the IP header (a SOCK_DGRAM packet socket). IPv6 extension headers are not
    walked by the filter: such packets are rare on port 53 and are dropped."""
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is not a port")
    # labels are instruction indexes; each jump's jt/jf is relative to the next instruction
    prog: list[tuple[int, object, object, int]] = [
        (_LD_W_ABS, 0, 0, _SKF_AD_PKTTYPE),        # 0 loopback's outgoing copy: dropped here (`duplicate`)
        (_JEQ_K, 0, "proto", PACKET_OUTGOING),     # 1
        (_LD_W_ABS, 0, 0, _SKF_AD_HATYPE),         # 2
        (_JEQ_K, "drop", "proto", ARPHRD_LOOPBACK),  # 3
        (_LD_H_ABS, 0, 0, _SKF_AD_PROTOCOL),       # 4 proto: the ethertype
        (_JEQ_K, "v4", 0, ETH_P_IP),               # 5
        (_JEQ_K, "v6", "drop", ETH_P_IPV6),        # 6
        (_LD_B_ABS, 0, 0, 9),                      # 7 v4: protocol
        (_JEQ_K, "v4frag", 0, IPPROTO_UDP),        # 8
        (_JEQ_K, "v4frag", "drop", IPPROTO_TCP),   # 9
        (_LD_H_ABS, 0, 0, 6),                      # 10 v4frag: flags + fragment offset
        (_JSET_K, "drop", 0, 0x1FFF),              # 11 a later fragment: no ports in it
        (_LDX_B_MSH, 0, 0, 0),                     # 12 X = header length
        (_LD_H_IND, 0, 0, 0),                      # 13 source port
        (_JEQ_K, "accept", 0, port),               # 14
        (_LD_H_IND, 0, 0, 2),                      # 15 destination port
        (_JEQ_K, "accept", "drop", port),          # 16
        (_LD_B_ABS, 0, 0, 6),                      # 17 v6: next header
        (_JEQ_K, "v6ports", 0, IPPROTO_UDP),       # 18
        (_JEQ_K, "v6ports", "drop", IPPROTO_TCP),  # 19
        (_LD_H_ABS, 0, 0, 40),                     # 20 v6ports: source port
        (_JEQ_K, "accept", 0, port),               # 21
        (_LD_H_ABS, 0, 0, 42),                     # 22 destination port
        (_JEQ_K, "accept", "drop", port),          # 23
        (_RET_K, 0, 0, SNAPLEN),                   # 24 accept
        (_RET_K, 0, 0, 0),                         # 25 drop
    ]
    labels = {"proto": 4, "v4": 7, "v4frag": 10, "v6": 17, "v6ports": 20, "accept": 24, "drop": 25}
    out: list[tuple[int, int, int, int]] = []
    for i, (code, jt, jf, k) in enumerate(prog):
        jt_off = labels[jt] - i - 1 if isinstance(jt, str) else int(str(jt))
        jf_off = labels[jf] - i - 1 if isinstance(jf, str) else int(str(jf))
        out.append((code, jt_off, jf_off, k))
    return out


def attach_filter(sock: socket.socket, program: list[tuple[int, int, int, int]]) -> None:
    """SO_ATTACH_FILTER: the kernel copies the program, so the buffer lives only for the call."""
    raw = b"".join(struct.pack("HBBI", code, jt, jf, k) for code, jt, jf, k in program)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = struct.pack("HL", len(program), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def open_capture(interface: str, port: int, *, rcvbuf: int = 4 << 20) -> socket.socket:
    """A non-blocking packet socket seeing `port`'s UDP and TCP traffic on `interface` ("any": all).
    OSError (EPERM without CAP_NET_RAW, ENODEV for an interface that does not exist)."""
    if interface == ANY:
        # bound to every interface from the start; packets queued before the filter is attached are
        # filtered by the parser's port check (parse_packet's caller) like any other
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    else:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, 0)  # protocol 0: nothing until bound
    try:
        attach_filter(sock, port_filter(port))
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        except OSError:
            pass
        if interface != ANY:
            sock.bind((interface, ETH_P_ALL))
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def kernel_drops(sock: socket.socket) -> int:
    """Packets the kernel dropped for this socket since the last call (PACKET_STATISTICS resets them)."""
    try:
        raw = sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
    except OSError:
        return 0
    _packets, drops = struct.unpack("II", raw[:8])
    return int(drops)


def duplicate(pkttype: int, hatype: int) -> bool:
    """The second copy of a packet: loopback's outgoing one (the arriving copy is kept)."""
    return pkttype == PACKET_OUTGOING and hatype == ARPHRD_LOOPBACK


def parse_packet(data: bytes) -> Segment | None:
    """The UDP or TCP segment in an IP packet (from its IP header), or None when it is not one we read."""
    if not data:
        return None
    version = data[0] >> 4
    if version == 4:
        return _ipv4(data)
    if version == 6:
        return _ipv6(data)
    return None


def _ipv4(data: bytes) -> Segment | None:
    if len(data) < 20:
        return None
    vihl, total, frag, proto, src, dst = _V4_HEAD.unpack_from(data)
    ihl = (vihl & 0x0F) * 4
    if ihl < 20 or total < ihl or total > len(data):
        return None
    if frag & 0x3FFF:  # more fragments, or a later fragment: not a whole datagram
        return None
    return _transport(proto, _text(src, socket.AF_INET), _text(dst, socket.AF_INET), data, ihl, total)


def _text(packed: bytes, family: int) -> str:
    """An address as text (remembered: inet_ntop per packet is a good part of reading one)."""
    text = _ADDRESSES.get(packed)
    if text is None:
        if len(_ADDRESSES) >= _ADDRESSES_MAX:
            _ADDRESSES.clear()
        text = _ADDRESSES[packed] = socket.inet_ntop(family, packed)
    return text


def _ipv6(data: bytes) -> Segment | None:
    if len(data) < 40:
        return None
    end = 40 + ((data[4] << 8) | data[5])
    if end > len(data):
        return None
    nh = data[6]
    pos = 40
    while nh in _V6_SKIPPABLE:
        if pos + 8 > end:
            return None
        nh, pos = data[pos], pos + 8 * (data[pos + 1] + 1)
    if pos > end:
        return None
    return _transport(nh, _text(data[8:24], socket.AF_INET6), _text(data[24:40], socket.AF_INET6), data, pos, end)


def _transport(proto: int, src: str, dst: str, data: bytes, pos: int, end: int) -> Segment | None:
    if proto == IPPROTO_UDP:
        if end - pos < 8:
            return None
        sport, dport, length = _PORTS.unpack_from(data, pos)
        if length < 8 or pos + length > end:
            return None
        return Segment(src, sport, dst, dport, False, data[pos + 8:pos + length])
    if proto == IPPROTO_TCP:
        if end - pos < 20:
            return None
        offset = (data[pos + 12] >> 4) * 4
        if offset < 20 or pos + offset > end:
            return None
        sport, dport, _ = _PORTS.unpack_from(data, pos)
        return Segment(src, sport, dst, dport, True, data[pos + offset:end])
    return None


def dns_messages(segment: Segment) -> tuple[list[bytes], bool]:
    """(the whole DNS messages in the segment, whether a partial one was left out). A TCP segment
    without payload (a SYN, an ACK) holds none and leaves nothing out."""
    payload = segment.payload
    if not segment.tcp:
        return ([payload], False) if payload else ([], False)
    out: list[bytes] = []
    pos = 0
    n = len(payload)
    while pos + 2 <= n:
        length = (payload[pos] << 8) | payload[pos + 1]
        if length == 0 or pos + 2 + length > n:
            return out, True
        out.append(payload[pos + 2:pos + 2 + length])
        pos += 2 + length
    return out, pos != n
