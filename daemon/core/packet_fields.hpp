// The fields software steering matches on, read from a received Ethernet frame: up to two VLAN
// tags, then IPv4 and its UDP or TCP ports. Bounds-checked against the frame length; anything
// it cannot read leaves `ipv4` false (only a catch-all flow takes such frames).
#pragma once

#include <cstddef>
#include <cstdint>

namespace daqiri::core {

// A descriptor's payload_offset while its frame is in GPU memory, never read by the daemon
// (gpudirect pools): the gpu engine finds the offset on the GPU before a consumer sees it.
inline constexpr uint16_t kPayloadOffsetUnread = 0xffff;

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
    auto u8 = [frame](uint32_t at) { return static_cast<uint8_t>(frame[at]); };
    auto u16 = [&u8](uint32_t at) { return static_cast<uint16_t>(u8(at) << 8 | u8(at + 1)); };
    auto u32 = [&u16](uint32_t at) { return uint32_t{u16(at)} << 16 | u16(at + 2); };
    uint32_t at = 12;
    if (length < at + 2) return p;
    uint16_t type = u16(at);
    for (int tags = 0; tags < 2 && (type == 0x8100 || type == 0x88a8); ++tags) {
      at += 4;
      if (length < at + 2) return p;
      type = u16(at);
    }
    at += 2;
    if (type != 0x0800 || length < at + 20 || (u8(at) >> 4) != 4) return p;
    uint32_t ihl = uint32_t(u8(at) & 0x0f) * 4;
    if (ihl < 20 || length < at + ihl) return p;
    p.ipv4 = true;
    p.protocol = u8(at + 9);
    p.src_ip = u32(at + 12);
    p.dst_ip = u32(at + 16);
    bool later_fragment = (u16(at + 6) & 0x1fff) != 0;
    uint32_t l4 = at + ihl;
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
