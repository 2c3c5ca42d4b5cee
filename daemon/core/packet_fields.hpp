// The fields software steering matches on, read from a received Ethernet frame: up to two VLAN
// tags, then IPv4 and its UDP or TCP ports, or an eCPRI common header. Bounds-checked against the
// frame length; anything it cannot read leaves `ipv4` and `ecpri` false (only a catch-all flow
// takes such frames).
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
  static constexpr uint16_t kEcpriEthertype = 0xaefe;

  bool ipv4 = false;
  bool ecpri = false;
  bool ecpri_has_id = false;  // the frame is long enough to hold PC_ID / RTC_ID
  uint8_t protocol = 0;
  uint8_t ecpri_type = 0;    // eCPRI message type
  uint16_t ecpri_id = 0;     // eCPRI PC_ID (types 0 and 1) or RTC_ID (type 2), host order
  uint16_t ipv4_length = 0;  // IPv4 total length
  uint32_t src_ip = 0;       // host byte order
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;  // UDP/TCP, host byte order; 0 for first fragments' followers
  uint16_t dst_port = 0;
  uint16_t payload_offset = 0;  // UDP payload within the frame; 0 when not UDP
  // The frame parsed, for matches on its payload bytes (flex items).
  const uint8_t* frame = nullptr;
  uint32_t length = 0;

  [[gnu::always_inline]] static PacketFields parse(const std::byte* frame, uint32_t length) {
    const auto* f = reinterpret_cast<const uint8_t*>(frame);
    // The walk to the IPv4 header, and the payload rule below, are the ABI's (abi.h), which
    // clients use for frames the daemon did not read: both must find the same payload.
    uint32_t at = daqiri_ipv4_header_offset(f, length);
    if (at == 0) [[unlikely]]
      return parse_ecpri(f, length);
    return parse_ipv4(f, length, at);
  }

  // The IPv4 header at `at` (found, at least 20 bytes, its IHL within `length`) and what
  // follows; f's bytes before `at` are not read.
  [[gnu::always_inline]] static PacketFields parse_ipv4(const uint8_t* f, uint32_t length,
                                                        uint32_t at) {
    PacketFields p;
    auto u16 = [f](uint32_t i) { return static_cast<uint16_t>(f[i] << 8 | f[i + 1]); };
    auto u32 = [&u16](uint32_t i) { return uint32_t{u16(i)} << 16 | u16(i + 2); };
    p.frame = f;
    p.length = length;
    p.ipv4 = true;
    p.protocol = f[at + 9];
    p.ipv4_length = u16(at + 2);
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

  // An eCPRI-over-Ethernet frame (EtherType 0xAEFE, after up to two VLAN tags): its message
  // type and, where the frame holds it, the identifier that follows the 4-byte common header.
  static PacketFields parse_ecpri(const uint8_t* f, uint32_t length) {
    PacketFields p;
    p.frame = f;
    p.length = length;
    auto u16 = [f](uint32_t i) { return static_cast<uint16_t>(f[i] << 8 | f[i + 1]); };
    uint32_t at = 12;
    if (length < at + 2) return p;
    uint16_t type = u16(at);
    for (int tags = 0; tags < 2 && (type == 0x8100 || type == 0x88a8); ++tags) {
      at += 4;
      if (length < at + 2) return p;
      type = u16(at);
    }
    at += 2;
    if (type != kEcpriEthertype || length < at + 4) return p;
    p.ecpri = true;
    p.ecpri_type = f[at + 1];
    if (length >= at + 6) {
      p.ecpri_has_id = true;
      p.ecpri_id = u16(at + 4);
    }
    return p;
  }
};

}  // namespace daqiri::core
