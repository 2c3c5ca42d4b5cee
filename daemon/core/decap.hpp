// What a flow strips from its frames before they are delivered: one VLAN tag, or a VXLAN, GRE or
// NVGRE tunnel whose outer headers are exactly the ones named. The flow's match then applies to
// the inner packet, and its clients receive the inner frame. Done in the poller, on a frame the
// daemon holds and has not lent yet: a tunnel's inner Ethernet frame is a suffix of the outer
// one (the descriptor starts further in); a popped tag or an L3 tunnel's outer IPv4 and GRE
// headers are cut out by moving the 12 MAC address bytes forward.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "core/packet_fields.hpp"

namespace daqiri::core {

using MacAddress = std::array<uint8_t, 6>;

// How to turn one received frame into the frame delivered.
struct Decapsulation {
  uint32_t strip = 0;      // bytes the delivered frame starts later
  bool move_macs = false;  // the frame's first 12 bytes move to `strip` first
  uint16_t ethertype = 0;  // written after the moved MACs; 0: the bytes there stay
  // The fields of the delivered frame (payload_offset within it).
  PacketFields inner;
};

struct Decap {
  enum class Kind : uint8_t { kVlan, kVxlan, kGre, kNvgre };
  static constexpr uint16_t kVxlanPort = 4789;
  static constexpr uint16_t kTransparentEthernet = 0x6558;  // GRE carrying Ethernet frames

  Kind kind = Kind::kVlan;
  // Tunnels: the outer headers a frame must carry, exactly.
  MacAddress outer_eth_src{};
  MacAddress outer_eth_dst{};
  uint32_t outer_ipv4_src = 0;  // host order
  uint32_t outer_ipv4_dst = 0;
  uint16_t outer_udp_src = 0;  // VXLAN; 0: any source port
  uint16_t outer_udp_dst = kVxlanPort;
  uint32_t vni = 0;                // VXLAN, 24 bits
  uint16_t gre_protocol = 0x0800;  // GRE: what it carries
  uint32_t tni = 0;                // NVGRE, 24 bits
  uint8_t flow_id = 0;             // NVGRE

  // How to decapsulate `frame` when its outer headers are this tunnel's (or it carries a VLAN
  // tag, for kVlan), else nullopt. Reads only within `length`.
  [[nodiscard]] std::optional<Decapsulation> decapsulate(const uint8_t* frame,
                                                         uint32_t length) const;
  // Whether one frame could be decapsulated by both.
  [[nodiscard]] bool overlaps(const Decap& o) const;
  // "vxlan vni=100 from 192.0.2.1 to 192.0.2.2 port 4789"
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Decap&, const Decap&) = default;
};

// What `d` says to do, applied to the frame at `frame` (its first `d.strip + 14` bytes are
// readable and writable); the delivered frame starts at frame + d.strip.
void apply(const Decapsulation& d, uint8_t* frame);

// An Ethernet header without a tag: what a tunnel puts in front of its IPv4 header.
inline constexpr uint32_t kEthernetHeader = 14;

const char* decap_kind_name(Decap::Kind kind);
// The bytes a tag or tunnel of this kind adds in front of a frame (a GRE tunnel of an L3
// protocol adds 14 fewer: it replaces the frame's Ethernet header).
uint32_t outer_header_bytes(Decap::Kind kind);

}  // namespace daqiri::core
