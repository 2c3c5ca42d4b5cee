// The fields software steering matches on, read from a received Ethernet frame: up to two VLAN
// tags, then IPv4 and its UDP or TCP ports. Bounds-checked against the frame length; anything
// it cannot read leaves `ipv4` false (only a catch-all flow takes such frames).
#pragma once

#include <cstddef>
#include <cstdint>

#include "daqiri/abi.h"

namespace daqiri::core {

// A descriptor's payload_offset for a frame the daemon did not read: the only flow of its queue
// takes every frame (the client finds the payload), or the frame is in GPU memory (gpudirect
// pools: the gpu engine finds it on the GPU before a consumer sees it).
inline constexpr uint16_t kPayloadOffsetUnread = DAQIRI_PAYLOAD_UNREAD;

struct PacketFields {
  static constexpr uint8_t kTcp = 6;
  static constexpr uint8_t kUdp = 17;

  bool ipv4 = false;
  uint8_t protocol = 0;
  uint32_t src_ip = 0;  // host byte order
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;  // UDP/TCP, host byte order; 0 for first fragments' followers
  uint16_t dst_port = 0;
  uint16_t payload_offset = 0;  // UDP payload within the frame; 0 when not UDP

  [[gnu::always_inline]] static PacketFields parse(const std::byte* frame, uint32_t length) {
    PacketFields p;
    const auto* f = reinterpret_cast<const uint8_t*>(frame);
    auto u16 = [f](uint32_t at) { return static_cast<uint16_t>(f[at] << 8 | f[at + 1]); };
    auto u32 = [&u16](uint32_t at) { return uint32_t{u16(at)} << 16 | u16(at + 2); };
    // The walk to the IPv4 header, and the payload rule below, are the ABI's (abi.h), which
    // clients use for frames the daemon did not read: both must find the same payload.
    uint32_t at = daqiri_ipv4_header_offset(f, length);
    if (at == 0) return p;
    p.ipv4 = true;
    p.protocol = f[at + 9];
    p.src_ip = u32(at + 12);
    p.dst_ip = u32(at + 16);
    bool later_fragment = (u16(at + 6) & 0x1fff) != 0;
    uint32_t l4 = at + uint32_t(f[at] & 0x0f) * 4;
    if (later_fragment || length < l4 + 4) return p;
    if (p.protocol == kUdp || p.protocol == kTcp) {
      p.src_port = u16(l4);
      p.dst_port = u16(l4 + 2);
    }
    if (p.protocol == kUdp && length >= l4 + 8) p.payload_offset = static_cast<uint16_t>(l4 + 8);
    return p;
  }
};

}  // namespace daqiri::core
