"""Ethernet/IPv4/UDP frames for TX, and parsing them back (what client/include/daqiri/frame.hpp
does for C++)."""
import ipaddress
import struct

import numpy as np

ETH_HEADER, IPV4_HEADER, UDP_HEADER = 14, 20, 8
UDP_HEADERS = ETH_HEADER + IPV4_HEADER + UDP_HEADER  # 42

_ETH = struct.Struct("!6s6sH")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")


def _checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_headers(src, dst, payload_length, src_mac=b"\0" * 6, dst_mac=b"\0" * 6, ttl=64):
    """The 42 header bytes of a frame carrying `payload_length` bytes from `src` to `dst`
    ((address, port) pairs). UDP checksum 0 (none), IPv4 checksum filled in."""
    total = IPV4_HEADER + UDP_HEADER + payload_length
    ip = _IPV4.pack(0x45, 0, total, 0, 0x4000, ttl, 17, 0,
                    ipaddress.IPv4Address(src[0]).packed, ipaddress.IPv4Address(dst[0]).packed)
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    return _ETH.pack(dst_mac, src_mac, 0x0800) + ip + _UDP.pack(src[1], dst[1], UDP_HEADER + payload_length, 0)


def write_udp(buf, src, dst, payload):
    """Writes a whole frame into `buf` (a writable uint8 array, e.g. TxBuffer.data); returns
    its length."""
    payload = np.frombuffer(payload, np.uint8) if not isinstance(payload, np.ndarray) else payload.view(np.uint8).ravel()
    n = UDP_HEADERS + len(payload)
    if n > len(buf):
        raise ValueError(f"a {n}-byte frame does not fit a {len(buf)}-byte buffer")
    buf[:UDP_HEADERS] = np.frombuffer(udp_headers(src, dst, len(payload)), np.uint8)
    buf[UDP_HEADERS:n] = payload
    return n


def parse_udp(frame):
    """((src address, port), (dst address, port), payload) of an Ethernet/IPv4/UDP frame (a
    uint8 array or bytes; the payload is a slice of it), or None when it is not one."""
    if len(frame) < UDP_HEADERS:
        return None
    head = bytes(frame[:UDP_HEADERS])
    ip = _IPV4.unpack_from(head, ETH_HEADER)
    if _ETH.unpack_from(head)[2] != 0x0800 or ip[0] != 0x45 or ip[6] != 17:
        return None
    sport, dport, ulen, _ = _UDP.unpack_from(head, ETH_HEADER + IPV4_HEADER)
    end = ETH_HEADER + IPV4_HEADER + max(ulen, UDP_HEADER)
    return ((str(ipaddress.IPv4Address(ip[8])), sport), (str(ipaddress.IPv4Address(ip[9])), dport),
            frame[UDP_HEADERS:end])


def udp_payload_offset(frame):
    """Where the UDP payload of an Ethernet frame (a uint8 array or bytes) starts, as daqirid
    finds it for a descriptor's payload_offset (abi.h's daqiri_udp_payload_offset): past up to
    two VLAN tags, an IPv4 header of its own length that is not a later fragment, and the UDP
    header; 0 when the frame is not that."""
    head = bytes(frame[:82])  # the deepest it looks: 2 tags, 60 bytes of IPv4, 8 of UDP
    n = len(frame)
    at = 12
    if n < at + 2:
        return 0
    kind = head[at] << 8 | head[at + 1]
    tags = 0
    while tags < 2 and kind in (0x8100, 0x88A8):
        at += 4
        tags += 1
        if n < at + 2:
            return 0
        kind = head[at] << 8 | head[at + 1]
    at += 2
    if kind != 0x0800 or n < at + 20 or head[at] >> 4 != 4:
        return 0
    ihl = (head[at] & 0x0F) * 4
    if ihl < 20 or n < at + ihl:
        return 0
    l4 = at + ihl
    fragment = (head[at + 6] << 8 | head[at + 7]) & 0x1FFF
    if fragment != 0 or head[at + 9] != 17 or n < l4 + 8:
        return 0
    return l4 + 8
